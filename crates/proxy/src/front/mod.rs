//! Front ends: each owns its client connections and their wire format, reads requests off
//! them and answers through the pipeline's `Responder` seam. HTTP/1.1 today (`h1`); HTTP/2
//! becomes a second front end behind the same seam. `burst` is the scheduling hint both use
//! to send the responses of a busy worker's pass back to back.

pub mod burst;
pub mod h1;
