//! What the origin side shares across requests, and reaching an origin.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::Config;
use sepia_observe::metrics::Histogram;

use super::checks::Checkers;
use super::fetch_error::AllDown;
use super::h2::conns::H2Conns;
use super::health::{OriginStatus, Tally};
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
    /// The active health checks of the routes that set `interval` (see [`Upstreams::start_checks`]).
    checkers: Checkers,
}

impl Upstreams {
    /// Must run inside the tokio runtime (the pool starts its sweeper task). Fails when a
    /// route's `tls_ca` cannot be used (the error names the route and the file). After a
    /// reload, `previous` is the origin side replaced: the health and counts of the origins
    /// still configured under the same route host carry over.
    pub fn new(
        config: Arc<Config>,
        via: Bytes,
        previous: Option<&Upstreams>,
    ) -> io::Result<Upstreams> {
        let tls = TlsClients::from_config(&config)?;
        let before = previous.map_or(&[][..], |p| &p.routes[..]);
        let routes = config.routes.iter().enumerate();
        let routes = routes
            .map(|(i, route)| RouteOrigins::new(i, route, &tls, before))
            .collect::<io::Result<_>>()?;
        Ok(Upstreams {
            pool: Pool::start(config.timeouts.origin_idle, config.timeouts.connect),
            h2: H2Conns::start(config.timeouts.origin_idle, config.timeouts.connect),
            resolver: Resolver::from_system(),
            routes,
            tls,
            via,
            config,
            checkers: Checkers::default(),
        })
    }

    /// Starts the active health checks, taking over those of `previous` (the origin side a
    /// reload replaces) that are unchanged and stopping the rest. Call once, when this origin
    /// side starts serving: nothing can fail.
    pub fn start_checks(&self, previous: Option<&Upstreams>) {
        let previous = previous.map(|p| &p.checkers);
        self.checkers
            .start(&self.config, &self.routes, &self.resolver, previous);
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
    /// host, with the route's origin it reached (its authority for `host_header = "origin"`,
    /// its counters).
    pub async fn obtain<'o>(
        &self,
        origins: &Origins<'o>,
    ) -> io::Result<(OriginConn, Option<&'o OriginAddress>)> {
        match origins {
            Origins::Host { host, port, tls } => {
                let tls = tls.then(|| self.tls.for_host(host)).transpose()?;
                let addrs = self.resolver.resolve(host, *port).await?;
                let conn = self.pool.get(&addrs, None, tls.as_ref(), Tally::Direct);
                Ok((conn.await?, None))
            }
            Origins::Diverted(d) => {
                let dst = [d.dst];
                let conn = self.pool.get(&dst, d.spoof_from, None, Tally::Direct);
                let conn = conn.await?;
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
                    if !origin.status.health.usable(route.health.down_for) {
                        continue;
                    }
                    let conn = match origin.addrs(&self.resolver).await {
                        Ok(addrs) => {
                            let tally = Tally::Origin(&origin.status);
                            let tls = origin.tls.as_ref();
                            self.pool.get(addrs.as_slice(), None, tls, tally).await
                        }
                        Err(e) => Err(e),
                    };
                    match observed(route, origin, conn) {
                        Ok(c) => return Ok((c, Some(origin))),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| AllDown::error(route.health.down_for)))
            }
        }
    }

    /// Every route origin's health: (route's host pattern, origin "host:port", its status),
    /// for the admin listener.
    pub fn origin_status(&self) -> Vec<(String, String, Arc<OriginStatus>)> {
        let all = self.routes.iter().flat_map(|route| {
            let origins = route.origins.iter();
            origins.map(|o| (route.label.clone(), o.name(), o.status.clone()))
        });
        all.collect()
    }

    /// Every route's origin latency: (route's host pattern, histogram), for the admin listener.
    pub fn route_latency(&self) -> Vec<(String, Histogram)> {
        let all = self
            .routes
            .iter()
            .map(|r| (r.label.clone(), r.latency.read()));
        all.collect()
    }

    /// A new connection made like `key`'s (the same address, source and TLS): the one retry
    /// of a request that a reused connection failed (RFC 9112 §9.3.1).
    pub async fn reconnect(&self, key: &OriginKey, tally: Tally<'_>) -> io::Result<OriginConn> {
        let tls = match &key.server_name {
            None => None,
            Some(name) => Some(self.tls.target(key.tls_client, name)?),
        };
        let conn = self
            .pool
            .connect(&[key.addr], key.source, tls.as_ref(), tally)
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
            if origin.status.health.succeeded() {
                tracing::info!(origin = %origin.name(), "origin is up again");
            }
        }
        Err(e) => {
            let h = &route.health;
            if origin.status.health.failed(h.fail_after, h.down_for) {
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
