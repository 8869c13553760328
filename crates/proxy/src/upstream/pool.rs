//! Keep-alive connections to origins, shared by all client connections.
//!
//! Idle connections are keyed by everything that makes one connection unfit for another's
//! request ([`OriginKey`]: the origin's address, the source address, the TLS server name and
//! the protocol) and handed out newest first (the one least likely to have been closed by the
//! origin's own idle timer). A connection is checked for a pending EOF before reuse, and the
//! origin client retries an idempotent request once on a fresh connection when a reused one
//! fails before any response byte arrives (RFC 9112 §9.3.1).
//!
//! A connection opened from a spoofed client address (TPROXY with `spoof_client`) is keyed by
//! that address too: the origin sees it as the client's own connection, so only requests of
//! the same client may ever travel on it.

use sepia_observe::metrics::OriginEvent;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::clock::coarse_now;
use super::health::Tally;
use super::tls::TlsTarget;
use crate::transport::tls::client;
use crate::transport::Conn;

/// Idle connections kept per key; more are closed on check-in.
const MAX_IDLE_PER_ORIGIN: usize = 256;

/// The protocol spoken on an origin connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Http1,
    /// HTTP/2 (RFC 9113): a connection shared by many requests at once (`super::h2`).
    H2,
}

/// What an idle connection must match to carry a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OriginKey {
    pub addr: SocketAddr,
    /// The client address the connection was opened from (spoofed), `None` for Sepia's own.
    pub source: Option<IpAddr>,
    /// The name the TLS handshake asked for (SNI) and the certificate was checked against;
    /// `None` for a plain connection, so plain and TLS connections to one address never mix.
    pub server_name: Option<Arc<str>>,
    /// Which TLS client configuration verified it ([`TlsTarget::client`]; 0 when plain): a
    /// connection a `tls_insecure_skip_verify` route opened never serves a route that
    /// verifies, nor one trusting another CA.
    pub tls_client: u16,
    pub protocol: Protocol,
}

impl OriginKey {
    /// A plain HTTP/1.1 connection to `addr`, from `source` when spoofing.
    pub fn plain(addr: SocketAddr, source: Option<IpAddr>) -> OriginKey {
        OriginKey {
            addr,
            source,
            server_name: None,
            tls_client: 0,
            protocol: Protocol::Http1,
        }
    }

    /// The same origin, spoken to in `protocol`.
    pub fn speaking(self, protocol: Protocol) -> OriginKey {
        OriginKey { protocol, ..self }
    }

    /// An HTTP/1.1 connection to `addr`, over TLS when `tls` says so.
    pub fn new(addr: SocketAddr, source: Option<IpAddr>, tls: Option<&TlsTarget>) -> OriginKey {
        match tls {
            None => OriginKey::plain(addr, source),
            Some(t) => OriginKey {
                server_name: Some(t.key_name.clone()),
                tls_client: t.client,
                ..OriginKey::plain(addr, source)
            },
        }
    }
}

/// A connection to an origin, fresh or taken from the pool.
#[derive(Debug)]
pub struct OriginConn {
    pub conn: Conn,
    pub key: OriginKey,
    /// True when the connection has carried a request before: a failure before the first
    /// response byte may then be the origin closing an idle connection, worth one retry.
    pub reused: bool,
}

impl OriginConn {
    pub fn addr(&self) -> SocketAddr {
        self.key.addr
    }
}

/// The pool is consulted twice by every request that reaches an origin (a checkout, a
/// check-in). Keys are origin addresses, which clients reach only through the routes or the
/// names they ask for: foldhash under a random seed (an attacker cannot compute collisions
/// without it) instead of SipHash, whose two passes over the key per request were 1 % of a
/// miss's instructions (callgrind).
pub(super) type PoolHasher = foldhash::fast::RandomState;

struct Idle {
    conn: Conn,
    /// When it was checked in, on the coarse monotonic clock (see [`coarse_now`]).
    since: Duration,
}

/// The pool itself. Cheap to share (`Arc<Pool>`); a sweeper task closes expired connections.
pub struct Pool {
    idle: Mutex<HashMap<OriginKey, Vec<Idle>, PoolHasher>>,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

impl Pool {
    /// Builds the pool and starts its sweeper on the current tokio runtime.
    pub fn start(idle_timeout: Duration, connect_timeout: Duration) -> Arc<Pool> {
        let pool = Arc::new(Pool {
            idle: Mutex::new(HashMap::default()),
            idle_timeout,
            connect_timeout,
        });
        tokio::spawn(sweep(Arc::downgrade(&pool)));
        pool
    }

    /// An idle connection matching `key` that still looks open, if the pool has one.
    pub(super) fn checkout(&self, key: &OriginKey) -> Option<OriginConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(key)?;
        let now = coarse_now();
        while let Some(mut idle) = list.pop() {
            if now.saturating_sub(idle.since) < self.idle_timeout && idle.conn.looks_open() {
                return Some(OriginConn {
                    conn: idle.conn,
                    key: key.clone(),
                    reused: true,
                });
            }
        }
        None
    }

    /// Keeps a connection whose last exchange ended cleanly for another request. Only the
    /// origin client calls this, from the one place that decides a connection may be reused.
    pub fn checkin(&self, conn: OriginConn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(conn.key).or_default();
        if list.len() < MAX_IDLE_PER_ORIGIN {
            list.push(Idle {
                conn: conn.conn,
                since: coarse_now(),
            });
        }
    }

    /// Opens a new connection to the first of `addrs` that accepts (and completes the TLS
    /// handshake, with `tls`) within the connect timeout, from the (non-local) client address
    /// `source` when given (TPROXY's `spoof_client`); each attempt counted in `tally`.
    pub async fn connect(
        &self,
        addrs: &[SocketAddr],
        source: Option<IpAddr>,
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<OriginConn> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
        for &addr in addrs {
            match open(addr, source, self.connect_timeout, tls).await {
                Ok(conn) => {
                    tally.count(OriginEvent::Opened);
                    return Ok(OriginConn {
                        conn,
                        key: OriginKey::new(addr, source, tls),
                        reused: false,
                    });
                }
                Err(e) => {
                    tally.count(OriginEvent::Failed);
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// A pooled connection to one of `addrs` opened from `source` (over TLS as `tls` says),
    /// or a new one.
    pub async fn get(
        &self,
        addrs: &[SocketAddr],
        source: Option<IpAddr>,
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<OriginConn> {
        for &addr in addrs {
            if let Some(conn) = self.checkout(&OriginKey::new(addr, source, tls)) {
                tally.count(OriginEvent::Reused);
                return Ok(conn);
            }
        }
        // Boxed: opening a connection (its connect and timeout state) is the rare case, and
        // inline it would be part of every request's future, held while the request waits
        // on its origin.
        Box::pin(self.connect(addrs, source, tls, tally)).await
    }

    /// Number of idle connections held.
    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.values().map(Vec::len).sum()
    }

    fn sweep_expired(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = coarse_now();
        idle.retain(|_, list| {
            list.retain(|c| now.saturating_sub(c.since) < self.idle_timeout);
            !list.is_empty()
        });
    }
}

/// A new connection to `addr` (and its TLS handshake, with `tls`) within `limit`, from the
/// (non-local) client address `source` when given: what the pool and the health checks open.
pub(super) async fn open(
    addr: SocketAddr,
    source: Option<IpAddr>,
    limit: Duration,
    tls: Option<&TlsTarget>,
) -> io::Result<Conn> {
    match tls {
        None => Conn::connect(addr, source, limit).await,
        // Boxed: the handshake's state (rustls' over a kilobyte) would otherwise enlarge
        // every request's future, plain ones included.
        Some(t) => Box::pin(client::connect(addr, source, limit, &t.config, &t.name)).await,
    }
}

async fn sweep(pool: Weak<Pool>) {
    let period = match pool.upgrade() {
        Some(p) => (p.idle_timeout / 2).max(Duration::from_millis(500)),
        None => return,
    };
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        match pool.upgrade() {
            Some(p) => p.sweep_expired(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn reuses_an_open_connection_and_drops_a_closed_one() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_secs(60), Duration::from_secs(1));

        let conn = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        assert!(!conn.reused);
        let (mut server_side, _) = listener.accept().await.unwrap();
        pool.checkin(conn);
        assert_eq!(pool.idle_count(), 1);

        let again = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        assert!(again.reused, "the idle connection is handed out again");
        pool.checkin(again);

        // The origin closes its side: the pool must not hand that connection out.
        server_side.shutdown().await.unwrap();
        drop(server_side);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let fresh = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        assert!(!fresh.reused);
    }

    #[tokio::test]
    async fn expired_connections_are_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_millis(100), Duration::from_secs(1));
        let conn = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        let _server_side = listener.accept().await.unwrap();
        pool.checkin(conn);
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(pool.idle_count(), 0, "the sweeper closed it");
        assert!(pool.checkout(&OriginKey::plain(addr, None)).is_none());
    }

    #[tokio::test]
    async fn connect_tries_the_next_address() {
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_secs(60), Duration::from_secs(1));
        let conn = pool
            .connect(&[dead, live], None, None, Tally::Direct)
            .await
            .unwrap();
        assert_eq!(conn.addr(), live);
        assert!(pool
            .connect(&[dead], None, None, Tally::Direct)
            .await
            .is_err());
    }

    #[tokio::test]
    async fn connections_from_different_sources_are_never_shared() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_secs(60), Duration::from_secs(1));
        let mine = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        let _accepted = listener.accept().await.unwrap();
        pool.checkin(mine);
        // A connection opened from a client's address is pooled under that address only.
        let client: IpAddr = "127.0.0.2".parse().unwrap();
        let key = |source| OriginKey::plain(addr, source);
        assert!(pool.checkout(&key(Some(client))).is_none());
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _accepted2 = listener.accept().await.unwrap();
        pool.checkin(OriginConn {
            conn: Conn::Tcp(stream),
            key: key(Some(client)),
            reused: false,
        });
        assert_eq!(pool.idle_count(), 2);
        let other: IpAddr = "127.0.0.3".parse().unwrap();
        assert!(pool.checkout(&key(Some(other))).is_none());
        let back = pool.checkout(&key(Some(client))).unwrap();
        assert_eq!(back.key.source, Some(client));
        let own = pool.checkout(&key(None)).unwrap();
        assert_eq!(own.key.source, None);
        assert!(pool.checkout(&key(None)).is_none());
    }

    #[tokio::test]
    async fn plain_and_tls_connections_never_mix() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_secs(60), Duration::from_secs(1));
        let plain = pool.get(&[addr], None, None, Tally::Direct).await.unwrap();
        let _accepted = listener.accept().await.unwrap();
        pool.checkin(plain);
        let verified = OriginKey {
            server_name: Some(Arc::from("origin.test")),
            tls_client: 0,
            ..OriginKey::plain(addr, None)
        };
        assert!(
            pool.checkout(&verified).is_none(),
            "a plain connection is not TLS"
        );
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _accepted2 = listener.accept().await.unwrap();
        pool.checkin(OriginConn {
            conn: Conn::Tcp(stream),
            key: verified.clone(),
            reused: false,
        });
        // Another name, or the same name verified another way (another CA, or not at all).
        let other_name = OriginKey {
            server_name: Some(Arc::from("other.test")),
            ..verified.clone()
        };
        let other_trust = OriginKey {
            tls_client: 1,
            ..verified.clone()
        };
        assert!(pool.checkout(&other_name).is_none());
        assert!(pool.checkout(&other_trust).is_none());
        assert_eq!(pool.checkout(&verified).unwrap().key, verified);
        let back = pool.checkout(&OriginKey::plain(addr, None)).unwrap();
        assert_eq!(back.key.server_name, None);
    }
}
