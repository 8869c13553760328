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
    jobs: Mutex<VecDeque<Job>>,
    wake: Condvar,
    stop: AtomicBool,
}

pub(crate) struct ReadPool {
    state: Arc<PoolState>,
    max_queued: usize,
}

impl ReadPool {
    pub(crate) fn new(threads: usize, max_queued: usize) -> ReadPool {
        let state = Arc::new(PoolState {
            jobs: Mutex::new(VecDeque::new()),
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
        jobs.push_back(job);
        drop(jobs);
        self.state.wake.notify_one();
    }

    /// Whether a job would be accepted now.
    pub(crate) fn has_room(&self) -> bool {
        self.state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
            < self.max_queued
    }
}

impl Drop for ReadPool {
    fn drop(&mut self) {
        self.state.stop.store(true, Relaxed);
        self.state.wake.notify_all();
    }
}

fn work(state: &PoolState) {
    loop {
        let job = {
            let mut jobs = state.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = jobs.pop_front() {
                    break job;
                }
                if state.stop.load(Relaxed) {
                    return;
                }
                jobs = state
                    .wake
                    .wait(jobs)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        job();
    }
}
