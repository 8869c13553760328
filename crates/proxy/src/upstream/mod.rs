//! The origin side: which origin a request goes to (a route's pool with failover, a requested
//! host, an original destination), the pool of kept-alive connections, and the origin clients
//! that send a request and hand back the response behind the one [`fetch`]: `h1` over TCP or
//! TLS (`tls`), and `h2` for routes with `http2 = true` (HTTP/2 picked by ALPN, or h2c with
//! prior knowledge), whose connections are shared by many requests at once.

mod checks;
mod clock;
mod fetch;
mod fetch_error;
mod h1;
mod h2;
mod health;
mod origins;
mod pool;
mod request;
mod tls;
mod upstreams;

pub use fetch::{fetch, fetch_prepared};
pub use fetch_error::FetchError;
pub use h1::exchange::{prepare, Fetched, OriginRequest, Scratch};
pub use health::{CheckResult, Tally};
pub use origins::{Origins, OwnedOrigins};
pub use request::{Conditionals, RangeAsk, Upstream};
pub use tls::TlsClients;
pub use upstreams::Upstreams;
