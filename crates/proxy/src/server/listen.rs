//! The listening sockets: binding them, and the accept loop that hands each connection to a
//! session.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sepia_config::Mode;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;

use super::handover::{Inherited, SocketRole};
use super::parked::{spawn_session, spawn_tls_session, Accepted};
use super::parking_lot::ParkingLot;
use super::tracker::Tracker;
use crate::state::State;
use crate::transport::intercept;
use crate::transport::tls::TlsListener;
use crate::transport::Conn;

/// Pending connections the kernel queues per listener.
const BACKLOG: i32 = 4096;

/// A listening socket and how its connections are served.
pub(super) struct Bound {
    /// Shared so that a reload that keeps the listener hands the same socket to a new
    /// accept loop.
    pub(super) listener: Arc<TcpListener>,
    mode: Mode,
    spoof_client: bool,
    /// Its index in the configuration.
    index: u16,
    /// TLS termination, when configured.
    pub(super) tls: Option<Arc<TlsListener>>,
}

impl Bound {
    /// Listener `index` of the configuration on `listener`, its TLS files read anew.
    pub(super) fn new(
        listener: Arc<TcpListener>,
        l: &sepia_config::Listener,
        index: usize,
    ) -> io::Result<Bound> {
        let tls = l.tls.as_ref().map(TlsListener::new).transpose();
        let tls = tls
            .map_err(|e| io::Error::new(e.kind(), format!("TLS of listener {}: {e}", l.address)))?;
        Ok(Bound {
            listener,
            mode: l.mode,
            spoof_client: l.spoof_client,
            index: u16::try_from(index).unwrap_or(u16::MAX),
            tls: tls.map(Arc::new),
        })
    }
}

/// The socket of configured listener `l`: the one passed for it by the process this one
/// replaces (a binary upgrade), else bound now.
pub(super) fn listener_for(
    l: &sepia_config::Listener,
    inherited: &mut Inherited,
) -> io::Result<TcpListener> {
    match inherited.take(SocketRole::of(l)) {
        Some(passed) => TcpListener::from_std(passed),
        None => bind_listener(l),
    }
}

/// Binds the socket of a configured listener.
pub(super) fn bind_listener(l: &sepia_config::Listener) -> io::Result<TcpListener> {
    bind(l.address, l.mode == Mode::Tproxy)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {}: {e}", l.address)))
}

pub(super) fn bind(addr: SocketAddr, transparent: bool) -> io::Result<TcpListener> {
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

pub(super) async fn accept_loop(
    bound: Bound,
    mut state: Arc<State>,
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
                    if let Some(newer) = State::newest(&state) {
                        state = newer;
                    }
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
