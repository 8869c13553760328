//! Opening the configured disks: each told which keys it is home to before it starts
//! (`DiskEngine::open_homed`), and the homes noting which ones opened.

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
