//! One read for the ring, and how its callback is run.

use std::fs::File;
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::Bytes;

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
    pub done: Done,
}

/// A read's callback.
pub type Done = Box<dyn FnOnce(io::Result<Bytes>) + Send>;

impl Read {
    /// Whether the ring must refuse it (see the fields' rules).
    pub(super) fn malformed(&self) -> bool {
        !self.align.is_power_of_two()
            || self.align > 1 << 20
            || self.need > self.len
            || u32::try_from(self.len).is_err()
    }
}

/// Runs a read's callback; a panic in it is logged, not passed on to whoever drives the
/// ring (an event loop's task, or the ring's thread).
pub(super) fn complete(done: Done, r: io::Result<Bytes>) {
    if std::panic::catch_unwind(AssertUnwindSafe(move || done(r))).is_err() {
        tracing::error!("a disk read's completion panicked");
    }
}
