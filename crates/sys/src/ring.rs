//! Positional file reads through io_uring, on one thread that owns the ring, behind a safe
//! API: a [`Read`] names a file, an offset and a length, and its `done` callback receives
//! the bytes (exactly `len` of them, or an error) on the ring's thread.
//!
//! Why (issue 21, "a thread pool or io_uring: measure both"; bench/RESULTS.md 2026-11-27):
//! a blocking read thread costs two context switches per read and one device
//! notification per read; the ring keeps any number of reads in flight on one thread,
//! submits what arrived together in one system call (one notification for a batch), and
//! waits for them without a thread per read.
//!
//! # Soundness
//! Queueing a read hands the kernel a raw pointer into a buffer, which it writes until the
//! read's completion is reaped. The buffer lives in a slot of the driver ([`Driver`]) that
//! is freed only when that completion is taken from the ring; the file is an `Arc<File>`
//! kept in the same slot (the kernel also takes its own reference at submission). The
//! driver never returns with reads in flight: it waits for all of them before its thread
//! ends, and a panic while any is in flight leaks the slots instead of freeing them (see
//! `Drop for Driver`). Callbacks run under `catch_unwind`, so a panicking callback does
//! not unwind through the driver.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use bytes::{Buf, BytesMut};
use io_uring::{opcode, types, IoUring};

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
    /// Where the buffer starts in memory must be a multiple of this: the device's block
    /// for a file opened with `O_DIRECT` (then `at` and `len` must be aligned too), else 1.
    pub align: usize,
    pub done: Box<dyn FnOnce(io::Result<BytesMut>) + Send>,
}

/// The ring and its thread. Dropping it fails the reads still queued (`Interrupted`) and
/// waits for those in flight.
pub struct ReadRing {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    max_queued: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Reads completed (read or failed), for tests and counters.
    completed: AtomicU64,
    /// The thread waits in the ring with an empty queue: a new read must wake it through
    /// the eventfd (set and swapped under the queue's order, see `ReadRing::submit`).
    parked: AtomicBool,
    wake: OwnedFd,
}

struct Queue {
    reads: VecDeque<Read>,
    stop: bool,
}

impl ReadRing {
    /// A ring for up to `depth` reads in flight, and a queue of up to `max_queued` more
    /// ([`ReadRing::has_room`]). Fails where io_uring is unavailable (an old kernel,
    /// `kernel.io_uring_disabled`, a seccomp filter).
    pub fn new(depth: u32, max_queued: usize) -> io::Result<ReadRing> {
        let depth = depth.clamp(1, 4096);
        // One entry more than the reads in flight, for the eventfd's read; completions
        // get twice as many (the kernel's default), so the completion queue never fills.
        let ring = IoUring::new((depth + 1).next_power_of_two())?;
        let wake = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                reads: VecDeque::new(),
                stop: false,
            }),
            completed: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            wake,
        });
        let driver = Driver::new(ring, depth as usize, Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("sepia-disk-ring".into())
            .spawn(move || driver.run())?;
        Ok(ReadRing {
            shared,
            thread: Some(thread),
            max_queued,
        })
    }

    /// Whether a read would be queued now (racing callers may pass the bound by a few).
    pub fn has_room(&self) -> bool {
        self.shared.lock().reads.len() < self.max_queued
    }

    /// Reads completed so far (read or failed).
    pub fn completed(&self) -> u64 {
        self.shared.completed.load(Relaxed)
    }

    /// Queues `read`; its callback runs on the ring's thread when it completes.
    pub fn submit(&self, read: Read) {
        self.shared.lock().reads.push_back(read);
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
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        // Cannot block: the counter would have to reach 2^64 - 1 first.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }
}

/// A read in flight: the buffer the kernel writes (its spare capacity from `base + filled`
/// to `base + len`) and the file, both kept until the read's completion is reaped.
struct InFlight {
    read: Read,
    buf: Vec<u8>,
    base: usize,
    filled: usize,
}

/// The completion of the eventfd's read.
const WAKE: u64 = u64::MAX;

struct Driver {
    ring: IoUring,
    depth: usize,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Where the armed eventfd read writes; leaked at the end (it may still be armed).
    wake_buf: Box<[u8; 8]>,
    shared: Arc<Shared>,
    done: Vec<(u64, i32)>,
}

impl Driver {
    fn new(ring: IoUring, depth: usize, shared: Arc<Shared>) -> Driver {
        Driver {
            ring,
            depth,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            wake_buf: Box::new([0; 8]),
            shared,
            done: Vec::new(),
        }
    }

    fn run(mut self) {
        self.arm_wake();
        loop {
            let stop = self.take();
            if stop && self.in_flight == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(4 | 11 | 16)) => {} // EINTR, EAGAIN, EBUSY
                Err(e) => {
                    tracing::error!("io_uring submit: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            self.shared.parked.store(false, SeqCst);
            self.reap();
        }
        // The eventfd read may still be armed: its buffer must outlive the kernel's write.
        Box::leak(std::mem::replace(&mut self.wake_buf, Box::new([0; 8])));
    }

    /// Starts the queued reads that fit; parks when the queue is empty. True once stopped
    /// (then the reads still queued are failed).
    fn take(&mut self) -> bool {
        let room = self.depth - self.in_flight;
        let (batch, stop): (Vec<Read>, bool) = {
            let mut q = self.shared.lock();
            if q.stop {
                (q.reads.drain(..).collect(), true)
            } else {
                let n = room.min(q.reads.len());
                let batch = q.reads.drain(..n).collect();
                if q.reads.is_empty() {
                    self.shared.parked.store(true, SeqCst);
                }
                (batch, false)
            }
        };
        for read in batch {
            if stop {
                complete(read.done, Err(io::ErrorKind::Interrupted.into()));
            } else {
                self.start(read);
            }
        }
        stop
    }

    fn start(&mut self, read: Read) {
        let Ok(len) = u32::try_from(read.len) else {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "read longer than 4 GiB");
            return complete(read.done, Err(e));
        };
        if len == 0 {
            return complete(read.done, Ok(BytesMut::new()));
        }
        let align = read.align.max(1);
        let mut buf: Vec<u8> = Vec::with_capacity(read.len + align - 1);
        let base = buf.as_ptr().align_offset(align);
        buf.resize(base, 0);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.slots[slot] = Some(InFlight {
            read,
            buf,
            base,
            filled: 0,
        });
        self.in_flight += 1;
        self.push_read(slot, len);
    }

    /// Queues the rest of slot `slot`'s read (`left` bytes) to the kernel.
    fn push_read(&mut self, slot: usize, left: u32) {
        let f = self.slots[slot].as_mut().expect("a read in flight");
        let fd = types::Fd(f.read.file.as_raw_fd());
        let at = f.read.at + f.filled as u64;
        let ptr = f.buf.as_mut_ptr().wrapping_add(f.base + f.filled);
        let entry = opcode::Read::new(fd, ptr, left)
            .offset(at)
            .build()
            .user_data(slot as u64);
        self.push(&entry);
    }

    fn arm_wake(&mut self) {
        let fd = types::Fd(self.shared.wake.as_raw_fd());
        let entry = opcode::Read::new(fd, self.wake_buf.as_mut_ptr(), 8)
            .build()
            .user_data(WAKE);
        self.push(&entry);
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) {
        // The submission queue holds `depth + 1` entries and is emptied by every
        // `submit_and_wait`; between two, each read in flight and the eventfd's read push
        // at most one entry.
        #[allow(unsafe_code)]
        // SAFETY: the entry points into a buffer that stays allocated, unmoved and unread
        // until its completion is reaped: a slot's `Vec` (never touched while in flight,
        // freed only in `reap` after its completion, or leaked by `Drop for Driver`) or
        // `wake_buf` (leaked at the end of `run`). Its descriptor is the slot's
        // `Arc<File>` or the eventfd, both held at least as long.
        let pushed = unsafe { self.ring.submission().push(entry) };
        pushed.expect("the submission queue has room for every read in flight");
    }

    fn reap(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        done.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        for &(slot, result) in &done {
            if slot == WAKE {
                self.arm_wake();
            } else {
                self.completed(slot as usize, result);
            }
        }
        done.clear();
        self.done = done;
    }

    fn completed(&mut self, slot: usize, result: i32) {
        let f = self.slots[slot].as_mut().expect("a read in flight");
        let left = f.read.len - f.filled;
        let outcome = match result {
            // Interrupted or not ready: try the rest again.
            -4 | -11 => return self.push_read(slot, left as u32),
            n if n < 0 => Err(io::Error::from_raw_os_error(-n)),
            0 if f.filled >= f.read.need => Ok(()),
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                let n = (n as usize).min(left);
                f.filled += n;
                if f.filled < f.read.len {
                    // A short read (a file being extended, a signal): the rest.
                    return self.push_read(slot, (left - n) as u32);
                }
                Ok(())
            }
        };
        let mut f = self.slots[slot].take().expect("a read in flight");
        self.free.push(slot);
        self.in_flight -= 1;
        self.shared.completed.fetch_add(1, Relaxed);
        let bytes = outcome.map(|()| {
            let end = f.base + f.filled;
            #[allow(unsafe_code)]
            // SAFETY: `end` is within the capacity reserved in `start` (`filled <= len`),
            // bytes up to `base` were initialised there, and the kernel reported writing
            // every byte from `base` to `end` (its completions summed to `filled`; its
            // writes are visible once their completion is reaped).
            unsafe {
                f.buf.set_len(end)
            };
            let mut b = BytesMut::from(bytes::Bytes::from(std::mem::take(&mut f.buf)));
            b.advance(f.base);
            b
        });
        complete(f.read.done, bytes);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // Only when unwinding from a bug: the kernel may still write these buffers.
            std::mem::forget(std::mem::take(&mut self.slots));
            Box::leak(std::mem::replace(&mut self.wake_buf, Box::new([0; 8])));
        }
    }
}

fn complete(done: Box<dyn FnOnce(io::Result<BytesMut>) + Send>, r: io::Result<BytesMut>) {
    if std::panic::catch_unwind(AssertUnwindSafe(move || done(r))).is_err() {
        tracing::error!("a disk read's completion panicked");
    }
}

#[cfg(test)]
mod tests;
