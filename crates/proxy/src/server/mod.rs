//! Listeners, the accept loops, and graceful shutdown: on the shutdown signal, stop accepting,
//! let in-flight requests finish (idle keep-alive connections close at once, busy ones after
//! their current response) and give up after the configured grace period.

mod idle_clock;
mod parked;
mod parking_lot;
mod tracker;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sepia_config::{Config, Mode};
use sepia_observe::AccessLog;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;

use self::parked::{spawn_session, spawn_tls_session, Accepted};
use self::parking_lot::ParkingLot;
use self::tracker::Tracker;
use crate::admin::Admin;
use crate::state::State;
use crate::transport::intercept;
use crate::transport::tls::TlsListener;
use crate::transport::Conn;
use crate::upstream::TlsClients;

/// Pending connections the kernel queues per listener.
const BACKLOG: i32 = 4096;

/// The proxy: its listeners and what their sessions share.
///
/// The runtime that runs it must call [`crate::worker_parks`] from
/// `tokio::runtime::Builder::on_thread_park`, as the `sepia` binary does: it tells a busy
/// worker from an idle one (see `burst.rs`). Without it every response waits for one pass of
/// the scheduler once its worker has begun two requests.
pub struct Server {
    state: Arc<State>,
    listeners: Vec<Bound>,
    /// The admin listener, when `[admin]` is configured, and the connection count it reports.
    admin: Option<(Arc<Admin>, Arc<Tracker>)>,
    /// Where idle plain-TCP connections wait, and the epoll set its task waits on.
    lot: (Arc<ParkingLot<Accepted>>, mio::Poll),
}

/// A listening socket and how its connections are served.
struct Bound {
    listener: TcpListener,
    mode: Mode,
    spoof_client: bool,
    /// Its index in the configuration.
    index: u16,
    /// TLS termination, when configured.
    tls: Option<Arc<TlsListener>>,
}

impl Server {
    /// Binds every configured listener. Must be called inside the tokio runtime.
    pub fn bind(config: Arc<Config>, log: AccessLog) -> io::Result<Server> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let tls = l.tls.as_ref().map(TlsListener::new).transpose();
            let tls = tls.map_err(|e| {
                io::Error::new(e.kind(), format!("TLS of listener {}: {e}", l.address))
            })?;
            let listener = bind(l.address, l.mode == Mode::Tproxy).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot listen on {}: {e}", l.address))
            })?;
            listeners.push(Bound {
                listener,
                mode: l.mode,
                spoof_client: l.spoof_client,
                index: u16::try_from(listeners.len()).unwrap_or(u16::MAX),
                tls: tls.map(Arc::new),
            });
        }
        let admin = match &config.admin {
            None => None,
            Some(a) => {
                let tracker = Arc::new(Tracker::new(Arc::default()));
                let counted = tracker.clone();
                let open = Box::new(move || counted.count.load(Ordering::Relaxed) as u64);
                let names = config.listeners.iter().map(|l| l.address.to_string());
                Some((Arc::new(Admin::bind(a, names.collect(), open)?), tracker))
            }
        };
        let lot = ParkingLot::new().map_err(|e| {
            io::Error::new(e.kind(), format!("the idle connections' epoll set: {e}"))
        })?;
        Ok(Server {
            state: Arc::new(State::new(config, log)?),
            listeners,
            admin,
            lot,
        })
    }

    /// What binding would check beyond the configuration file itself, without binding: every
    /// TLS listener's certificates and keys can be read and belong together, and every
    /// route's `tls_ca` holds CA certificates (`sepia check`).
    pub fn check(config: &Config) -> io::Result<()> {
        for l in &config.listeners {
            if let Some(tls) = &l.tls {
                TlsListener::new(tls).map_err(|e| {
                    io::Error::new(e.kind(), format!("TLS of listener {}: {e}", l.address))
                })?;
            }
        }
        TlsClients::from_config(config).map(drop)
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|b| b.listener.local_addr().ok())
            .collect()
    }

    /// The admin listener's bound address, when there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|(a, _)| a.local_addr().ok())
    }

    /// Serves until `shutdown` completes, then drains.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (admin, tracker) = match self.admin {
            Some((admin, tracker)) => (Some(admin), tracker),
            None => (None, Arc::new(Tracker::new(Arc::default()))),
        };
        let admin = admin.map(|a| tokio::spawn(a.run(self.state.clone())));
        tokio::spawn(tracker.clock.clone().run(tracker.shutdown.clone()));
        let (lot, poll) = self.lot;
        let (clock, stop) = (tracker.clock.clone(), tracker.shutdown.clone());
        tokio::spawn(lot.clone().run(poll, clock, stop));
        let mut watchers = Vec::new();
        for bound in self.listeners {
            if let (Some(tls), Ok(addr)) = (&bound.tls, bound.listener.local_addr()) {
                watchers.push(tokio::spawn(tls.clone().watch_files(addr)));
            }
            let accepting = accept_loop(bound, self.state.clone(), tracker.clone(), lot.clone());
            tokio::spawn(accepting);
        }
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing in-flight requests");
        tracker.shutdown.begin();
        watchers.iter().for_each(tokio::task::JoinHandle::abort);
        admin.iter().for_each(tokio::task::JoinHandle::abort);
        let grace = self.state.config.server.shutdown_grace;
        if tokio::time::timeout(grace, tracker.all_done())
            .await
            .is_err()
        {
            tracing::warn!(
                open = tracker.count.load(Ordering::Relaxed),
                "shutdown grace period over; closing remaining connections"
            );
        }
        // A disk tier flushes what it buffers and checkpoints its index, so the next start
        // loads the index instead of scanning the segments (blocking I/O: off the workers).
        let state = self.state.clone();
        let closing = tokio::task::spawn_blocking(move || {
            if let Some(cache) = &state.cache {
                cache.store.close();
            }
        });
        if let Err(e) = closing.await {
            tracing::error!("closing the cache store failed: {e}");
        }
    }
}

fn bind(addr: SocketAddr, transparent: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // Restarting Sepia must not wait for old connections in TIME_WAIT.
    socket.set_reuse_address(true)?;
    if transparent {
        // TPROXY delivers connections addressed to other hosts only to IP_TRANSPARENT sockets
        // (needs CAP_NET_ADMIN). Linux accepts the IPv4-level option on IPv6 sockets too.
        socket.set_ip_transparent(true).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("IP_TRANSPARENT for a tproxy listener (needs CAP_NET_ADMIN): {e}"),
            )
        })?;
    }
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Responses are written whole, so Nagle would only delay their last segment. Linux copies
    // TCP_NODELAY from the listening socket into every connection it accepts (the child socket
    // is cloned from the listener): set here once, it saves a setsockopt per connection,
    // one of ~7 syscalls a connection-per-request client costs (bench/RESULTS.md, 2026-11-24).
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

async fn accept_loop(
    bound: Bound,
    state: Arc<State>,
    tracker: Arc<Tracker>,
    lot: Arc<ParkingLot<Accepted>>,
) {
    let Bound {
        listener,
        mode,
        spoof_client,
        index,
        tls,
    } = bound;
    let Ok(listen) = listener.local_addr() else {
        return;
    };
    let mut stop = std::pin::pin!(tracker.shutdown.waiter());
    if tracker.shutdown.has_begun() {
        return;
    }
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let divert = intercept::divert(&stream, mode, listen, spoof_client, peer);
                    let accepted = Accepted { state: state.clone(), mode, listener: index, divert, guard: tracker.enter(), parked_until: 0, lot: lot.clone() };
                    match &tls {
                        None => spawn_session(accepted, Conn::Tcp(stream), peer),
                        Some(tls) => spawn_tls_session(accepted, stream, peer, tls.clone()),
                    }
                }
                Err(e) => {
                    // Out of descriptors or memory: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            _ = &mut stop => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    use super::parked::Parked;
    use crate::front::h1;
    use crate::state::shutdown::Shutdown;
    use crate::transport::intercept::Divert;

    /// Runs `measure` with a connected socket, its peer address, the built-in configuration's
    /// shared state and a shutdown signal, on a throwaway runtime.
    fn with_parts<T>(
        measure: impl FnOnce(TcpStream, SocketAddr, Arc<State>, Arc<Shutdown>) -> T,
    ) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let s = TcpStream::connect(addr).await.unwrap();
            let config = Arc::new(Config::builtin_default());
            let state = Arc::new(State::new(config, AccessLog::disabled()).unwrap());
            measure(s, addr, state, Arc::default())
        })
    }

    #[test]
    fn accepted_connections_inherit_nodelay() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for addr in ["127.0.0.1:0", "[::1]:0"] {
                let Ok(listener) = bind(addr.parse().unwrap(), false) else {
                    continue; // no IPv6 loopback here
                };
                let to = listener.local_addr().unwrap();
                let _client = TcpStream::connect(to).await.unwrap();
                let (accepted, _) = listener.accept().await.unwrap();
                assert!(accepted.nodelay().unwrap(), "{addr}: Nagle is on");
            }
        });
    }

    #[test]
    fn a_parked_connection_is_small() {
        let serve = with_parts(|s, addr, state, shutdown| {
            let listener = crate::front::Listener {
                mode: Mode::Forward,
                divert: Divert::NotDiverted,
                index: 0,
                scheme: crate::model::Scheme::Http,
            };
            std::mem::size_of_val(&h1::serve(state, Conn::Tcp(s), addr, listener, shutdown))
        });
        let park = with_parts(|s, _, state, shutdown| {
            let tracker = Arc::new(Tracker::new(shutdown));
            let accepted = Accepted {
                state,
                mode: Mode::Forward,
                listener: 0,
                divert: Divert::NotDiverted,
                guard: tracker.enter(),
                parked_until: 0,
                lot: ParkingLot::new().unwrap().0,
            };
            std::mem::size_of_val(&Parked::new(accepted, Conn::Tcp(s)))
        });
        let h2 = with_parts(|s, addr, state, shutdown| {
            let listener = crate::front::Listener {
                mode: Mode::Reverse,
                divert: Divert::NotDiverted,
                index: 0,
                scheme: crate::model::Scheme::Https,
            };
            std::mem::size_of_val(&crate::front::h2::serve(
                state,
                Conn::Tcp(s),
                addr,
                listener,
                shutdown,
            ))
        });
        eprintln!("serve future: {serve} bytes, h2: {h2} bytes, parked connection: {park} bytes");
        // A parked TLS connection must stay small: this is what 10,000 idle clients cost. Its
        // task is this plus tokio's ~104 bytes, rounded up to 128: at most 152 is 256 bytes.
        assert!(park <= 152, "a parked connection grew to {park} bytes");
        // An idle HTTP/2 connection keeps its session's future: 8,400 bytes when the h2
        // connection was held by three nested futures, 3,720 with one.
        assert!(h2 <= 4096, "the HTTP/2 session's future grew to {h2} bytes");
    }
}
