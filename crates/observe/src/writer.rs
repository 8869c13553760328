//! The access log's two halves: [`AccessLog`], the cheap handle the request path logs
//! through, and [`AccessLogWriter`], the background task that formats and writes.
//!
//! The request path only moves a record into a bounded channel of [`QUEUE_CAPACITY`] records
//! (no formatting, no I/O, no lock, never a wait, and under load no wake-up either: see
//! [`BATCH_TICK`]). The task drains whatever is queued, formats it into one reused buffer and
//! writes it in chunks of up to [`WRITE_CHUNK`] bytes on tokio's blocking pool, so a slow disk
//! delays log lines, never requests. Under load that is one `write(2)` per 64 KiB of log
//! instead of one per request.
//!
//! Overload: when the output stalls (a blocked disk, a stdout pipe nobody reads) or cannot
//! keep up, the queue fills and further records are dropped, not waited for, and counted
//! ([`AccessLog::dropped`]). The writer warns about them (`tracing::warn!`, at most once per
//! [`DROP_WARNING_INTERVAL`], and once more when it stops), so memory stays bounded and the
//! loss is visible.
//!
//! Log rotation ([`LogReopen`]): logrotate renames the file, then signals the process (what
//! `squid -k rotate` is for Squid). Lines written in between go to the renamed file, which
//! the open descriptor still names. On the request the task first writes out every line it
//! has formatted, then opens the configured path anew (on the blocking pool), so each line
//! lands in exactly one of the two files and requests never wait for it.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};

use crate::format::{LineFormatter, LogFormat};
use crate::record::AccessRecord;

/// Where log lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogSink {
    /// The process's standard output.
    Stdout,
    /// A file, opened for appending and created if missing.
    File(PathBuf),
}

/// Bytes of formatted lines gathered before a write.
pub const WRITE_CHUNK: usize = 64 * 1024;

/// Records taken from the channel at a time.
const RECEIVE_BATCH: usize = 256;

/// Records the channel holds at most; a record logged while it is full is dropped and
/// counted. An [`AccessRecord`] is 320 bytes (`size_of`, x86-64), so a full queue is 20 MiB
/// of records (plus a channel block header per 32 records). Their `Bytes` slices also keep
/// alive the request-head buffers they point into (the proxy's are 2 or 8 KiB): with
/// keep-alive several heads share a buffer, a few hundred bytes per record, but records from
/// one-request connections pin a 2 KiB buffer each, about 150 MiB for a full queue. The
/// writer holds up to 256 more records (its batch) and a [`WRITE_CHUNK`] of lines.
///
/// Why this size: the writer drains every [`BATCH_TICK`] (25 ms), so at 100,000 requests per
/// second a tick gathers 2,500 records; 65,536 rides out 650 ms of stalled writes at that
/// rate (6.5 s at 10,000 per second) before the first line is lost, while a log stalled for
/// good costs a bounded, modest amount of memory instead of growing until the process dies.
pub const QUEUE_CAPACITY: usize = 64 * 1024;

/// At most one warning about dropped records per this interval.
pub const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(5);

/// Handle for logging finished requests. Cheap to clone (a few refcounts); `log` never waits,
/// never blocks, and allocates only the channel's amortised blocks (one per 32 records).
///
/// Why tokio's bounded channel and `try_send`: its send takes a permit with one
/// compare-and-swap on the semaphore's counter, which replaces the unbounded channel's own
/// compare-and-swap on its message counter, so the bound costs the request path next to
/// nothing (callgrind: 281 instructions per `log` unbounded, 286 bounded, most of them moving
/// the 320-byte record). An unbounded channel plus our own length counter would add a second
/// atomic read-modify-write per record, on a cache line the writer also writes. The permits go back
/// on the writer's side, once per received batch (a short mutex there, not here). A full
/// queue costs one atomic load and one atomic add to the drop counter, no mutex, and dropping
/// the record.
#[derive(Clone, Default)]
pub struct AccessLog {
    queue: Option<Queue>,
}

/// The sending half of an enabled log.
#[derive(Clone)]
struct Queue {
    sender: mpsc::Sender<AccessRecord>,
    /// Records dropped because the queue was full; shared by every clone and the writer.
    dropped: Arc<AtomicU64>,
}

impl AccessLog {
    /// A log that drops every record (`access_log.path = "off"`).
    pub fn disabled() -> AccessLog {
        AccessLog { queue: None }
    }

    /// Whether records are kept; lets the caller skip building one when logging is off.
    pub fn is_enabled(&self) -> bool {
        self.queue.is_some()
    }

    /// Queues `record` for the writer and returns at once. If the queue is full (the writer
    /// is stalled or behind by [`QUEUE_CAPACITY`] records) the record is dropped and counted in
    /// [`dropped`](AccessLog::dropped); if the writer is gone it is dropped uncounted. Losing
    /// a log line is better than failing, stalling or bloating a request.
    pub fn log(&self, record: AccessRecord) {
        if let Some(queue) = &self.queue {
            if let Err(TrySendError::Full(_)) = queue.sender.try_send(record) {
                // Relaxed: a statistic; nothing else is published through it.
                queue.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Records dropped so far because the queue was full, by this handle and every clone of
    /// it (0 for a disabled log).
    pub fn dropped(&self) -> u64 {
        self.queue
            .as_ref()
            .map_or(0, |queue| queue.dropped.load(Ordering::Relaxed))
    }
}

impl fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessLog")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

/// The background task that writes the access log.
#[derive(Debug)]
pub struct AccessLogWriter {
    /// Returns the number of dropped records it warned about.
    task: JoinHandle<u64>,
    reopen: LogReopen,
}

/// Asks the writer to reopen its file (after logrotate moved it). Cheap to clone; a request
/// made while the writer is busy is kept until it gets to it, and several requests before
/// then make one reopen. A stdout log ignores it.
#[derive(Clone, Debug, Default)]
pub struct LogReopen(Arc<Notify>);

impl LogReopen {
    /// Requests a reopen and returns at once; the writer task does the work.
    pub fn request(&self) {
        self.0.notify_one();
    }
}

impl AccessLogWriter {
    /// Starts the writer task. Must be called inside a tokio runtime with timers enabled
    /// (`enable_all()` / `#[tokio::main]`). A file is opened (append, create) before this
    /// returns, so a bad path is a start-up error, not a silent loss.
    pub fn spawn(sink: LogSink, format: LogFormat) -> io::Result<(AccessLog, AccessLogWriter)> {
        let output = match sink {
            LogSink::Stdout => Output::Stdout(io::stdout()),
            LogSink::File(path) => Output::File(open_log(&path)?, path),
        };
        Ok(AccessLogWriter::start(
            output,
            format,
            QUEUE_CAPACITY,
            DROP_WARNING_INTERVAL,
        ))
    }

    /// Starts the task writing to `output`, with a queue of `capacity` records and a warning
    /// about dropped ones at most every `warn_interval`.
    fn start(
        output: Output,
        format: LogFormat,
        capacity: usize,
        warn_interval: Duration,
    ) -> (AccessLog, AccessLogWriter) {
        let (sender, receiver) = mpsc::channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let warnings = DropWarnings::new(dropped.clone(), capacity, warn_interval);
        let reopen = LogReopen::default();
        let formatter = LineFormatter::new(format);
        let task = tokio::spawn(run(receiver, output, formatter, reopen.0.clone(), warnings));
        let log = AccessLog {
            queue: Some(Queue { sender, dropped }),
        };
        (log, AccessLogWriter { task, reopen })
    }

    /// The handle that makes this writer reopen its file (the binary calls it on SIGUSR1).
    pub fn reopen_handle(&self) -> LogReopen {
        self.reopen.clone()
    }

    /// Waits until every [`AccessLog`] clone has been dropped (including the one `spawn`
    /// returned), then until everything they logged is written. Drop the handles first, or
    /// this waits for as long as one is alive.
    pub async fn finish(self) {
        if let Err(e) = self.task.await {
            tracing::error!("access log writer failed: {e}");
        }
    }
}

/// Opens the log file for appending, creating it if missing.
fn open_log(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open access log {}: {e}", path.display()),
            )
        })
}

/// Where the task writes; `Write` so the blocking side is the same for both.
enum Output {
    Stdout(io::Stdout),
    /// The open file and the configured path it is reopened from.
    File(std::fs::File, PathBuf),
    /// Whatever a test needs, e.g. a writer that stalls.
    #[cfg(test)]
    Test(Box<dyn Write + Send>),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Stdout(out) => out.lock().write(buf),
            Output::File(file, _) => file.write(buf),
            #[cfg(test)]
            Output::Test(out) => out.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(out) => {
                let mut out = out.lock();
                out.write_all(buf)?;
                out.flush()
            }
            Output::File(file, _) => file.write_all(buf),
            #[cfg(test)]
            Output::Test(out) => out.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(out) => out.flush(),
            Output::File(file, _) => file.flush(),
            #[cfg(test)]
            Output::Test(out) => out.flush(),
        }
    }
}

/// How long the writer lets records gather while they keep coming.
///
/// Why not simply `recv().await` in a loop: a receiver that drains the channel and waits again
/// registers its waker every time, so under load many `log` calls have to wake the writer task
/// (a task schedule, sometimes a futex syscall) on the request path. Instead, once records
/// flow the writer sleeps for a tick and then drains what arrived, so senders find no waker
/// and `log` is a plain queue push. When a tick brings nothing, the writer goes back to
/// waiting on the channel, so an idle proxy has no timer wake-ups. A log line thus reaches the
/// file at most one tick after its request ends. Measured (2-core VM, 200 records per ms from
/// another thread): `log` 202 ns/record with the tick, 235 ns with a drain-and-wait writer;
/// most of what is left is moving the 320-byte record into memory last touched by the
/// writer's core.
pub const BATCH_TICK: Duration = Duration::from_millis(25);

/// Returns the number of dropped records it warned about (every one by then).
async fn run(
    mut receiver: mpsc::Receiver<AccessRecord>,
    output: Output,
    mut formatter: LineFormatter,
    reopen: Arc<Notify>,
    warnings: DropWarnings,
) -> u64 {
    let mut sink = BlockingSink::new(output, warnings);
    let mut batch = Vec::with_capacity(RECEIVE_BATCH);
    loop {
        // Idle: wait on the channel (the first record after a quiet spell wakes us) or for a
        // reopen, or for the moment a warning held back by the interval may go out. All are
        // cancel-safe: a record or a request not taken now is taken later.
        let warn_at = sink.warnings.next_warning();
        tokio::select! {
            received = receiver.recv_many(&mut batch, RECEIVE_BATCH) => {
                if received == 0 {
                    break;
                }
            }
            () = reopen.notified() => {
                sink.reopen().await;
                continue;
            }
            () = sleep_until(warn_at.unwrap_or_else(Instant::now)), if warn_at.is_some() => {
                sink.warnings.check(Instant::now());
                continue;
            }
        }
        // Busy: drain, write, sleep a tick, until a tick brings nothing.
        loop {
            sink.format_batch(&mut formatter, &mut batch).await;
            while !receiver.is_empty() {
                receiver.recv_many(&mut batch, RECEIVE_BATCH).await;
                sink.format_batch(&mut formatter, &mut batch).await;
            }
            sink.write_out().await;
            // Drops happen while the queue is full, i.e. while we were busy or stalled.
            sink.warnings.check(Instant::now());
            // Everything formatted so far is written: a reopen now splits the lines cleanly.
            tokio::select! {
                () = tokio::time::sleep(BATCH_TICK) => {}
                () = reopen.notified() => sink.reopen().await,
            }
            if receiver.is_empty() {
                break;
            }
        }
    }
    sink.write_out().await;
    sink.warnings.finish()
}

/// The writer's side of the drop counter: warns about records dropped since its last warning,
/// at most once per interval ([`DROP_WARNING_INTERVAL`]; a log that cannot keep up would
/// otherwise flood the diagnostics with one line per tick).
struct DropWarnings {
    dropped: Arc<AtomicU64>,
    /// The queue's capacity, for the message.
    capacity: usize,
    interval: Duration,
    /// The counter's value at the last warning.
    reported: u64,
    /// When the last warning went out; the first drops are reported as soon as seen.
    last: Option<Instant>,
}

impl DropWarnings {
    fn new(dropped: Arc<AtomicU64>, capacity: usize, interval: Duration) -> DropWarnings {
        DropWarnings {
            dropped,
            capacity,
            interval,
            reported: 0,
            last: None,
        }
    }

    /// Warns about the records dropped since the last warning, if there are any and the last
    /// warning is at least the interval before `now`. Returns how many it warned about (0: no
    /// warning).
    fn check(&mut self, now: Instant) -> u64 {
        if self.last.is_some_and(|last| now < last + self.interval) {
            return 0;
        }
        let warned = self.warn();
        if warned > 0 {
            self.last = Some(now);
        }
        warned
    }

    /// When drops not yet warned about may be: none if there are none.
    fn next_warning(&self) -> Option<Instant> {
        if self.dropped.load(Ordering::Relaxed) == self.reported {
            return None;
        }
        Some(
            self.last
                .map_or_else(Instant::now, |last| last + self.interval),
        )
    }

    /// The writer is stopping: warns about what is left, interval or not. Returns the number
    /// of dropped records warned about in all.
    fn finish(&mut self) -> u64 {
        self.warn();
        self.reported
    }

    /// Warns about the drops since the last warning, if any; returns how many.
    fn warn(&mut self) -> u64 {
        let total = self.dropped.load(Ordering::Relaxed);
        let new = total - self.reported;
        if new > 0 {
            tracing::warn!(
                "access log could not keep up (output stalled or too slow): {new} records \
                 dropped since the last warning, {total} since start; at most {} wait to be \
                 written",
                self.capacity
            );
            self.reported = total;
        }
        new
    }
}

/// The output and the one reused buffer, passed to the blocking pool and back for each write.
struct BlockingSink {
    output: Option<Output>,
    buffer: Vec<u8>,
    /// Set after a failed write, so a full disk reports once, not once per chunk.
    failing: bool,
    /// Here so that a write that hangs still lets the drops it causes be reported.
    warnings: DropWarnings,
}

impl BlockingSink {
    fn new(output: Output, warnings: DropWarnings) -> BlockingSink {
        BlockingSink {
            output: Some(output),
            buffer: Vec::with_capacity(WRITE_CHUNK + 4096),
            failing: false,
            warnings,
        }
    }

    /// Formats `batch` (emptying it), writing whenever a chunk is full.
    async fn format_batch(&mut self, formatter: &mut LineFormatter, batch: &mut Vec<AccessRecord>) {
        for record in batch.drain(..) {
            formatter.format(&record, &mut self.buffer);
            if self.buffer.len() >= WRITE_CHUNK {
                self.write_out().await;
            }
        }
    }

    /// Writes out what is formatted, then reopens a file output at its path. If the path
    /// cannot be opened, logging continues to the old file and the error is reported.
    async fn reopen(&mut self) {
        self.write_out().await;
        let Some(Output::File(_, path)) = &self.output else {
            return;
        };
        let path = path.clone();
        match tokio::task::spawn_blocking(move || open_log(&path).map(|f| (f, path))).await {
            Ok(Ok((file, path))) => self.output = Some(Output::File(file, path)),
            Ok(Err(e)) => {
                tracing::error!("access log not reopened, still writing to the old file: {e}")
            }
            Err(e) => tracing::error!("access log writer stopped: {e}"),
        }
    }

    async fn write_out(&mut self) {
        let Some(mut output) = self.output.take() else {
            self.buffer.clear();
            return;
        };
        if self.buffer.is_empty() {
            self.output = Some(output);
            return;
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        let mut write = tokio::task::spawn_blocking(move || {
            let result = output.write_all(&buffer);
            buffer.clear();
            (output, buffer, result)
        });
        // A write that hangs (a blocked disk, a pipe nobody reads) is exactly when records
        // are dropped: keep warning about them meanwhile.
        let done = loop {
            tokio::select! {
                done = &mut write => break done,
                () = tokio::time::sleep(self.warnings.interval) => {
                    self.warnings.check(Instant::now());
                }
            }
        };
        match done {
            Ok((output, buffer, result)) => {
                self.output = Some(output);
                self.buffer = buffer;
                match result {
                    Err(e) if !self.failing => {
                        tracing::error!("access log write failed (lines lost): {e}");
                        self.failing = true;
                    }
                    Err(_) => {}
                    Ok(()) => self.failing = false,
                }
            }
            // The blocking pool is shutting down with the runtime; nothing left to write to.
            Err(e) => tracing::error!("access log writer stopped: {e}"),
        }
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
