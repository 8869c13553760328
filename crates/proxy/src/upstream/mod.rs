//! The origin side: which origin a request goes to (a route's pool with failover, a requested
//! host, an original destination), the pool of kept-alive connections, and the origin client
//! that sends a request and hands back the response (`h1`, the only protocol spoken to
//! origins today, over TCP or TLS (`tls`); an HTTP/2 client becomes a second one behind the
//! same [`fetch`]).

mod fetch_error;
mod h1;
mod origins;
mod pool;
mod request;
mod tls;
mod upstreams;

pub use fetch_error::FetchError;
pub use h1::exchange::{fetch, fetch_prepared, prepare, Fetched, OriginRequest, Scratch};
pub use origins::{Origins, OwnedOrigins};
pub use request::{Conditionals, RangeAsk, Upstream};
pub use tls::TlsClients;
pub use upstreams::Upstreams;
