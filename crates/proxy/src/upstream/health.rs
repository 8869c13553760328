//! Origin health. Passive: consecutive failures to reach an origin mark it down for a while,
//! so that requests skip it instead of each waiting on a dead address; once that while has
//! passed, one request is let through as a trial (half-open) and its result decides. Active
//! (`super::checks`, when the route sets `interval`): a check task marks it down after `fall`
//! failed checks and up again after `rise` good ones.
//!
//! The two combine as "down if either says down": an origin the checks marked down gets no
//! request, not even a passive trial, until the checks see it well again; one the requests
//! marked down waits for its passive trial as before, whatever the checks say.
//!
//! The state is three atomics per origin, read only when a request goes to an origin (a
//! miss): a cache hit never looks at it. When (`fail_after`) and for how long (`down_for`)
//! come from the route's `[route.health]`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use sepia_observe::metrics::OriginEvent;
use sepia_observe::Counter;

use super::clock::coarse_now;

/// What is kept of one route origin while its route and origin stay configured, reloads
/// included: its health, and its counts for the admin listener.
#[derive(Debug, Default)]
pub struct OriginStatus {
    pub health: Health,
    /// Connection events (`sepia_origin_connections`), by [`OriginEvent`].
    connections: [Counter; 3],
    /// Active checks' results (`sepia_health_checks`), by [`CheckResult`].
    checks: [Counter; 4],
}

impl OriginStatus {
    pub fn count(&self, event: OriginEvent) {
        self.connections[event as usize].incr();
    }

    pub fn count_check(&self, result: CheckResult) {
        self.checks[result as usize].incr();
    }

    pub fn connections(&self) -> [u64; 3] {
        self.connections.each_ref().map(Counter::get)
    }

    pub fn checks(&self) -> [u64; 4] {
        self.checks.each_ref().map(Counter::get)
    }
}

/// Where an origin connection's events are counted: a route origin's own counters, or the
/// worker's for requests without a route (forward, intercepted).
#[derive(Clone, Copy)]
pub enum Tally<'a> {
    Origin(&'a OriginStatus),
    Direct,
}

impl Tally<'_> {
    pub fn count(self, event: OriginEvent) {
        match self {
            Tally::Origin(status) => status.count(event),
            Tally::Direct => sepia_observe::metrics::origin(event),
        }
    }
}

/// How one active check ended, the `result` label of `sepia_health_checks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckResult {
    /// The origin answered with an expected status.
    Ok = 0,
    /// It answered with another status.
    Status,
    /// It did not connect and answer within `timeout`.
    Timeout,
    /// Connecting failed (refused, TLS refused, name not resolved) or the answer was not HTTP.
    Error,
}

impl CheckResult {
    pub const ALL: [CheckResult; 4] = [
        CheckResult::Ok,
        CheckResult::Status,
        CheckResult::Timeout,
        CheckResult::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckResult::Ok => "ok",
            CheckResult::Status => "status",
            CheckResult::Timeout => "timeout",
            CheckResult::Error => "error",
        }
    }
}

/// One origin's health: passive (requests' connection failures) and active (checks).
#[derive(Debug, Default)]
pub struct Health {
    /// Consecutive failures since the last success.
    fails: AtomicU32,
    /// 0 when up; else until when (coarse monotonic milliseconds) requests skip it.
    down_until: AtomicU64,
    /// The active checks say it is down (only its check task writes it).
    checks_down: AtomicBool,
}

fn now_ms() -> u64 {
    coarse_now().as_millis() as u64
}

impl Health {
    /// Whether a request may try this origin now: it is up, or its time down has passed and
    /// this caller won the one trial (the next trial is `down_for` later).
    pub fn usable(&self, down_for: Duration) -> bool {
        if self.checks_down.load(Ordering::Relaxed) {
            return false;
        }
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

    /// Whether the origin is up (for metrics and the dashboard): neither the requests nor
    /// the checks marked it down.
    pub fn is_up(&self) -> bool {
        self.down_until.load(Ordering::Relaxed) == 0 && !self.checks_down()
    }

    /// Whether the active checks marked it down.
    pub fn checks_down(&self) -> bool {
        self.checks_down.load(Ordering::Relaxed)
    }

    /// The active checks' verdict. Returns true when it changed.
    pub fn set_checks_down(&self, down: bool) -> bool {
        self.checks_down.swap(down, Ordering::Relaxed) != down
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

    #[test]
    fn down_if_either_the_checks_or_the_requests_say_so() {
        let h = Health::default();
        let down_for = Duration::from_secs(60);
        assert!(h.set_checks_down(true));
        assert!(!h.set_checks_down(true), "no transition when already down");
        assert!(
            !h.is_up() && !h.usable(down_for),
            "no request, not even a trial"
        );
        assert!(
            !h.succeeded(),
            "a passive success does not undo the checks' verdict"
        );
        assert!(!h.usable(down_for));
        assert!(h.set_checks_down(false));
        assert!(h.is_up() && h.usable(down_for));
        assert!(h.failed(1, down_for));
        assert!(
            !h.is_up() && !h.usable(down_for),
            "the requests' verdict alone"
        );
    }
}
