//! A thread that drives a [`ReadRing`] where no event loop does (the store opened outside
//! a runtime: its tests, tools): it sleeps in `poll(2)` on the ring's descriptor and calls
//! [`ReadRing::drive`] when completions wait. Callbacks then run on this thread.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::thread::JoinHandle;

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};

use super::guard::DriverGuard;
use super::read_ring::ReadRing;

/// The thread; dropping it stops it (after the callbacks it is running).
pub struct ThreadDriver {
    stop: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// How often the thread looks at the ring without a completion: a submission made inline
/// that failed (`ReadRing::wants_retry`) is retried then (its submitter does not wake the
/// thread).
const RETRY: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 100_000_000,
};

impl ThreadDriver {
    /// Drives `ring` until dropped, or until the ring is gone.
    pub fn start(ring: &Arc<ReadRing>) -> io::Result<ThreadDriver> {
        let ring_fd = ring.poll_fd()?;
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC)?);
        let weak = Arc::downgrade(ring);
        let stop_fd = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sepia-disk-ring".into())
            .spawn(move || {
                // A thread that ends on its own leaves the ring dead: reads then fail at
                // once and the store reads with its threads (no thread restarts another).
                let on_end = Box::new(|ring: &Arc<ReadRing>| ring.die("its thread ended"));
                run(DriverGuard::new(weak, on_end), &ring_fd, &stop_fd)
            })?;
        Ok(ThreadDriver {
            stop,
            thread: Some(thread),
        })
    }
}

fn run(mut guard: DriverGuard, ring_fd: &OwnedFd, stop: &OwnedFd) {
    loop {
        let mut fds = [
            PollFd::new(ring_fd, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        match poll(&mut fds, Some(&RETRY)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::error!("the disk ring's thread: poll failed ({e}); it stops");
                return;
            }
        }
        let Some(r) = guard.ring().filter(|_| fds[1].revents().is_empty()) else {
            guard.done = true;
            return;
        };
        r.drive(usize::MAX);
    }
}

impl Drop for ThreadDriver {
    fn drop(&mut self) {
        // Cannot block: the counter would have to reach 2^64 - 1 first.
        let _ = rustix::io::write(&*self.stop, &1u64.to_ne_bytes());
        if let Some(thread) = self.thread.take() {
            // The last handle may go in a read's callback, on this very thread (a fill
            // holding the store that holds the driver): it ends by itself then.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}
