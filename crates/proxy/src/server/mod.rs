//! Listeners, the accept loops, and graceful shutdown: on the shutdown signal, stop accepting,
//! let in-flight requests finish (idle keep-alive connections close at once, busy ones after
//! their current response) and give up after the configured grace period.

mod handover;
mod idle_clock;
mod listen;
mod parked;
mod parking_lot;
mod reload;
mod tracker;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sepia_config::Config;
use sepia_observe::AccessLog;

pub use self::handover::{Inherited, PassedSocket, SocketRole};
use self::listen::{listener_for, Bound};
use self::parked::Accepted;
use self::parking_lot::ParkingLot;
pub use self::reload::Reloader;
use self::reload::{Listening, Request};
use self::tracker::Tracker;
use crate::admin::{Admin, ClientCounts};
use crate::state::State;
use crate::transport::tls::TlsListener;
use crate::upstream::TlsClients;

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
    /// Reloads asked for by [`Reloader`]s (SIGHUP in the binary), and requests for the
    /// listening sockets (a binary upgrade).
    reloads: tokio::sync::mpsc::UnboundedReceiver<Request>,
    reloader: Reloader,
    /// Where idle plain-TCP connections wait, and the epoll set its task waits on.
    lot: (Arc<ParkingLot<Accepted>>, mio::Poll),
}

impl Server {
    /// Binds every configured listener. Must be called inside the tokio runtime.
    pub fn bind(config: Arc<Config>, log: AccessLog) -> io::Result<Server> {
        Server::bind_with(config, log, Inherited::default())
    }

    /// [`Server::bind`] for the process that replaces a running one (a binary upgrade): the
    /// listeners take the sockets it passed (`handover.rs`), and disks it holds are waited
    /// for rather than refused.
    pub fn bind_with(
        config: Arc<Config>,
        log: AccessLog,
        mut inherited: Inherited,
    ) -> io::Result<Server> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let listener = listener_for(l, &mut inherited)?;
            listeners.push(Bound::new(Arc::new(listener), l, listeners.len())?);
        }
        let lot = ParkingLot::new().map_err(|e| {
            io::Error::new(e.kind(), format!("the idle connections' epoll set: {e}"))
        })?;
        let admin = match &config.admin {
            None => None,
            Some(a) => {
                let tracker = Arc::new(Tracker::new(Arc::default()));
                let (counted, parking) = (tracker.clone(), lot.0.clone());
                let clients = Box::new(move || ClientCounts {
                    open: counted.count.load(Ordering::Relaxed) as u64,
                    parked: (parking.parked() + counted.parked_tasks.load(Ordering::Relaxed))
                        as u64,
                });
                let names = config.listeners.iter().map(|l| l.address.to_string());
                let passed = inherited.take(SocketRole::Admin { address: a.listen });
                let admin = Admin::bind(a, names.collect(), clients, passed)?;
                Some((Arc::new(admin), tracker))
            }
        };
        for role in inherited.leftover() {
            tracing::info!("{role}: not in this configuration any more, closed");
        }
        let disks = match inherited.wait_for_disks {
            true => sepia_store::LockWait::Wait,
            false => sepia_store::LockWait::Fail,
        };
        let (reloader, reloads) = Reloader::new();
        Ok(Server {
            state: Arc::new(State::with_disks(config, log, disks)?),
            listeners,
            admin,
            reloads,
            reloader,
            lot,
        })
    }

    /// A handle that reloads the configuration of this server once it runs.
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
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

    /// Serves until `shutdown` completes, then drains. Reloads are applied meanwhile.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let (admin, tracker) = match self.admin.take() {
            Some((admin, tracker)) => (Some(admin), tracker),
            None => (None, Arc::new(Tracker::new(Arc::default()))),
        };
        let admin_socket = admin.clone();
        let admin = admin.map(|a| tokio::spawn(a.run(self.state.clone())));
        self.state.upstreams.start_checks(None);
        tokio::spawn(tracker.clock.clone().run(tracker.shutdown.clone()));
        let (lot, poll) = self.lot;
        let (clock, stop) = (tracker.clock.clone(), tracker.shutdown.clone());
        tokio::spawn(lot.clone().run(poll, clock, stop));
        let bound = std::mem::take(&mut self.listeners);
        let mut listening = Listening::start(bound, &self.state, &tracker, lot);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(request) = self.reloads.recv() => match request {
                    Request::Reload { config, log, done } => {
                        let result = reload::apply(&mut self.state, &mut listening, &tracker, *config, log);
                        let _ = done.send(result);
                    }
                    Request::Sockets(done) => {
                        let _ = done.send(sockets(&listening, admin_socket.as_deref()));
                    }
                },
            }
        }
        tracing::info!("shutting down: no new connections; finishing in-flight requests");
        tracker.shutdown.begin();
        listening.stop();
        admin.iter().for_each(tokio::task::JoinHandle::abort);
        let state = State::newest(&self.state).unwrap_or(self.state);
        let grace = state.config.server.shutdown_grace;
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

/// Every listening socket, duplicated, with its role: the listeners', then the admin one.
fn sockets(listening: &Listening, admin: Option<&Admin>) -> io::Result<Vec<PassedSocket>> {
    let mut sockets = listening.sockets()?;
    if let Some(admin) = admin {
        sockets.push(PassedSocket {
            role: SocketRole::Admin {
                address: admin.configured(),
            },
            fd: admin.socket()?,
        });
    }
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sepia_config::Mode;
    use tokio::net::{TcpListener, TcpStream};

    use super::listen::bind;
    use super::parked::Accepted;
    use crate::transport::Conn;

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
