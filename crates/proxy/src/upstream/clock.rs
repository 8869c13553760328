//! The monotonic clock the origin side reads for idle times and health: coarse, since they
//! are seconds.

use std::time::Duration;

/// The monotonic clock at the kernel's tick resolution (a few milliseconds): a plain memory
/// read in the vDSO, where the precise clock reads and scales the TSC. Idle timeouts are
/// seconds; every pooled exchange read the clock twice.
pub fn coarse_now() -> Duration {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE).map_or(Duration::ZERO, Duration::from)
}
