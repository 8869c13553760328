//! HTTP/2 connections to origins, each shared by many requests at once (RFC 9113 §5: streams
//! are multiplexed on one connection).
//!
//! Per origin key a few connections are kept: a request takes a stream on the first one with
//! room under the origin's SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2); when all are
//! full another is opened, up to [`MAX_CONNS_PER_ORIGIN`], beyond which the least busy one
//! queues the stream until the origin allows it. A connection that ended (GOAWAY, an error,
//! the origin's close) is dropped; one without streams for `origin_idle` is closed by the
//! sweeper. Only one connection per key is being opened at a time, so that a burst of
//! requests to a cold origin shares the first connection instead of opening one each.
//!
//! An `https://` origin that answers ALPN with `http/1.1` is remembered for `origin_idle`:
//! meanwhile its requests go to the HTTP/1.1 pool without trying h2 again.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;

use crate::transport::Conn;
use crate::upstream::clock::coarse_now;
use crate::upstream::health::Tally;
use crate::upstream::pool::{OriginConn, OriginKey, Pool, PoolHasher, Protocol};
use crate::upstream::tls::TlsTarget;
use sepia_observe::metrics::OriginEvent;

/// HTTP/2 connections kept per origin key.
const MAX_CONNS_PER_ORIGIN: usize = 4;
/// The receive windows offered to origins (RFC 9113 §6.9.2): larger than the 64 KiB default so
/// that one stream can fill a fast link.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

/// The shared HTTP/2 connections of every origin.
pub struct H2Conns {
    keys: Mutex<HashMap<OriginKey, KeyConns, PoolHasher>>,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

/// One origin key's connections.
#[derive(Default)]
struct KeyConns {
    conns: Vec<H2Conn>,
    /// When the origin last answered ALPN with `http/1.1` (coarse clock).
    declined: Option<Duration>,
    /// Held while a connection for this key is being opened.
    opening: Arc<tokio::sync::Mutex<()>>,
}

/// One HTTP/2 connection: a handle to open streams on it and what the pool knows of it.
#[derive(Clone)]
pub struct H2Conn {
    pub send: SendRequest<Bytes>,
    pub key: OriginKey,
    state: Arc<ConnState>,
}

#[derive(Default)]
struct ConnState {
    /// Streams in use by requests (each an [`H2Stream`]).
    streams: AtomicUsize,
    /// The connection ended or was told to go away: no new stream goes on it.
    closed: AtomicBool,
    /// When its last stream ended, in milliseconds of the coarse clock.
    idle_since_ms: AtomicU64,
}

/// A request's claim on a stream of a shared connection; dropping it gives the place back.
pub struct H2Stream {
    pub conn: H2Conn,
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        let state = &self.conn.state;
        if state.streams.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.idle_since_ms.store(now_ms(), Ordering::Relaxed);
        }
    }
}

impl H2Conn {
    fn claim(&self) -> H2Stream {
        self.state.streams.fetch_add(1, Ordering::AcqRel);
        H2Stream { conn: self.clone() }
    }

    fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::Acquire)
    }

    /// No new stream goes on this connection (it received GOAWAY, RFC 9113 §6.8).
    pub fn retire(&self) {
        self.state.closed.store(true, Ordering::Release);
    }

    fn has_room(&self) -> bool {
        self.state.streams.load(Ordering::Acquire) < self.send.current_max_send_streams()
    }

    fn expired(&self, now_ms: u64, idle_timeout: Duration) -> bool {
        self.state.streams.load(Ordering::Acquire) == 0
            && now_ms.saturating_sub(self.state.idle_since_ms.load(Ordering::Relaxed))
                >= duration_ms(idle_timeout)
    }
}

/// Where a request for an `http2` route goes: a stream of a shared HTTP/2 connection, or an
/// HTTP/1.1 connection to an origin that did not pick h2.
pub enum Reached {
    H1(OriginConn),
    H2(H2Stream),
}

/// What [`H2Conns::at_hand`] found.
enum AtHand {
    Reached(Reached),
    /// The origin declines h2 and no idle HTTP/1.1 connection is left: open one (without
    /// waiting for the turn to open h2 connections).
    OpenH1,
}

impl AtHand {
    async fn resolve(
        self,
        conns: &H2Conns,
        pool: &Pool,
        addrs: &[SocketAddr],
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<Reached> {
        match self {
            // A stream of a shared connection, or a pooled HTTP/1.1 one: a connection reused.
            AtHand::Reached(r) => {
                tally.count(OriginEvent::Reused);
                Ok(r)
            }
            AtHand::OpenH1 => conns.open(pool, addrs, tls, tally).await,
        }
    }
}

/// What the pool has for a key.
enum Found {
    Stream(H2Stream),
    /// The origin declined h2 lately: use HTTP/1.1.
    Declined,
    Nothing,
}

fn now_ms() -> u64 {
    duration_ms(coarse_now())
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl H2Conns {
    /// Builds the connection set and starts its sweeper on the current tokio runtime.
    pub fn start(idle_timeout: Duration, connect_timeout: Duration) -> Arc<H2Conns> {
        let conns = Arc::new(H2Conns {
            keys: Mutex::new(HashMap::default()),
            idle_timeout,
            connect_timeout,
        });
        tokio::spawn(sweep(Arc::downgrade(&conns)));
        conns
    }

    /// A stream to one of `addrs` (over TLS as `tls` says, h2c with prior knowledge when
    /// plain), on a shared connection or a new one; or an HTTP/1.1 connection when the
    /// origin's ALPN answer was `http/1.1`.
    pub async fn reach(
        &self,
        pool: &Pool,
        addrs: &[SocketAddr],
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<Reached> {
        if let Some(reached) = self.at_hand(pool, addrs, tls) {
            return reached.resolve(self, pool, addrs, tls, tally).await;
        }
        let Some(&first) = addrs.first() else {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address"));
        };
        let opening = self.opening(&OriginKey::new(first, None, tls).speaking(Protocol::H2));
        let turn = opening.lock().await;
        // Whoever held the turn before may have opened a connection with room, or learnt
        // that the origin declines h2.
        if let Some(reached) = self.at_hand(pool, addrs, tls) {
            drop(turn);
            return reached.resolve(self, pool, addrs, tls, tally).await;
        }
        self.open(pool, addrs, tls, tally).await
    }

    /// What the pools hold for one of `addrs` without opening anything.
    fn at_hand(
        &self,
        pool: &Pool,
        addrs: &[SocketAddr],
        tls: Option<&TlsTarget>,
    ) -> Option<AtHand> {
        for &addr in addrs {
            match self.find(&OriginKey::new(addr, None, tls).speaking(Protocol::H2)) {
                Found::Stream(s) => return Some(AtHand::Reached(Reached::H2(s))),
                Found::Declined => {
                    return Some(match pool.checkout(&OriginKey::new(addr, None, tls)) {
                        Some(conn) => AtHand::Reached(Reached::H1(conn)),
                        None => AtHand::OpenH1,
                    })
                }
                Found::Nothing => {}
            }
        }
        None
    }

    /// A new connection to `key`'s origin, never a shared one: the retry of a request that a
    /// connection refused (RFC 9113 §8.7).
    pub async fn reopen(
        &self,
        pool: &Pool,
        key: &OriginKey,
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<Reached> {
        self.open(pool, &[key.addr], tls, tally).await
    }

    /// Opens a connection; an h2 one joins the set.
    async fn open(
        &self,
        pool: &Pool,
        addrs: &[SocketAddr],
        tls: Option<&TlsTarget>,
        tally: Tally<'_>,
    ) -> io::Result<Reached> {
        let origin = pool.connect(addrs, None, tls, tally).await?;
        // RFC 9113 §3.2: the origin picks h2 in ALPN; §3.3: a plain origin the route says
        // speaks h2 gets the connection preface right away (prior knowledge).
        let speaks_h2 = tls.is_none() || origin.conn.alpn() == Some(b"h2");
        let key = origin.key.clone().speaking(Protocol::H2);
        if !speaks_h2 {
            self.with_key(key, |k| k.declined = Some(coarse_now()));
            return Ok(Reached::H1(origin));
        }
        let conn = self.handshake(origin.conn, key.clone()).await?;
        let stream = conn.claim();
        self.with_key(key, |k| k.conns.push(conn));
        Ok(Reached::H2(stream))
    }

    /// The client connection preface and SETTINGS (RFC 9113 §3.4), within the connect
    /// timeout; the connection is then driven by a task of its own until it ends.
    async fn handshake(&self, io: Conn, key: OriginKey) -> io::Result<H2Conn> {
        let mut builder = h2::client::Builder::new();
        builder
            .enable_push(false)
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW);
        let handshake = builder.handshake::<_, Bytes>(io);
        let (send, connection) = match tokio::time::timeout(self.connect_timeout, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "h2 handshake timed out",
                ))
            }
        };
        let state = Arc::new(ConnState {
            idle_since_ms: AtomicU64::new(now_ms()),
            ..ConnState::default()
        });
        let ended = state.clone();
        let origin = key.addr;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%origin, "h2 origin connection ended: {e}");
            }
            ended.closed.store(true, Ordering::Release);
        });
        Ok(H2Conn { send, key, state })
    }

    /// A stream on one of `key`'s connections, if one can take it.
    fn find(&self, key: &OriginKey) -> Found {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = keys.get_mut(key) else {
            return Found::Nothing;
        };
        entry.conns.retain(|c| !c.is_closed());
        if let Some(conn) = entry.conns.iter().find(|c| c.has_room()) {
            return Found::Stream(conn.claim());
        }
        if entry.conns.len() >= MAX_CONNS_PER_ORIGIN {
            // h2 queues the stream until the origin allows another (RFC 9113 §5.1.2).
            let least = entry
                .conns
                .iter()
                .min_by_key(|c| c.state.streams.load(Ordering::Acquire));
            if let Some(conn) = least {
                return Found::Stream(conn.claim());
            }
        }
        let now = coarse_now();
        match entry.declined {
            Some(t) if now.saturating_sub(t) < self.idle_timeout => Found::Declined,
            _ => Found::Nothing,
        }
    }

    fn opening(&self, key: &OriginKey) -> Arc<tokio::sync::Mutex<()>> {
        self.with_key(key.clone(), |k| k.opening.clone())
    }

    fn with_key<T>(&self, key: OriginKey, f: impl FnOnce(&mut KeyConns) -> T) -> T {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        f(keys.entry(key).or_default())
    }

    /// Closes connections idle for `origin_idle` and forgets keys with nothing left.
    fn sweep_expired(&self) {
        let now = coarse_now();
        let now_ms = duration_ms(now);
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.retain(|_, k| {
            k.conns
                .retain(|c| !c.is_closed() && !c.expired(now_ms, self.idle_timeout));
            let declined = k
                .declined
                .is_some_and(|t| now.saturating_sub(t) < self.idle_timeout);
            !k.conns.is_empty() || declined || Arc::strong_count(&k.opening) > 1
        });
    }

    /// Connections held (open or not yet swept).
    #[cfg(test)]
    pub fn conn_count(&self) -> usize {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.values().map(|k| k.conns.len()).sum()
    }
}

async fn sweep(conns: Weak<H2Conns>) {
    let period = match conns.upgrade() {
        Some(c) => (c.idle_timeout / 2).max(Duration::from_millis(500)),
        None => return,
    };
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        match conns.upgrade() {
            Some(c) => c.sweep_expired(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// An h2c origin (prior knowledge) allowing `streams` at once, answering every request
    /// with 200; counts the connections it accepted.
    async fn origin(streams: u32) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut builder = h2::server::Builder::new();
                    builder.max_concurrent_streams(streams);
                    let Ok(mut conn) = builder.handshake::<_, Bytes>(tcp).await else {
                        return;
                    };
                    while let Some(Ok((_, mut respond))) = conn.accept().await {
                        let response = http::Response::new(());
                        let _ = respond.send_response(response, true);
                    }
                });
            }
        });
        (addr, accepted)
    }

    fn start() -> (Arc<Pool>, Arc<H2Conns>) {
        let (idle, connect) = (Duration::from_secs(60), Duration::from_secs(2));
        (Pool::start(idle, connect), H2Conns::start(idle, connect))
    }

    async fn stream(conns: &H2Conns, pool: &Pool, addr: SocketAddr) -> H2Stream {
        match conns
            .reach(pool, &[addr], None, Tally::Direct)
            .await
            .unwrap()
        {
            Reached::H2(s) => s,
            Reached::H1(_) => panic!("a plain origin of an http2 route is spoken to in h2c"),
        }
    }

    /// One request and its response, so that the origin's SETTINGS are known.
    async fn round_trip(stream: &H2Stream) {
        let send = stream.conn.send.clone().ready().await.unwrap();
        let mut send = send;
        let request = http::Request::get("http://origin.test/").body(()).unwrap();
        let (response, _) = send.send_request(request, true).unwrap();
        assert_eq!(response.await.unwrap().status(), 200);
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_connection() {
        let (addr, accepted) = origin(100).await;
        let (pool, conns) = start();
        let first = stream(&conns, &pool, addr).await;
        round_trip(&first).await;
        let second = stream(&conns, &pool, addr).await;
        round_trip(&second).await;
        assert_eq!(conns.conn_count(), 1);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(first.conn.state.streams.load(Ordering::SeqCst), 2);
        drop((first, second));
        let again = stream(&conns, &pool, addr).await;
        round_trip(&again).await;
        assert_eq!(again.conn.state.streams.load(Ordering::SeqCst), 1);
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "reused once its streams ended"
        );
    }

    #[tokio::test]
    async fn a_full_connection_makes_another_be_opened() {
        let (addr, accepted) = origin(1).await;
        let (pool, conns) = start();
        let first = stream(&conns, &pool, addr).await;
        round_trip(&first).await;
        // SETTINGS_MAX_CONCURRENT_STREAMS = 1 and the first request still holds its stream.
        let second = stream(&conns, &pool, addr).await;
        round_trip(&second).await;
        assert_eq!(conns.conn_count(), 2);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_idle_for_origin_idle_is_closed() {
        let (addr, accepted) = origin(100).await;
        let idle = Duration::from_millis(200);
        let (pool, conns) = (
            Pool::start(idle, Duration::from_secs(2)),
            H2Conns::start(idle, Duration::from_secs(2)),
        );
        let first = stream(&conns, &pool, addr).await;
        round_trip(&first).await;
        let state = first.conn.state.clone();
        drop(first);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(conns.conn_count(), 0, "the sweeper dropped it");
        // With no handle left, the connection ends (GOAWAY and close).
        assert!(state.closed.load(Ordering::Acquire));
        let again = stream(&conns, &pool, addr).await;
        round_trip(&again).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_ended_connection_is_not_used_again() {
        let (addr, accepted) = origin(100).await;
        let (pool, conns) = start();
        let first = stream(&conns, &pool, addr).await;
        round_trip(&first).await;
        first.conn.retire();
        drop(first);
        let second = stream(&conns, &pool, addr).await;
        round_trip(&second).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        assert_eq!(conns.conn_count(), 1, "the retired one was dropped");
    }
}
