//! The ring's thread: takes queued reads, submits them, reaps their completions and runs
//! their callbacks. The soundness argument is in the parent module's docs.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use io_uring::{opcode, types, IoUring};

use super::queue::{complete, Read, Shared};

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

pub(super) struct Driver {
    ring: IoUring,
    depth: usize,
    max_bytes: usize,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    in_flight_bytes: usize,
    /// Where the armed eventfd read writes: leaked, so it outlives any kernel write.
    wake_buf: &'static mut [u8; 8],
    /// The eventfd read failed: nothing can wake the thread any more, so it takes no new
    /// reads and ends once those in flight complete.
    broken: bool,
    shared: Arc<Shared>,
    /// Reused between wake-ups: completions reaped, reads taken from the queue.
    done: Vec<(u64, i32)>,
    batch: Vec<Read>,
}

impl Driver {
    pub(super) fn new(
        ring: IoUring,
        depth: usize,
        max_bytes: usize,
        shared: Arc<Shared>,
    ) -> Driver {
        Driver {
            ring,
            depth,
            max_bytes,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            in_flight_bytes: 0,
            wake_buf: Box::leak(Box::new([0; 8])),
            broken: false,
            shared,
            done: Vec::new(),
            batch: Vec::new(),
        }
    }

    pub(super) fn run(mut self) {
        self.arm_wake();
        let mut failures = 0u32;
        let mut logged = None::<Instant>;
        loop {
            let stop = self.take();
            if (stop || self.broken) && self.in_flight == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => failures = 0,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // Out of memory for requests (EAGAIN), completions not reaped (EBUSY), or
                // worse: reap what there is, back off, and say so now and then.
                Err(e) => {
                    failures = failures.saturating_add(1);
                    if logged.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
                        tracing::error!("io_uring submit: {e} ({failures} in a row)");
                        logged = Some(Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(u64::from(failures.min(100))));
                }
            }
            self.shared.parked.store(false, SeqCst);
            self.reap();
        }
    }

    /// Starts the queued reads that fit (in number and bytes); parks when the queue is
    /// empty. True once stopped (then the reads still queued are failed).
    fn take(&mut self) -> bool {
        let mut batch = std::mem::take(&mut self.batch);
        let stop = {
            let mut q = self.shared.lock();
            if q.stop || self.broken {
                batch.extend(q.reads.drain(..));
                true
            } else {
                let mut bytes = self.in_flight_bytes;
                while self.in_flight + batch.len() < self.depth {
                    let Some(next) = q.reads.front() else { break };
                    // One read goes whatever its size, so none waits for good.
                    if bytes + next.len > self.max_bytes && self.in_flight + batch.len() > 0 {
                        break;
                    }
                    bytes += next.len;
                    batch.extend(q.reads.pop_front());
                }
                if q.reads.is_empty() {
                    self.shared.parked.store(true, SeqCst);
                }
                false
            }
        };
        for read in batch.drain(..) {
            if stop {
                complete(read.done, Err(io::ErrorKind::Interrupted.into()));
            } else {
                self.start(read);
            }
        }
        self.batch = batch;
        stop
    }

    fn start(&mut self, read: Read) {
        if read.len == 0 {
            return complete(read.done, Ok(BytesMut::new()));
        }
        // `ReadRing::submit` checked `align` (a power of two, ≤ 1 MiB) and `len` (< 4 GiB).
        let mut buf: Vec<u8> = Vec::with_capacity(read.len + read.align - 1);
        let base = buf.as_ptr().align_offset(read.align);
        buf.resize(base, 0);
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

    /// Queues the rest of slot `slot`'s read to the kernel.
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
        // The submission queue holds at least `depth + 1` entries, and each read in flight
        // and the eventfd's read have at most one entry in it at any time (an entry is
        // pushed only at a read's start or after its completion was reaped).
        #[allow(unsafe_code)]
        // SAFETY: the entry points into a buffer that stays allocated, unmoved and unread
        // until its completion is reaped: a slot's `Vec` (never touched while in flight,
        // freed only in `completed` after its final completion, or leaked by `Drop`) or
        // `wake_buf` (leaked, never freed). Its descriptor is the slot's `Arc<File>` or the
        // eventfd (`Shared`, held by this driver), both held at least as long.
        let pushed = unsafe { self.ring.submission().push(entry) };
        pushed.expect("the submission queue has room for every read in flight");
    }

    fn reap(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        done.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        for &(slot, result) in &done {
            if slot != WAKE {
                self.completed(slot as usize, result);
            } else if result >= 0 || result == -libc::EINTR || result == -libc::EAGAIN {
                self.arm_wake();
            } else {
                tracing::error!(
                    "io_uring: the wake-up read failed ({}); disk reads go to the threads",
                    io::Error::from_raw_os_error(-result)
                );
                self.broken = true;
            }
        }
        done.clear();
        self.done = done;
    }

    fn completed(&mut self, slot: usize, result: i32) {
        let f = self.slots[slot].as_mut().expect("a read in flight");
        let aligned = f.read.align > 1;
        let outcome = match result {
            // Interrupted or not ready: try the rest again.
            n if n == -libc::EINTR || n == -libc::EAGAIN => return self.push_read(slot),
            n if n == -libc::EINVAL && aligned && f.read.fallback.is_some() => {
                f.read.file = f.read.fallback.take().expect("checked");
                return self.push_read(slot);
            }
            n if n < 0 => Err(io::Error::from_raw_os_error(-n)),
            0 if f.filled >= f.read.need => Ok(()),
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                f.filled += (n as usize).min(f.read.len - f.filled);
                // A short read (the end of the file, a signal): the rest, unless an aligned
                // read has what it needs (its rest would be unaligned).
                if f.filled < f.read.len && !(aligned && f.filled >= f.read.need) {
                    return self.push_read(slot);
                }
                Ok(())
            }
        };
        let mut f = self.slots[slot].take().expect("a read in flight");
        self.free.push(slot);
        self.in_flight -= 1;
        self.in_flight_bytes -= f.read.len;
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
    /// The thread's end, normal or by a panic: reads queued from now on fail at once, and
    /// those queued still fail now (their fills are handed back, not left waiting).
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // Only when unwinding from a bug: the kernel may still write these buffers.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
        let queued: Vec<Read> = {
            let mut q = self.shared.lock();
            q.dead = true;
            q.reads.drain(..).collect()
        };
        for read in queued {
            complete(read.done, Err(io::ErrorKind::Interrupted.into()));
        }
    }
}
