//! Several disks, and starts whose disk lists differ: a key's records never outlive a
//! purge on a disk the key has moved away from.

use std::path::PathBuf;
use std::time::Duration;

use crate::conformance::{any, expect_miss, pattern, runtime, Meta};
use crate::tiered_tests::{demote, disk_cfg, memory_cfg, pool_reads, read_pending, Tiered};
use crate::{Store, TieredConfig, TieredStore};

fn open(disks: &[&PathBuf]) -> Tiered {
    let disks = disks.iter().map(|p| disk_cfg(p)).collect();
    let cfg = pool_reads(TieredConfig::new(memory_cfg(64 << 10, 32 << 10, 1), disks));
    let store = TieredStore::<Meta>::open(cfg);
    for d in store.disks() {
        assert!(d.wait_loaded(Duration::from_secs(10)));
    }
    Tiered {
        store,
        dir: tempfile::tempdir().unwrap(),
    }
}

fn close(t: Tiered) {
    t.store.close();
}

/// Disk `a` alone holds the key; disk `b` is added and becomes the key's home; the key is
/// purged; `b` is taken out again. The record on `a` must not come back: the purge went to
/// every disk holding the key, not only to its home.
#[test]
fn a_purge_reaches_a_record_left_on_a_disk_the_key_moved_from() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let both = open(&[&a, &b]);
    let key = (0..)
        .map(|i| format!("/moved/{i}"))
        .find(|k| both.store.home_of(k.as_bytes()) == Some(1))
        .unwrap();
    close(both);

    let only_a = open(&[&a]);
    demote(&only_a, key.as_bytes(), &pattern(9000, 4));
    let on_a = runtime().block_on(read_pending(&only_a, key.as_bytes()));
    assert_eq!(on_a.expect("on a").1, pattern(9000, 4));
    close(only_a);

    let both = open(&[&a, &b]);
    expect_miss(both.lookup(key.as_bytes(), &any)); // its home, b, does not hold it
    assert!(both.purge(key.as_bytes()) >= 1, "a's record purged too");
    close(both);

    let only_a = open(&[&a]);
    expect_miss(only_a.lookup(key.as_bytes(), &any));
    close(only_a);
}

/// A disk that does not open moves no key of the others: the keys it would hold stay in
/// memory only, and a key of the other disk is still read from it.
#[test]
fn a_disk_that_does_not_open_leaves_the_other_disks_keys_in_place() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let both = open(&[&a, &b]);
    let homed = |want| {
        (0..)
            .map(|i| format!("/k/{i}"))
            .find(|k| both.store.home_of(k.as_bytes()) == want)
            .unwrap()
    };
    let (on_a, on_b) = (homed(Some(0)), homed(Some(1)));
    demote(&both, on_a.as_bytes(), &pattern(9000, 5));
    close(both);

    // b is now a file, not a directory: it cannot be opened, and is left out.
    std::fs::remove_dir_all(&b).unwrap();
    std::fs::write(&b, b"not a directory").unwrap();
    let t = open(&[&a, &b]);
    assert_eq!(t.store.disks().len(), 1);
    assert_eq!(t.store.home_of(on_a.as_bytes()), Some(0));
    assert_eq!(
        t.store.home_of(on_b.as_bytes()),
        None,
        "memory only meanwhile"
    );
    let got = runtime().block_on(read_pending(&t, on_a.as_bytes()));
    assert_eq!(got.expect("read from a").1, pattern(9000, 5));
    close(t);
}
