//! Where a request may be sent: a reverse route's pool of origins (round-robin with failover),
//! a host named by a forward request, or an intercepted connection's original destination.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::{HostMatch, OriginAddr, OriginHealth, Route};
use sepia_observe::metrics::SharedHistogram;

use super::health::OriginStatus;
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
    /// The route's host pattern as metrics label it (`www.example.com`, `*.example.com`, `*`).
    pub label: String,
    /// From a request sent to its origin's response head (`sepia_origin_latency_seconds`);
    /// kept across reloads while the route's host is configured.
    pub latency: Arc<SharedHistogram>,
}

/// What a new [`RouteOrigins`] takes over from the one it replaces in a reload: its latency
/// histogram and its origins' status, found by route label and origin name.
pub trait Previous {
    fn latency(&self, label: &str) -> Option<Arc<SharedHistogram>>;
    fn status(&self, label: &str, origin: &str) -> Option<Arc<OriginStatus>>;
}

impl Previous for [RouteOrigins] {
    fn latency(&self, label: &str) -> Option<Arc<SharedHistogram>> {
        let route = self.iter().find(|r| r.label == label)?;
        Some(route.latency.clone())
    }

    fn status(&self, label: &str, origin: &str) -> Option<Arc<OriginStatus>> {
        let route = self.iter().find(|r| r.label == label)?;
        let origin = route.origins.iter().find(|o| o.name() == origin)?;
        Some(origin.status.clone())
    }
}

/// A route's host pattern as metrics and logs name it.
pub fn route_label(host: &HostMatch) -> String {
    match host {
        HostMatch::Exact(h) => h.clone(),
        HostMatch::Suffix(s) => format!("*{s}"),
        HostMatch::Any => "*".to_owned(),
    }
}

impl RouteOrigins {
    /// Route `index`'s origins, with the TLS client of its https ones, taking over the status
    /// of the origins `previous` had under the same route host.
    pub fn new(
        index: usize,
        route: &Route,
        tls: &TlsClients,
        previous: &[RouteOrigins],
    ) -> io::Result<RouteOrigins> {
        let label = route_label(&route.host);
        let origins = route.origins.iter().map(|o| {
            let target = tls.for_route_origin(index, route, o)?;
            let mut origin = OriginAddress::new(o, target);
            if let Some(status) = previous.status(&label, &origin.name()) {
                origin.status = status;
            }
            Ok(origin)
        });
        Ok(RouteOrigins {
            next: AtomicUsize::new(0),
            origins: origins.collect::<io::Result<_>>()?,
            http2: route.http2,
            health: route.health.clone(),
            latency: previous.latency(&label).unwrap_or_default(),
            label,
        })
    }

    /// Where this request's round-robin turn starts; the caller tries the others after it.
    pub fn start(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.origins.len().max(1)
    }
}

/// One origin of a route.
#[derive(Clone)]
pub struct OriginAddress {
    /// "host:port" as sent in Host when the route says `host_header = "origin"`.
    pub authority: Bytes,
    host: String,
    port: u16,
    /// Set when the host is an IP literal: no resolution on the request path.
    literal: Option<SocketAddr>,
    /// Set for an `https://` origin.
    pub tls: Option<TlsTarget>,
    /// Its health (skipped while down) and counts.
    pub status: Arc<OriginStatus>,
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
            status: Arc::default(),
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
