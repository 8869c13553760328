//! Running the real `sepia` binary: locate it, start it with a configuration file or the
//! quick-start command line, wait until it listens, read its output, and stop it on drop.

use std::ffi::OsString;
use std::fs::File;
use std::net::SocketAddr;
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
    ///
    /// Should that port have been taken between [`crate::free_addr`] and the bind (another
    /// test's socket), the start is retried on a fresh port: tests use [`Sepia::addr`].
    pub fn start(config_toml: &str) -> Sepia {
        Sepia::start_with_env(config_toml, &[])
    }

    /// [`Sepia::start`] with extra environment variables for the process (e.g. `TZ`).
    pub fn start_with_env(config_toml: &str, env: &[(&str, &str)]) -> Sepia {
        let addr = listen_address_in(config_toml)
            .unwrap_or_else(|| panic!("no `address = \"...\"` line in config:\n{config_toml}"));
        let mut config_toml = config_toml.to_string();
        let mut addr = addr;
        for attempt in 1.. {
            let dir = TempDir::new().expect("create temp dir");
            let config = dir.path().join("sepia.toml");
            std::fs::write(&config, &config_toml).expect("write config");
            let args = vec!["--config".into(), config.into_os_string()];
            match Self::spawn(args, dir, addr, env, None) {
                Ok(sepia) => return sepia,
                Err(failed) if attempt < 3 && failed.port_taken() => {
                    let fresh: SocketAddr = crate::free_addr().parse().expect("free address");
                    config_toml = config_toml.replace(&addr.to_string(), &fresh.to_string());
                    addr = fresh;
                }
                Err(failed) => failed.fail(),
            }
        }
        unreachable!("the loop returns or panics")
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
        Self::spawn(
            args.iter().map(OsString::from).collect(),
            dir,
            addr,
            &[],
            None,
        )
        .unwrap_or_else(|failed| failed.fail())
    }

    /// Runs `sepia` with no arguments (the built-in default) and waits for `addr`.
    pub fn start_default(addr: SocketAddr) -> Sepia {
        let dir = TempDir::new().expect("create temp dir");
        Self::spawn(Vec::new(), dir, addr, &[], None).unwrap_or_else(|failed| failed.fail())
    }

    /// Like [`Sepia::start`], inside network namespace `netns` (`ip netns exec NETNS sepia
    /// --config FILE`; needs root). No port retry: a fresh namespace has every port free.
    pub fn start_in_netns(netns: &str, config_toml: &str) -> Sepia {
        let addr = listen_address_in(config_toml)
            .unwrap_or_else(|| panic!("no `address = \"...\"` line in config:\n{config_toml}"));
        let dir = TempDir::new().expect("create temp dir");
        let config = dir.path().join("sepia.toml");
        std::fs::write(&config, config_toml).expect("write config");
        let args = vec!["--config".into(), config.into_os_string()];
        Self::spawn(args, dir, addr, &[], Some(netns)).unwrap_or_else(|failed| failed.fail())
    }

    fn spawn(
        args: Vec<OsString>,
        dir: TempDir,
        addr: SocketAddr,
        env: &[(&str, &str)],
        netns: Option<&str>,
    ) -> Result<Sepia, FailedStart> {
        let stdout = File::create(dir.path().join("stdout")).expect("create stdout file");
        let stderr = File::create(dir.path().join("stderr")).expect("create stderr file");
        let mut command = match netns {
            // `ip netns exec` execs the program in place: the child's pid stays the binary's.
            Some(netns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", netns]).arg(sepia_bin());
                c
            }
            None => Command::new(sepia_bin()),
        };
        let child = command
            .args(&args)
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", sepia_bin().display()));
        let mut sepia = Sepia { child, dir, addr };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = sepia.child.try_wait() {
                return Err(FailedStart {
                    why: format!(
                        "sepia {args:?} exited ({status}) before listening on {addr}\nstderr:\n{}\nstdout:\n{}",
                        sepia.stderr(),
                        sepia.stdout()
                    ),
                });
            }
            // Owning the listening socket, not merely "something accepts on the port": that
            // could be another test's socket that took the port first.
            if listens_on(sepia.child.id(), addr.port()) {
                return Ok(sepia);
            }
            if Instant::now() >= deadline {
                return Err(FailedStart {
                    why: format!(
                        "sepia {args:?} not listening on {addr} after {START_TIMEOUT:?}\nstderr:\n{}",
                        sepia.stderr()
                    ),
                });
            }
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

    /// Sends a signal by name (`"USR1"`, `"HUP"`, …) without waiting for its effect.
    pub fn send_signal(&self, name: &str) {
        signal(self.child.id(), name);
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

    /// The process's peak resident set size in KiB (`VmHWM` in /proc/PID/status, Linux).
    pub fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.child.id(), "VmHWM:")
    }

    /// The process's current resident set size in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.child.id(), "VmRSS:")
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Whether process `pid` holds a socket listening on TCP `port` (Linux /proc: the socket
/// inodes of listeners in /proc/PID/net/tcp{,6}, the tables of the process's own network
/// namespace, against the process's open descriptors).
fn listens_on(pid: u32, port: u16) -> bool {
    let listeners: Vec<String> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|table| listening_inodes(&table, port))
        .collect();
    if listeners.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .any(|inode| listeners.contains(&inode))
}

/// Inodes of the sockets in a /proc/net/tcp table listening (state 0A) on `port`.
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    let port_hex = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            (local.ends_with(&port_hex) && *state == "0A").then(|| inode.to_string())
        })
        .collect()
}

/// Why a start failed (the process is killed when the half-built [`Sepia`] is dropped).
struct FailedStart {
    why: String,
}

impl FailedStart {
    /// Whether the listen port was taken ("Address already in use").
    fn port_taken(&self) -> bool {
        self.why.to_ascii_lowercase().contains("in use")
    }

    fn fail(self) -> ! {
        panic!("{}", self.why)
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

/// A `kB` field of /proc/PID/status; panics when it cannot be read (the process is gone).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
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
    fn proc_status_fields_of_this_process() {
        let pid = std::process::id();
        // Read in this order, the peak cannot be below the current size read after it.
        let now = proc_status_kib(pid, "VmRSS:");
        let peak = proc_status_kib(pid, "VmHWM:");
        assert!(now > 0 && peak >= now, "peak {peak} now {now}");
    }

    #[test]
    fn listening_inodes_from_a_proc_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:0C38 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0";
        assert_eq!(listening_inodes(table, 3128), vec!["111".to_string()]);
        assert_eq!(listening_inodes(table, 8080), vec!["333".to_string()]);
        assert!(listening_inodes(table, 80).is_empty());
    }

    #[test]
    fn this_process_is_seen_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens_on(std::process::id(), port));
        drop(listener);
        assert!(!listens_on(std::process::id(), port));
    }

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 10), "ab");
        assert_eq!(tail("aé", 1), "");
    }
}
