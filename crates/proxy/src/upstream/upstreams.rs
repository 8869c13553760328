//! What the origin side shares across requests, and reaching an origin.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::Config;

use super::origins::{Origins, OwnedOrigins, RouteOrigins};
use super::pool::{OriginConn, Pool};
use crate::transport::dns::Resolver;

/// What the origin side shares across requests.
pub struct Upstreams {
    pub config: Arc<Config>,
    pub pool: Arc<Pool>,
    pub resolver: Resolver,
    /// One entry per `config.routes`, same order.
    pub routes: Vec<RouteOrigins>,
    /// The Via value Sepia adds: "1.1 <pseudonym>" (RFC 9110 §7.6.3).
    pub via: Bytes,
}

impl Upstreams {
    /// Must run inside the tokio runtime (the pool starts its sweeper task).
    pub fn new(config: Arc<Config>, via: Bytes) -> Upstreams {
        Upstreams {
            pool: Pool::start(config.timeouts.origin_idle, config.timeouts.connect),
            resolver: Resolver::from_system(),
            routes: config.routes.iter().map(RouteOrigins::new).collect(),
            via,
            config,
        }
    }

    /// The origins `owned` stands for.
    pub fn origins<'a>(&'a self, owned: &'a OwnedOrigins) -> Origins<'a> {
        match owned {
            OwnedOrigins::Route(i) => Origins::Route(&self.routes[*i]),
            OwnedOrigins::Host(host, port) => Origins::Host { host, port: *port },
            OwnedOrigins::Diverted(d) => Origins::Diverted(d),
        }
    }

    /// `origins` owned, for work that outlives the request.
    pub fn to_owned(&self, origins: &Origins<'_>) -> Option<OwnedOrigins> {
        Some(match origins {
            Origins::Route(r) => {
                OwnedOrigins::Route(self.routes.iter().position(|s| std::ptr::eq(s, *r))?)
            }
            Origins::Host { host, port } => OwnedOrigins::Host((*host).to_owned(), *port),
            Origins::Diverted(d) => OwnedOrigins::Diverted(**d),
        })
    }

    /// A connection to the route's next origin (failing over on connect errors) or to the
    /// host, with the authority of the route's origin it reached (for `host_header = "origin"`).
    pub async fn obtain(&self, origins: &Origins<'_>) -> io::Result<(OriginConn, Option<Bytes>)> {
        match origins {
            Origins::Host { host, port } => {
                let addrs = self.resolver.resolve(host, *port).await?;
                Ok((self.pool.get(&addrs, None).await?, None))
            }
            Origins::Diverted(d) => Ok((self.pool.get(&[d.dst], d.spoof_from).await?, None)),
            Origins::Route(route) => {
                let n = route.origins.len();
                let start = route.start();
                // The error is only built when every origin failed: an io::Error with a message
                // allocates, and this runs for every request that reaches an origin.
                let mut last = None;
                for i in 0..n {
                    let origin = &route.origins[(start + i) % n];
                    let addrs = match origin.addrs(&self.resolver).await {
                        Ok(a) => a,
                        Err(e) => {
                            last = Some(e);
                            continue;
                        }
                    };
                    match self.pool.get(addrs.as_slice(), None).await {
                        Ok(c) => return Ok((c, Some(origin.authority.clone()))),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "route without origins")
                }))
            }
        }
    }
}
