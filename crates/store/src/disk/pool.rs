//! A small pool of threads for disk reads, so that blocking `pread`s never run on the
//! async runtime's workers.
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
    /// Threads waiting on `wake` (counted under the lock). A job finds one to wake only
    /// while some are idle: under load every thread is busy in a read and takes the next
    /// job when it finishes, and a `notify_one` is a `futex` system call even when nobody
    /// waits (std's futex condition variable).
    idle: usize,
}

pub(crate) struct ReadPool {
    state: Arc<PoolState>,
    max_queued: usize,
}

impl ReadPool {
    pub(crate) fn new(threads: usize, max_queued: usize) -> ReadPool {
        let state = Arc::new(PoolState {
            jobs: Mutex::new(Jobs {
                queue: VecDeque::new(),
                idle: 0,
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        for i in 0..threads.max(1) {
            let state = Arc::clone(&state);
            let spawned = std::thread::Builder::new()
                .name(format!("sepia-disk-read-{i}"))
                .spawn(move || work(&state));
            if let Err(e) = spawned {
                tracing::error!("disk read thread: {e}");
            }
        }
        ReadPool { state, max_queued }
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
        drop(jobs);
        if idle {
            self.state.wake.notify_one();
        }
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
    }
}
