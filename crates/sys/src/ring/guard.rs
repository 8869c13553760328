//! What a driver leaves behind when it ends without being asked to (dropped by a runtime
//! shutting down, a failed descriptor, a panic): reads in flight must still complete, or
//! fail, never hang.

use std::sync::{Arc, Weak};

use super::read_ring::ReadRing;

/// What to do with a ring whose driver ended on its own: an event loop's driver hands it
/// to a thread (`runtime.rs`); a thread's leaves it dead ([`ReadRing::die`]), not to start
/// threads in a loop.
pub(crate) type OnEnd = Box<dyn FnOnce(&Arc<ReadRing>) + Send>;

/// Held by a driver while it runs; its drop runs the driver's [`OnEnd`] unless the driver
/// was asked to stop or the ring is gone.
pub(crate) struct DriverGuard {
    ring: Weak<ReadRing>,
    on_end: Option<OnEnd>,
    /// The driver was asked to stop, or the ring is gone.
    pub(crate) done: bool,
}

impl DriverGuard {
    pub(crate) fn new(ring: Weak<ReadRing>, on_end: OnEnd) -> Self {
        DriverGuard {
            ring,
            on_end: Some(on_end),
            done: false,
        }
    }

    /// The ring, while anyone else holds it.
    pub(crate) fn ring(&self) -> Option<Arc<ReadRing>> {
        self.ring.upgrade()
    }
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        let Some(ring) = self.ring.upgrade().filter(|_| !self.done) else {
            return;
        };
        if let Some(on_end) = self.on_end.take() {
            on_end(&ring);
        }
    }
}
