//! Positional file reads through io_uring, on one thread that owns the ring, behind a safe
//! API: a [`Read`] names a file, an offset and a length, and its `done` callback receives
//! the bytes (or an error) on the ring's thread.
//!
//! Why (issue 21, "a thread pool or io_uring: measure both"; bench/RESULTS.md 2026-11-27):
//! a blocking read thread costs two context switches per read and one device
//! notification per read; the ring keeps any number of reads in flight on one thread,
//! submits what arrived together in one system call (one notification for a batch), and
//! waits for them without a thread per read. Cold 4 KiB disk hits cost 26–30 CPU-µs with
//! it against 40–55 with 16 read threads.
//!
//! # Soundness
//! Queueing a read hands the kernel a raw pointer into a buffer, which it writes until the
//! read's completion is reaped. The buffer lives in a slot of the driver (`driver.rs`) that
//! is freed only when that completion is taken from the ring; the file is an `Arc<File>`
//! kept in the same slot (the kernel also takes its own reference at submission). The
//! driver never returns with reads in flight: it waits for all of them before its thread
//! ends, and a panic while any is in flight leaks the slots instead of freeing them. The
//! eventfd read's 8 bytes are leaked at the start and never freed. Callbacks run under
//! `catch_unwind`, so a panicking callback does not unwind through the driver.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use io_uring::{opcode, IoUring, Probe};

mod driver;
mod queue;

pub use queue::Read;
use queue::{complete, Queue, Shared};

/// The ring and its thread. Dropping it fails the reads still queued (`Interrupted`) and
/// waits for those in flight.
pub struct ReadRing {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    max_queued: usize,
}

impl ReadRing {
    /// A ring for up to `depth` reads and `max_bytes` of buffers in flight, and a queue of
    /// up to `max_queued` more ([`ReadRing::has_room`]). Fails where io_uring or its read
    /// is unavailable (before Linux 5.6, `kernel.io_uring_disabled`, a seccomp filter).
    pub fn new(depth: u32, max_queued: usize, max_bytes: usize) -> io::Result<ReadRing> {
        let depth = depth.clamp(1, 4096);
        // One entry more than the reads in flight, for the eventfd's read; completions
        // get twice as many (the kernel's default), so the completion queue never fills.
        let ring = IoUring::new((depth + 1).next_power_of_two())?;
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
        let wake = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                reads: VecDeque::new(),
                stop: false,
                dead: false,
            }),
            completed: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            wake,
        });
        let driver = driver::Driver::new(ring, depth as usize, max_bytes, Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("sepia-disk-ring".into())
            .spawn(move || driver.run())?;
        Ok(ReadRing {
            shared,
            thread: Some(thread),
            max_queued,
        })
    }

    /// Whether a read would be queued now (racing callers may pass the bound by a few);
    /// `None` once the ring's thread is gone (it ends when it fails for good).
    pub fn has_room(&self) -> Option<bool> {
        let q = self.shared.lock();
        (!q.dead).then_some(q.reads.len() < self.max_queued)
    }

    /// Reads completed so far (read or failed).
    pub fn completed(&self) -> u64 {
        self.shared.completed.load(Relaxed)
    }

    /// Queues `read`; its callback runs on the ring's thread when it completes (at once, on
    /// this thread, with an error when the read is malformed or the ring is gone).
    pub fn submit(&self, read: Read) {
        let malformed = !read.align.is_power_of_two()
            || read.align > 1 << 20
            || read.need > read.len
            || u32::try_from(read.len).is_err();
        if malformed {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "malformed read");
            return complete(read.done, Err(e));
        }
        let mut q = self.shared.lock();
        if q.dead {
            drop(q);
            let e = io::Error::new(io::ErrorKind::Interrupted, "the read ring stopped");
            return complete(read.done, Err(e));
        }
        q.reads.push_back(read);
        drop(q);
        // The thread sets `parked` under the queue's lock after seeing it empty, so either
        // it saw this read, or this swap sees `parked` and wakes it.
        if self.shared.parked.swap(false, SeqCst) {
            self.shared.notify();
        }
    }
}

impl Drop for ReadRing {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.notify();
        if let Some(thread) = self.thread.take() {
            // The last handle may go in a read's callback, on the ring's own thread (a
            // fill holding the store that holds the ring): it ends by itself then.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests;
