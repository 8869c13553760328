//! Where a request may be sent: a reverse route's pool of origins (round-robin with failover),
//! a host named by a forward request, or an intercepted connection's original destination.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use sepia_config::{OriginAddr, OriginHealth, Route};

use super::health::Health;
use super::tls::{TlsClients, TlsTarget};
use crate::transport::dns::Resolver;
use crate::transport::intercept::Diverted;

/// Where the request goes.
#[derive(Clone, Copy)]
pub enum Origins<'a> {
    /// Reverse mode: a route's origins, round-robin with failover on connect errors.
    Route(&'a RouteOrigins),
    /// Forward mode: the requested host (a name or an IP literal) and port, over TLS for an
    /// `https://` URL (RFC 9110 §4.2.2). Names are resolved only when a connection is
    /// needed, so a cache hit never waits on DNS.
    Host { host: &'a str, port: u16, tls: bool },
    /// Interception: the connection's original destination and nothing else, opened from the
    /// client's address when spoofing. Borrowed, so that every future holding it stays as
    /// small as in the other modes.
    Diverted(&'a Diverted),
}

/// [`Origins`] owned, for work that outlives the request (a background revalidation).
#[derive(Clone, Debug)]
pub enum OwnedOrigins {
    /// An index into the routes.
    Route(usize),
    /// Host, port, TLS.
    Host(String, u16, bool),
    Diverted(Diverted),
}

/// A reverse-mode route's origins and its round-robin position.
pub struct RouteOrigins {
    next: AtomicUsize,
    pub origins: Vec<OriginAddress>,
    /// `http2 = true`: its origins are spoken to in HTTP/2 where they can.
    pub http2: bool,
    /// `[route.health]`: when its origins are marked down, and for how long.
    pub health: OriginHealth,
}

impl RouteOrigins {
    /// Route `index`'s origins, with the TLS client of its https ones.
    pub fn new(index: usize, route: &Route, tls: &TlsClients) -> io::Result<RouteOrigins> {
        let origins = route.origins.iter().map(|o| {
            let target = tls.for_route_origin(index, route, o)?;
            Ok(OriginAddress::new(o, target))
        });
        Ok(RouteOrigins {
            next: AtomicUsize::new(0),
            origins: origins.collect::<io::Result<_>>()?,
            http2: route.http2,
            health: route.health,
        })
    }

    /// Where this request's round-robin turn starts; the caller tries the others after it.
    pub fn start(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.origins.len().max(1)
    }
}

/// One origin of a route.
pub struct OriginAddress {
    /// "host:port" as sent in Host when the route says `host_header = "origin"`.
    pub authority: Bytes,
    host: String,
    port: u16,
    /// Set when the host is an IP literal: no resolution on the request path.
    literal: Option<SocketAddr>,
    /// Set for an `https://` origin.
    pub tls: Option<TlsTarget>,
    /// Passive health: skipped for a while after consecutive failures.
    pub health: Health,
}

impl OriginAddress {
    fn new(o: &OriginAddr, tls: Option<TlsTarget>) -> OriginAddress {
        let bare = o.host.trim_start_matches('[').trim_end_matches(']');
        OriginAddress {
            authority: Bytes::from(o.authority()),
            literal: bare.parse().ok().map(|ip| SocketAddr::new(ip, o.port)),
            host: o.host.clone(),
            port: o.port,
            tls,
            health: Health::default(),
        }
    }

    /// "host:port" as configured, for logs and metrics.
    pub fn name(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub async fn addrs(&self, resolver: &Resolver) -> io::Result<Addrs<'_>> {
        match &self.literal {
            Some(a) => Ok(Addrs::Literal(a)),
            None => Ok(Addrs::Resolved(
                resolver.resolve(&self.host, self.port).await?,
            )),
        }
    }
}

/// Addresses of an origin, borrowed when known in advance.
pub enum Addrs<'a> {
    Literal(&'a SocketAddr),
    Resolved(Vec<SocketAddr>),
}

impl Addrs<'_> {
    pub fn as_slice(&self) -> &[SocketAddr] {
        match self {
            Addrs::Literal(a) => std::slice::from_ref(*a),
            Addrs::Resolved(v) => v,
        }
    }
}
