//! The ring itself: reads waiting for room, reads in flight, and the lock that guards them
//! (the parent module says who drives it).
//!
//! # Soundness
//! Queueing a read hands the kernel a raw pointer into a buffer, which it writes until the
//! read's completion is reaped. The buffer lives in a slot of the driver (`driver.rs`) that
//! is freed only when that completion is taken from the ring; the file is an `Arc<File>`
//! kept in the same slot (the kernel also takes its own reference at submission). The
//! ring is never dropped with reads in flight: its `Drop` waits for all of them, and a
//! panic while any is in flight leaks the slots instead of freeing them. Callbacks run
//! under `catch_unwind` and outside the ring's lock, so a callback may submit reads and a
//! panicking one does not unwind through the ring.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use io_uring::{opcode, IoUring, Probe};
use tokio::sync::Notify;

use super::driver::{Driver, Finished};
use super::read::{complete, Read};

/// The ring: reads in flight and waiting, and the lock that guards them.
pub struct ReadRing {
    driver: Mutex<Driver>,
    completed: AtomicU64,
    max_queued: usize,
}

impl ReadRing {
    /// A ring for up to `depth` reads and `max_bytes` of buffers in flight, and a queue of
    /// up to `max_queued` more ([`ReadRing::has_room`]). Fails where io_uring or its read
    /// is unavailable (before Linux 5.6, `kernel.io_uring_disabled`, a seccomp filter).
    /// Nothing completes until someone drives it (see the parent module's "Who drives it").
    pub fn new(depth: u32, max_queued: usize, max_bytes: usize) -> io::Result<ReadRing> {
        let depth = depth.clamp(1, 4096);
        // Completions get twice the entries (the kernel's default), so the completion
        // queue never fills: each read in flight has at most one completion pending.
        let ring = build(depth.next_power_of_two())?;
        // Kernels from 5.1 to 5.5 set a ring up but fail every `IORING_OP_READ`; probing
        // came with it (5.6), so a kernel without the probe has no read either.
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::Read::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring without IORING_OP_READ",
            ));
        }
        Ok(ReadRing {
            driver: Mutex::new(Driver::new(ring, depth as usize, max_bytes)),
            completed: AtomicU64::new(0),
            max_queued,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Driver> {
        self.driver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The gauge of the huge-page slab its read buffers come from first (`slab.rs`):
    /// bytes a read returns from there hold their slot until dropped, so a caller that
    /// keeps them long (a body stored in memory) should copy them out once the slab runs
    /// low ([`SlabGauge::should_copy`]).
    pub fn slab_gauge(&self) -> Option<super::slab::SlabGauge> {
        self.lock().slab_gauge()
    }

    /// Whether a read would wait for fewer than `max_queued` others now (racing callers
    /// may pass the bound by a few); `None` when nothing drives the ring (its driver ended
    /// and no thread could take over: reads fail at once, read some other way).
    pub fn has_room(&self) -> Option<bool> {
        let d = self.lock();
        (!d.dead).then_some(d.queue.len() < self.max_queued)
    }

    /// Called when a driver on an event loop ends without being asked to (its runtime
    /// shut down, its descriptor failed, a panic): what it would have flushed at its next
    /// turn goes to the kernel now, and so does every later submission, until another
    /// driver calls [`ReadRing::flush_on_event_loop`].
    pub(crate) fn flush_inline(&self) {
        let mut d = self.lock();
        d.flush_later = None;
        d.flush();
    }

    /// Nothing drives the ring any more: the reads waiting for room fail, later ones fail
    /// at once, and [`ReadRing::has_room`] says `None` (the store reads with its threads).
    /// Those in flight complete only when the ring is dropped.
    pub(crate) fn die(&self, why: &str) {
        tracing::error!("disk reads' io_uring lost its driver ({why}); reading with threads");
        let mut d = self.lock();
        d.dead = true;
        let queued: Finished = (d.queue.drain(..))
            .map(|r| (r.done, Err(io::ErrorKind::Interrupted.into())))
            .collect();
        drop(d);
        run(queued);
    }

    /// Reads completed so far (read or failed).
    pub fn completed(&self) -> u64 {
        self.completed.load(Relaxed)
    }

    /// Hands `read` to the kernel (or queues it while the ring is full); its callback runs
    /// on the driving thread (at once, on this thread, with an error when the read is
    /// malformed).
    ///
    /// With a driver on an event loop, the read reaches the kernel at that driver's next
    /// turn, with every other read submitted meanwhile, in one `io_uring_enter`: on a
    /// virtual machine's disk each submission may cost a notification of the device (a VM
    /// exit), which the batch shares (bench/RESULTS.md, 2026-11-27). Otherwise, now.
    pub fn submit(&self, read: Read) {
        if read.malformed() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "malformed read");
            return complete(read.done, Err(e));
        }
        let mut finished = Finished::new();
        let wake = {
            let mut d = self.lock();
            if d.dead {
                drop(d);
                let e = io::Error::new(io::ErrorKind::Interrupted, "the ring has no driver");
                return complete(read.done, Err(e));
            }
            d.queue.push_back(read);
            d.start_queued(&mut finished);
            match d.flush_later.clone() {
                Some(driver) => d.unflushed().then_some(driver),
                None => {
                    d.flush();
                    None
                }
            }
        };
        if let Some(driver) = wake {
            driver.notify_one();
        }
        run(finished);
    }

    /// Takes what completed (at most `max` reads), starts the reads that waited for room,
    /// hands what waits to the kernel, and runs the finished reads' callbacks on this
    /// thread. Returns how many finished, and whether more completions wait.
    pub fn drive(&self, max: usize) -> (usize, bool) {
        let mut finished = Finished::new();
        let (n, more) = {
            let mut d = self.lock();
            let n = d.reap(&mut finished, max);
            d.start_queued(&mut finished);
            d.flush();
            (n, d.completions_wait())
        };
        self.completed.fetch_add(n as u64, Relaxed);
        run(finished);
        (n, more)
    }

    /// From now on, submissions wait for the driver this returns to flush them (see
    /// [`ReadRing::submit`]).
    pub(crate) fn flush_on_event_loop(&self) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        self.lock().flush_later = Some(Arc::clone(&notify));
        notify
    }

    /// A submission failed and waits to be retried: the driver should call
    /// [`ReadRing::drive`] after a short while even without a completion.
    pub fn wants_retry(&self) -> bool {
        self.lock().stuck()
    }

    /// A descriptor of the ring to watch: readable while completions wait (level-
    /// triggered for `poll(2)`; for edge-triggered epoll, an event per completion posted).
    pub fn poll_fd(&self) -> io::Result<OwnedFd> {
        let d = self.lock();
        #[allow(unsafe_code)]
        // SAFETY: the ring's descriptor is open while the ring (held locked here) lives;
        // the borrow ends before this function returns, and the duplicate is owned.
        let fd = unsafe { BorrowedFd::borrow_raw(d.ring_fd()) };
        fd.try_clone_to_owned()
    }
}

/// The ring, with the flags that make submission cheaper where the kernel has them:
/// `SUBMIT_ALL` (a bad entry does not stop the batch, 5.18) and `COOP_TASKRUN` (a
/// completion does not interrupt the submitting thread with an inter-processor interrupt:
/// it is posted at that thread's next system call or sleep, 5.19).
fn build(entries: u32) -> io::Result<IoUring> {
    let mut ring = IoUring::builder()
        .setup_submit_all()
        .setup_coop_taskrun()
        .build(entries);
    // Each flag is refused with `EINVAL` by a kernel that predates it.
    if matches!(&ring, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
        ring = IoUring::builder().setup_submit_all().build(entries);
    }
    if matches!(&ring, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
        ring = IoUring::new(entries);
    }
    ring
}

fn run(finished: Finished) {
    for (done, r) in finished {
        complete(done, r);
    }
}

impl Drop for ReadRing {
    /// Fails the reads still queued (`Interrupted`) and waits for those in flight.
    fn drop(&mut self) {
        let mut finished = Finished::new();
        self.driver
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(&mut finished);
        run(finished);
    }
}
