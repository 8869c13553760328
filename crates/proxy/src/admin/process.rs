//! What the process costs, read from /proc at scrape time.

/// CPU, memory and descriptors of this process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Process {
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
}

/// Clock ticks per second of /proc/PID/stat (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

impl Process {
    pub fn read() -> Process {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name, which is in parentheses and may hold spaces.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let cpu_seconds = (ticks(11) + ticks(12)) as f64 / TICKS;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        let max_fds = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(0, |(soft, _)| soft);
        Process {
            cpu_seconds,
            rss_bytes: rss_kib * 1024,
            open_fds,
            max_fds,
        }
    }
}
