//! The HTTP/1.1 front end: the read loop of a client connection (keep-alive, pipelining,
//! parking of idle connections), and the [`Responder`](crate::pipeline::Responder) that writes
//! the pipeline's answers in HTTP/1.1: gather writes of stored heads and bodies, `sendfile` for
//! large stored bodies, chunked or close-delimited framing, 100-continue and interim
//! responses, error pages and CONNECT tunnels.

mod client_io;
mod errors;
mod exchange;
mod idle;
mod relayed;
mod session;
mod stored;
mod tunnel;

pub use idle::IDLE_RELEASE;
pub use session::{serve, Served};
