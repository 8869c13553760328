//! Who drives a [`ReadRing`] (see the parent module's "Who drives it"): a task on a tokio
//! runtime where the caller has one, else a [`ThreadDriver`].
//!
//! On the runtime, a completion wakes the event loop through the ring's descriptor (in
//! the same `epoll_wait` as the sockets); the task takes it, and the read's callback (the
//! disk tier's: check the record, play it into its fill) runs on that worker, which then
//! wakes the waiting request without crossing threads. With a thread instead, each read
//! cost a cold hit a wake-up of the thread and one back (bench/RESULTS.md, 2026-11-27).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::runtime::Handle;
use tokio::sync::Notify;

use super::guard::DriverGuard;
use super::read_ring::ReadRing;
use super::thread::ThreadDriver;

/// How soon a failed submission is retried (`ReadRing::wants_retry`).
const RETRY: Duration = Duration::from_millis(100);

/// The driver; dropping it stops it, after the callbacks it is running (a thread's are
/// waited for).
pub enum RingDriver {
    /// A task on a runtime.
    Runtime {
        /// Stops the task.
        stop: Arc<Notify>,
        /// The thread that took over if the task ended on its own (`take_over`).
        takeover: Takeover,
    },
    Thread(ThreadDriver),
}

type Takeover = Arc<Mutex<Option<ThreadDriver>>>;

impl RingDriver {
    /// Drives `ring` from a task on `runtime`, or from a thread without one.
    pub fn start(ring: &Arc<ReadRing>, runtime: Option<&Handle>) -> io::Result<Self> {
        let Some(runtime) = runtime else {
            return ThreadDriver::start(ring).map(RingDriver::Thread);
        };
        let owned = ring.poll_fd()?;
        let fd = {
            let _in = runtime.enter();
            #[allow(unsafe_code)]
            // SAFETY: `register_with_interest` asks that the descriptor stay open and
            // unreplaced while registered. It is an `OwnedFd` (a duplicate of the ring's,
            // made for this alone) moved into the `AsyncFd`, which closes it only after
            // deregistering it; nothing else has it.
            let registered = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) };
            registered?
        };
        let stop = Arc::new(Notify::new());
        let flush = ring.flush_on_event_loop();
        // Made here, not in the task: a task dropped before it first runs (a runtime
        // shutting down) drops it too, and a thread takes over.
        let takeover = Takeover::default();
        let slot = Arc::downgrade(&takeover);
        let on_end = Box::new(move |ring: &Arc<ReadRing>| take_over(ring, &slot));
        let guard = DriverGuard::new(Arc::downgrade(ring), on_end);
        runtime.spawn(drive(fd, Arc::clone(&stop), flush, guard));
        Ok(RingDriver::Runtime { stop, takeover })
    }

    /// The thread that took over, if any (tests).
    #[cfg(test)]
    pub(crate) fn takeover(&self) -> Option<Takeover> {
        match self {
            RingDriver::Runtime { takeover, .. } => Some(Arc::clone(takeover)),
            RingDriver::Thread(_) => None,
        }
    }
}

/// The task ended without being asked to (its runtime shut down, its descriptor failed, a
/// panic): submissions go to the kernel inline from now on, and a thread takes completions,
/// so that the reads in flight and later ones complete. The thread lives in the
/// [`RingDriver`]'s `takeover`, and stops with it. With the driver already dropped (the
/// task had not yet seen its stop), nobody drives the ring any more: it is left dead, so
/// that reads fail at once instead of waiting for a driver that will not come.
fn take_over(ring: &Arc<ReadRing>, slot: &Weak<Mutex<Option<ThreadDriver>>>) {
    ring.flush_inline();
    let Some(slot) = slot.upgrade() else {
        return ring.die("its driver was dropped");
    };
    match ThreadDriver::start(ring) {
        Ok(thread) => {
            tracing::info!(
                "disk reads' io_uring: its event loop's driver ended; a thread drives it"
            );
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        }
        Err(e) => ring.die(&e.to_string()),
    }
}

impl Drop for RingDriver {
    fn drop(&mut self) {
        if let RingDriver::Runtime { stop, .. } = self {
            // A permit if the task is not waiting: it stops at its next turn.
            stop.notify_one();
        }
    }
}

/// Completions taken per turn at most: each runs its read's callback (a record checked,
/// a fill played), and other tasks of this worker wait meanwhile.
const BATCH: usize = 64;

async fn drive(
    fd: AsyncFd<OwnedFd>,
    stop: Arc<Notify>,
    flush: Arc<Notify>,
    mut guard: DriverGuard,
) {
    loop {
        let retry = match guard.ring() {
            Some(r) => r.wants_retry(),
            None => break,
        };
        tokio::select! {
            biased;
            () = stop.notified() => break,
            // Reads submitted since the last turn (`drive` flushes them).
            () = flush.notified() => {}
            ready = fd.readable() => match ready {
                // Cleared before the completions are taken: one posted after is a new
                // event, so none waits unseen.
                Ok(mut guard) => guard.clear_ready(),
                Err(e) => {
                    tracing::error!("the disk ring's descriptor: {e}; disk reads stop");
                    return;
                }
            },
            () = tokio::time::sleep(RETRY), if retry => {}
        }
        loop {
            let Some(r) = guard.ring() else { break };
            let (_, more) = r.drive(BATCH);
            drop(r);
            if !more {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    guard.done = true;
}
