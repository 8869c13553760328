//! A small pool of threads for disk reads, so that blocking `pread`s never run on the
//! async runtime's workers.
//!
//! Threads are started when a job finds none idle, up to the pool's size: with io_uring
//! (`cache.disk_io`) the threads read only what the ring does not, often nothing, and
//! sixteen threads started up front took ~1 ms of the core that was serving the first
//! requests after a restart (bench/RESULTS.md, "Issue 21, fifteenth stop").
//!
//! Why not `tokio::task::spawn_blocking`: the store must work without being called from
//! inside a runtime, and a bounded queue lets a flood of disk misses become plain misses
//! instead of an unbounded backlog (a lookup never waits for the queue).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

type Job = Box<dyn FnOnce() + Send>;

struct PoolState {
    jobs: Mutex<Jobs>,
    wake: Condvar,
    stop: AtomicBool,
}

struct Jobs {
    queue: VecDeque<Job>,
    /// Threads started (they never stop before the pool does).
    started: usize,
    /// Threads waiting on `wake` (counted under the lock). A job finds one to wake only
    /// while some are idle: under load every thread is busy in a read and takes the next
    /// job when it finishes, and a `notify_one` is a `futex` system call even when nobody
    /// waits (std's futex condition variable).
    idle: usize,
}

pub(crate) struct ReadPool {
    state: Arc<PoolState>,
    max_threads: usize,
    max_queued: usize,
}

impl ReadPool {
    /// A pool of at most `threads` threads (at least one), none started yet.
    pub(crate) fn new(threads: usize, max_queued: usize) -> ReadPool {
        let state = Arc::new(PoolState {
            jobs: Mutex::new(Jobs {
                queue: VecDeque::new(),
                started: 0,
                idle: 0,
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        ReadPool {
            state,
            max_threads: threads.max(1),
            max_queued,
        }
    }

    /// Queues `job`. The bound is checked beforehand with [`ReadPool::has_room`] (so that
    /// a caller can keep what it would have given the job); racing callers may pass it by
    /// a few jobs.
    pub(crate) fn spawn(&self, job: Job) {
        let mut jobs = self
            .state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        jobs.queue.push_back(job);
        let idle = jobs.idle > 0;
        // A thread more when more jobs wait than threads do (a woken thread counts as
        // waiting until it takes one): a busy thread may be in a read for milliseconds.
        let start = jobs.queue.len() > jobs.idle && jobs.started < self.max_threads;
        jobs.started += usize::from(start);
        let number = jobs.started;
        drop(jobs);
        if idle {
            self.state.wake.notify_one();
        }
        if start {
            self.start_thread(number);
        }
    }

    /// Starts the `number`th thread (counted in `started` already; given back on failure).
    fn start_thread(&self, number: usize) {
        let state = Arc::clone(&self.state);
        let spawned = std::thread::Builder::new()
            .name(format!("sepia-disk-read-{}", number - 1))
            .spawn(move || work(&state));
        if let Err(e) = spawned {
            tracing::error!("disk read thread: {e}");
            self.state
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .started -= 1;
        }
    }

    /// Threads started so far.
    #[cfg(test)]
    fn started(&self) -> usize {
        self.state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .started
    }

    /// Whether a job would be accepted now.
    pub(crate) fn has_room(&self) -> bool {
        self.state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .len()
            < self.max_queued
    }
}

impl Drop for ReadPool {
    fn drop(&mut self) {
        // Under the lock: a thread between its `stop` check and its wait would otherwise
        // miss the wake-up and wait for good.
        let jobs = self
            .state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.state.stop.store(true, Relaxed);
        drop(jobs);
        self.state.wake.notify_all();
    }
}

fn work(state: &PoolState) {
    loop {
        let job = {
            let mut jobs = state.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = jobs.queue.pop_front() {
                    break job;
                }
                if state.stop.load(Relaxed) {
                    return;
                }
                jobs.idle += 1;
                jobs = state
                    .wake
                    .wait(jobs)
                    .unwrap_or_else(PoisonError::into_inner);
                jobs.idle -= 1;
            }
        };
        job();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_job_runs_whether_threads_are_idle_or_busy() {
        let pool = ReadPool::new(3, 10_000);
        let (tx, rx) = std::sync::mpsc::channel();
        // Bursts while all threads are busy (no wake-up needed), then single jobs to idle
        // threads (each needs one): a lost wake-up leaves a job queued and the count short.
        for burst in [200, 1, 1, 50, 1, 1, 1] {
            for _ in 0..burst {
                let tx = tx.clone();
                pool.spawn(Box::new(move || {
                    std::thread::sleep(Duration::from_micros(50));
                    tx.send(()).unwrap();
                }));
            }
            for _ in 0..burst {
                rx.recv_timeout(Duration::from_secs(10)).expect("a job ran");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(pool.started() <= 3, "{} threads", pool.started());
    }

    #[test]
    fn threads_start_when_jobs_find_none_idle_and_never_beyond_the_size() {
        let pool = ReadPool::new(4, 100);
        assert_eq!(pool.started(), 0, "no thread before the first job");
        let (tx, rx) = std::sync::mpsc::channel();
        let run = |tx: std::sync::mpsc::Sender<()>| {
            pool.spawn(Box::new(move || tx.send(()).unwrap()));
        };
        run(tx.clone());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the job ran");
        assert_eq!(pool.started(), 1);
        // The thread waits now: the next job wakes it rather than starting another.
        std::thread::sleep(Duration::from_millis(20));
        run(tx.clone());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the job ran");
        assert_eq!(pool.started(), 1, "an idle thread took the job");
        // Jobs that block: each finds every thread busy, until the pool is full.
        let gate = Arc::new(std::sync::Barrier::new(5));
        for _ in 0..8 {
            let (gate, tx) = (Arc::clone(&gate), tx.clone());
            pool.spawn(Box::new(move || {
                gate.wait();
                tx.send(()).unwrap();
            }));
        }
        assert_eq!(pool.started(), 4);
        gate.wait(); // the first four jobs pass together
        for _ in 0..4 {
            rx.recv_timeout(Duration::from_secs(10)).expect("a job ran");
        }
        gate.wait(); // the last four
        for _ in 0..4 {
            rx.recv_timeout(Duration::from_secs(10)).expect("a job ran");
        }
        assert_eq!(pool.started(), 4);
    }
}
