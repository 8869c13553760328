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

/// The configured disks in order, each with its weight seed and its engine's index among
/// those that opened (`None`: not opened at this start).
#[derive(Clone)]
pub(super) struct Homes {
    slots: Vec<(u64, Option<usize>)>,
}

impl Homes {
    /// The engines that opened (in configured order) out of `configured` (each disk's path
    /// and its engine, if it opened), and the homes over all of them.
    pub(super) fn split<T>(configured: Vec<(PathBuf, Option<T>)>) -> (Vec<T>, Homes) {
        let mut engines = Vec::new();
        let mut slots = Vec::new();
        for (path, engine) in configured {
            slots.push((path, engine.is_some().then_some(engines.len())));
            engines.extend(engine);
        }
        let homes = Homes::new(slots.iter().map(|(path, e)| (path.as_path(), *e)));
        (engines, homes)
    }

    /// `disks`: each configured disk's path, and its engine's index if it opened.
    pub(super) fn new<'a>(disks: impl IntoIterator<Item = (&'a Path, Option<usize>)>) -> Self {
        let slots = disks
            .into_iter()
            .map(|(path, engine)| (seed(path), engine))
            .collect();
        Homes { slots }
    }

    /// Whether more than one disk is configured (else every key's home is the one).
    pub(super) fn several(&self) -> bool {
        self.slots.len() > 1
    }

    /// The index of the engine holding `primary`'s records, if its disk opened.
    pub(super) fn home(&self, primary: &[u8]) -> Option<usize> {
        match self.slots.as_slice() {
            [] => None,
            // One disk (the usual case) needs no hash: this runs on every disk lookup and
            // every eviction.
            [(_, engine)] => *engine,
            slots => {
                let key = u64::from(crc32c::crc32c(primary));
                let best = slots.iter().max_by_key(|(seed, _)| mix(key ^ seed));
                best.and_then(|(_, engine)| *engine)
            }
        }
    }
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
        Homes::new(disks.iter().map(|(p, e)| (Path::new(*p), *e)))
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

    #[test]
    fn one_disk_holds_every_key_or_none() {
        assert_eq!(homes(&[("/a", Some(0))]).home(b"k"), Some(0));
        assert_eq!(homes(&[("/a", None)]).home(b"k"), None);
        assert_eq!(homes(&[]).home(b"k"), None);
    }
}
