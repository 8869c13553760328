//! The HTTP/2 front end (RFC 9113): each stream of a client connection is one request through
//! the same pipeline as an HTTP/1.1 request (same cache and keys, same access rules, same
//! access log, `HTTP/2.0` in it), answered through the pipeline's `Responder` seam.
//!
//! - `session`: the connection (the h2 crate's server), its limits, one task per stream,
//!   idle and shutdown GOAWAYs;
//! - `request`: the request view over a stream's head (`:authority` for Host, the target an
//!   h1 client would have sent);
//! - `checks`: what is refused before anything is forwarded (the h2→h1 downgrade class);
//! - `exchange`: one stream's `Responder` and `Downstream`; `heads`: response heads;
//!   `send`: content within flow control; `tunnel`: CONNECT (RFC 9113 §8.5);
//! - `wire`: the connection as the h2 crate sees it: the bytes an h1 session read before it
//!   saw the h2c preface put back in front, and its writes gathered into one per poll;
//!   `meter`: the budget for frames that ask for nothing (PING, SETTINGS and PRIORITY floods
//!   end the connection).

mod checks;
mod exchange;
mod heads;
mod meter;
mod request;
mod send;
mod session;
mod tunnel;
mod wire;

pub use session::{serve, serve_h2c};

/// The client connection preface (RFC 9113 §3.4), which starts a prior-knowledge h2c
/// connection. Its first 18 bytes parse as an HTTP/1.x head (`PRI * HTTP/2.0`) that the h1
/// decoder refuses: that refusal is where the h1 session looks for it.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
