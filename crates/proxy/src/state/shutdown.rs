//! Shutdown as client connections see it: a flag every request reads, and a waiter list for
//! the connections waiting for a request (or parked) that must close as soon as it begins.
//!
//! The flag is an atomic load: a watch channel's value sits behind a read lock, and a keep-alive
//! hit read it three times (two atomic read-modify-writes each, for nothing but a `false`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

#[derive(Default)]
pub struct Shutdown {
    begun: AtomicBool,
    waiters: Arc<Notify>,
}

impl Shutdown {
    /// Begins shutdown: the flag first, so that a waiter made after this reads it as set.
    pub fn begin(&self) {
        self.begun.store(true, Ordering::Release);
        self.waiters.notify_waiters();
    }

    pub fn has_begun(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    /// A future that completes when shutdown begins after this call. One that began before
    /// is not seen: read [`Shutdown::has_begun`] after making the waiter.
    pub fn waiter(&self) -> OwnedNotified {
        self.waiters.clone().notified_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_made_before_shutdown_sees_it_even_unpolled() {
        let s = Shutdown::default();
        let waiter = s.waiter();
        assert!(!s.has_begun());
        s.begin();
        assert!(s.has_begun());
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("the waiter was woken");
    }
}
