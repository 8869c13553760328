//! Binary upgrade without dropping a connection, the way nginx's SIGUSR2 and Pingora's
//! upgrade do: the running process hands its listening sockets to a new binary, which serves
//! on them, and then stops accepting, finishes what it has in flight and exits.
//!
//! ```text
//! sepia upgrade -c FILE      validates FILE with the new binary, then SIGUSR2 to the pid file's process
//!   old: SIGUSR2  ─▶ spawns  <the path it was started from> --takeover <its own arguments>
//!                    stdin = one end of a SOCK_SEQPACKET pair (wire.rs)
//!   old ─▶ new:   its listening sockets (SCM_RIGHTS) and the address each serves
//!   new:          loads its configuration, binds with the passed sockets (fresh ones for new
//!                 addresses; passed ones its configuration lacks are closed), accepts
//!   new ─▶ old:   "ready PID"; new writes the pid file, tells systemd MAINPID= and READY=1
//!   old:          stops accepting, drains as on SIGTERM (no STOPPING=1), checkpoints its
//!                 disks and exits; new takes their locks then (disk/lock.rs in sepia-store)
//! ```
//!
//! Why the old process starts the new one (rather than a new one started by hand fetching
//! the sockets): the new binary runs with the old one's environment, working directory and
//! command line, under the same service (a child of the main process, where systemd's
//! `NotifyAccess=all` lets it announce itself), and the old process knows at once whether it
//! took over. If the new binary cannot start, its configuration is invalid, a socket cannot
//! be bound, or it is not ready within `READY_TIMEOUT`, the old process logs why (the new
//! one's own messages go to the same stderr), stops it if it still runs, and keeps serving.
//! Until `ready`, only the old process accepts; from `ready` until the old one's accept loops
//! end, both do, on the same sockets, so no connection waits in a queue nobody reads.

mod takeover;
mod wire;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
use sepia_config::Config;
use sepia_proxy::{PassedSocket, Reloader};
use tokio::sync::oneshot;

pub use takeover::Takeover;

/// The hidden flag the new process is started with: its sockets come on its stdin.
pub const TAKEOVER_FLAG: &str = "--takeover";
/// How long the new process has to answer `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `sepia upgrade` waits for the outcome.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// What the running process needs to start its successor, captured at start.
pub struct Upgrader {
    /// The path this binary was started from (read at start: once a package replaces the
    /// file, `/proc/self/exe` names the deleted old one).
    exe: Option<PathBuf>,
    /// This process's arguments, without the program name and without `--takeover`.
    args: Vec<OsString>,
    pid_file: Option<PathBuf>,
    /// Fired with the new process's pid once it took over: the old one then drains.
    handed_over: Option<oneshot::Sender<u32>>,
}

impl Upgrader {
    /// The upgrader of this process and the receiver that fires when it handed over.
    pub fn at_start(pid_file: Option<PathBuf>) -> (Upgrader, oneshot::Receiver<u32>) {
        let (tx, rx) = oneshot::channel();
        let args = std::env::args_os()
            .skip(1)
            .filter(|a| a != TAKEOVER_FLAG)
            .collect();
        let upgrader = Upgrader {
            exe: std::env::current_exe().ok(),
            args,
            pid_file,
            handed_over: Some(tx),
        };
        (upgrader, rx)
    }

    /// SIGUSR2: starts the new binary and hands it the sockets; on failure, logs why and
    /// keeps serving.
    pub async fn upgrade(&mut self, reloader: &Reloader) {
        if self.handed_over.is_none() {
            return tracing::warn!("SIGUSR2: already handed over to a new process; draining");
        }
        let Some(exe) = self.exe.clone() else {
            return self.failed("the path of this binary is unknown".into());
        };
        tracing::info!("SIGUSR2: upgrading: starting {}", exe.display());
        crate::notify::status(&format!("upgrading: starting {}", exe.display()));
        let sockets = match reloader.sockets().await {
            Ok(s) => s,
            Err(e) => return self.failed(format!("cannot duplicate the listening sockets: {e}")),
        };
        let args = self.args.clone();
        let outcome = tokio::task::spawn_blocking(move || hand_over(&exe, &args, sockets)).await;
        match outcome.unwrap_or_else(|e| Err(format!("the upgrade task failed: {e}"))) {
            Err(why) => self.failed(why),
            Ok(pid) => {
                tracing::info!("upgrade: process {pid} took over; no new connections here, finishing in-flight requests");
                record_outcome(self.pid_file.as_deref(), &format!("ok {pid}"));
                crate::notify::main_pid(pid);
                if let Some(tx) = self.handed_over.take() {
                    let _ = tx.send(pid);
                }
            }
        }
    }

    fn failed(&self, why: String) {
        tracing::error!("upgrade failed, this process keeps serving: {why}");
        record_outcome(self.pid_file.as_deref(), &format!("failed: {why}"));
        crate::notify::status(&format!("serving; upgrade failed: {why}"));
    }
}

/// Starts `exe --takeover ARGS`, sends it `sockets`, waits for `ready`: its pid, or why not.
fn hand_over(exe: &Path, args: &[OsString], sockets: Vec<PassedSocket>) -> Result<u32, String> {
    let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("socket pair: {e}"))?;
    let mut child = Command::new(exe)
        .arg(TAKEOVER_FLAG)
        .args(args)
        .stdin(Stdio::from(theirs))
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let sent = wire::send_sockets(&ours, &sockets);
    // Our duplicates: the server keeps its own copies until it stops.
    drop(sockets);
    let ready = sent.and_then(|()| wire::receive_ready(&ours, READY_TIMEOUT));
    let id = child.id();
    match ready {
        Ok(pid) if pid == id => Ok(pid),
        Ok(pid) => Err(stop(
            &mut child,
            format!("process {id} answered as process {pid}"),
        )),
        Err(e) => Err(stop(&mut child, format!("the new process: {e}"))),
    }
}

/// Stops a new process that did not take over (if it still runs) and says how it ended.
fn stop(child: &mut Child, why: String) -> String {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return format!("{why} ({status}; its messages are above)"),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return format!("{why}; stopped it");
            }
        }
    }
}

/// `<pid_file>.upgrade`: the last upgrade's outcome (`ok PID` or `failed: why`), which
/// `sepia upgrade` reports.
fn outcome_file(pid_file: &Path) -> PathBuf {
    let mut name = pid_file.as_os_str().to_owned();
    name.push(".upgrade");
    PathBuf::from(name)
}

fn record_outcome(pid_file: Option<&Path>, line: &str) {
    if let Some(pid_file) = pid_file {
        if let Err(e) = std::fs::write(outcome_file(pid_file), format!("{line}\n")) {
            tracing::warn!("cannot record the upgrade's outcome: {e}");
        }
    }
}

/// `sepia upgrade -c FILE` (FILE already validated by this, the new, binary): SIGUSR2 to the
/// pid file's process, then waits until a new process took over or the old one says why not.
pub fn signal_upgrade(config: &Config) -> ExitCode {
    let Some(pid_file) = &config.server.pid_file else {
        eprintln!(
            "sepia: upgrade needs [server] pid_file in the configuration, to find the process \
             (or send SIGUSR2 to it yourself)"
        );
        return ExitCode::from(2);
    };
    let Some(old) = crate::reload::running_pid(config) else {
        eprintln!(
            "sepia: no running Sepia found through {}",
            pid_file.display()
        );
        return ExitCode::from(1);
    };
    let outcome = outcome_file(pid_file);
    let _ = std::fs::remove_file(&outcome);
    let pid = nix::unistd::Pid::from_raw(old);
    if let Err(e) = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR2) {
        eprintln!("sepia: cannot signal process {old}: {e}");
        return ExitCode::from(1);
    }
    println!("sepia: asked process {old} to hand over to a new process");
    let deadline = Instant::now() + CLI_TIMEOUT;
    while Instant::now() < deadline {
        let said = std::fs::read_to_string(&outcome).unwrap_or_default();
        if let Some(why) = said.trim().strip_prefix("failed: ") {
            eprintln!("sepia: upgrade failed, process {old} keeps serving: {why}");
            return ExitCode::from(1);
        }
        match crate::reload::running_pid(config) {
            Some(new) if new != old && said.starts_with("ok") => {
                println!(
                    "sepia: process {new} took over; process {old} finishes its requests and exits"
                );
                return ExitCode::SUCCESS;
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    eprintln!(
        "sepia: no outcome from process {old} within {} s: see its log",
        CLI_TIMEOUT.as_secs()
    );
    ExitCode::from(1)
}
