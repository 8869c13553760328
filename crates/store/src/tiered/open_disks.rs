//! Opening the configured disks: each told which keys it is home to before it starts
//! (`DiskEngine::open_homed`), and the homes noting which ones opened; and the io_uring
//! that reads them.

use std::io;
use std::sync::Arc;

use super::homes::Homes;
use crate::disk::{DiskConfig, DiskEngine, IsHome, LockWait};

/// Opens the configured disks in order: the engines that opened, and the homes over all
/// of them. A disk another process holds is an error with `busy_is_error`, else logged and
/// left out like any disk that cannot be opened.
pub(super) fn open_disks(
    disks: Vec<DiskConfig>,
    wait: LockWait,
    busy_is_error: bool,
) -> io::Result<(Vec<Arc<DiskEngine>>, Homes)> {
    let mut homes = Homes::new(disks.iter().map(|d| d.path.as_path()));
    let mut engines = Vec::with_capacity(disks.len());
    for (slot, d) in disks.into_iter().enumerate() {
        let path = d.path.clone();
        let engine = match open_disk(d, wait, homes.hook(slot)) {
            Ok(engine) => engine,
            Err(e) if busy_is_error => return Err(e),
            Err(e) => {
                tracing::error!(disk = %path.display(), "disk cache not opened: {e}");
                None
            }
        };
        if let Some(engine) = engine {
            homes.opened(slot, engines.len());
            engines.push(engine);
        }
    }
    Ok((engines, homes))
}

/// Opens one disk: `Ok(None)` (logged) when it cannot be used, `Err` when another process
/// holds it (`ErrorKind::ResourceBusy`).
fn open_disk(
    d: DiskConfig,
    wait: LockWait,
    is_home: Option<IsHome>,
) -> io::Result<Option<Arc<DiskEngine>>> {
    let path = d.path.clone();
    match DiskEngine::open_homed(d, wait, is_home) {
        Ok(engine) => Ok(Some(Arc::new(engine))),
        Err(e) if e.kind() == io::ErrorKind::ResourceBusy => Err(e),
        Err(e) => {
            tracing::error!(disk = %path.display(), "disk cache not opened: {e}");
            Ok(None)
        }
    }
}

/// Reads the ring keeps at each disk's device at once by default (on average: one ring
/// serves them all; `TieredConfig::ring_depth`, the proxy's `cache.disk_ring_depth`). Its read buffers are physically contiguous (huge pages, `sepia_sys`
/// `ring/slab.rs`), so a disk that takes a descriptor per piece of a buffer holds every read
/// it is given: unbounded, all of them then ended together and the device sat idle while
/// the worker answered them (64 reads in a burst, 0.57–0.59 of fio's IOPS on cold 64 KiB
/// hits); with 24 at a time the device and the worker overlap (0.98–0.99). 24 reads of ~0.1 ms each on a fast SSD are ~240k reads/s, more than the
/// worker that checks them handles. bench/RESULTS.md, "Issue 21, thirteenth stop".
pub(crate) const RING_DEPTH: usize = 24;

/// The io_uring for reading the disks and its driver (on `reads_on`, else a thread), where
/// the kernel allows it; `depth`: the reads in flight at once, `TieredConfig::ring_depth`
/// per disk it reads (0: no ring); `max_queued`: the reads that may wait for it
/// (`TieredConfig::max_queued_reads`).
pub(super) fn open_ring(
    depth: usize,
    max_queued: usize,
    reads_on: Option<&tokio::runtime::Handle>,
) -> Option<(Arc<sepia_sys::ring::ReadRing>, sepia_sys::ring::RingDriver)> {
    if depth == 0 {
        return None;
    }
    // In flight at once: at most `depth` reads (the rest wait in the ring's queue, as many
    // as may wait for the read threads), and as many bytes as 16 threads reading 4 MiB
    // records hold.
    let depth = max_queued.clamp(1, depth) as u32;
    let opened = sepia_sys::ring::ReadRing::new(depth, max_queued, 64 << 20)
        .map(Arc::new)
        .and_then(|ring| {
            let driver = sepia_sys::ring::RingDriver::start(&ring, reads_on)?;
            Ok((ring, driver))
        });
    match opened {
        Ok(ring) => Some(ring),
        Err(e) => {
            tracing::warn!(
                "cache.disk_io = \"io_uring\": not available ({e}); reading with threads"
            );
            None
        }
    }
}
