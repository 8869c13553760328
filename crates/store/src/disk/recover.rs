//! Opening a disk: the meta file (hash key), the checkpoint, and the scan of what was
//! written after it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::engine::Shared;
use super::format::SummaryEntry;
use super::index::SHARDS;

use super::segment;
use super::writer::Writer;

const META_MAGIC: &[u8; 8] = b"SEPIADK1";
const CK_MAGIC: &[u8; 8] = b"SEPIACK1";
/// magic, crc, watermark segment and offset, next sequence number.
const CK_HEADER: usize = 8 + 4 + 4 + 8 + 8;

/// The disk's hash key from its `meta` file, made at random for a new disk. A missing or
/// damaged meta file makes every segment and checkpoint unreadable (their hashes were made
/// under the lost key), so they are removed.
pub(crate) fn meta_key(dir: &Path) -> io::Result<(u64, u64)> {
    let path = dir.join("meta");
    if let Ok(b) = fs::read(&path) {
        if b.len() == 28
            && &b[..8] == META_MAGIC
            && crc32c::crc32c(&b[..24]).to_le_bytes() == b[24..28]
        {
            let k0 = u64::from_le_bytes(b[8..16].try_into().expect("8"));
            let k1 = u64::from_le_bytes(b[16..24].try_into().expect("8"));
            return Ok((k0, k1));
        }
    }
    for id in segment::list(dir)? {
        fs::remove_file(segment::seg_path(dir, id))?;
    }
    let _ = fs::remove_file(dir.join("checkpoint"));
    let key = random_key();
    let mut b = META_MAGIC.to_vec();
    b.extend_from_slice(&key.0.to_le_bytes());
    b.extend_from_slice(&key.1.to_le_bytes());
    b.extend_from_slice(&crc32c::crc32c(&b).to_le_bytes());
    write_durably(dir, "meta", &b)?;
    Ok(key)
}

/// 128 random bits from the standard library's randomly keyed hasher (no extra crate).
fn random_key() -> (u64, u64) {
    use std::hash::{BuildHasher, RandomState};
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (
        RandomState::new().hash_one(t),
        RandomState::new().hash_one((t, std::process::id())),
    )
}

/// Writes `name` via a temporary file, fsync and rename, so a crash leaves old or new.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// Checkpoint: magic, crc (of everything after it), watermark segment and offset (every
/// record before it is reflected), next sequence number, then the index dump.
pub(crate) fn write_checkpoint(shared: &Shared, mark: (u32, u64), next_seq: u64) -> io::Result<()> {
    let mut b = Vec::with_capacity(CK_HEADER + 16 * shared.index.len() + 8 * SHARDS);
    b.extend_from_slice(CK_MAGIC);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&mark.0.to_le_bytes());
    b.extend_from_slice(&mark.1.to_le_bytes());
    b.extend_from_slice(&next_seq.to_le_bytes());
    shared.index.dump(&mut b);
    if b.len() as u64 > shared.cfg.checkpoint_reserve() / 2 {
        tracing::warn!(disk = %shared.cfg.path.display(), "index checkpoint larger than its reserve: skipped");
        return Ok(());
    }
    let crc = crc32c::crc32c(&b[12..]);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
    write_durably(&shared.cfg.path, "checkpoint", &b)?;
    shared.counters.checkpoints.fetch_add(1, Relaxed);
    Ok(())
}

/// Loads the checkpoint into the index (entries of segments that are gone are dropped);
/// returns its watermark and next sequence number, or `None` without a valid one.
fn load_checkpoint(
    shared: &Shared,
    live: &std::collections::HashSet<u32>,
) -> Option<((u32, u64), u64)> {
    let b = fs::read(shared.cfg.path.join("checkpoint")).ok()?;
    if b.len() < CK_HEADER
        || &b[..8] != CK_MAGIC
        || crc32c::crc32c(&b[12..]).to_le_bytes() != b[8..12]
    {
        return None;
    }
    let mark_seg = u32::from_le_bytes(b[12..16].try_into().ok()?);
    let mark_off = u64::from_le_bytes(b[16..24].try_into().ok()?);
    let next_seq = u64::from_le_bytes(b[24..32].try_into().ok()?);
    shared
        .index
        .load(&b[CK_HEADER..], |s| live.contains(&s.seg()))?;
    Some(((mark_seg, mark_off), next_seq))
}

/// Rebuilds the writer's view and the index: checkpoint first, then the summaries of the
/// segments written after its watermark (the torn last one scanned record by record and
/// sealed at its last valid record). A damaged segment from before the watermark is
/// deleted rather than re-scanned: re-indexing it could resurrect purged records.
pub(crate) fn recover(w: &mut Writer) -> io::Result<()> {
    let started = Instant::now();
    let shared = Arc::clone(&w.shared);
    let dir = shared.cfg.path.clone();
    let _ = fs::remove_file(dir.join("checkpoint.tmp"));
    let ids = segment::list(&dir)?;
    let live: std::collections::HashSet<u32> = ids.iter().copied().collect();
    let ck = load_checkpoint(&shared, &live);
    let ((mark_seg, mark_off), next_seq) = ck.unwrap_or(((0, 0), 1));
    w.seq = next_seq;
    let from_checkpoint = shared.index.len();
    for &id in &ids {
        let seg = Arc::new(segment::open(&dir, id, false)?);
        let summary = segment::read_summary(&seg)?;
        let entries = match summary {
            Some((entries, _)) => entries,
            None if id < mark_seg => {
                tracing::warn!(disk = %dir.display(), seg = id, "damaged segment before the checkpoint: removed");
                shared.index.retain(|s| s.seg() != id);
                fs::remove_file(segment::seg_path(&dir, id))?;
                continue;
            }
            None => {
                let (entries, end) = segment::scan(&seg, shared.key, 0)?;
                segment::seal(&seg, end, &entries)?;
                entries
            }
        };
        let size = seg.file.metadata()?.len();
        shared
            .segs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, seg);
        w.sealed.insert(id, size);
        w.next_seg = w.next_seg.max(id + 1);
        if id > mark_seg || (id == mark_seg && ck.is_some()) || ck.is_none() {
            apply(
                w,
                id,
                &entries,
                if id == mark_seg && ck.is_some() {
                    mark_off
                } else {
                    0
                },
            );
        } else {
            for e in &entries {
                w.seq = w.seq.max(e.seq + 1);
            }
        }
    }
    w.next_seg = w.next_seg.max(mark_seg);
    tracing::info!(
        disk = %dir.display(),
        objects = shared.index.len(),
        from_checkpoint,
        segments = ids.len(),
        ms = started.elapsed().as_millis() as u64,
        "disk cache index loaded"
    );
    Ok(())
}

fn apply(w: &mut Writer, id: u32, entries: &[SummaryEntry], from: u64) {
    for e in entries.iter().filter(|e| e.offset >= from) {
        w.recovered(id, e);
    }
}
