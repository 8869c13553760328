//! Passive origin health: consecutive failures to reach an origin mark it down for a while,
//! so that requests skip it instead of each waiting on a dead address; once that while has
//! passed, one request is let through as a trial (half-open) and its result decides.
//!
//! The state is two atomics per origin, read only when a request goes to an origin (a miss):
//! a cache hit never looks at it. When (`fail_after`) and for how long (`down_for`) come from
//! the route's `[route.health]`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::pool::coarse_now;

/// One origin's passive health.
#[derive(Debug, Default)]
pub struct Health {
    /// Consecutive failures since the last success.
    fails: AtomicU32,
    /// 0 when up; else until when (coarse monotonic milliseconds) requests skip it.
    down_until: AtomicU64,
}

fn now_ms() -> u64 {
    coarse_now().as_millis() as u64
}

impl Health {
    /// Whether a request may try this origin now: it is up, or its time down has passed and
    /// this caller won the one trial (the next trial is `down_for` later).
    pub fn usable(&self, down_for: Duration) -> bool {
        let until = self.down_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        let now = now_ms();
        now >= until
            && self
                .down_until
                .compare_exchange(
                    until,
                    now + down_for.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Whether the origin is up (for metrics and the dashboard).
    pub fn is_up(&self) -> bool {
        self.down_until.load(Ordering::Relaxed) == 0
    }

    /// A connection was made: the origin is up. Returns true when it was down.
    pub fn succeeded(&self) -> bool {
        if self.fails.load(Ordering::Relaxed) != 0 {
            self.fails.store(0, Ordering::Relaxed);
        }
        self.down_until.swap(0, Ordering::Relaxed) != 0
    }

    /// A connection failed. Returns true when this failure marked the origin down.
    pub fn failed(&self, fail_after: u32, down_for: Duration) -> bool {
        let fails = self.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if fails < fail_after {
            return false;
        }
        let until = now_ms() + down_for.as_millis() as u64;
        // A failed trial keeps it down (already pushed on by `usable`); the first failure
        // at the threshold marks it down.
        self.down_until
            .compare_exchange(0, until.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_after_fail_after_failures_and_up_after_a_success() {
        let h = Health::default();
        let down_for = Duration::from_secs(60);
        assert!(!h.failed(3, down_for));
        assert!(!h.failed(3, down_for));
        assert!(h.usable(down_for), "still up after two failures");
        assert!(h.failed(3, down_for), "the third marks it down");
        assert!(!h.is_up());
        assert!(!h.usable(down_for), "skipped while down");
        assert!(!h.failed(3, down_for), "already down: no new transition");
        assert!(h.succeeded(), "a success brings it back up");
        assert!(h.is_up() && h.usable(down_for));
        assert!(!h.succeeded(), "no transition when already up");
    }

    #[test]
    fn one_trial_after_the_time_down() {
        let h = Health::default();
        assert!(h.failed(1, Duration::ZERO));
        // down_for 0: the time has passed at once; only one caller gets the trial.
        assert!(h.usable(Duration::from_secs(60)));
        assert!(!h.usable(Duration::from_secs(60)));
        assert!(!h.is_up(), "still down until the trial succeeds");
    }
}
