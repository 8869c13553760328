//! What the ring's handle (`ReadRing`) and its thread (`driver.rs`) share: the reads, the
//! queue between them, and how a read's callback is run.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::BytesMut;

/// One positional read.
pub struct Read {
    pub file: Arc<File>,
    /// Offset in the file.
    pub at: u64,
    /// Bytes to read: the callback receives this many, or fewer where the file ends
    /// after `need` bytes, or an error (`UnexpectedEof` when it ends before).
    pub len: usize,
    /// Bytes that must be read (at most `len`): an `O_DIRECT` read of whole blocks may
    /// run past the end of the file, where the bytes wanted end before it.
    pub need: usize,
    /// Where the buffer starts in memory must be a multiple of this (a power of two, at
    /// most 1 MiB): the device's block for a file opened with `O_DIRECT` (then `at` and
    /// `len` must be aligned too), else 1.
    pub align: usize,
    /// Read the same range through this descriptor instead where the kernel refuses an
    /// aligned read of `file` (`EINVAL`: a file system that takes `O_DIRECT` opens but not
    /// such reads).
    pub fallback: Option<Arc<File>>,
    pub done: Box<dyn FnOnce(io::Result<BytesMut>) + Send>,
}

pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    /// Reads completed (read or failed), for tests and counters.
    pub(super) completed: AtomicU64,
    /// The thread waits in the ring with an empty queue: a new read must wake it through
    /// the eventfd (set and swapped under the queue's order, see `ReadRing::submit`).
    pub(super) parked: AtomicBool,
    pub(super) wake: OwnedFd,
}

pub(super) struct Queue {
    pub(super) reads: VecDeque<Read>,
    pub(super) stop: bool,
    /// The thread is gone (stopped, or it failed): reads fail at once.
    pub(super) dead: bool,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn notify(&self) {
        // Cannot block: the counter would have to reach 2^64 - 1 first.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }
}

/// Runs a read's callback; a panic in it is logged, not passed on to the ring's thread.
pub(super) fn complete(
    done: Box<dyn FnOnce(io::Result<BytesMut>) + Send>,
    r: io::Result<BytesMut>,
) {
    if std::panic::catch_unwind(AssertUnwindSafe(move || done(r))).is_err() {
        tracing::error!("a disk read's completion panicked");
    }
}
