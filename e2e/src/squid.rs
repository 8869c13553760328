//! A real Squid (Debian's `squid` package) started for one test in its own directory, on a
//! given address, stopped on drop: for tests that compare Sepia with Squid.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::wait_until;

const LOG_WAIT: Duration = Duration::from_secs(10);
const START_WAIT: Duration = Duration::from_secs(30);

/// A running `squid -N`; its native access log is `access.log` in its directory.
pub struct Squid {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
}

impl Squid {
    /// `$SQUID_BIN`, else Squid where Debian and source builds put it.
    pub fn binary() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("SQUID_BIN") {
            return Some(PathBuf::from(p));
        }
        ["/usr/sbin/squid", "/usr/local/sbin/squid", "/usr/bin/squid"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    }

    /// Starts `bin -N -f CONF` where CONF is `site` (which must listen on `addr`) plus what
    /// keeps Squid inside its temporary directory: PID file, cache.log, the native access log
    /// (unless `site` has an `access_log`), core dumps, no pinger, an immediate shutdown.
    /// Ready when cache.log says it accepts connections.
    pub fn start(bin: &Path, addr: SocketAddr, site: &str) -> Result<Squid, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        // Run as root, Squid drops to `cache_effective_user` (Debian: proxy) before it opens
        // its logs; that user must be able to write here.
        let _ = Command::new("chmod").arg("0777").arg(dir.path()).status();
        let d = dir.path().display();
        let log = if site.contains("\naccess_log ") || site.starts_with("access_log ") {
            String::new()
        } else {
            format!("access_log stdio:{d}/access.log squid\n")
        };
        let conf = format!(
            "pid_filename {d}/squid.pid\n\
             cache_log {d}/cache.log\n\
             {log}\
             coredump_dir {d}\n\
             shutdown_lifetime 0 seconds\n\
             pinger_enable off\n\
             {site}"
        );
        let conf_path = dir.path().join("squid.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("-N")
            .arg("-f")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let mut squid = Squid { child, dir, addr };
        // Ready when it says so in cache.log ("Accepting HTTP Socket connections at …", or
        // "Accepting reverse-proxy HTTP Socket …" for accel ports; a probe connection would be
        // logged too:
        // Squid 5 logs a connection closed before a request as
        // `NONE_NONE/000 0 - error:transaction-end-before-headers`).
        let up = wait_until(START_WAIT, || {
            squid
                .read("cache.log")
                .contains("HTTP Socket connections at")
                || !matches!(squid.child.try_wait(), Ok(None))
        });
        if !up || !matches!(squid.child.try_wait(), Ok(None)) {
            return Err(format!(
                "squid did not start on {addr}: {}\n{}",
                squid.read("stderr"),
                squid.read("cache.log")
            ));
        }
        Ok(squid)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A file of its directory (`cache.log`, `access.log`, `stderr`), empty when missing.
    pub fn read(&self, name: &str) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join(name)) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// The access log once it has at least `n` lines (panics after 10 s).
    pub fn wait_for_log_lines(&self, n: usize) -> Vec<String> {
        let lines =
            || -> Vec<String> { self.read("access.log").lines().map(String::from).collect() };
        assert!(
            wait_until(LOG_WAIT, || lines().len() >= n),
            "squid logged {:?}, expected {n} lines\n{}",
            lines(),
            self.read("cache.log")
        );
        lines()
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        // SIGTERM with shutdown_lifetime 0 exits at once; SIGKILL if it does not.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        if !wait_until(Duration::from_secs(5), || {
            !matches!(self.child.try_wait(), Ok(None))
        }) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
