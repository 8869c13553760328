//! The persistent disk tier (docs: see the end of this module's header, filled in below).

mod config;
mod engine;
mod format;
mod hash;
mod index;
mod pool;
mod recover;
mod segment;
mod writer;

pub use config::{DiskConfig, DiskStats};
pub use engine::DiskEngine;
pub(crate) use engine::{Demoted, DiskRecord};
pub(crate) use pool::ReadPool;

/// Segment ids in `dir` (tests of the layers above).
#[cfg(test)]
pub(crate) fn segment_ids(dir: &std::path::Path) -> Vec<u32> {
    segment::list(dir).unwrap()
}

#[cfg(test)]
mod kill_tests;
#[cfg(test)]
mod tests;
