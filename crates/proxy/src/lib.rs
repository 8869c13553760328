//! Sepia's proxy core: listeners, client sessions, origin connections and pools, and the
//! forward, reverse and tunnel paths. The request state machine is
//! recv (`client`) → route (`client::dispatch`) → pass (`exchange`) or tunnel (`tunnel`)
//! → deliver (`relay`) → log.

mod access;
mod burst;
mod cache;
mod client;
mod dns;
mod errors;
mod exchange;
mod heads;
mod intercept;
mod io;
mod pool;
mod relay;
mod server;
mod shared;
mod shutdown;
mod target;
mod tunnel;

pub use burst::worker_parks;
pub use server::Server;
