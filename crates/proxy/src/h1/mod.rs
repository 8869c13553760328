//! HTTP/1.1 wire code shared by both roles, the front end (server) and the origin client:
//! the codec's parsed heads seen through the pipeline's views, and message bodies decoded
//! from and framed for an h1 connection. Like hyper's `proto/h1`, one engine serves both
//! roles; `front/h1` and `upstream/h1` hold what only one role does.

pub mod body;
pub mod fields;
pub mod stored_head;
pub mod views;

#[cfg(test)]
pub mod parsed;
