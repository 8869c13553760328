//! The ring's state, kept behind the [`ReadRing`](super::ReadRing)'s lock: the reads in
//! flight (their buffers and files), those waiting for room, and the submission and
//! reaping of their entries. It never runs a callback itself: what completed is handed
//! back as [`Finished`], to be run once the lock is let go. The soundness argument is in
//! `read_ring.rs`.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use io_uring::{opcode, types, IoUring};

use super::buffers::{pooled, BufferPool, ReadBuf};
use super::read::{Done, Read};

/// A read in flight: the buffer the kernel writes (its spare capacity from `base + filled`
/// to `base + len`) and the file, both kept until the read's completion is reaped.
struct InFlight {
    read: Read,
    buf: ReadBuf,
    base: usize,
    filled: usize,
}

/// A callback and its result, to run outside the lock.
pub(super) type Finished = Vec<(Done, io::Result<Bytes>)>;

pub(super) struct Driver {
    ring: IoUring,
    depth: usize,
    max_bytes: usize,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    in_flight_bytes: usize,
    /// Reads waiting for room (in number or bytes) in the ring.
    pub(super) queue: VecDeque<Read>,
    /// When the last failed submission was logged.
    logged: Option<Instant>,
    /// Completions being handled, reused.
    cq: Vec<(u64, i32)>,
    /// Where read buffers come from and go back to.
    buffers: Arc<BufferPool>,
    /// The driver was asked to flush (`unflushed`) and has not yet.
    flush_asked: bool,
    /// Set by a driver on an event loop: what `submit` wakes so that the entries queued in
    /// one turn of the loop reach the kernel together. `None`: `submit` flushes at once.
    pub(super) flush_later: Option<Arc<tokio::sync::Notify>>,
    /// Nothing drives the ring any more (see `ReadRing::die`): reads fail at once.
    pub(super) dead: bool,
}

impl Driver {
    pub(super) fn new(ring: IoUring, depth: usize, max_bytes: usize) -> Driver {
        Driver {
            ring,
            depth,
            max_bytes,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            in_flight_bytes: 0,
            queue: VecDeque::new(),
            logged: None,
            cq: Vec::new(),
            // A slab of as many bytes as may be in flight, up to 32 MiB, and up to 8 MiB of
            // ordinary buffers kept free for reads the slab has no slot for.
            buffers: BufferPool::new(max_bytes.min(8 << 20), max_bytes.min(32 << 20)),
            flush_asked: false,
            flush_later: None,
            dead: false,
        }
    }

    pub(super) fn slab_gauge(&self) -> Option<super::slab::SlabGauge> {
        self.buffers.slab_gauge()
    }

    pub(super) fn ring_fd(&self) -> std::os::fd::RawFd {
        self.ring.as_raw_fd()
    }

    /// Starts the queued reads that fit (in number and bytes); an empty read completes
    /// at once.
    pub(super) fn start_queued(&mut self, finished: &mut Finished) {
        while self.in_flight < self.depth {
            let Some(next) = self.queue.front() else {
                break;
            };
            // One read goes whatever its size, so none waits for good.
            if self.in_flight_bytes + next.len > self.max_bytes && self.in_flight > 0 {
                break;
            }
            let read = self.queue.pop_front().expect("looked at");
            if read.len == 0 {
                finished.push((read.done, Ok(Bytes::new())));
            } else {
                self.start(read);
            }
        }
    }

    fn start(&mut self, read: Read) {
        // `ReadRing::submit` checked `align` (a power of two, ≤ 1 MiB) and `len` (< 4 GiB).
        let mut buf = self.buffers.take(read.len + read.align - 1);
        let base = buf.as_ptr().align_offset(read.align);
        buf.pad(base);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.in_flight += 1;
        self.in_flight_bytes += read.len;
        self.slots[slot] = Some(InFlight {
            read,
            buf,
            base,
            filled: 0,
        });
        self.push_read(slot);
    }

    /// Queues the rest of slot `slot`'s read to the kernel (submitted by `flush`).
    fn push_read(&mut self, slot: usize) {
        let f = self.slots[slot].as_mut().expect("a read in flight");
        let fd = types::Fd(f.read.file.as_raw_fd());
        let at = f.read.at + f.filled as u64;
        let left = (f.read.len - f.filled) as u32;
        let ptr = f.buf.as_mut_ptr().wrapping_add(f.base + f.filled);
        let entry = opcode::Read::new(fd, ptr, left)
            .offset(at)
            .build()
            .user_data(slot as u64);
        // The submission queue holds at least `depth` entries, and each read in flight
        // has at most one entry in it at any time (an entry is pushed only at a read's
        // start or after its completion was reaped).
        #[allow(unsafe_code)]
        // SAFETY: the entry points into a buffer that stays allocated, unmoved and unread
        // until its completion is reaped: a slot's `ReadBuf` (its own `Vec`, or a slot of
        // the slab, whose mapping its `Arc` keeps: `slab.rs`), never touched while in
        // flight, freed only in `completed` after its final completion, or leaked
        // (`drain`). Its descriptor is the slot's `Arc<File>`, held at least as long.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        pushed.expect("the submission queue has room for every read in flight");
    }

    /// Hands the entries pushed since the last call to the kernel (one system call for
    /// all of them). A failure leaves them queued to the kernel, for the next call; they
    /// stay in flight (`stuck` says so).
    pub(super) fn flush(&mut self) {
        self.flush_asked = false;
        if self.ring.submission().is_empty() {
            return;
        }
        let submitted = loop {
            match self.ring.submit() {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                r => break r,
            }
        };
        // Out of memory for requests (EAGAIN), completions not reaped (EBUSY), or worse:
        // retried by the next submission, the next reaping, or the driver's retry tick;
        // said now and then.
        if let Err(e) = submitted {
            if (self.logged).is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
                tracing::error!("io_uring submit: {e} (retried)");
                self.logged = Some(Instant::now());
            }
        }
    }

    /// Entries wait for a submission that failed.
    pub(super) fn stuck(&mut self) -> bool {
        !self.ring.submission().is_empty()
    }

    /// Whether entries wait for `flush` and nobody was asked to flush them yet (the
    /// caller asks now).
    pub(super) fn unflushed(&mut self) -> bool {
        let ask = !self.flush_asked && !self.ring.submission().is_empty();
        self.flush_asked |= ask;
        ask
    }

    /// Takes the completions the kernel posted (no system call: they are in memory shared
    /// with it), at most `max`; what finished goes to `finished`, short reads are queued
    /// again. Returns the reads finished (read or failed).
    pub(super) fn reap(&mut self, finished: &mut Finished, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            // `completed` may push entries: the queue is copied out first.
            let mut cq = std::mem::take(&mut self.cq);
            let posted = self.ring.completion();
            cq.extend(posted.take(max - n).map(|c| (c.user_data(), c.result())));
            if cq.is_empty() {
                self.cq = cq;
                break;
            }
            for &(slot, result) in &cq {
                if let Some(done) = self.completed(slot as usize, result) {
                    finished.push(done);
                    n += 1;
                }
            }
            cq.clear();
            self.cq = cq;
        }
        n
    }

    /// Completions wait to be taken.
    pub(super) fn completions_wait(&mut self) -> bool {
        !self.ring.completion().is_empty()
    }

    /// A completion of slot `slot`'s read: the callback and its result once the read is
    /// over, `None` when it goes on (the rest queued to the kernel).
    fn completed(&mut self, slot: usize, result: i32) -> Option<(Done, io::Result<Bytes>)> {
        let f = self.slots[slot].as_mut().expect("a read in flight");
        let aligned = f.read.align > 1;
        let outcome = match result {
            // Interrupted or not ready: try the rest again.
            n if n == -libc::EINTR || n == -libc::EAGAIN => {
                self.push_read(slot);
                return None;
            }
            n if n == -libc::EINVAL && aligned && f.read.fallback.is_some() => {
                f.read.file = f.read.fallback.take().expect("checked");
                self.push_read(slot);
                return None;
            }
            n if n < 0 => Err(io::Error::from_raw_os_error(-n)),
            0 if f.filled >= f.read.need => Ok(()),
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                f.filled += (n as usize).min(f.read.len - f.filled);
                // A short read (the end of the file, a signal): the rest, unless an aligned
                // read has what it needs (its rest would be unaligned).
                if f.filled < f.read.len && !(aligned && f.filled >= f.read.need) {
                    self.push_read(slot);
                    return None;
                }
                Ok(())
            }
        };
        let InFlight {
            read,
            mut buf,
            base,
            filled,
        } = self.slots[slot].take().expect("a read in flight");
        self.free.push(slot);
        self.in_flight -= 1;
        self.in_flight_bytes -= read.len;
        let bytes = outcome.map(|()| {
            let end = base + filled;
            #[allow(unsafe_code)]
            // SAFETY: `end` is within the capacity reserved in `start` (`filled <= len`),
            // bytes up to `base` were initialised there, and the kernel reported writing
            // every byte from `base` to `end` (its completions summed to `filled`; its
            // writes are visible once their completion is reaped).
            unsafe {
                buf.set_len(end)
            };
            pooled(buf, &self.buffers).slice(base..)
        });
        Some((read.done, bytes))
    }

    /// The ring's end: the queued reads fail (`Interrupted`), and those in flight are
    /// waited for (their callbacks get what they read), for at most 10 s. Should waiting
    /// fail or last longer, their buffers are leaked (the kernel may still write them) and
    /// their callbacks fail.
    pub(super) fn drain(&mut self, finished: &mut Finished) {
        for read in self.queue.drain(..) {
            finished.push((read.done, Err(io::ErrorKind::Interrupted.into())));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let tick = types::Timespec::new().nsec(100_000_000);
        let args = types::SubmitArgs::new().timespec(&tick);
        // A wait with a timeout needs `IORING_FEAT_EXT_ARG` (5.11); before, an unbounded one.
        let timed = self.ring.params().is_feature_ext_arg();
        while self.in_flight > 0 {
            let waited = match timed {
                true => self.ring.submitter().submit_with_args(1, &args),
                false => self.ring.submit_and_wait(1),
            };
            let gave_up = match waited.map_err(|e| e.raw_os_error()) {
                Ok(_) | Err(Some(libc::EINTR | libc::ETIME)) => false,
                Err(Some(libc::EAGAIN | libc::EBUSY | libc::ENOMEM)) => {
                    std::thread::sleep(Duration::from_millis(10));
                    false
                }
                Err(_) => true,
            };
            if gave_up || Instant::now() > deadline {
                tracing::error!("io_uring: the reads in flight did not end; leaking their buffers");
                for f in self.slots.iter_mut().filter_map(Option::take) {
                    std::mem::forget(f.buf);
                    finished.push((f.read.done, Err(io::ErrorKind::Interrupted.into())));
                }
                self.in_flight = 0;
                return;
            }
            self.reap(finished, usize::MAX);
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // Only when unwinding from a bug before `drain`: the kernel may still write
            // these buffers.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}
