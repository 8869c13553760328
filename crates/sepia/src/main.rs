//! `sepia`: the command line. Loads a configuration (a file, a quick-start, or the built-in
//! default), builds the runtime, serves until SIGTERM/SIGINT, then drains. SIGUSR1 reopens
//! the access log file (log rotation), SIGHUP reloads the configuration file (`reload.rs`),
//! SIGUSR2 hands the listening sockets to a new binary and drains (`upgrade`).
//! Under systemd (`Type=notify`) it reports readiness and
//! shutdown through `$NOTIFY_SOCKET` (see `notify`).

mod descriptors;
mod generate;
mod import_squid;
mod notify;
mod reload;
mod upgrade;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use sepia_config::{Config, EventLogFormat, ListenerTls, QuickCache};
use sepia_proxy::Server;

/// Sepia, a caching HTTP proxy. With no arguments it runs the built-in default: a forward
/// proxy on 127.0.0.1:3128 that serves loopback and private-network clients only.
#[derive(Parser)]
#[command(name = "sepia", version = VERSION, about, after_long_help = generate::help_notes())]
struct Cli {
    /// Configuration file (TOML). See the README for every key.
    #[arg(long, short = 'c', value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Sepia's own event log on stderr as text lines or JSON lines (overrides
    /// server.log_format).
    #[arg(long, value_name = "FORMAT", global = true)]
    log_format: Option<LogFormatArg>,
    /// Started by a running Sepia to replace it (SIGUSR2): its listening sockets come on
    /// stdin. Not for use by hand.
    #[arg(long, hide = true, global = true)]
    takeover: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate the configuration file and exit (0 when valid). With a running Sepia found
    /// through `[server] pid_file`, also print what a reload would change.
    Check,
    /// Validate the configuration file, then ask the running Sepia (`[server] pid_file`) to
    /// reload it (SIGHUP). An invalid file is reported and nothing is signalled.
    Reload,
    /// Replace the running Sepia (`[server] pid_file`) by the binary installed at the path it
    /// was started from, without dropping a connection: validates the configuration file
    /// with this binary, sends SIGUSR2 (the running process starts the new binary and hands
    /// it its listening sockets, then finishes its requests and exits) and reports the
    /// outcome. On failure the running process keeps serving.
    Upgrade,
    /// Quick start: an accelerator in front of one or more origins.
    Reverse {
        /// Address to listen on, e.g. 0.0.0.0:80 or [::]:8080.
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// Origin server URL, e.g. http://127.0.0.1:8080 (repeat for a round-robin pool).
        #[arg(long, value_name = "URL", required = true)]
        origin: Vec<String>,
        /// Worker threads (default: number of CPU cores).
        #[arg(long)]
        workers: Option<usize>,
        #[command(flatten)]
        tls: TlsArgs,
        #[command(flatten)]
        cache: CacheArgs,
        /// Admin listener (metrics, stats, dashboard, purge), e.g. 127.0.0.1:9090.
        #[arg(long, value_name = "ADDR")]
        admin: Option<String>,
    },
    /// Quick start: a forward proxy for loopback and private-network clients.
    Forward {
        /// Address to listen on, e.g. 127.0.0.1:3128.
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// Worker threads (default: number of CPU cores).
        #[arg(long)]
        workers: Option<usize>,
        #[command(flatten)]
        tls: TlsArgs,
        #[command(flatten)]
        cache: CacheArgs,
        /// Admin listener (metrics, stats, dashboard, purge), e.g. 127.0.0.1:9090.
        #[arg(long, value_name = "ADDR")]
        admin: Option<String>,
    },
    /// Translate a squid.conf into a Sepia configuration (TOML), with a comment for each
    /// directive that could not be translated and why.
    ImportSquid {
        /// The squid.conf to read ("-" for stdin).
        #[arg(value_name = "SQUID_CONF")]
        squid_conf: PathBuf,
        /// Write the configuration to FILE instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Write the manual pages or a shell's completion script, made from this command line's
    /// definition (for packagers).
    #[command(subcommand)]
    Generate(Generate),
}

#[derive(Subcommand)]
enum Generate {
    /// Write sepia.1 and one page per subcommand (sepia-reverse.1, ...) into DIR.
    Man {
        /// Directory to write the pages into (made if missing), e.g. /usr/share/man/man1.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print the completion script for SHELL on stdout.
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

/// `--log-format`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

/// `sepia --version`: the version and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SEPIA_COMMIT"),
    ")"
);

/// `--cache-memory SIZE --cache-dir PATH --cache-dir-size SIZE`: the quick starts' cache.
#[derive(clap::Args)]
struct CacheArgs {
    /// Memory cache budget, e.g. 512MiB or 2GiB (default 256MiB).
    #[arg(long, value_name = "SIZE")]
    cache_memory: Option<String>,
    /// Directory of a persistent disk cache under the memory cache (made if missing).
    #[arg(long, value_name = "PATH")]
    cache_dir: Option<PathBuf>,
    /// Bytes the disk cache may use, e.g. 10GiB (default 1GiB); needs --cache-dir.
    #[arg(long, value_name = "SIZE", requires = "cache_dir")]
    cache_dir_size: Option<String>,
}

impl CacheArgs {
    fn quick(&self) -> QuickCache {
        QuickCache {
            memory: self.cache_memory.clone(),
            dir: self.cache_dir.clone(),
            dir_size: self.cache_dir_size.clone(),
        }
    }
}

/// `--tls-cert FILE --tls-key FILE`: the quick starts' listener serves TLS (ALPN h2 and
/// http/1.1) with this certificate for every server name.
#[derive(clap::Args)]
struct TlsArgs {
    /// PEM certificate (chain) to serve TLS with; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl TlsArgs {
    fn listener_tls(&self) -> Option<ListenerTls> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(ListenerTls::quick(cert.clone(), key.clone())),
            _ => None,
        }
    }
}

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Starts jemalloc's background purging thread (why it runs: .cargo/config.toml). It is not
/// in the compiled-in options because jemalloc would start it at its first allocation,
/// before `main`, and the descriptor table must be sized while the process has one thread
/// (`descriptors::reserve_table`). `_RJEM_MALLOC_CONF=background_thread:false` still turns
/// it off.
fn start_allocator_thread() {
    let wanted = std::env::var("_RJEM_MALLOC_CONF")
        .map_or(true, |conf| !conf.contains("background_thread:false"));
    if wanted {
        if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
            tracing::warn!("could not start the allocator's background thread: {e}");
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::ImportSquid { squid_conf, output }) => {
            return import_squid::run(squid_conf, output.as_deref());
        }
        Some(Command::Generate(Generate::Man { dir })) => {
            return generate::man(Cli::command(), dir);
        }
        Some(Command::Generate(Generate::Completions { shell })) => {
            return generate::completions(Cli::command(), *shell);
        }
        _ => {}
    }
    let config = match load_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sepia: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = Server::check(&config) {
        eprintln!("sepia: {e}");
        return ExitCode::from(2);
    }
    if let (Some(Command::Check), Some(path)) = (&cli.command, &cli.config) {
        println!("sepia: {} is valid", path.display());
        reload::print_changes(&config);
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Reload) = &cli.command {
        return reload::signal_reload(&config);
    }
    if let Some(Command::Upgrade) = &cli.command {
        return upgrade::signal_upgrade(&config);
    }
    let format = match cli.log_format {
        Some(LogFormatArg::Text) => EventLogFormat::Text,
        Some(LogFormatArg::Json) => EventLogFormat::Json,
        None => config.server.log_format,
    };
    init_tracing(format, config.server.log_level.as_str());
    // SIGHUP re-reads the file Sepia was started with (none for a quick start or the default).
    let file = cli.config.filter(|_| cli.command.is_none());
    let takeover = match cli.takeover.then(upgrade::Takeover::from_stdin).transpose() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("{}: {e}", upgrade::TAKEOVER_FLAG);
            return ExitCode::from(2);
        }
    };
    match run(config, file, takeover) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Through the event log, so that a JSON log stays JSON to its last line.
            tracing::error!("{e}");
            ExitCode::from(1)
        }
    }
}

/// The configuration the command line asks for: a quick start, `--config FILE`, or the
/// built-in default; the error as `sepia: …` prints it.
fn load_config(cli: &Cli) -> Result<Config, String> {
    let loaded = match (&cli.command, &cli.config) {
        (Some(Command::Check), None) => return Err("check needs --config FILE".to_string()),
        (Some(Command::Upgrade), None) => {
            return Err("upgrade needs --config FILE (to find the running process and validate what the new binary will load)".to_string())
        }
        (
            Some(Command::Reverse {
                listen,
                origin,
                workers,
                tls,
                cache,
                admin,
            }),
            _,
        ) => Config::quick_reverse(listen, origin, *workers, tls.listener_tls())
            .and_then(|c| c.with_quick_cache(&cache.quick()))
            .and_then(|c| c.with_quick_admin(admin.as_deref())),
        (
            Some(Command::Forward {
                listen,
                workers,
                tls,
                cache,
                admin,
            }),
            _,
        ) => Config::quick_forward(listen, *workers, tls.listener_tls())
            .and_then(|c| c.with_quick_cache(&cache.quick()))
            .and_then(|c| c.with_quick_admin(admin.as_deref())),
        (_, Some(path)) => Config::from_file(path),
        (_, None) => Ok(Config::builtin_default()),
    };
    loaded.map_err(|e| e.to_string())
}

/// Sepia's own event log on stderr: `SEPIA_LOG` (a `tracing` filter such as `debug` or
/// `sepia_proxy=trace`) when set, else `level`. Text lines carry colours only on a terminal
/// (journald and files get plain text); JSON lines hold one event each, its fields beside
/// `timestamp`, `level`, `target` and `message` at the top level.
fn init_tracing(format: EventLogFormat, level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEPIA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        EventLogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        EventLogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

/// The tokio scheduler for `workers` worker threads.
///
/// One worker runs tokio's current-thread scheduler: with nobody to steal work from, the
/// multi-thread scheduler's machinery is pure cost, and it shows once many connections are
/// ready at once. Its worker keeps at most 256 woken tasks in its own queue and overflows the
/// rest into a locked shared queue; at 1,000 busy keep-alive clients the current-thread
/// scheduler took 15-20 % less CPU per hit (1 KiB and 64 KiB) with half the p99, and the
/// same at 100 clients and on misses (bench/RESULTS.md, 2026-11-26).
fn runtime_builder(workers: usize) -> tokio::runtime::Builder {
    if workers <= 1 {
        return tokio::runtime::Builder::new_current_thread();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(workers)
        // Fairness across many busy connections: a worker's local run queue holds 256 tasks
        // and the rest wait in the shared queue, which tokio visits only every few dozen
        // polls. With 1,000 active keep-alive clients that split them into a served quarter
        // and a starved rest: p50 6 ms but p99 165 ms. Visiting it every second poll gave
        // p99 28-47 ms at the same CPU per request (bench/RESULTS.md, 2026-11-23).
        .global_queue_interval(2);
    builder
}

/// `file`: the configuration file SIGHUP re-reads (none for a quick start or the default);
/// `takeover`: set when this process replaces a running one (SIGUSR2 there).
fn run(
    config: Config,
    file: Option<PathBuf>,
    takeover: Option<upgrade::Takeover>,
) -> std::io::Result<()> {
    descriptors::raise_limit();
    // Before the first thread: see `descriptors::reserve_table` and `start_allocator_thread`.
    let disk_files = sepia_proxy::disk_descriptors(&config.cache);
    descriptors::reserve_table(descriptors::CONNECTION_ROOM + disk_files);
    start_allocator_thread();
    let runtime = runtime_builder(config.server.workers)
        .thread_name("sepia-worker")
        // Busy periods for the response bursts (sepia_proxy's `burst` module).
        .on_thread_park(sepia_proxy::worker_parks)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let logs = reload::Logs::open(&config)?;
        let log = logs.log.clone();
        let pid_file = config.server.pid_file.clone();
        let text = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok());
        let config = Arc::new(config);
        let shutdown = shutdown_signal()?;
        let inherited = match &takeover {
            Some(t) => t.receive()?,
            None => sepia_proxy::Inherited::default(),
        };
        let server = Server::bind_with(config.clone(), log, inherited)?;
        // Installed whatever the log target: SIGUSR1's, SIGHUP's and SIGUSR2's default
        // actions would kill the process.
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (upgrader, handed_over) = upgrade::Upgrader::at_start(pid_file.clone());
        let signals = reload::Signals {
            logs,
            path: file,
            pid_file: pid_file.clone(),
            reloader: server.reloader(),
            upgrader,
        };
        let signals = tokio::spawn(signals.handle(stopped)?);
        let addrs = server.local_addrs();
        for addr in &addrs {
            tracing::info!("listening on {addr}");
        }
        if let Some(addr) = server.admin_addr() {
            tracing::info!("admin listener on {addr}");
        }
        let status = serving_status(&addrs);
        // `run` polls this future once its accept loops are spawned: only then is Sepia ready.
        server
            .run(async move {
                reload::record_running(pid_file.as_deref(), text.as_deref());
                if let Some(takeover) = &takeover {
                    takeover.ready();
                    notify::main_pid(std::process::id());
                }
                notify::ready(&status);
                tokio::select! {
                    () = shutdown => notify::stopping("shutting down: finishing in-flight requests"),
                    // The new process is the service now: nothing to tell the service manager.
                    Ok(pid) = handed_over => tracing::info!("handed over to process {pid}"),
                }
            })
            .await;
        let _ = stop.send(());
        if let Ok(logs) = signals.await {
            // Connections still open past the grace period hold log handles; do not wait on them.
            let finish = finish_logs(logs.writers());
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), finish).await;
        }
        reload::remove_pid_file(&config);
        Ok(())
    })
}

/// Waits for every access log writer to write what it was given.
async fn finish_logs(writers: Vec<sepia_observe::AccessLogWriter>) {
    for w in writers {
        w.finish().await;
    }
}

/// The `STATUS=` line of a serving Sepia, for `systemctl status`.
fn serving_status(addrs: &[std::net::SocketAddr]) -> String {
    let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    format!("serving on {}", addrs.join(", "))
}

/// Registers the SIGTERM and SIGINT handlers now, before readiness is announced (a service
/// manager may stop Sepia the moment it is ready), and returns the future that completes on
/// the first of them.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
