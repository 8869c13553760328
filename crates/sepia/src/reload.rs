//! Reloading a running Sepia, the way `nginx -s reload` does: `[server] pid_file` names the
//! process, SIGHUP makes it re-read its configuration file. `sepia reload -c FILE` validates
//! FILE first (an invalid one is reported and nothing is signalled); `sepia check -c FILE`
//! prints what a reload would change, comparing FILE with the configuration the running
//! process last loaded, which it keeps beside its pid file (`<pid_file>.running.toml`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sepia_config::{Config, LogFormat as CfgFormat, LogTarget};
use sepia_observe::{AccessLog, AccessLogWriter, LogFormat, LogReopen, LogSink};
use sepia_proxy::Reloader;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;

use crate::upgrade::Upgrader;

/// `<pid_file>.running.toml`: the text of the configuration the process runs.
fn running_copy(pid_file: &Path) -> PathBuf {
    let mut name = pid_file.as_os_str().to_owned();
    name.push(".running.toml");
    PathBuf::from(name)
}

/// Writes the pid file and the running configuration's text beside it (at start and after
/// each successful reload). A failure is logged: serving does not depend on it.
pub fn record_running(pid_file: Option<&Path>, text: Option<&str>) {
    let Some(pid_file) = pid_file else {
        return;
    };
    let pid = format!("{}\n", std::process::id());
    if let Err(e) = std::fs::write(pid_file, pid) {
        tracing::warn!("cannot write the pid file {}: {e}", pid_file.display());
    }
    if let Some(text) = text {
        if let Err(e) = std::fs::write(running_copy(pid_file), text) {
            tracing::warn!("cannot record the running configuration: {e}");
        }
    }
}

/// Removes the pid file at exit, if it still names this process (an upgraded successor may
/// have rewritten it).
pub fn remove_pid_file(config: &Config) {
    let Some(pid_file) = &config.server.pid_file else {
        return;
    };
    if read_pid(pid_file) == Some(std::process::id() as i32) {
        let _ = std::fs::remove_file(pid_file);
        let _ = std::fs::remove_file(running_copy(pid_file));
    }
}

fn read_pid(pid_file: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    text.trim().parse().ok()
}

/// The running process of `config`'s pid file, if there is one and it is alive.
pub fn running_pid(config: &Config) -> Option<i32> {
    let pid = read_pid(config.server.pid_file.as_ref()?)?;
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    alive.then_some(pid)
}

/// `sepia reload -c FILE` (FILE already validated): signals the process of its pid file.
pub fn signal_reload(config: &Config) -> ExitCode {
    let Some(pid_file) = &config.server.pid_file else {
        eprintln!(
            "sepia: reload needs [server] pid_file in the configuration, to find the process"
        );
        return ExitCode::from(2);
    };
    let Some(pid) = running_pid(config) else {
        eprintln!(
            "sepia: no running Sepia found through {}",
            pid_file.display()
        );
        return ExitCode::from(1);
    };
    let sent = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    );
    match sent {
        Ok(()) => {
            println!("sepia: asked process {pid} to reload (see its log for the outcome)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sepia: cannot signal process {pid}: {e}");
            ExitCode::from(1)
        }
    }
}

/// `sepia check`: with a running Sepia found through the pid file, what a reload would change.
pub fn print_changes(config: &Config) {
    let Some(pid_file) = &config.server.pid_file else {
        return;
    };
    let Some(pid) = running_pid(config) else {
        return;
    };
    let copy = running_copy(pid_file);
    let running = std::fs::read_to_string(&copy)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            Config::from_toml_str(&t, &copy.display().to_string()).map_err(|e| e.to_string())
        });
    let running = match running {
        Ok(r) => r,
        Err(e) => return println!("sepia: cannot compare with running process {pid}: {e}"),
    };
    let changes = running.changes_to(config);
    if changes.is_empty() {
        return println!("sepia: a reload of process {pid} would change nothing");
    }
    println!("sepia: a reload of process {pid} would change:");
    for line in &changes.live {
        println!("  {line}");
    }
    for line in &changes.restart {
        println!("  {line}");
    }
}

/// The access log the process writes, and the writers a reload replaced (finished at exit).
pub struct Logs {
    pub log: AccessLog,
    target: LogTarget,
    format: CfgFormat,
    writer: Option<AccessLogWriter>,
    pub retired: Vec<AccessLogWriter>,
}

impl Logs {
    pub fn open(config: &Config) -> std::io::Result<Logs> {
        let (log, writer) = spawn_log(config)?;
        Ok(Logs {
            log,
            writer,
            target: config.access_log.target.clone(),
            format: config.access_log.format,
            retired: Vec::new(),
        })
    }

    /// The log for `config`: the running one when its target and format are unchanged.
    fn for_reload(&mut self, config: &Config) -> std::io::Result<AccessLog> {
        let a = &config.access_log;
        if a.target == self.target && a.format == self.format {
            return Ok(self.log.clone());
        }
        let (log, writer) = spawn_log(config)?;
        self.retired
            .extend(std::mem::replace(&mut self.writer, writer));
        self.log = log.clone();
        (self.target, self.format) = (a.target.clone(), a.format);
        Ok(log)
    }

    fn reopen(&self) -> Option<LogReopen> {
        match (&self.target, &self.writer) {
            (LogTarget::File(_), Some(w)) => Some(w.reopen_handle()),
            _ => None,
        }
    }

    /// Every writer, to finish at exit (after the log handles are dropped).
    pub fn writers(self) -> Vec<AccessLogWriter> {
        self.retired.into_iter().chain(self.writer).collect()
    }
}

fn spawn_log(config: &Config) -> std::io::Result<(AccessLog, Option<AccessLogWriter>)> {
    let format = match config.access_log.format {
        CfgFormat::Squid => LogFormat::Squid,
        CfgFormat::Combined => LogFormat::Combined,
        CfgFormat::Json => LogFormat::Json,
    };
    let sink = match &config.access_log.target {
        LogTarget::Off => return Ok((AccessLog::disabled(), None)),
        LogTarget::Stdout => LogSink::Stdout,
        LogTarget::File(p) => LogSink::File(p.clone()),
    };
    let (log, writer) = AccessLogWriter::spawn(sink.clone(), format).map_err(|e| match sink {
        LogSink::File(p) => {
            std::io::Error::new(e.kind(), format!("access log {}: {e}", p.display()))
        }
        _ => e,
    })?;
    Ok((log, Some(writer)))
}

/// What the signals of a running process act on: SIGUSR1 reopens the access log file
/// (logrotate's "rename, then signal"); SIGHUP reloads `path`; SIGUSR2 hands over to a new
/// binary (`upgrade`).
pub struct Signals {
    pub logs: Logs,
    pub path: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub reloader: Reloader,
    pub upgrader: Upgrader,
}

impl Signals {
    /// Registers the handlers before it returns, so a signal right after start-up is not
    /// fatal. The task ends when `stop` fires and gives the logs back.
    pub fn handle(
        mut self,
        stop: oneshot::Receiver<()>,
    ) -> std::io::Result<impl std::future::Future<Output = Logs>> {
        let mut usr1 = signal(SignalKind::user_defined1())?;
        let mut usr2 = signal(SignalKind::user_defined2())?;
        let mut hup = signal(SignalKind::hangup())?;
        Ok(async move {
            let mut stop = std::pin::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => return self.logs,
                    Some(()) = usr1.recv() => self.reopen(),
                    Some(()) = hup.recv() => self.reload().await,
                    Some(()) = usr2.recv() => self.upgrader.upgrade(&self.reloader).await,
                }
            }
        })
    }

    fn reopen(&self) {
        match self.logs.reopen() {
            Some(reopen) => {
                tracing::info!("SIGUSR1: reopening the access log");
                reopen.request();
            }
            None => tracing::debug!("SIGUSR1: no access log file to reopen"),
        }
    }

    async fn reload(&mut self) {
        match &self.path {
            Some(path) => {
                let pid_file = self.pid_file.as_deref();
                reload(path, pid_file, &mut self.logs, &self.reloader).await
            }
            None => tracing::warn!("SIGHUP: no configuration file to reload (a quick start)"),
        }
    }
}

/// Re-reads and applies `path`; an invalid file is logged (file:line:key) and the running
/// configuration stays.
async fn reload(path: &Path, pid_file: Option<&Path>, logs: &mut Logs, reloader: &Reloader) {
    crate::notify::reloading();
    tracing::info!("SIGHUP: reloading {}", path.display());
    let text = std::fs::read_to_string(path);
    let config = text
        .as_ref()
        .map_err(|e| format!("{}: cannot read the file: {e}", path.display()))
        .and_then(|t| {
            Config::from_toml_str(t, &path.display().to_string()).map_err(|e| e.to_string())
        })
        .and_then(|c| {
            sepia_proxy::Server::check(&c)
                .map(|()| c)
                .map_err(|e| e.to_string())
        });
    let outcome = match config {
        Err(e) => Err(e),
        Ok(config) => match logs.for_reload(&config) {
            Err(e) => Err(e.to_string()),
            Ok(log) => reloader
                .reload(config, log)
                .await
                .map_err(|e| e.to_string()),
        },
    };
    match outcome {
        Err(e) => tracing::error!("reload failed, the running configuration stays: {e}"),
        Ok(changes) => {
            for line in &changes.live {
                tracing::info!("reload: {line}");
            }
            for line in &changes.restart {
                tracing::warn!("reload: {line}");
            }
            tracing::info!("reload done: {} change(s) applied", changes.live.len());
            // The pid file is the running one: moving it needs a restart.
            record_running(pid_file, text.ok().as_deref());
        }
    }
    crate::notify::ready("serving (configuration reloaded)");
}
