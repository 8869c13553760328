//! Keep-alive connections to origins, shared by all client connections.
//!
//! Idle connections are keyed by the origin's socket address and handed out newest first (the
//! one least likely to have been closed by the origin's own idle timer). A connection is checked
//! for a pending EOF before reuse, and callers retry an idempotent request once on a fresh
//! connection when a reused one fails before any response byte arrives (RFC 9112 §9.3.1).
//!
//! A connection opened from a spoofed client address (TPROXY with `spoof_client`) is keyed by
//! that address too: the origin sees it as the client's own connection, so only requests of
//! the same client may ever travel on it.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::net::TcpStream;

/// Idle connections kept per origin address; more are closed on check-in.
const MAX_IDLE_PER_ORIGIN: usize = 256;

/// A connection to an origin, fresh or taken from the pool.
pub struct OriginConn {
    pub stream: TcpStream,
    pub addr: SocketAddr,
    /// The client address the connection was opened from (spoofed), `None` for Sepia's own.
    pub source: Option<IpAddr>,
    /// True when the connection has carried a request before: a failure before the first
    /// response byte may then be the origin closing an idle connection, worth one retry.
    pub reused: bool,
}

/// The origin's address and the spoofed client address the connection was opened from, if any.
type PoolKey = (SocketAddr, Option<IpAddr>);

/// The pool is consulted twice by every request that reaches an origin (a checkout, a
/// check-in). Keys are origin addresses, which clients reach only through the routes or the
/// names they ask for: foldhash under a random seed (an attacker cannot compute collisions
/// without it) instead of SipHash, whose two passes over the key per request were 1 % of a
/// miss's instructions (callgrind).
type PoolHasher = foldhash::fast::RandomState;

struct Idle {
    stream: TcpStream,
    /// When it was checked in, on the coarse monotonic clock (see [`coarse_now`]).
    since: Duration,
}

/// The monotonic clock at the kernel's tick resolution (a few milliseconds): a plain memory
/// read in the vDSO, where the precise clock reads and scales the TSC. Idle timeouts are
/// seconds; every pooled exchange read the clock twice.
fn coarse_now() -> Duration {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE).map_or(Duration::ZERO, Duration::from)
}

/// The pool itself. Cheap to share (`Arc<Pool>`); a sweeper task closes expired connections.
pub struct Pool {
    idle: Mutex<HashMap<PoolKey, Vec<Idle>, PoolHasher>>,
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

    /// An idle connection to `addr` that still looks open, if the pool has one.
    #[cfg(test)]
    pub fn checkout(&self, addr: SocketAddr) -> Option<OriginConn> {
        self.checkout_from(addr, None)
    }

    /// An idle connection to `addr` opened from `source` (see [`Pool::connect_from`]).
    fn checkout_from(&self, addr: SocketAddr, source: Option<IpAddr>) -> Option<OriginConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(&(addr, source))?;
        let now = coarse_now();
        while let Some(conn) = list.pop() {
            if now.saturating_sub(conn.since) < self.idle_timeout && looks_open(&conn.stream) {
                return Some(OriginConn {
                    stream: conn.stream,
                    addr,
                    source,
                    reused: true,
                });
            }
        }
        None
    }

    /// Returns a connection whose last response was complete and which may carry another.
    pub fn checkin(&self, conn: OriginConn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry((conn.addr, conn.source)).or_default();
        if list.len() < MAX_IDLE_PER_ORIGIN {
            list.push(Idle {
                stream: conn.stream,
                since: coarse_now(),
            });
        }
    }

    /// Opens a new connection to the first of `addrs` that accepts within the connect timeout.
    pub async fn connect(&self, addrs: &[SocketAddr]) -> io::Result<OriginConn> {
        self.connect_from(addrs, None).await
    }

    /// Like [`Pool::connect`], from the (non-local) client address `source` when given: a
    /// transparent socket, as TPROXY's `spoof_client` needs.
    pub async fn connect_from(
        &self,
        addrs: &[SocketAddr],
        source: Option<IpAddr>,
    ) -> io::Result<OriginConn> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
        for &addr in addrs {
            let connecting = async {
                match source {
                    None => TcpStream::connect(addr).await,
                    Some(ip) => {
                        crate::intercept::spoofed_socket(ip, addr)?
                            .connect(addr)
                            .await
                    }
                }
            };
            match tokio::time::timeout(self.connect_timeout, connecting).await {
                Ok(Ok(stream)) => {
                    // Heads and bodies are written whole; Nagle would only add latency.
                    stream.set_nodelay(true)?;
                    return Ok(OriginConn {
                        stream,
                        addr,
                        source,
                        reused: false,
                    });
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
            }
        }
        Err(last)
    }

    /// A pooled connection to one of `addrs`, or a new one.
    pub async fn get(&self, addrs: &[SocketAddr]) -> io::Result<OriginConn> {
        self.get_from(addrs, None).await
    }

    /// A pooled connection to one of `addrs` opened from `source`, or a new one.
    pub async fn get_from(
        &self,
        addrs: &[SocketAddr],
        source: Option<IpAddr>,
    ) -> io::Result<OriginConn> {
        for &addr in addrs {
            if let Some(conn) = self.checkout_from(addr, source) {
                return Ok(conn);
            }
        }
        self.connect_from(addrs, source).await
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

/// An idle connection must have nothing to read: data would be a protocol error by the origin,
/// and EOF means it closed its side.
fn looks_open(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
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

        let conn = pool.get(&[addr]).await.unwrap();
        assert!(!conn.reused);
        let (mut server_side, _) = listener.accept().await.unwrap();
        pool.checkin(conn);
        assert_eq!(pool.idle_count(), 1);

        let again = pool.get(&[addr]).await.unwrap();
        assert!(again.reused, "the idle connection is handed out again");
        pool.checkin(again);

        // The origin closes its side: the pool must not hand that connection out.
        server_side.shutdown().await.unwrap();
        drop(server_side);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let fresh = pool.get(&[addr]).await.unwrap();
        assert!(!fresh.reused);
    }

    #[tokio::test]
    async fn expired_connections_are_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_millis(100), Duration::from_secs(1));
        let conn = pool.get(&[addr]).await.unwrap();
        let _server_side = listener.accept().await.unwrap();
        pool.checkin(conn);
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(pool.idle_count(), 0, "the sweeper closed it");
        assert!(pool.checkout(addr).is_none());
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
        let conn = pool.connect(&[dead, live]).await.unwrap();
        assert_eq!(conn.addr, live);
        assert!(pool.connect(&[dead]).await.is_err());
    }

    #[tokio::test]
    async fn connections_from_different_sources_are_never_shared() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = Pool::start(Duration::from_secs(60), Duration::from_secs(1));
        let mine = pool.get(&[addr]).await.unwrap();
        let _accepted = listener.accept().await.unwrap();
        pool.checkin(mine);
        // A connection opened from a client's address is pooled under that address only.
        let client: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(pool.checkout_from(addr, Some(client)).is_none());
        let stream = TcpStream::connect(addr).await.unwrap();
        let _accepted2 = listener.accept().await.unwrap();
        pool.checkin(OriginConn {
            stream,
            addr,
            source: Some(client),
            reused: false,
        });
        assert_eq!(pool.idle_count(), 2);
        let other: IpAddr = "127.0.0.3".parse().unwrap();
        assert!(pool.checkout_from(addr, Some(other)).is_none());
        let back = pool.checkout_from(addr, Some(client)).unwrap();
        assert_eq!(back.source, Some(client));
        let own = pool.checkout(addr).unwrap();
        assert_eq!(own.source, None);
        assert!(pool.checkout(addr).is_none());
    }
}
