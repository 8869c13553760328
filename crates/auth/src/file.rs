//! An htpasswd file that follows its changes on disk, so operators can add, change and remove
//! users without restarting (Apache re-reads the file on every request; Squid's basic_ncsa_auth
//! re-reads it when its mtime changes). A background task looks at the file's metadata once a
//! second and re-reads it only when mtime, size or inode changed.
//!
//! A broken new version (an unsupported entry, a half-written edit) is logged and the previous
//! users stay in force, rather than locking everyone out of a running proxy; the next change is
//! tried again. At start-up, by contrast, a broken file is an error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::{Duration, SystemTime};

use crate::htpasswd::{self, PasswordHash, Table};

/// How often the file's metadata is looked at.
pub(crate) const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// What identifies one version of the file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Stamp {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode,
        }
    }
}

#[derive(Debug)]
pub(crate) struct HtpasswdFile {
    path: PathBuf,
    table: RwLock<Arc<Table>>,
    /// Bumped on every successful reload; cached verdicts of older generations are void.
    generation: AtomicU64,
}

impl HtpasswdFile {
    /// Reads and parses the file now (errors name `path:line`), and starts the task that
    /// follows its changes; the task ends when the returned value is dropped. Inside tokio.
    pub(crate) fn open(path: &Path) -> Result<Arc<HtpasswdFile>, String> {
        let (table, stamp) = read(path)?;
        let file = Arc::new(HtpasswdFile {
            path: path.to_path_buf(),
            table: RwLock::new(Arc::new(table)),
            generation: AtomicU64::new(0),
        });
        tokio::spawn(follow(Arc::downgrade(&file), stamp, RELOAD_CHECK));
        Ok(file)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The stored hash of `user`, if the current version of the file has one.
    pub(crate) fn lookup(&self, user: &str) -> Option<Arc<PasswordHash>> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table.get(user).cloned()
    }

    fn replace(&self, table: Table) {
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

fn read(path: &Path) -> Result<(Table, Stamp), String> {
    let shown = path.display().to_string();
    let fail = |e: std::io::Error| format!("cannot read {shown}: {e}");
    // One open: the stamp belongs to the very bytes parsed.
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let metadata = file.metadata().map_err(fail)?;
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut text).map_err(fail)?;
    Ok((htpasswd::parse_file(&text, &shown)?, Stamp::of(&metadata)))
}

/// Polls the file's metadata every `every` until the file object is gone.
async fn follow(file: Weak<HtpasswdFile>, mut seen: Stamp, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut missing_reported = false;
    loop {
        ticker.tick().await;
        let Some(path) = file.upgrade().map(|f| f.path.clone()) else {
            return;
        };
        let metadata = match tokio::fs::metadata(&path).await {
            Ok(metadata) => metadata,
            Err(e) => {
                if !missing_reported {
                    tracing::error!(
                        "htpasswd file {}: {e}; keeping the users already loaded",
                        path.display()
                    );
                    missing_reported = true;
                }
                continue;
            }
        };
        missing_reported = false;
        let stamp = Stamp::of(&metadata);
        if stamp == seen {
            continue;
        }
        // The file is small, but reading and parsing it is still blocking work.
        let result = tokio::task::spawn_blocking(move || read(&path)).await;
        let Some(file) = file.upgrade() else {
            return;
        };
        match result {
            Ok(Ok((table, stamp))) => {
                tracing::info!(
                    "htpasswd file {} changed: {} users",
                    file.path.display(),
                    table.len()
                );
                file.replace(table);
                seen = stamp;
            }
            Ok(Err(why)) => {
                tracing::error!("{why}; keeping the users loaded before the change");
                seen = stamp;
            }
            Err(join) => tracing::error!("reading the htpasswd file failed: {join}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAROL: &str = "carol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\n";
    /// `htpasswd -nbs dave pw`.
    const DAVE: &str = "dave:{SHA}GpHWL3ymc5liWkNopqtdSjuqYHM=\n";

    /// Waits (in paused tokio time, advanced by the runtime) until `check` holds.
    async fn eventually(mut check: impl FnMut() -> bool) -> bool {
        for _ in 0..50 {
            if check() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        check()
    }

    #[tokio::test]
    async fn changes_are_picked_up_and_broken_versions_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("htpasswd");
        std::fs::write(&path, CAROL).unwrap();
        let file = HtpasswdFile::open(&path).unwrap();
        assert!(file.lookup("carol").is_some());
        assert!(file.lookup("dave").is_none());
        assert_eq!(file.generation(), 0);

        std::fs::write(&path, format!("{CAROL}{DAVE}")).unwrap();
        assert!(eventually(|| file.lookup("dave").is_some()).await);
        assert_eq!(file.generation(), 1);
        assert!(file.lookup("dave").unwrap().verify(b"pw"));

        // A broken version keeps the previous users.
        std::fs::write(&path, format!("{DAVE}eve:plaintext\n")).unwrap();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(file.lookup("carol").is_some());
        assert_eq!(file.generation(), 1);

        // Removing a user takes effect.
        std::fs::write(&path, DAVE).unwrap();
        assert!(eventually(|| file.lookup("carol").is_none()).await);
        assert!(file.lookup("dave").is_some());
        assert_eq!(file.generation(), 2);
    }

    #[tokio::test]
    async fn a_broken_file_is_an_error_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("htpasswd");
        std::fs::write(&path, "\nx:secret\n").unwrap();
        let err = HtpasswdFile::open(&path).unwrap_err();
        assert!(
            err.starts_with(&format!("{}:2: user \"x\"", path.display())),
            "{err}"
        );
        let err = HtpasswdFile::open(&dir.path().join("missing")).unwrap_err();
        assert!(err.starts_with("cannot read"), "{err}");
    }
}
