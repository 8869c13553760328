//! Idle plain-TCP keep-alive connections, parked outside tokio: a descriptor and 32 bytes.
//!
//! A connection registered with tokio costs its `ScheduledIo` (256 bytes, cache-line aligned)
//! and, to wait on it, a task (256 bytes at the least): 512 bytes of heap per idle client,
//! ~750 B of RSS each at 10,000 (nginx: ~530). Parked here, a connection leaves tokio's epoll
//! set for the lot's own epoll instance and keeps only its `Accepted` and its descriptor, in
//! a slot of one vector. The lot is one task, woken through an `AsyncFd` on its epoll
//! descriptor when any parked client sends; it hands that connection back to tokio and starts
//! its session. Moving a connection in or out costs an `epoll_ctl` on each side and, on the way
//! out, tokio's registration: once per idle period of at least `IDLE_RELEASE`, never per
//! request.
//!
//! Idle deadlines are `IdleClock` seconds in each slot, checked by a scan once a second
//! (microseconds for 10,000 slots). TLS connections keep a task of their own
//! (`parked::Parked`): their session state lives in user space, not in the socket.

use std::io;
use std::net::TcpStream as StdTcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::io::unix::AsyncFd;
use tokio::time::MissedTickBehavior;

use super::idle_clock::IdleClock;
use crate::state::shutdown::Shutdown;

/// Events taken from the lot's epoll set per `epoll_wait`.
const EVENTS: usize = 256;

/// What the lot keeps of a parked connection besides its socket (`parked::Accepted`), and
/// how the connection is taken back.
pub(super) trait Parkable: Send + 'static {
    /// The `IdleClock` second at which the connection closes.
    fn parked_until(&self) -> u32;
    /// The client sent again (or closed): serve it.
    fn resume(self, stream: tokio::net::TcpStream);
    /// The server is stopping: close the connection (gracefully).
    fn close(self, stream: tokio::net::TcpStream);
}

pub(super) struct ParkingLot<T> {
    /// The lot's epoll set, for parking from any worker (`Registry` calls take `&self`).
    registry: Registry,
    slots: Mutex<Slots<T>>,
    /// The lot stopped waiting (shutdown, or its epoll set failed): park nothing more here.
    closed: AtomicBool,
}

struct Slot<T> {
    parked: T,
    stream: StdTcpStream,
}

/// Parked connections by token: the index of their slot.
struct Slots<T> {
    slots: Vec<Option<Slot<T>>>,
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    fn insert(&mut self, slot: Slot<T>) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i as usize
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        }
    }

    fn take(&mut self, i: usize) -> Option<Slot<T>> {
        let slot = self.slots.get_mut(i)?.take()?;
        self.free.push(u32::try_from(i).unwrap_or(u32::MAX));
        if self.free.len() == self.slots.len() {
            // Nobody parked: give back what a crowd of idle clients left behind.
            *self = Slots::default();
        }
        Some(slot)
    }
}

impl<T: Parkable> ParkingLot<T> {
    /// The lot and the epoll set that `run` waits on.
    pub(super) fn new() -> io::Result<(Arc<ParkingLot<T>>, Poll)> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let lot = ParkingLot {
            registry,
            slots: Mutex::default(),
            closed: AtomicBool::new(false),
        };
        Ok((Arc::new(lot), poll))
    }

    fn slots(&self) -> MutexGuard<'_, Slots<T>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks an idle connection until its client sends, its idle time is up, or shutdown;
    /// gives it back when the lot no longer waits.
    pub(super) fn park(
        &self,
        parked: T,
        stream: tokio::net::TcpStream,
    ) -> Result<(), (T, tokio::net::TcpStream)> {
        if self.closed.load(Ordering::Acquire) {
            return Err((parked, stream));
        }
        // Leaves tokio's epoll set; the socket stays non-blocking.
        let Ok(stream) = stream.into_std() else {
            return Ok(());
        };
        let fd = stream.as_raw_fd();
        // Registered under the lock, so that the lot sees its slot with its first event. A
        // socket already readable is reported at once (EPOLL_CTL_ADD checks readiness).
        let mut slots = self.slots();
        let key = slots.insert(Slot { parked, stream });
        let added = self
            .registry
            .register(&mut SourceFd(&fd), Token(key), Interest::READABLE);
        if let Err(e) = added {
            tracing::debug!("could not park an idle connection, closing it: {e}");
            drop(slots.take(key));
        }
        Ok(())
    }

    /// Connections parked here now (for the admin listener: takes the lot's lock).
    pub(super) fn parked(&self) -> usize {
        let slots = self.slots();
        slots.slots.len() - slots.free.len()
    }

    /// The client of slot `key` sent something (or closed): back to tokio, a new session.
    fn resume(&self, key: usize) {
        let Some(Slot { parked, stream }) = self.slots().take(key) else {
            return;
        };
        // Out of the lot's set before tokio's takes the descriptor: in both, it would wake both.
        let _ = self.registry.deregister(&mut SourceFd(&stream.as_raw_fd()));
        // Even once shutdown began: what woke it is most likely a request, which its session
        // answers (with `Connection: close`) before closing.
        if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
            parked.resume(stream);
        }
    }

    /// Closes the connections whose idle time is up (closing a descriptor also takes it out of
    /// the epoll set).
    fn expire(&self, now: u32) {
        let mut slots = self.slots();
        for i in 0..slots.slots.len() {
            let due = matches!(&slots.slots[i], Some(s) if s.parked.parked_until() <= now);
            if due {
                drop(slots.take(i));
            }
        }
    }

    /// Waits for parked clients, expires idle ones every second, and closes all at shutdown.
    pub(super) async fn run(
        self: Arc<Self>,
        poll: Poll,
        clock: Arc<IdleClock>,
        stop: Arc<Shutdown>,
    ) {
        let waiter = stop.waiter();
        let mut waiter = std::pin::pin!(waiter);
        // tokio 1.54 deprecates the safe constructors for types whose `as_raw_fd` could change
        // or close under it (#8587); `mio::Poll` owns its epoll descriptor for its whole life
        // and always returns that one, which is what the unsafe replacement asks the caller to
        // promise.
        #[allow(deprecated)]
        let poll = AsyncFd::with_interest(poll, tokio::io::Interest::READABLE);
        match poll {
            Ok(mut poll) if !stop.has_begun() => {
                let mut events = Events::with_capacity(EVENTS);
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        ready = poll.readable_mut() => {
                            let Ok(mut ready) = ready else { break };
                            match ready.get_inner_mut().poll(&mut events, Some(Duration::ZERO)) {
                                Ok(()) if events.is_empty() => ready.clear_ready(),
                                Ok(()) => events.iter().for_each(|e| self.resume(e.token().0)),
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(e) => {
                                    tracing::error!("the parking lot's epoll failed: {e}");
                                    break;
                                }
                            }
                        }
                        _ = tick.tick() => self.expire(clock.now()),
                        _ = &mut waiter => break,
                    }
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!("the parking lot cannot wait on its epoll set: {e}"),
        }
        // Shutdown (or a broken lot): parked connections are idle, so they close at once, each
        // gracefully (a request may be crossing our FIN). A broken lot's do too: nothing
        // would wake them any more.
        let mut slots = self.slots();
        self.closed.store(true, Ordering::Release);
        let parked = std::mem::take(&mut *slots);
        drop(slots);
        for Slot { parked, stream } in parked.slots.into_iter().flatten() {
            let _ = self.registry.deregister(&mut SourceFd(&stream.as_raw_fd()));
            if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                parked.close(stream);
            }
        }
    }
}
