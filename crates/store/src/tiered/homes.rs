//! Which disk a key lives on: rendezvous (highest random weight) hashing over the
//! configured disks, each weighted by its path.
//!
//! Why not the key's hash modulo the disks that opened: a disk that could not be opened at
//! one start (or one added to the configuration) then moved the keys of every disk, and a
//! key's older records stayed on the disk it had left. Purges and invalidations go to a
//! key's home, so such a record missed them, and served the purged response again once the
//! mapping moved back. With rendezvous hashing a disk left out moves only its own keys (to
//! no disk: they are memory-only until it is back), and adding one moves only the keys it
//! takes; `TieredStore::purge_disk` also removes the key from every other disk holding it.

use std::path::{Path, PathBuf};

use crate::disk::IsHome;

/// The configured disks in order: each one's weight seed, and its engine's index among
/// those that opened (`None`: not opened at this start).
pub(super) struct Homes {
    seeds: Vec<u64>,
    engines: Vec<Option<usize>>,
}

impl Homes {
    /// The configured disks' paths, in order; none opened yet.
    pub(super) fn new<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Self {
        let seeds: Vec<u64> = paths.into_iter().map(seed).collect();
        let engines = vec![None; seeds.len()];
        Homes { seeds, engines }
    }

    /// Notes that the configured disk `slot` opened as engine `engine`.
    pub(super) fn opened(&mut self, slot: usize, engine: usize) {
        self.engines[slot] = Some(engine);
    }

    /// What tells the configured disk `slot` which keys it is home to, given before it
    /// opens (`DiskEngine::open_homed`); `None` with one disk (home to every key).
    pub(super) fn hook(&self, slot: usize) -> Option<IsHome> {
        let seeds = self.seeds.clone();
        (seeds.len() > 1)
            .then(|| -> IsHome { Box::new(move |primary| pick(&seeds, primary) == slot) })
    }

    /// The index of the engine holding `primary`'s records, if its disk opened.
    pub(super) fn home(&self, primary: &[u8]) -> Option<usize> {
        match self.engines.as_slice() {
            [] => None,
            // One disk (the usual case) needs no hash: this runs on every disk lookup and
            // every eviction.
            [engine] => *engine,
            engines => engines[pick(&self.seeds, primary)],
        }
    }
}

/// The configured disk `primary` lives on: the one whose seed mixed with the key's hash
/// weighs most. `seeds` is not empty.
fn pick(seeds: &[u64], primary: &[u8]) -> usize {
    let key = u64::from(crc32c::crc32c(primary));
    let weights = seeds.iter().map(|seed| mix(key ^ seed)).enumerate();
    weights.max_by_key(|&(_, w)| w).map_or(0, |(slot, _)| slot)
}

/// A disk's weight seed: its path as configured, with `//`, `/./` and a trailing `/`
/// spelled out of it, so that `/d1` and `/d1/` are one disk.
fn seed(path: &Path) -> u64 {
    let path: PathBuf = path.components().collect();
    mix(u64::from(crc32c::crc32c(
        path.as_os_str().as_encoded_bytes(),
    )))
}

/// SplitMix64's finaliser: spreads a 32-bit hash and a seed over 64 bits, so each disk
/// wins a fair share of keys.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::Homes;
    use std::path::Path;

    fn homes(disks: &[(&str, Option<usize>)]) -> Homes {
        let mut h = Homes::new(disks.iter().map(|(p, _)| Path::new(*p)));
        for (slot, (_, engine)) in disks.iter().enumerate() {
            if let Some(engine) = engine {
                h.opened(slot, *engine);
            }
        }
        h
    }

    fn keys() -> impl Iterator<Item = Vec<u8>> {
        (0..20_000).map(|i| format!("http://example.com/{i}").into_bytes())
    }

    #[test]
    fn keys_spread_evenly_over_the_disks() {
        let h = homes(&[("/a", Some(0)), ("/b", Some(1)), ("/c", Some(2))]);
        let mut n = [0; 3];
        for k in keys() {
            n[h.home(&k).unwrap()] += 1;
        }
        assert!(n.iter().all(|&c| (6_000..7_300).contains(&c)), "{n:?}");
    }

    /// A disk that did not open keeps its keys (memory-only meanwhile); the others keep theirs.
    #[test]
    fn a_disk_left_out_moves_no_other_disks_keys() {
        let all = homes(&[("/a", Some(0)), ("/b", Some(1)), ("/c", Some(2))]);
        let without_b = homes(&[("/a", Some(0)), ("/b", None), ("/c", Some(1))]);
        for k in keys() {
            let expect = match all.home(&k) {
                Some(0) => Some(0),
                Some(1) => None,
                Some(2) => Some(1),
                other => panic!("{other:?}"),
            };
            assert_eq!(without_b.home(&k), expect);
        }
    }

    /// Adding a disk moves only the keys it takes.
    #[test]
    fn a_disk_added_takes_keys_only_for_itself() {
        let two = homes(&[("/a", Some(0)), ("/b", Some(1))]);
        let three = homes(&[("/a", Some(0)), ("/b", Some(1)), ("/c", Some(2))]);
        let mut moved = 0;
        for k in keys() {
            match three.home(&k) {
                Some(2) => moved += 1,
                home => assert_eq!(home, two.home(&k)),
            }
        }
        assert!((6_000..7_300).contains(&moved), "{moved}");
    }

    #[test]
    fn a_path_spelled_with_a_trailing_slash_is_the_same_disk() {
        let plain = homes(&[("/a", Some(0)), ("/b", Some(1))]);
        let slashed = homes(&[("/a/", Some(0)), ("/./b", Some(1))]);
        assert!(keys().all(|k| plain.home(&k) == slashed.home(&k)));
    }

    /// The hook a disk gets before it opens agrees with the homes once it has.
    #[test]
    fn each_disks_hook_says_it_is_home_to_its_own_keys_only() {
        let h = homes(&[("/a", Some(0)), ("/b", None), ("/c", Some(1))]);
        let hooks: Vec<_> = (0..3).map(|slot| h.hook(slot).unwrap()).collect();
        for k in keys() {
            let homes_of: Vec<usize> = (0..3).filter(|&s| hooks[s](&k)).collect();
            assert_eq!(homes_of.len(), 1);
            let engine = [Some(0), None, Some(1)][homes_of[0]];
            assert_eq!(h.home(&k), engine);
        }
        assert!(homes(&[("/a", Some(0))]).hook(0).is_none());
    }

    #[test]
    fn one_disk_holds_every_key_or_none() {
        assert_eq!(homes(&[("/a", Some(0))]).home(b"k"), Some(0));
        assert_eq!(homes(&[("/a", None)]).home(b"k"), None);
        assert_eq!(homes(&[]).home(b"k"), None);
    }
}
