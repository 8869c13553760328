//! What the origin side shares across requests, and reaching an origin.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::{Config, HostMatch};

use super::fetch_error::AllDown;
use super::h2::conns::H2Conns;
use super::origins::{OriginAddress, Origins, OwnedOrigins, RouteOrigins};
use super::pool::{OriginConn, OriginKey, Pool};
use super::tls::TlsClients;
use crate::transport::dns::Resolver;

/// What the origin side shares across requests.
pub struct Upstreams {
    pub config: Arc<Config>,
    pub pool: Arc<Pool>,
    /// The shared HTTP/2 connections of `http2` routes.
    pub h2: Arc<H2Conns>,
    pub resolver: Resolver,
    /// One entry per `config.routes`, same order.
    pub routes: Vec<RouteOrigins>,
    /// The TLS client configurations toward https origins.
    pub tls: TlsClients,
    /// The Via value Sepia adds: "1.1 <pseudonym>" (RFC 9110 §7.6.3).
    pub via: Bytes,
}

impl Upstreams {
    /// Must run inside the tokio runtime (the pool starts its sweeper task). Fails when a
    /// route's `tls_ca` cannot be used (the error names the route and the file).
    pub fn new(config: Arc<Config>, via: Bytes) -> io::Result<Upstreams> {
        let tls = TlsClients::from_config(&config)?;
        let routes = config.routes.iter().enumerate();
        let routes = routes
            .map(|(i, route)| RouteOrigins::new(i, route, &tls))
            .collect::<io::Result<_>>()?;
        Ok(Upstreams {
            pool: Pool::start(config.timeouts.origin_idle, config.timeouts.connect),
            h2: H2Conns::start(config.timeouts.origin_idle, config.timeouts.connect),
            resolver: Resolver::from_system(),
            routes,
            tls,
            via,
            config,
        })
    }

    /// The origins `owned` stands for.
    pub fn origins<'a>(&'a self, owned: &'a OwnedOrigins) -> Origins<'a> {
        match owned {
            OwnedOrigins::Route(i) => Origins::Route(&self.routes[*i]),
            OwnedOrigins::Host(host, port, tls) => Origins::Host {
                host,
                port: *port,
                tls: *tls,
            },
            OwnedOrigins::Diverted(d) => Origins::Diverted(d),
        }
    }

    /// `origins` owned, for work that outlives the request.
    pub fn to_owned(&self, origins: &Origins<'_>) -> Option<OwnedOrigins> {
        Some(match origins {
            Origins::Route(r) => {
                OwnedOrigins::Route(self.routes.iter().position(|s| std::ptr::eq(s, *r))?)
            }
            Origins::Host { host, port, tls } => {
                OwnedOrigins::Host((*host).to_owned(), *port, *tls)
            }
            Origins::Diverted(d) => OwnedOrigins::Diverted(**d),
        })
    }

    /// A connection to the route's next origin (failing over on connect errors) or to the
    /// host, with the authority of the route's origin it reached (for `host_header = "origin"`).
    pub async fn obtain(&self, origins: &Origins<'_>) -> io::Result<(OriginConn, Option<Bytes>)> {
        match origins {
            Origins::Host { host, port, tls } => {
                let tls = tls.then(|| self.tls.for_host(host)).transpose()?;
                let addrs = self.resolver.resolve(host, *port).await?;
                Ok((self.pool.get(&addrs, None, tls.as_ref()).await?, None))
            }
            Origins::Diverted(d) => {
                let conn = self.pool.get(&[d.dst], d.spoof_from, None).await?;
                Ok((conn, None))
            }
            Origins::Route(route) => {
                let n = route.origins.len();
                let start = route.start();
                // The error is only built when every origin failed: an io::Error with a message
                // allocates, and this runs for every request that reaches an origin.
                let mut last = None;
                for i in 0..n {
                    let origin = &route.origins[(start + i) % n];
                    if !origin.health.usable(route.health.down_for) {
                        continue;
                    }
                    let conn = match origin.addrs(&self.resolver).await {
                        Ok(addrs) => {
                            self.pool
                                .get(addrs.as_slice(), None, origin.tls.as_ref())
                                .await
                        }
                        Err(e) => Err(e),
                    };
                    match observed(route, origin, conn) {
                        Ok(c) => return Ok((c, Some(origin.authority.clone()))),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| AllDown::error(route.health.down_for)))
            }
        }
    }

    /// Every route origin's passive health: (route's host pattern, origin "host:port", up),
    /// for the admin listener.
    pub fn origin_health(&self) -> Vec<(String, String, bool)> {
        let routes = self.config.routes.iter().zip(&self.routes);
        let all = routes.flat_map(|(route, origins)| {
            let host = match &route.host {
                HostMatch::Exact(h) => h.clone(),
                HostMatch::Suffix(s) => format!("*{s}"),
                HostMatch::Any => "*".to_owned(),
            };
            let origins = origins.origins.iter();
            origins.map(move |o| (host.clone(), o.name(), o.health.is_up()))
        });
        all.collect()
    }

    /// A new connection made like `key`'s (the same address, source and TLS): the one retry
    /// of a request that a reused connection failed (RFC 9112 §9.3.1).
    pub async fn reconnect(&self, key: &OriginKey) -> io::Result<OriginConn> {
        let tls = match &key.server_name {
            None => None,
            Some(name) => Some(self.tls.target(key.tls_client, name)?),
        };
        let conn = self
            .pool
            .connect(&[key.addr], key.source, tls.as_ref())
            .await?;
        // An `http2` route's origin that declined h2 may pick it this time (RFC 9113 §3.2):
        // that connection cannot carry this HTTP/1.1 request.
        if conn.conn.alpn() == Some(b"h2") {
            return Err(io::Error::other(
                "the origin picked h2 for a retry of a request of the other protocol",
            ));
        }
        Ok(conn)
    }
}

/// `result` of reaching `origin` of `route`, noted in its passive health (a transition is
/// logged).
pub(super) fn observed<T>(
    route: &RouteOrigins,
    origin: &OriginAddress,
    result: io::Result<T>,
) -> io::Result<T> {
    match &result {
        Ok(_) => {
            if origin.health.succeeded() {
                tracing::info!(origin = %origin.name(), "origin is up again");
            }
        }
        Err(e) => {
            let h = route.health;
            if origin.health.failed(h.fail_after, h.down_for) {
                tracing::warn!(
                    origin = %origin.name(),
                    "origin marked down for {:?} after {} consecutive failures: {e}",
                    h.down_for,
                    h.fail_after
                );
            }
        }
    }
    result
}
