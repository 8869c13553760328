//! Running the real `sepia` binary: locate it, start it with a configuration file or the
//! quick-start command line, wait until it listens, read its output, and stop it on drop.

use std::ffi::OsString;
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long the binary gets to start listening before the test gives up.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long SIGTERM gets before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// The binary under test: `$SEPIA_BIN` if set, else `<workspace>/target/debug/sepia`.
pub fn sepia_bin() -> PathBuf {
    let path = match std::env::var_os("SEPIA_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/sepia"),
    };
    assert!(
        path.is_file(),
        "sepia binary not found at {}: build it first: cargo build -p sepia (or set SEPIA_BIN)",
        path.display()
    );
    path
}

/// A running `sepia` process with its own temporary directory (config, stdout, stderr).
pub struct Sepia {
    child: Child,
    dir: TempDir,
    addr: SocketAddr,
}

impl Sepia {
    /// Writes `config_toml` to a file and runs `sepia --config FILE`. The address to wait for
    /// is the first `address = "..."` line of the config (the first `[[listen]]`).
    pub fn start(config_toml: &str) -> Sepia {
        let addr = listen_address_in(config_toml)
            .unwrap_or_else(|| panic!("no `address = \"...\"` line in config:\n{config_toml}"));
        let dir = TempDir::new().expect("create temp dir");
        let config = dir.path().join("sepia.toml");
        std::fs::write(&config, config_toml).expect("write config");
        Self::spawn(vec!["--config".into(), config.into_os_string()], dir, addr)
    }

    /// Runs `sepia ARGS...` (the quick-start CLI, e.g. `reverse --listen A --origin URL`); the
    /// address to wait for is the value after `--listen`.
    pub fn start_args(args: &[&str]) -> Sepia {
        let listen = args
            .iter()
            .position(|a| *a == "--listen")
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("no --listen ADDR in {args:?}"));
        let addr = listen
            .parse()
            .unwrap_or_else(|e| panic!("bad --listen {listen}: {e}"));
        let dir = TempDir::new().expect("create temp dir");
        Self::spawn(args.iter().map(OsString::from).collect(), dir, addr)
    }

    /// Runs `sepia` with no arguments (the built-in default) and waits for `addr`.
    pub fn start_default(addr: SocketAddr) -> Sepia {
        let dir = TempDir::new().expect("create temp dir");
        Self::spawn(Vec::new(), dir, addr)
    }

    fn spawn(args: Vec<OsString>, dir: TempDir, addr: SocketAddr) -> Sepia {
        let stdout = File::create(dir.path().join("stdout")).expect("create stdout file");
        let stderr = File::create(dir.path().join("stderr")).expect("create stderr file");
        let child = Command::new(sepia_bin())
            .args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", sepia_bin().display()));
        let mut sepia = Sepia { child, dir, addr };
        sepia.wait_listening(&args);
        sepia
    }

    fn wait_listening(&mut self, args: &[OsString]) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "sepia {args:?} exited ({status}) before listening on {}\nstderr:\n{}\nstdout:\n{}",
                    self.addr,
                    self.stderr(),
                    self.stdout()
                );
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sepia {args:?} not listening on {} after {START_TIMEOUT:?}\nstderr:\n{}",
                self.addr,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, for curl in reverse mode or as a forward proxy (`-x`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temporary directory holding the config and the captured output.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything the process wrote to stdout so far (the access log by default).
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stdout")).unwrap_or_default()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Non-empty stdout lines so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.stdout()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Waits (up to `timeout`) until stdout holds at least `n` lines and returns them; panics
    /// showing the output if it never does. The access log is written in batches, so a line
    /// may appear some time after its response.
    pub fn wait_for_log_lines(&self, n: usize, timeout: Duration) -> Vec<String> {
        let reached = crate::wait_until(timeout, || self.log_lines().len() >= n);
        assert!(
            reached,
            "expected {n} access-log lines on stdout within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
        self.log_lines()
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Sends a signal with the `kill` command (the harness is `unsafe`-free, so no libc::kill).
fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl Drop for Sepia {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- sepia on {} stderr (tail) ----\n{}\n---- stdout (tail) ----\n{}",
                self.addr,
                tail(&self.stderr(), 4000),
                tail(&self.stdout(), 4000)
            );
        }
        if self.terminate(STOP_TIMEOUT).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first `address = "..."` value in a config, as a socket address.
fn listen_address_in(config: &str) -> Option<SocketAddr> {
    config.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        if key.trim() != "address" {
            return None;
        }
        value.trim().trim_matches('"').parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_address_is_found_in_config() {
        let cases = [
            (
                "[[listen]]\naddress = \"127.0.0.1:3128\"\n",
                Some("127.0.0.1:3128"),
            ),
            ("address=\"[::1]:80\"", Some("[::1]:80")),
            ("[server]\nworkers = 1\n", None),
        ];
        for (config, want) in cases {
            let want = want.map(|a| a.parse::<SocketAddr>().unwrap());
            assert_eq!(listen_address_in(config), want, "{config}");
        }
    }

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 10), "ab");
        assert_eq!(tail("aé", 1), "");
    }
}
