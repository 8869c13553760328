//! How a disk record becomes an answer: played into a fill (and so into memory), or, for a
//! large body, sent from its segment file and remembered (see the parent module's "Large
//! bodies").

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;

use super::Persist;
use crate::body_file::BodyFile;
use crate::disk::{DiskEngine, DiskRecord, InFile, CHUNK};
use crate::fill::{BodyLength, FillWriter};
use crate::object::{Body, Object};

/// Where a disk read puts a large body: see "Large bodies".
pub(super) struct SegmentTarget<'a, M> {
    pub(super) bodies: &'a SegmentBodies<M>,
    pub(super) disk_index: usize,
    pub(super) from: u64,
}

/// Plays a disk record held in memory into the fill: readers see it as a stored response,
/// and finishing commits it to memory by the usual admission.
fn play_into<M: Clone + Send + Sync + 'static>(writer: FillWriter<M>, rec: DiskRecord, meta: M) {
    let length = BodyLength::Known(rec.body_len);
    let mut body_writer = writer.publish_stored_head(rec.head, meta, rec.secondary, length);
    // The disk copy is this object: evicting it again (or closing) need not rewrite it.
    body_writer.mark_on_disk(rec.hash);
    for chunk in rec.body {
        body_writer.append(chunk);
    }
    // Lengths match by construction (verified record); a mismatch would abort the readers.
    let _ = body_writer.finish();
}

/// The object of a verified disk record whose body is sent from its segment file.
pub(super) fn segment_object<M>(in_file: InFile, rec: &DiskRecord, meta: M) -> Object<M> {
    let file = BodyFile::in_segment(in_file.file, in_file.at, rec.body_len);
    let object = Object::new(
        rec.head.clone(),
        Body::File(Arc::new(file)),
        rec.body_len,
        meta,
        rec.secondary.clone(),
    );
    object.set_on_disk(rec.hash);
    object
}

/// Reads `key`'s newest disk record and plays it into the fill; hands the fill over to a
/// waiting request when there is nothing usable.
pub(super) fn fill_from_disk<M: Persist + Clone + Send + Sync + 'static>(
    disk: &DiskEngine,
    key: &Bytes,
    writer: FillWriter<M>,
    to: &SegmentTarget<'_, M>,
) {
    fill_from_records(disk, key, disk.read_all(key, to.from), writer, to);
}

/// The newest of `records` (all one key's, as read from `disk`) whose metadata decodes, with
/// that metadata. Only the newest is ever served (see "Which variant" in the parent module;
/// sequence numbers order responses, and a record copied forward by a reclaim keeps its
/// own), so the others leave the index, as do records whose metadata does not decode: later
/// lookups read one record, and reclaiming their segments does not copy them forward. They
/// leave before a large newest body is verified: if that fails its checksum, the key misses
/// rather than falls back to an older response. A key gets a second record when it is
/// fetched again while its first copy is being written, refreshed, or stored as another
/// variant; measured: 4 KiB disk hits cost 1.38x a memory hit instead of 1.27x while a
/// quarter of the keys had two records, each hit reading both (bench/RESULTS.md,
/// 2026-11-27, eighth stop).
pub(super) fn newest_usable<M: Persist>(
    disk: &DiskEngine,
    records: Vec<DiskRecord>,
) -> Option<(M, DiskRecord)> {
    let mut usable = records
        .into_iter()
        .filter_map(|r| match M::decode(&r.head, &r.meta) {
            Some(meta) => Some((meta, r)),
            // Never served by this build (another metadata format): read by every lookup of
            // the key, and its index entry would keep a servable record from being copied
            // forward at a reclaim (`take_hot`), so it goes. (After a rollback to an older
            // build, records of a newer format go this way, for good once checkpointed.)
            None => {
                disk.drop_unserved(&r);
                None
            }
        });
    let mut newest = usable.next()?;
    for other in usable {
        let older = if other.1.seq > newest.1.seq {
            std::mem::replace(&mut newest, other)
        } else {
            other
        };
        disk.drop_unserved(&older.1);
    }
    Some(newest)
}

/// Plays the newest usable of `key`'s `records` (as read from `disk`) into the fill, or
/// hands the fill over to a waiting request.
pub(super) fn fill_from_records<M: Persist + Clone + Send + Sync + 'static>(
    disk: &DiskEngine,
    key: &Bytes,
    records: Vec<DiskRecord>,
    writer: FillWriter<M>,
    to: &SegmentTarget<'_, M>,
) {
    let Some((meta, mut rec)) = newest_usable(disk, records) else {
        writer.hand_off();
        return;
    };
    let Some(in_file) = rec.in_file.clone() else {
        play_into(writer, rec, meta);
        return;
    };
    // A large body: verified whole before any byte is sent (a bad chunk hands the request
    // to the origin instead of cutting a response short), then streamed to this first
    // request and remembered, so later hits send it from the segment file.
    let chunks = rec.body_len.div_ceil(CHUNK);
    if !in_file.verified {
        for i in 0..chunks {
            if let Err(e) = in_file.chunk(i, rec.body_len) {
                disk.read_failed(rec.hash, rec.seg, rec.offset, e);
                writer.hand_off();
                return;
            }
        }
    }
    // Later lookups may send it from the segment, reading only its prefix.
    disk.mark_verified(rec.hash, rec.seg, rec.offset);
    let mut body_writer = writer.publish_stored_head(
        rec.head.clone(),
        meta.clone(),
        rec.secondary.clone(),
        BodyLength::Known(rec.body_len),
    );
    body_writer.keep_out_of_store();
    if in_file.verified {
        for chunk in std::mem::take(&mut rec.body) {
            body_writer.append(chunk);
        }
    } else {
        for i in 0..chunks {
            match in_file.chunk(i, rec.body_len) {
                Ok(chunk) => body_writer.append(chunk),
                Err(e) => {
                    // Changed since verified a moment ago: only a failing device does that.
                    disk.read_failed(rec.hash, rec.seg, rec.offset, e);
                    body_writer.abort();
                    return;
                }
            }
        }
    }
    // Remembered before the readers see the end, so their next lookup hits it.
    let object = segment_object(in_file, &rec, meta);
    to.bodies.insert(
        key.clone(),
        SegmentBody {
            at: BodyAt {
                disk: to.disk_index,
                seg: rec.seg,
                offset: rec.offset,
                hash: rec.hash,
            },
            object: Arc::new(object),
        },
    );
    if body_writer.finish().is_err() {
        to.bodies.remove(key);
    }
}

/// Large disk bodies served from their segment files, by primary key (one variant each,
/// the newest on disk), at most `cap`; forgotten when their segment is reclaimed, their key
/// purged, their disk failed, or a lookup finds the index holding anything but exactly
/// their record (`TieredStore::segment_body`).
pub(super) struct SegmentBodies<M> {
    map: RwLock<HashMap<Bytes, SegmentBody<M>>>,
    /// `map.len()`, read without the lock: lookups skip the map while it is empty.
    len: AtomicUsize,
    cap: usize,
}

pub(super) struct SegmentBody<M> {
    at: BodyAt,
    object: Arc<Object<M>>,
}

/// Where a remembered body's record is: its disk (by index), segment and offset, and the
/// disk's hash of its key, to check that the index still holds exactly that record.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct BodyAt {
    pub(super) disk: usize,
    pub(super) seg: u32,
    pub(super) offset: u64,
    pub(super) hash: u64,
}

impl<M> SegmentBodies<M> {
    pub(super) fn new(cap: usize) -> Self {
        SegmentBodies {
            map: RwLock::new(HashMap::new()),
            len: AtomicUsize::new(0),
            cap,
        }
    }

    pub(super) fn get(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<(BodyAt, Arc<Object<M>>)> {
        if self.len.load(Relaxed) == 0 {
            return None;
        }
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        let b = map.get(primary)?;
        select(&b.object).then(|| (b.at, Arc::clone(&b.object)))
    }

    pub(super) fn insert(&self, primary: Bytes, body: SegmentBody<M>) {
        if self.cap == 0 {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= self.cap && !map.contains_key(&primary) {
            // Full: one goes (an arbitrary one; its next hit reads it from disk again).
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        map.insert(primary, body);
        self.len.store(map.len(), Relaxed);
    }

    pub(super) fn retain(&self, keep: impl Fn(&Bytes, &SegmentBody<M>) -> bool) {
        if self.len.load(Relaxed) == 0 {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        map.retain(|k, b| keep(k, b));
        self.len.store(map.len(), Relaxed);
    }

    /// Swaps the remembered `old` for a copy with a new head (after a 304).
    pub(super) fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<M>>,
        head: Bytes,
        meta: M,
    ) -> Option<Arc<Object<M>>> {
        if self.len.load(Relaxed) == 0 {
            return None;
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let b = map.get_mut(primary)?;
        if !Arc::ptr_eq(&b.object, old) {
            return None;
        }
        b.object = Arc::new(old.with_head(head, meta));
        Some(Arc::clone(&b.object))
    }

    pub(super) fn remove(&self, primary: &[u8]) {
        if self.len.load(Relaxed) == 0 {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.remove(primary).is_some() {
            self.len.store(map.len(), Relaxed);
        }
    }

    /// Forgets `primary`'s body if it is still the one at `at` (not one a fill remembered
    /// since).
    pub(super) fn forget_at(&self, primary: &[u8], at: BodyAt) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.get(primary).is_some_and(|b| b.at == at) {
            map.remove(primary);
            self.len.store(map.len(), Relaxed);
        }
    }

    pub(super) fn drop_segment(&self, disk: usize, seg: u32) {
        self.retain(|_, b| !(b.at.disk == disk && b.at.seg == seg));
    }
}
