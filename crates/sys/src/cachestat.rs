//! `cachestat(2)` (Linux 6.5): how many pages of a file range are in the page cache.
//!
//! Why: the disk tier must know whether a record can be read without waiting for the
//! device before a worker thread reads it (or `sendfile`s it). The only probe without
//! `unsafe` is a `preadv2(RWF_NOWAIT)`, and on a miss it starts reading the pages it asked
//! about (readahead) before it fails: every cold lookup then submitted its own device
//! request from the worker thread (a quarter of a worker's time on cold 4 KiB hits,
//! bench/RESULTS.md 2026-11-27). `cachestat` only counts (~0.4 µs here).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The system call's number: 451 wherever the unified table is used (alpha and MIPS
/// number it otherwise: there, this answers `Unsupported`).
const SYS_CACHESTAT: Option<libc::c_long> = if cfg!(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x",
    target_arch = "powerpc64",
    target_arch = "powerpc",
)) {
    Some(451)
} else {
    None
};

#[repr(C)]
struct Range {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Stat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Whether every page holding bytes `at..at + len` of `file` is in the page cache (present:
/// a page still being read in counts). `Err` where the kernel lacks `cachestat` (`ENOSYS`,
/// before 6.5) or refuses the file.
pub fn all_cached(file: &File, at: u64, len: u64) -> io::Result<bool> {
    let Some(nr) = SYS_CACHESTAT else {
        return Err(io::ErrorKind::Unsupported.into());
    };
    if len == 0 {
        return Ok(true);
    }
    let page = rustix::param::page_size() as u64;
    let pages = (at + len - 1) / page - at / page + 1;
    let range = Range { off: at, len };
    let mut stat = Stat::default();
    #[allow(unsafe_code)]
    // SAFETY: `cachestat(fd, range, stat, flags)` reads one `struct cachestat_range` (two
    // u64s, `Range` is `repr(C)` with that layout) and writes one `struct cachestat` (five
    // u64s, `Stat`), both live on this stack frame for the whole call; the descriptor is
    // borrowed from `file`, open for the call; flags must be 0. It touches no other memory.
    let rc = unsafe {
        libc::syscall(
            nr,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Stat,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.nr_cache >= pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn counts_cached_pages_without_reading_them() {
        let dir = tempfile::tempdir_in("/var/tmp")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        let cached = match all_cached(&f, 5_000, 9_000) {
            Ok(c) => c,
            // Before 6.5, or filtered (seccomp): nothing to check here.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => return,
            Err(e) => panic!("{e}"),
        };
        // Just written: in the page cache (dirty or written back, still there).
        assert!(cached);
        assert!(all_cached(&f, 0, 0).unwrap());
        // Dropped from the cache, the range is not, and asking does not bring it in.
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        if !all_cached(&f, 5_000, 9_000).unwrap() {
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(
                !all_cached(&f, 5_000, 9_000).unwrap(),
                "asking read nothing"
            );
        }
    }
}
