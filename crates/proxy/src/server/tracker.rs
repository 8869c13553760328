//! Counting open client connections, so that shutdown can wait for them and tell them to close.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use super::idle_clock::IdleClock;
use crate::state::shutdown::Shutdown;

/// Counts open client connections so shutdown can wait for them, and tells them to close.
pub(super) struct Tracker {
    pub(super) count: AtomicUsize,
    /// Connections parked in a task of their own (TLS, or when the parking lot stopped).
    pub(super) parked_tasks: AtomicUsize,
    zero: Notify,
    /// Begins when the server stops; every session and parked connection holds it.
    pub(super) shutdown: Arc<Shutdown>,
    /// Parked connections' idle deadlines (its ticker runs with the server).
    pub(super) clock: Arc<IdleClock>,
}

pub(super) struct Guard(Arc<Tracker>);

impl Tracker {
    pub(super) fn new(shutdown: Arc<Shutdown>) -> Tracker {
        Tracker {
            count: AtomicUsize::new(0),
            parked_tasks: AtomicUsize::new(0),
            zero: Notify::new(),
            shutdown,
            clock: Arc::default(),
        }
    }

    pub(super) fn enter(self: &Arc<Self>) -> Guard {
        self.count.fetch_add(1, Ordering::AcqRel);
        Guard(self.clone())
    }

    pub(super) async fn all_done(&self) {
        loop {
            let notified = self.zero.notified();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Guard {
    /// The shutdown signal, for the session.
    pub(super) fn shutdown(&self) -> Arc<Shutdown> {
        self.0.shutdown.clone()
    }

    /// The clock of parked connections' idle deadlines; its waiters also wake at shutdown.
    pub(super) fn clock(&self) -> &IdleClock {
        &self.0.clock
    }

    /// A connection parks in a task of its own (`parked::Parked`), or leaves it.
    pub(super) fn parked_task(&self, parks: bool) {
        if parks {
            self.0.parked_tasks.fetch_add(1, Ordering::Relaxed);
        } else {
            self.0.parked_tasks.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether shutdown has begun.
    pub(super) fn stopping(&self) -> bool {
        self.0.shutdown.has_begun()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}
