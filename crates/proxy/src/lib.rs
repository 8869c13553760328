//! Sepia's proxy core, in layers whose imports point down only (see docs/ARCHITECTURE.md):
//!
//! - `server`: listeners, accept loops, parked idle connections, graceful shutdown;
//! - `admin`: the admin listener (metrics, stats, health, configuration, purges, dashboard);
//! - `front`: front ends, each owning its client connections and their wire format (`h1`,
//!   `h2`);
//! - `pipeline`: the request logic written once for every protocol: access → destination →
//!   cache or pass or tunnel → upstream → respond → log, answering through a `Responder`;
//! - `state`: the configuration snapshot and what was built from it, shared by connections;
//! - `cache`: the store behind `sepia_store::Store`, what is kept beside each response, and
//!   publishing into it; `upstream`: choosing origins, the connection pool, the origin client;
//! - `h1`: HTTP/1.1 wire code both roles share (views over the codec's heads, body framing,
//!   the stored head's form);
//! - `transport`: connections (`Conn`), deadlines, gather writes, DNS, interception sockets;
//! - `model`: the vocabulary: request and response views, targets, outcomes, the seam the
//!   origin side sees the client through.

mod admin;
mod cache;
mod front;
mod h1;
mod model;
mod pipeline;
mod server;
mod state;
mod transport;
mod upstream;

pub use cache::disk_descriptors;
pub use front::burst::worker_parks;
pub use server::{Inherited, PassedSocket, Reloader, Server, SocketRole};
