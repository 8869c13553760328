//! State shared by every connection: the configuration snapshot and what was built from it.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::{Config, Route};
use sepia_http1::Limits;
use sepia_observe::AccessLog;

use crate::cache::Cache;
use crate::dns::Resolver;
use crate::pool::Pool;

pub struct Shared {
    pub config: Arc<Config>,
    pub limits: Limits,
    pub pool: Arc<Pool>,
    pub resolver: Resolver,
    pub log: AccessLog,
    /// One entry per `config.routes`, same order.
    pub routes: Vec<RouteState>,
    /// The HTTP cache; `None` when `cache.enabled = false`.
    pub cache: Option<Cache>,
    /// The Via value Sepia adds: "1.1 <pseudonym>" (RFC 9110 §7.6.3).
    pub via: Bytes,
    /// The zone `time` ACLs read the clock in: `TZ` if set, else the system's
    /// (`/etc/localtime`), read once here.
    pub tz: sepia_access::TimeZone,
    /// Proxy authentication (`[auth]`), consulted when a rule reaches a `proxy_auth` ACL.
    pub auth: Option<sepia_auth::Authenticator>,
}

impl Shared {
    /// A value only the access log reads, computed only when the log is on: a `Bytes` clone
    /// is two atomic operations that a hit would otherwise pay for nothing.
    pub fn for_log<T>(&self, value: impl FnOnce() -> Option<T>) -> Option<T> {
        self.log.is_enabled().then(value).flatten()
    }

    /// Must run inside the tokio runtime (the pool starts its sweeper task).
    pub fn new(config: Arc<Config>, log: AccessLog) -> io::Result<Shared> {
        let limits = Limits {
            max_head_bytes: config.limits.max_request_head,
            max_headers: config.limits.max_headers,
        };
        let routes = config.routes.iter().map(RouteState::new).collect();
        let via = Bytes::from(format!("1.1 {}", config.headers.via_pseudonym));
        let cache = Cache::from_config(&config.cache).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cache configuration: {e}"),
            )
        })?;
        let auth = config
            .auth
            .as_ref()
            .map(sepia_auth::Authenticator::from_config)
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("[auth]: {e}")))?;
        Ok(Shared {
            auth,
            cache,
            pool: Pool::start(config.timeouts.origin_idle, config.timeouts.connect),
            resolver: Resolver::from_system(),
            limits,
            log,
            routes,
            via,
            tz: sepia_access::TimeZone::system(),
            config,
        })
    }

    /// The route serving `host` (a Host value without port), as its index and state.
    pub fn route(&self, host: &[u8]) -> Option<(&Route, &RouteState)> {
        let route = self.config.route_for_host(host)?;
        let i = self
            .config
            .routes
            .iter()
            .position(|r| std::ptr::eq(r, route))?;
        Some((route, &self.routes[i]))
    }

    /// The Proxy-Authenticate value a 407 carries: `Basic realm="<auth.realm>"`.
    pub fn challenge(&self) -> &[u8] {
        self.auth
            .as_ref()
            .map_or(crate::errors::DEFAULT_CHALLENGE, |a| a.challenge())
    }

    /// The Via value, when configured to send one.
    pub fn via(&self) -> Option<&[u8]> {
        self.config.headers.via.then_some(&self.via[..])
    }
}

/// A reverse-mode route's origins and its round-robin position.
pub struct RouteState {
    next: AtomicUsize,
    pub origins: Vec<OriginState>,
}

impl RouteState {
    fn new(route: &Route) -> RouteState {
        RouteState {
            next: AtomicUsize::new(0),
            origins: route.origins.iter().map(OriginState::new).collect(),
        }
    }

    /// Where this request's round-robin turn starts; the caller tries the others after it.
    pub fn start(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.origins.len().max(1)
    }
}

pub struct OriginState {
    /// "host:port" as sent in Host when the route says `host_header = "origin"`.
    pub authority: Bytes,
    host: String,
    port: u16,
    /// Set when the host is an IP literal: no resolution on the request path.
    literal: Option<SocketAddr>,
}

impl OriginState {
    fn new(o: &sepia_config::OriginAddr) -> OriginState {
        let bare = o.host.trim_start_matches('[').trim_end_matches(']');
        OriginState {
            authority: Bytes::from(o.authority()),
            literal: bare.parse().ok().map(|ip| SocketAddr::new(ip, o.port)),
            host: o.host.clone(),
            port: o.port,
        }
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
