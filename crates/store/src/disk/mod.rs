//! The persistent disk tier (docs: see the end of this module's header, filled in below).

mod config;
mod engine;
mod format;
mod hash;
mod index;
mod recover;
mod segment;
mod writer;

pub use config::{DiskConfig, DiskStats};
pub use engine::DiskEngine;

#[cfg(test)]
mod kill_tests;
#[cfg(test)]
mod tests;
