//! Reloading the configuration of a running server (SIGHUP in the binary).
//!
//! A reload builds a new [`State`] and links the old one to it: sessions move over before
//! their next request and in-flight requests finish on the state they began with. Listeners
//! are matched by address: one whose address and socket options are unchanged keeps its
//! socket (its queue of pending connections is never closed) under a new accept loop with
//! the new mode and TLS files; new addresses are bound, removed ones closed. Everything that
//! can fail (TLS files, binding, building the state) is done before anything is swapped, so a
//! failed reload leaves the running configuration as it was.
//!
//! The same channel hands out the listening sockets for a binary upgrade (`handover.rs`).

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use sepia_config::{Changes, Config, Mode};
use sepia_observe::AccessLog;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::handover::{PassedSocket, SocketRole};
use super::listen::{accept_loop, bind_listener, Bound};
use super::parked::Accepted;
use super::parking_lot::ParkingLot;
use super::tracker::Tracker;
use crate::state::State;

/// Asks a running [`super::Server`] to reload, or for its listening sockets (a binary
/// upgrade). Cheap to clone.
#[derive(Clone)]
pub struct Reloader {
    requests: mpsc::UnboundedSender<Request>,
}

/// What a [`Reloader`] asks of the running server.
pub(super) enum Request {
    Reload {
        /// Boxed: a `Config` is large, and the channel's slots are sized by the largest.
        config: Box<Config>,
        log: AccessLog,
        done: oneshot::Sender<io::Result<Changes>>,
    },
    Sockets(oneshot::Sender<io::Result<Vec<PassedSocket>>>),
}

impl Reloader {
    pub(super) fn new() -> (Reloader, mpsc::UnboundedReceiver<Request>) {
        let (requests, rx) = mpsc::unbounded_channel();
        (Reloader { requests }, rx)
    }

    /// Replaces the running configuration by `config` (already validated) with access log
    /// `log`. Returns what changed, including what keeps its running value until a restart;
    /// on error nothing changed.
    pub async fn reload(&self, config: Config, log: AccessLog) -> io::Result<Changes> {
        let (done, answer) = oneshot::channel();
        let config = Box::new(config);
        self.ask(Request::Reload { config, log, done }, answer)
            .await
    }

    /// Duplicates of every socket the server listens on now, with the configured address
    /// each serves (admin included), for the binary that replaces this one. The server goes
    /// on accepting on its own copies until it stops.
    pub async fn sockets(&self) -> io::Result<Vec<PassedSocket>> {
        let (done, answer) = oneshot::channel();
        self.ask(Request::Sockets(done), answer).await
    }

    async fn ask<T>(
        &self,
        request: Request,
        answer: oneshot::Receiver<io::Result<T>>,
    ) -> io::Result<T> {
        let stopped = || io::Error::other("the server is not running");
        self.requests.send(request).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The accept loops running, one per configured listener, and their sockets.
pub(super) struct Listening {
    running: Vec<Running>,
    /// Where their idle plain-TCP connections wait.
    lot: Arc<ParkingLot<Accepted>>,
}

struct Running {
    /// The configured listener it serves.
    config: sepia_config::Listener,
    listener: Arc<TcpListener>,
    accept: JoinHandle<()>,
    /// Reloads the TLS files when they change on disk.
    watcher: Option<JoinHandle<()>>,
}

impl Listening {
    pub(super) fn start(
        bound: Vec<Bound>,
        state: &Arc<State>,
        tracker: &Arc<Tracker>,
        lot: Arc<ParkingLot<Accepted>>,
    ) -> Listening {
        let configs = state.config.listeners.iter().cloned();
        let running = configs
            .zip(bound)
            .map(|(config, b)| Running::spawn(config, b, state, tracker, &lot))
            .collect();
        Listening { running, lot }
    }

    /// A duplicate of each listening socket, with the role it serves.
    pub(super) fn sockets(&self) -> io::Result<Vec<PassedSocket>> {
        self.running
            .iter()
            .map(|r| {
                Ok(PassedSocket {
                    role: SocketRole::of(&r.config),
                    fd: r.listener.as_fd().try_clone_to_owned()?,
                })
            })
            .collect()
    }

    /// Stops every accept loop (shutdown): their sockets close.
    pub(super) fn stop(&mut self) {
        for r in self.running.drain(..) {
            r.abort();
        }
    }
}

impl Running {
    fn spawn(
        config: sepia_config::Listener,
        b: Bound,
        state: &Arc<State>,
        tracker: &Arc<Tracker>,
        lot: &Arc<ParkingLot<Accepted>>,
    ) -> Running {
        let watcher = match (&b.tls, b.listener.local_addr()) {
            (Some(tls), Ok(addr)) => Some(tokio::spawn(tls.clone().watch_files(addr))),
            _ => None,
        };
        let listener = b.listener.clone();
        let accepting = accept_loop(b, state.clone(), tracker.clone(), lot.clone());
        let accept = tokio::spawn(accepting);
        Running {
            config,
            listener,
            accept,
            watcher,
        }
    }

    /// Accepting is cancel-safe and the loop spawns each connection without awaiting in
    /// between: aborting loses no accepted connection.
    fn abort(self) {
        self.accept.abort();
        if let Some(w) = &self.watcher {
            w.abort();
        }
    }
}

/// Applies a reload: `new` replaces `*state` for new requests and `listening` follows its
/// listeners. On error nothing changed.
pub(super) fn apply(
    state: &mut Arc<State>,
    listening: &mut Listening,
    tracker: &Arc<Tracker>,
    new: Config,
    log: AccessLog,
) -> io::Result<Changes> {
    let changes = state.config.changes_to(&new);
    let config = Arc::new(state.config.reloaded_with(new));
    // Sockets first: every listener of the new configuration, the kept ones reused.
    let mut bound = Vec::with_capacity(config.listeners.len());
    for (index, l) in config.listeners.iter().enumerate() {
        let kept = listening.running.iter().find(|r| same_socket(&r.config, l));
        let listener = match kept {
            Some(r) => r.listener.clone(),
            None => Arc::new(bind_listener(l)?),
        };
        bound.push(Bound::new(listener, l, index)?);
    }
    let next = Arc::new(state.reloaded(config.clone(), log)?);
    // Nothing can fail from here on.
    next.upstreams.start_checks(Some(&state.upstreams));
    state.replace_with(next.clone());
    *state = next;
    let old = std::mem::take(&mut listening.running);
    listening.running = config
        .listeners
        .iter()
        .cloned()
        .zip(bound)
        .map(|(l, b)| Running::spawn(l, b, state, tracker, &listening.lot))
        .collect();
    // The old loops' sockets close once nothing else holds them (a removed listener).
    old.into_iter().for_each(Running::abort);
    Ok(changes)
}

/// Whether listener `new` can take over the socket of `old`: the same address, and the same
/// socket options (a tproxy socket is IP_TRANSPARENT). Mode, TLS and the rest are the accept
/// loop's and change live. Port 0 means a new port each time: never kept.
fn same_socket(old: &sepia_config::Listener, new: &sepia_config::Listener) -> bool {
    old.address == new.address
        && old.address.port() != 0
        && (old.mode == Mode::Tproxy) == (new.mode == Mode::Tproxy)
}
