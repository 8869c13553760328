//! Large bodies kept in files, so that a hit can leave with `sendfile(2)`.
//!
//! Why: serving a body from process memory means the kernel copies every byte into the
//! socket on every hit. For a 1 MiB body that copy is most of a hit's cost, and it is the one
//! copy nginx avoids by serving its cache file with sendfile (bench/RESULTS.md). A body in a
//! file is copied once, on the object's first hit (`MemoryStore::lookup`: most stored objects
//! are never hit, and writing each of them to a file made misses dearer); each later hit hands
//! the kernel references to the file's pages instead of copying them.
//!
//! Where the file lives matters (measured, bench/RESULTS.md): an unnamed file
//! (`O_TMPFILE | O_EXCL`) in a directory on a disk filesystem such as ext4 or XFS sits in the
//! page cache in large folios, and sendfile from it cost about 0.6 x what it costs from a
//! memfd or tmpfs file, whose 4 KiB pages each become a separate socket fragment. So bodies go
//! to a directory ([`FileHome::Dir`], `cache.sendfile_dir`), and to a sealed memfd only where no
//! such directory is usable ([`FileHome::Memory`]).
//!
//! Nothing changes a body file once written: an unnamed `O_EXCL` file can never be given a
//! name, so no other process can open it, and this type has no writing method. A memfd is
//! also sealed (`F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`). So a response still
//! queued in a socket when its object is evicted keeps exactly the bytes that were stored: the
//! pages live as long as the kernel references them.
//!
//! Each file is a descriptor: [`FileSlots`] caps how many the store holds, so large objects
//! can never starve the listener of descriptors; past the cap (or when the kernel refuses a
//! file) a body simply stays in memory chunks.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};

/// Where body files are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileHome {
    /// Unnamed files (`O_TMPFILE | O_EXCL`) in this directory.
    Dir(PathBuf),
    /// Sealed anonymous memory files (memfd).
    Memory,
}

impl FileHome {
    /// Creates (and drops) one empty file, to learn at startup whether this home works:
    /// `O_TMPFILE` needs a filesystem that supports it and a writable directory.
    pub fn probe(&self) -> io::Result<()> {
        self.open().map(drop)
    }

    fn open(&self) -> io::Result<File> {
        match self {
            FileHome::Dir(dir) => unnamed_file(dir),
            FileHome::Memory => {
                let fd = memfd_create(
                    c"sepia-body",
                    MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
                )?;
                Ok(File::from(fd))
            }
        }
    }
}

/// An unnamed regular file in `dir`: gone with its last descriptor, and (`O_EXCL`) never
/// linkable into the directory, so only this process can reach it.
fn unnamed_file(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_TMPFILE | nix::libc::O_EXCL)
        .mode(0o600)
        .open(dir)
}

/// A complete body in a file, never written again: all of an unnamed file, or a byte range
/// of a disk-cache segment file ([`BodyFile::in_segment`]).
///
/// A segment range is as immutable as an unnamed file: the disk tier writes each segment
/// once, front to back (sealing only appends after its records), and reclaiming a segment
/// unlinks its file; a new segment is always a new file (`O_CREAT | O_EXCL`, a new id). So
/// a body being sent when its segment is reclaimed keeps the bytes it was verified with:
/// the file (and its blocks) live as long as this handle. Its `len` bytes start at
/// [`BodyFile::offset`] in the file: `sendfile(2)` must add it.
#[derive(Debug)]
pub struct BodyFile {
    file: Arc<File>,
    offset: u64,
    len: u64,
    _slot: Option<FileSlot>,
}

impl BodyFile {
    /// Copies `chunks` (exactly `len` bytes) into a new file in `home`, taking one of `slots`.
    /// `None` when no slot is free; an error when the kernel refuses the file or the write.
    pub(crate) fn create(
        chunks: &[Bytes],
        len: u64,
        slots: &Arc<FileSlots>,
        home: &FileHome,
    ) -> io::Result<Option<BodyFile>> {
        let total: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if total != len {
            return Err(io::Error::other(format!(
                "body chunks hold {total} bytes, {len} expected"
            )));
        }
        let Some(slot) = FileSlots::take(slots) else {
            return Ok(None);
        };
        let mut file = home.open()?;
        for chunk in chunks {
            file.write_all(chunk)?;
        }
        if *home == FileHome::Memory {
            fcntl(
                &file,
                FcntlArg::F_ADD_SEALS(
                    SealFlag::F_SEAL_WRITE
                        | SealFlag::F_SEAL_SHRINK
                        | SealFlag::F_SEAL_GROW
                        | SealFlag::F_SEAL_SEAL,
                ),
            )?;
        }
        Ok(Some(BodyFile {
            file: Arc::new(file),
            offset: 0,
            len,
            _slot: Some(slot),
        }))
    }

    /// Bytes `offset..offset + len` of a segment file (verified by the caller, never written
    /// again: see the type's docs). Shares the segment's descriptor: no slot is taken.
    pub(crate) fn in_segment(file: Arc<File>, offset: u64, len: u64) -> BodyFile {
        BodyFile {
            file,
            offset,
            len,
            _slot: None,
        }
    }

    /// Where the body starts in the file (0 but for a segment range): what `sendfile(2)`
    /// offsets are relative to. Reads through this type's methods add it themselves.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether this body lies in a disk-cache segment (served from the disk tier) rather than
    /// in a body file of its own made by the memory store.
    pub fn in_disk_segment(&self) -> bool {
        self.offset > 0
    }

    /// Whether the body is likely all in the page cache (see `disk::resident`): a segment
    /// body that is not goes through a read thread rather than a `sendfile` that would wait
    /// for the device on a worker.
    pub(crate) fn resident(&self) -> bool {
        crate::disk::resident(&self.file, self.offset, self.len)
    }

    /// Body length in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the body is empty (never, for a stored file; for completeness).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the whole body back into memory: for the rare paths that need the bytes
    /// themselves (a 304 re-publishing the object to readers of a refresh fill).
    pub fn read_all(&self) -> io::Result<Bytes> {
        self.read_range(0, self.len)
    }

    /// Reads bytes `start..end` of the body: for connections that cannot take the file
    /// itself (TLS, HTTP/2), a piece at a time.
    pub fn read_range(&self, start: u64, end: u64) -> io::Result<Bytes> {
        if start > end || end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bytes {start}..{end} of a {}-byte body", self.len),
            ));
        }
        let len = usize::try_from(end - start).map_err(io::Error::other)?;
        let mut buf = BytesMut::zeroed(len);
        self.file.read_exact_at(&mut buf, self.offset + start)?;
        Ok(buf.freeze())
    }
}

impl AsFd for BodyFile {
    /// The file, for `sendfile(2)` and other reads (never written after `create`).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// The cap on body files a store holds at once (one descriptor each).
#[derive(Debug)]
pub(crate) struct FileSlots {
    in_use: AtomicUsize,
    max: usize,
}

impl FileSlots {
    pub(crate) fn new(max: usize) -> Arc<FileSlots> {
        Arc::new(FileSlots {
            in_use: AtomicUsize::new(0),
            max,
        })
    }

    /// Files currently held.
    pub(crate) fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    fn take(slots: &Arc<FileSlots>) -> Option<FileSlot> {
        slots
            .in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < slots.max).then_some(n + 1)
            })
            .ok()
            .map(|_| FileSlot(Arc::clone(slots)))
    }
}

/// One taken slot, given back when its file is dropped.
#[derive(Debug)]
struct FileSlot(Arc<FileSlots>);

impl Drop for FileSlot {
    fn drop(&mut self) {
        self.0.in_use.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks() -> Vec<Bytes> {
        vec![
            Bytes::from_static(b"hello, "),
            Bytes::from(vec![b'x'; 70_000]),
            Bytes::from_static(b"!"),
        ]
    }

    fn homes() -> Vec<FileHome> {
        vec![FileHome::Memory, FileHome::Dir(std::env::temp_dir())]
    }

    #[test]
    fn round_trip_keeps_every_byte() {
        for home in homes() {
            if home.probe().is_err() {
                continue; // a temp dir on a filesystem without O_TMPFILE
            }
            let slots = FileSlots::new(4);
            let c = chunks();
            let len = c.iter().map(|c| c.len() as u64).sum();
            let f = BodyFile::create(&c, len, &slots, &home).unwrap().unwrap();
            assert_eq!(f.len(), len);
            assert_eq!(f.read_all().unwrap(), c.concat(), "{home:?}");
            assert_eq!(slots.in_use(), 1);
            drop(f);
            assert_eq!(slots.in_use(), 0, "the slot comes back with the file");
        }
    }

    #[test]
    fn unnamed_files_leave_nothing_in_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let home = FileHome::Dir(dir.path().to_path_buf());
        if home.probe().is_err() {
            return; // tmpfs and ext4 support O_TMPFILE; an exotic test filesystem may not
        }
        let slots = FileSlots::new(1);
        let f = BodyFile::create(&chunks(), 70_008, &slots, &home)
            .unwrap()
            .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(f.read_all().unwrap().len(), 70_008);
    }

    #[test]
    fn a_directory_that_is_not_there_fails_the_probe() {
        let home = FileHome::Dir(PathBuf::from("/nonexistent/sepia-bodies"));
        assert!(home.probe().is_err());
        let slots = FileSlots::new(1);
        assert!(BodyFile::create(&chunks(), 70_008, &slots, &home).is_err());
        assert_eq!(slots.in_use(), 0, "a failed create gives its slot back");
    }

    #[test]
    fn sealed_memory_file_refuses_writes_and_truncation() {
        let slots = FileSlots::new(1);
        let f = BodyFile::create(&chunks(), 70_008, &slots, &FileHome::Memory)
            .unwrap()
            .unwrap();
        assert!((&*f.file).write_all(b"changed").is_err());
        assert!(f.file.write_at(b"changed", 0).is_err());
        assert!(f.file.set_len(1).is_err());
        assert!(f.file.set_len(1 << 20).is_err());
        assert_eq!(&f.read_all().unwrap()[..7], b"hello, ");
    }

    #[test]
    fn wrong_length_is_an_error_and_frees_the_slot() {
        let slots = FileSlots::new(1);
        assert!(BodyFile::create(&chunks(), 5, &slots, &FileHome::Memory).is_err());
        assert_eq!(slots.in_use(), 0);
    }

    #[test]
    fn no_free_slot_means_no_file() {
        let slots = FileSlots::new(1);
        let c = chunks();
        let first = BodyFile::create(&c, 70_008, &slots, &FileHome::Memory).unwrap();
        assert!(first.is_some());
        assert!(BodyFile::create(&c, 70_008, &slots, &FileHome::Memory)
            .unwrap()
            .is_none());
        drop(first);
        assert!(BodyFile::create(&c, 70_008, &slots, &FileHome::Memory)
            .unwrap()
            .is_some());
    }
}
