//! The idle deadlines of parked connections, at one-second resolution, without a timer each.
//!
//! A tokio `Sleep` is 112 bytes: with one in it, a parked connection's task was a 512-byte
//! allocation, and 10,000 idle clients cost 770 B of heap each (`examples/idle_memory.rs`).
//! Here each second of a ring has a `Notify`; a parked connection waits on the second of its
//! deadline (one owned waiter, which it needs anyway to hear of shutdown), a ticker task wakes
//! each second as it comes, and shutdown wakes every second at once. A keep-alive timeout of
//! minutes does not need millisecond precision: a connection closes between its deadline and
//! one second later (nginx's and Squid's idle timeouts are no finer in practice).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use crate::state::shutdown::Shutdown;

/// Seconds in the ring. A deadline further away than this waits on the ring's last second
/// and then again; a larger ring only costs 64 bytes a second.
const RING: u32 = 64;

pub(super) struct IdleClock {
    start: Instant,
    seconds: Box<[Arc<Notify>]>,
}

impl Default for IdleClock {
    fn default() -> IdleClock {
        IdleClock {
            start: Instant::now(),
            seconds: (0..RING).map(|_| Arc::new(Notify::new())).collect(),
        }
    }
}

impl IdleClock {
    /// Whole seconds since the clock started.
    pub(super) fn now(&self) -> u32 {
        u32::try_from(self.start.elapsed().as_secs()).unwrap_or(u32::MAX)
    }

    /// The first whole second at or after `after` from now: never early.
    pub(super) fn deadline_after(&self, after: Duration) -> u32 {
        let at = self.start.elapsed() + after;
        let secs = at.as_secs() + u64::from(at.subsec_nanos() > 0);
        u32::try_from(secs).unwrap_or(u32::MAX)
    }

    /// A waiter woken when second `deadline` comes (or the ring's last second, for a deadline
    /// past it), or at shutdown. It may wake early (another lap of the ring, a lagging ticker):
    /// its owner compares `now()` with its deadline and waits again.
    pub(super) fn waiter(&self, deadline: u32) -> OwnedNotified {
        loop {
            let now = self.now();
            let at = deadline.clamp(now + 1, now + RING - 1);
            let waiter = self.seconds[(at % RING) as usize].clone().notified_owned();
            // A waiter hears every `notify_waiters` after it was made: if second `at` came
            // between reading the clock and making it, its wake-up may be gone; choose again.
            if self.now() < at {
                return waiter;
            }
        }
    }

    /// Wakes each second as it comes, and every second at shutdown. Runs for the server's life.
    pub(super) async fn run(self: Arc<Self>, shutdown: Arc<Shutdown>) {
        let stop = shutdown.waiter();
        let mut stop = std::pin::pin!(stop);
        if !shutdown.has_begun() {
            let mut tick = tokio::time::interval_at(
                self.start + Duration::from_secs(1),
                Duration::from_secs(1),
            );
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            let mut next = 1u32;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = &mut stop => break,
                }
                // A late tick (a busy worker) wakes every second it missed, at most a lap.
                let now = self.now();
                let first = next.max(now.saturating_sub(RING - 1));
                for second in first..=now {
                    self.seconds[(second % RING) as usize].notify_waiters();
                }
                next = now + 1;
            }
        }
        self.seconds.iter().for_each(|s| s.notify_waiters());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_waiter_wakes_at_its_deadline_and_not_before() {
        let clock = Arc::new(IdleClock::default());
        let shutdown = Arc::new(Shutdown::default());
        tokio::spawn(clock.clone().run(shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let deadline = clock.deadline_after(Duration::from_secs(3));
        assert_eq!(deadline, 4, "0.3 s + 3 s rounds up to the 4th second");
        let waiter = clock.waiter(deadline);
        let woke = tokio::time::timeout(Duration::from_secs(10), waiter).await;
        assert!(woke.is_ok(), "the waiter was never woken");
        assert!(
            clock.now() >= deadline,
            "woken at {} before {deadline}",
            clock.now()
        );
        assert!(clock.now() <= deadline + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_past_the_ring_wakes_early_and_is_seen_as_not_due() {
        let clock = Arc::new(IdleClock::default());
        let shutdown = Arc::new(Shutdown::default());
        tokio::spawn(clock.clone().run(shutdown.clone()));
        let deadline = clock.deadline_after(Duration::from_secs(300));
        clock.waiter(deadline).await;
        assert!(
            clock.now() < deadline,
            "woken at {} for {deadline}",
            clock.now()
        );
        assert!(clock.now() >= RING - 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_every_waiter() {
        let clock = Arc::new(IdleClock::default());
        let shutdown = Arc::new(Shutdown::default());
        tokio::spawn(clock.clone().run(shutdown.clone()));
        let waiters: Vec<_> = (1..RING).map(|d| clock.waiter(d * 100)).collect();
        shutdown.begin();
        for w in waiters {
            tokio::time::timeout(Duration::from_millis(10), w)
                .await
                .expect("woken by shutdown");
        }
    }
}
