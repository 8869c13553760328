//! Store sizing.

use crate::body_file::FileHome;

/// Sizing of a [`crate::MemoryStore`].
///
/// Values are normalised by [`StoreConfig::normalized`] (which `MemoryStore::new` applies):
/// the shard count is rounded up to a power of two in `1..=MAX_SHARDS` and the maximum
/// object size is clamped to the budget. The config crate is where a user's bad value
/// becomes an error with a file and line; the store only refuses to be inconsistent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Total bytes all stored objects may account for (payload plus overhead estimate);
    /// the store never holds more after an insertion returns.
    pub budget_bytes: u64,
    /// Largest accounted size of a single object; anything larger is streamed to the
    /// clients already attached to its fill but never stored.
    pub max_object_bytes: u64,
    /// Number of independently locked shards (keys are spread by hash), so that threads
    /// looking up different keys do not serialise on one lock.
    pub shards: usize,
    /// Bodies of at least this many bytes (and never empty ones) are kept in files and served with
    /// `sendfile(2)` (see `body_file.rs`); `u64::MAX` keeps every body in memory chunks.
    pub body_file_min: u64,
    /// Most body files held at once (each is a file descriptor); beyond it, large bodies
    /// stay in memory chunks.
    pub max_body_files: usize,
    /// Where body files are made.
    pub body_file_home: FileHome,
}

/// Upper bound on shards: beyond this the per-shard fixed cost outweighs any contention win
/// on the machines we target.
pub const MAX_SHARDS: usize = 1024;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            budget_bytes: 256 * 1024 * 1024,
            max_object_bytes: 16 * 1024 * 1024,
            shards: 32,
            body_file_min: u64::MAX,
            max_body_files: 0,
            body_file_home: FileHome::Memory,
        }
    }
}

impl StoreConfig {
    /// The config with shards rounded up to a power of two in `1..=MAX_SHARDS` (so a shard
    /// is chosen with a mask) and `max_object_bytes <= budget_bytes`.
    pub fn normalized(self) -> Self {
        let shards = self.shards.clamp(1, MAX_SHARDS).next_power_of_two();
        StoreConfig {
            budget_bytes: self.budget_bytes,
            max_object_bytes: self.max_object_bytes.min(self.budget_bytes),
            shards,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_issue() {
        let c = StoreConfig::default();
        assert_eq!(c.budget_bytes, 256 << 20);
        assert_eq!(c.max_object_bytes, 16 << 20);
        assert_eq!(c, c.clone().normalized());
    }

    #[test]
    fn normalization_table() {
        let cases = [
            // (budget, max, shards) -> (max, shards)
            ((100, 10, 0), (10, 1)),
            ((100, 10, 1), (10, 1)),
            ((100, 10, 3), (10, 4)),
            ((100, 10, 64), (10, 64)),
            ((100, 500, 16), (100, 16)),
            ((100, 10, 5000), (10, MAX_SHARDS)),
        ];
        for ((budget, max, shards), (want_max, want_shards)) in cases {
            let n = StoreConfig {
                budget_bytes: budget,
                max_object_bytes: max,
                shards,
                ..StoreConfig::default()
            }
            .normalized();
            assert_eq!(n.budget_bytes, budget);
            assert_eq!(
                n.max_object_bytes, want_max,
                "max for {budget}/{max}/{shards}"
            );
            assert_eq!(n.shards, want_shards, "shards for {budget}/{max}/{shards}");
        }
    }
}
