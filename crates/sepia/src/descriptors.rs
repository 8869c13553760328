//! The process's descriptors: their limit, and the kernel's table that holds them, sized
//! before a second thread shares it.

use std::io;

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Room in the descriptor table beyond the disk tier's files: listeners, logs, and a few
/// thousand client and origin connections (32 KiB of kernel memory).
pub const CONNECTION_ROOM: u64 = 4096;

/// Raises the soft descriptor limit to the hard one, as a server holding thousands of
/// connections needs (Squid's `max_filedescriptors`, nginx's `worker_rlimit_nofile`); the
/// store sizes its body files from the result. A refusal only leaves the limit as it was.
pub fn raise_limit() {
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!("could not raise the descriptor limit from {soft} to {hard}: {e}");
            }
        }
    }
}

/// Grows the kernel's descriptor table to hold `fds` descriptors (at most the soft limit)
/// now, while this process still has one thread.
///
/// Why: the table starts with room for 64 and doubles when a descriptor beyond it is
/// opened. Once threads share it, each growth waits for an RCU grace period
/// (`expand_fdtable` in the kernel's fs/file.c), and every thread that opens or accepts a
/// descriptor meanwhile waits with it. A restart over a million disk objects opens ~240
/// segment files on the recovery thread while the first requests arrive: growing the
/// table 64 → 512 then stalled the first `accept4` 10-20 ms (perf: `accept4` → `alloc_fd`
/// → `expand_files` asleep, the recovery thread in `synchronize_rcu`; bench/RESULTS.md,
/// "Issue 21, fifteenth stop"). With one thread the kernel skips the wait. Connections
/// beyond the room still grow the table later, each growth once per process.
pub fn reserve_table(fds: u64) {
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    let top = fds.min(soft).saturating_sub(1);
    if let Err(e) = occupy_once(i32::try_from(top).unwrap_or(i32::MAX)) {
        tracing::debug!("could not size the descriptor table for {fds} descriptors: {e}");
    }
}

/// Opens a descriptor numbered `top` or above and closes it: the table grows to hold it.
fn occupy_once(top: i32) -> io::Result<()> {
    let probe = std::fs::File::open("/dev/null")?;
    let high = rustix::io::fcntl_dupfd_cloexec(&probe, top)?;
    drop(high);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor table's size (`FDSize`), from /proc/self/status.
    fn table_size() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("FDSize:"))?;
        line["FDSize:".len()..].trim().parse().ok()
    }

    #[test]
    fn the_table_holds_what_was_reserved() {
        // The test process has threads (the harness): the growth waits for RCU, and works.
        let before = table_size().expect("FDSize in /proc/self/status");
        let want = (before * 4).min(getrlimit(Resource::RLIMIT_NOFILE).unwrap().0);
        reserve_table(want);
        let after = table_size().expect("FDSize after");
        assert!(
            after >= want,
            "table {after} after reserving {want} (was {before})"
        );
    }
}
