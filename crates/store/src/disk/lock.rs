//! One process per disk: an exclusive `flock(2)` on `PATH/lock`, held for the engine's life.
//!
//! Two writers on one directory would interleave segments, reclaim each other's files and
//! overwrite each other's checkpoints, so a second Sepia started on a directory in use is
//! refused with the holder's pid ([`DirLock::acquire`]). A binary upgrade's new process is
//! the one process allowed to wait: it opens the disk with [`LockWait::Wait`] and its writer
//! thread takes the lock once the old process, which checkpoints its index when it stops,
//! exits (see `engine.rs`).
//!
//! `flock` belongs to the open file, so the kernel releases it when the process ends however
//! it ends (kill -9 included): there is never a stale lock to clean up. The file is opened
//! close-on-exec (as the standard library opens every file), so a process Sepia spawns (the
//! upgrade's new binary, an authentication helper) never inherits it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation};

/// What opening a disk held by another process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockWait {
    /// Refuse, naming the process that holds it (a start by mistake).
    #[default]
    Fail,
    /// Wait for it in the background, serving without this disk meanwhile (a binary
    /// upgrade's new process, while the old one drains).
    Wait,
}

/// The lock on a disk directory; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// A directory whose lock another process holds: the open lock file, to try again.
#[derive(Debug)]
pub(crate) struct Busy {
    file: File,
    /// The holder's pid, as it wrote it into the file.
    pub(crate) holder: Option<u32>,
}

impl DirLock {
    /// Takes the lock of `dir` (made if missing) without waiting.
    pub(crate) fn acquire(dir: &Path) -> io::Result<Result<DirLock, Busy>> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Ok(DirLock::mark(file)?)),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let holder = read_pid(&mut file);
                Ok(Err(Busy { file, holder }))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`DirLock::acquire`], trying again for up to `grace` while it is held.
    pub(crate) fn acquire_within(dir: &Path, grace: Duration) -> io::Result<Result<DirLock, Busy>> {
        let deadline = Instant::now() + grace;
        let mut busy = match DirLock::acquire(dir)? {
            Ok(lock) => return Ok(Ok(lock)),
            Err(busy) => busy,
        };
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            busy = match busy.retry()? {
                Ok(lock) => return Ok(Ok(lock)),
                Err(busy) => busy,
            };
        }
        Ok(Err(busy))
    }

    /// Writes this process's pid into the lock file, for the error another process reports.
    fn mark(mut file: File) -> io::Result<DirLock> {
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
        Ok(DirLock { _file: file })
    }
}

impl Busy {
    /// Tries again; `Err(self)` while the other process still holds it.
    pub(crate) fn retry(self) -> io::Result<Result<DirLock, Busy>> {
        match flock(&self.file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Ok(DirLock::mark(self.file)?)),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(Err(self)),
            Err(e) => Err(e.into()),
        }
    }

    /// The error a start on a directory in use gets.
    pub(crate) fn error(&self, dir: &Path) -> io::Error {
        let who = match self.holder {
            Some(pid) => format!("another Sepia (process {pid})"),
            None => "another Sepia".to_string(),
        };
        io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "disk cache {} is in use by {who}: two processes must never share one \
                 (stop it first, or replace it with `sepia upgrade`)",
                dir.display()
            ),
        )
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap().expect("free");
        // A second open file description: what another process would have.
        let busy = DirLock::acquire(dir.path()).unwrap().expect_err("held");
        assert_eq!(busy.holder, Some(std::process::id()));
        let message = busy.error(dir.path()).to_string();
        assert!(
            message.contains("in use by another Sepia (process"),
            "{message}"
        );
        let busy = busy.retry().unwrap().expect_err("still held");
        drop(first);
        busy.retry().unwrap().expect("released");
    }
}
