//! The disk index in RAM: 16 bytes per object in open-addressing tables.
//!
//! Why not `HashMap<u64, Loc>`: hashbrown stores the 8-byte key, a padded value and a
//! control byte per bucket, and doubles its bucket array, so it costs 30-60 B per entry.
//! Here an entry is four `u32`s: the tag (the upper 32 bits of the key hash; the lower bits
//! chose the shard), the segment id, the record offset and length in 16-byte units, and two
//! flag bits. Tables grow by 1.5x at 85 % load, so they are 57-85 % full: 19-28 B per object
//! (measured by `examples/disk_index_mem.rs`, see `mod.rs`).
//!
//! It is a multimap: several entries may share a tag (variants of one URI, older copies, or
//! two keys whose hashes collide). A reader checks the full key stored in each candidate
//! record, so a collision costs a read, never a wrong object. Linear probing with
//! backward-shift deletion keeps probe runs short without tombstones.

use std::sync::{PoisonError, RwLock};

use smallvec::SmallVec;

/// Independent tables, so that lookups and the writer rarely meet on one lock.
pub(crate) const SHARDS: usize = 64;
const EMPTY_SEG: u32 = u32::MAX;
const LEN_MASK: u32 = (1 << 30) - 1;
const HIT: u32 = 1 << 30;
/// The record's body was read and checked against its chunk checksums by this process:
/// later hits may send it from the segment unread (segments are written once and never
/// overwritten). Not kept across a restart: a checkpoint is dumped without it.
const VERIFIED: u32 = 1 << 31;

/// Where a record is: segment, byte offset and length (`len == 0`: too big for the index's
/// length field, learn it from the record header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) seg: u32,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) hit: bool,
    pub(crate) verified: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    tag: u32,
    seg: u32,
    off: u32,
    lenw: u32,
}

const EMPTY: Slot = Slot {
    tag: 0,
    seg: EMPTY_SEG,
    off: 0,
    lenw: 0,
};

impl Slot {
    fn new(hash: u64, loc: Loc) -> Slot {
        let units = loc.len / 16;
        let lenw = if units > u64::from(LEN_MASK) || loc.len == 0 {
            0
        } else {
            units as u32
        };
        Slot {
            tag: (hash >> 32) as u32,
            seg: loc.seg,
            off: u32::try_from(loc.offset / 16).expect("segment offsets fit in 64 GiB"),
            lenw: lenw | if loc.hit { HIT } else { 0 } | if loc.verified { VERIFIED } else { 0 },
        }
    }

    fn loc(&self) -> Loc {
        Loc {
            seg: self.seg,
            offset: u64::from(self.off) * 16,
            len: u64::from(self.lenw & LEN_MASK) * 16,
            hit: self.lenw & HIT != 0,
            verified: self.lenw & VERIFIED != 0,
        }
    }

    fn at(&self, seg: u32, offset: u64) -> bool {
        self.seg == seg && u64::from(self.off) * 16 == offset
    }

    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        for (i, v) in [self.tag, self.seg, self.off, self.lenw].iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub(crate) fn from_bytes(b: &[u8]) -> Slot {
        let w = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        Slot {
            tag: w(0),
            seg: w(1),
            off: w(2),
            lenw: w(3),
        }
    }

    pub(crate) fn seg(&self) -> u32 {
        self.seg
    }

    pub(crate) fn tag(&self) -> u32 {
        self.tag
    }
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    len: usize,
}

impl Table {
    #[inline]
    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.slots.len() as u64) >> 32) as usize
    }

    fn probe(&self, tag: u32) -> impl Iterator<Item = usize> + '_ {
        let n = self.slots.len();
        let start = if n == 0 { 0 } else { self.home(tag) };
        (0..n)
            .map(move |i| (start + i) % n)
            .take_while(move |&i| self.slots[i].seg != EMPTY_SEG)
    }

    fn insert(&mut self, slot: Slot) {
        if (self.len + 1) * 100 > self.slots.len() * 85 {
            self.grow();
        }
        let n = self.slots.len();
        let mut i = self.home(slot.tag);
        while self.slots[i].seg != EMPTY_SEG {
            i = (i + 1) % n;
        }
        self.slots[i] = slot;
        self.len += 1;
    }

    /// Inserts `slot` unless an entry for the same record (tag, segment, offset) is there.
    fn insert_once(&mut self, slot: Slot) {
        let there = self.probe(slot.tag).any(|i| {
            let s = &self.slots[i];
            s.tag == slot.tag && s.seg == slot.seg && s.off == slot.off
        });
        if !there {
            self.insert(slot);
        }
    }

    fn grow(&mut self) {
        self.grow_to((self.slots.len() * 3 / 2).max(16));
    }

    /// Sizes the table for `n` entries at once. Needed before inserting entries in slot
    /// order (a checkpoint is dumped in that order): grown step by step, the low part of
    /// the table would fill densely first and probe runs would get long (measured: a 1M
    /// checkpoint loaded in 2.5 s instead of a few hundred ms).
    fn reserve(&mut self, n: usize) {
        let cap = n * 100 / 80 + 16;
        if cap > self.slots.len() {
            self.grow_to(cap);
        }
    }

    fn grow_to(&mut self, cap: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        self.len = 0;
        for s in old.into_iter().filter(|s| s.seg != EMPTY_SEG) {
            self.insert(s);
        }
    }

    /// Removes slot `i`, shifting later members of its probe run back (no tombstones).
    fn remove_at(&mut self, mut i: usize) {
        let n = self.slots.len();
        self.slots[i] = EMPTY;
        self.len -= 1;
        let mut j = (i + 1) % n;
        while self.slots[j].seg != EMPTY_SEG {
            let h = self.home(self.slots[j].tag);
            // Slot j may move to i when its home is not cyclically within (i, j].
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.slots[i] = self.slots[j];
                self.slots[j] = EMPTY;
                i = j;
            }
            j = (j + 1) % n;
        }
    }

    fn remove_where(&mut self, tag: u32, mut pred: impl FnMut(&Slot) -> bool) -> usize {
        let mut removed = 0;
        'again: loop {
            let found = self
                .probe(tag)
                .find(|&i| self.slots[i].tag == tag && pred(&self.slots[i]));
            if let Some(i) = found {
                self.remove_at(i);
                removed += 1;
                continue 'again;
            }
            return removed;
        }
    }
}

/// The sharded index.
pub(crate) struct Index {
    shards: Box<[RwLock<Table>]>,
}

impl Index {
    pub(crate) fn new() -> Index {
        Index {
            shards: (0..SHARDS).map(|_| RwLock::new(Table::default())).collect(),
        }
    }

    fn shard(&self, hash: u64) -> &RwLock<Table> {
        &self.shards[hash as usize % SHARDS]
    }

    fn write(&self, hash: u64) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.shard(hash)
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds an entry (unless one for this exact record is already there).
    pub(crate) fn insert(&self, hash: u64, loc: Loc) {
        self.write(hash).insert_once(Slot::new(hash, loc));
    }

    /// Makes `loc` the only entry with `hash`'s tag (adding it unless there), under one lock:
    /// a key's newest record replaces its older ones (only the newest is ever served), and
    /// a lookup in between never finds none. Returns how many entries went.
    pub(crate) fn replace(&self, hash: u64, loc: Loc) -> usize {
        let slot = Slot::new(hash, loc);
        let mut t = self.write(hash);
        let removed = t.remove_where(slot.tag, |s| !s.at(loc.seg, loc.offset));
        t.insert_once(slot);
        removed
    }

    /// Indexes a record the writer placed: a key's newest response replaces its older
    /// entries ([`Index::replace`]); a hot record copied forward with its old sequence
    /// number joins them ([`Index::insert`]).
    pub(crate) fn add(&self, hash: u64, loc: Loc, newest: bool) {
        if newest {
            self.replace(hash, loc);
        } else {
            self.insert(hash, loc);
        }
    }

    /// Entries whose tag matches `hash` (usually none or one).
    pub(crate) fn candidates(&self, hash: u64) -> SmallVec<[Loc; 2]> {
        let tag = (hash >> 32) as u32;
        let t = self
            .shard(hash)
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        t.probe(tag)
            .filter(|&i| t.slots[i].tag == tag)
            .map(|i| t.slots[i].loc())
            .collect()
    }

    /// Whether an entry's tag matches `hash` ([`Index::candidates`] without collecting them).
    pub(crate) fn contains(&self, hash: u64) -> bool {
        let tag = (hash >> 32) as u32;
        let t = self
            .shard(hash)
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let found = t.probe(tag).any(|i| t.slots[i].tag == tag);
        found
    }

    /// Removes every entry with this tag; returns how many.
    pub(crate) fn remove_all(&self, hash: u64) -> usize {
        self.write(hash).remove_where((hash >> 32) as u32, |_| true)
    }

    /// Removes the entry for exactly this record; returns it.
    pub(crate) fn remove_exact(&self, hash: u64, seg: u32, offset: u64) -> Option<Loc> {
        let tag = (hash >> 32) as u32;
        let mut t = self.write(hash);
        let i = t
            .probe(tag)
            .find(|&i| t.slots[i].tag == tag && t.slots[i].at(seg, offset))?;
        let loc = t.slots[i].loc();
        t.remove_at(i);
        Some(loc)
    }

    /// Marks the record as hit (it is re-written rather than dropped when its segment goes).
    pub(crate) fn mark_hit(&self, hash: u64, seg: u32, offset: u64) {
        self.set_flag(hash, seg, offset, HIT);
    }

    /// Marks the record's body as verified (see [`VERIFIED`]).
    pub(crate) fn mark_verified(&self, hash: u64, seg: u32, offset: u64) {
        self.set_flag(hash, seg, offset, VERIFIED);
    }

    fn set_flag(&self, hash: u64, seg: u32, offset: u64, flag: u32) {
        let tag = (hash >> 32) as u32;
        let mut t = self.write(hash);
        let found = t
            .probe(tag)
            .find(|&i| t.slots[i].tag == tag && t.slots[i].at(seg, offset));
        if let Some(i) = found {
            t.slots[i].lenw |= flag;
        }
    }

    /// Keeps only the entries `keep` accepts (dropping a lost segment's entries).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&Slot) -> bool) -> usize {
        let mut dropped = 0;
        for shard in self.shards.iter() {
            let mut t = shard.write().unwrap_or_else(PoisonError::into_inner);
            let old = std::mem::take(&mut t.slots);
            t.len = 0;
            t.slots = vec![EMPTY; old.len()];
            for s in old.into_iter().filter(|s| s.seg != EMPTY_SEG) {
                if keep(&s) {
                    t.insert(s);
                } else {
                    dropped += 1;
                }
            }
        }
        dropped
    }

    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(PoisonError::into_inner).len)
            .sum()
    }

    /// The entries, and the bytes [`Index::dump_shard`] writes for all the shards.
    pub(crate) fn dump_bytes(&self) -> (u64, u64) {
        let per = |s: &RwLock<Table>| {
            let t = s.read().unwrap_or_else(PoisonError::into_inner);
            let bytes = 16 + 8 * t.slots.len().div_ceil(64) + 16 * t.len;
            (t.len as u64, bytes as u64)
        };
        let each = self.shards.iter().map(per);
        each.fold((0, 0), |(n, b), (tn, tb)| (n + tn, b + tb))
    }

    /// Bytes the tables hold (what the index costs in RAM, besides a few hundred bytes).
    pub(crate) fn heap_bytes(&self) -> usize {
        let per = |s: &RwLock<Table>| {
            s.read()
                .unwrap_or_else(PoisonError::into_inner)
                .slots
                .capacity()
        };
        self.shards.iter().map(per).sum::<usize>() * std::mem::size_of::<Slot>()
    }

    /// Appends shard `i` as it sits in RAM, so that loading it is a copy rather than a
    /// million probing inserts (measured: 1M entries re-inserted took ~100 ms, mostly cache
    /// misses): the capacity and entry count (u64 each), an occupancy bitmap (one bit per
    /// slot, in u64 words), then the occupied slots in slot order. Returns the entry count.
    pub(crate) fn dump_shard(&self, i: usize, out: &mut Vec<u8>) -> usize {
        let t = self.shards[i]
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        out.extend_from_slice(&(t.slots.len() as u64).to_le_bytes());
        out.extend_from_slice(&(t.len as u64).to_le_bytes());
        for word in t.slots.chunks(64) {
            let bits = word
                .iter()
                .enumerate()
                .filter(|(_, s)| s.seg != EMPTY_SEG)
                .fold(0u64, |w, (b, _)| w | 1 << b);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        for s in t.slots.iter().filter(|s| s.seg != EMPTY_SEG) {
            let s = Slot {
                lenw: s.lenw & !VERIFIED,
                ..*s
            };
            out.extend_from_slice(&s.to_bytes());
        }
        t.len
    }

    /// Installs shard `i` from what [`Index::dump_shard`] wrote, dropping the entries `keep`
    /// rejects; returns how many it kept, `None` if the bytes are malformed. A shard that
    /// already holds entries gets the loaded ones inserted one by one instead.
    pub(crate) fn load_shard(
        &self,
        i: usize,
        b: &[u8],
        mut keep: impl FnMut(&Slot) -> bool,
    ) -> Option<usize> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let cap = usize::try_from(word(0)?).ok()?;
        let len = usize::try_from(word(8)?).ok()?;
        let words = cap.div_ceil(64);
        let bitmap = b.get(16..16 + words.checked_mul(8)?)?;
        let entries = b.get(16 + bitmap.len()..)?;
        if len >= cap.max(1) || entries.len() != len.checked_mul(16)? {
            return None;
        }
        let mut slots = vec![EMPTY; cap];
        let mut next = entries.chunks_exact(16);
        for (w, bits) in bitmap.chunks_exact(8).enumerate() {
            let mut bits = u64::from_le_bytes(bits.try_into().ok()?);
            while bits != 0 {
                let at = w * 64 + bits.trailing_zeros() as usize;
                let slot = Slot::from_bytes(next.next()?);
                if at >= cap || slot.seg == EMPTY_SEG {
                    return None;
                }
                slots[at] = slot;
                bits &= bits - 1;
            }
        }
        if next.next().is_some() {
            return None;
        }
        let mut t = self.shards[i]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut kept = 0;
        if t.len > 0 {
            let want = t.len + len;
            t.reserve(want);
            for s in slots.into_iter().filter(|s| s.seg != EMPTY_SEG && keep(s)) {
                t.insert(s);
                kept += 1;
            }
            return Some(kept);
        }
        let rejected: Vec<Slot> = slots
            .iter()
            .filter(|s| s.seg != EMPTY_SEG && !keep(s))
            .copied()
            .collect();
        *t = Table { slots, len };
        for r in rejected {
            t.remove_where(r.tag, |s| *s == r);
        }
        Some(t.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(seg: u32, offset: u64) -> Loc {
        Loc {
            seg,
            offset,
            len: 4096,
            hit: false,
            verified: false,
        }
    }

    #[test]
    fn insert_find_remove_many_with_collisions() {
        let idx = Index::new();
        // Same tag, several records (variants / copies), plus a crowd of others.
        let h = 0xABCD_0000_0000_0005u64;
        idx.insert(h, loc(1, 0));
        idx.insert(h, loc(1, 4096));
        idx.insert(h, loc(1, 4096)); // duplicate of an exact record: ignored
        for i in 0..10_000u64 {
            idx.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), loc(2, i * 16));
        }
        assert_eq!(idx.candidates(h).len(), 2);
        assert_eq!(idx.len(), 10_002);
        assert!(idx.remove_exact(h, 1, 0).is_some());
        assert_eq!(
            idx.candidates(h),
            [loc(1, 4096)].into_iter().collect::<SmallVec<[Loc; 2]>>()
        );
        for i in (0..10_000u64).step_by(2) {
            assert_eq!(
                idx.remove_all(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                1,
                "{i}"
            );
        }
        for i in (1..10_000u64).step_by(2) {
            let c = idx.candidates(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            assert!(
                c.contains(&loc(2, i * 16)),
                "entry {i} lost by a backward shift"
            );
        }
        idx.mark_hit(h, 1, 4096);
        assert!(idx.candidates(h)[0].hit);
        assert_eq!(idx.retain(|s| s.seg() != 2), 5_000);
        assert_eq!(idx.len(), 1);
    }

    #[test]
    fn replace_leaves_one_entry_for_a_tag_and_keeps_others() {
        let idx = Index::new();
        let h = 0x1234_0000_0000_0007u64;
        // Same shard, other tag: untouched.
        let other = 0x4321_0000_0000_0007u64;
        idx.insert(h, loc(1, 0));
        idx.insert(h, loc(1, 4096));
        idx.insert(other, loc(1, 8192));
        for i in 0..2_000u64 {
            idx.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), loc(2, i * 16));
        }
        assert_eq!(idx.replace(h, loc(3, 0)), 2, "both older entries went");
        assert_eq!(idx.candidates(h).as_slice(), &[loc(3, 0)]);
        assert_eq!(
            idx.replace(h, loc(3, 0)),
            0,
            "the same record again: kept once"
        );
        assert_eq!(idx.candidates(h).len(), 1);
        assert_eq!(idx.candidates(other).as_slice(), &[loc(1, 8192)]);
        // A tag with no entry yet gets one.
        let fresh = 0x7777_0000_0000_0001u64;
        assert_eq!(idx.replace(fresh, loc(4, 0)), 0);
        assert_eq!(idx.candidates(fresh).as_slice(), &[loc(4, 0)]);
        assert_eq!(idx.len(), 2_003);
        for i in 0..2_000u64 {
            let c = idx.candidates(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            assert!(
                c.contains(&loc(2, i * 16)),
                "entry {i} lost by a backward shift"
            );
        }
    }

    #[test]
    fn a_dumped_shard_loads_as_the_same_table_minus_rejected_entries() {
        let idx = Index::new();
        let hashes: Vec<u64> = (0..20_000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & !63)
            .collect();
        for (i, &h) in hashes.iter().enumerate() {
            idx.insert(h, loc(i as u32 % 3, i as u64 * 16));
        }
        let mut b = Vec::new();
        assert_eq!(idx.dump_shard(0, &mut b), 20_000);
        let back = Index::new();
        assert_eq!(back.load_shard(0, &b, |s| s.seg() != 1), Some(13_333));
        for (i, &h) in hashes.iter().enumerate() {
            let found = back
                .candidates(h)
                .contains(&loc(i as u32 % 3, i as u64 * 16));
            assert_eq!(found, i % 3 != 1, "entry {i}");
        }
        // Loading into a shard that already holds entries merges them.
        let other = Index::new();
        other.insert(64, loc(7, 0));
        assert_eq!(other.load_shard(0, &b, |_| true), Some(20_000));
        assert_eq!(other.len(), 20_001);
        // Malformed bytes are refused, not trusted.
        assert_eq!(back.load_shard(1, &b[..b.len() - 1], |_| true), None);
        let mut wrong = b.clone();
        wrong[8] ^= 1;
        assert_eq!(back.load_shard(1, &wrong, |_| true), None);
    }

    #[test]
    fn huge_records_keep_an_unknown_length() {
        let s = Slot::new(
            1 << 40,
            Loc {
                seg: 3,
                offset: 0,
                len: 1 << 40,
                hit: true,
                verified: false,
            },
        );
        let l = s.loc();
        assert_eq!((l.seg, l.offset, l.len, l.hit), (3, 0, 0, true));
        assert_eq!(Slot::from_bytes(&s.to_bytes()), s);
    }
}
