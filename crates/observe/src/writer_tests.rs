//! The writer end to end: records from many tasks land in a file, whole and in full.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::*;
use crate::record::{Hierarchy, ResultCode};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "sepia-observe-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(task: usize, index: usize) -> AccessRecord {
    AccessRecord {
        start: SystemTime::now(),
        elapsed: Duration::from_millis(index as u64),
        client: "10.0.0.1:1234".parse().unwrap(),
        result: match index % 2 {
            0 => ResultCode::TcpHit,
            _ => ResultCode::TcpMiss,
        },
        status: 200,
        bytes_sent: index as u64,
        method: Bytes::from_static(b"GET"),
        scheme_host: Some(Bytes::from_static(b"example.com")),
        tls: false,
        target: Bytes::from(format!("/t{task}/r{index}")),
        version_major: 1,
        version_minor: 1,
        user: None,
        hierarchy: Hierarchy::Direct,
        peer: Some("192.0.2.1".parse().unwrap()),
        content_type: Some(Bytes::from_static(b"text/plain")),
        referer: None,
        user_agent: Some(Bytes::from_static(b"test")),
    }
}

const TASKS: usize = 8;
const PER_TASK: usize = 1250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_writer_keeps_every_line_from_many_tasks() {
    let dir = TempDir::new("many");
    let path = dir.0.join("access.log");
    std::fs::write(&path, "existing line\n").unwrap();
    let (log, writer) = AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid)
        .expect("open log file");
    assert!(log.is_enabled());
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let log = log.clone();
            tokio::spawn(async move {
                for index in 0..PER_TASK {
                    log.log(record(task, index));
                    if index % 100 == 99 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(log.dropped(), 0, "the queue has room for them all");
    drop(log);
    writer.finish().await;

    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("existing line"),
        "appends, not truncates"
    );
    let mut seen = HashSet::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 10, "{line}");
        let (secs, millis) = fields[0].split_once('.').unwrap();
        assert!(secs.parse::<u64>().unwrap() > 1_700_000_000, "{line}");
        assert_eq!(millis.len(), 3, "{line}");
        assert!(
            ["TCP_HIT/200", "TCP_MISS/200"].contains(&fields[3]),
            "{line}"
        );
        assert_eq!(fields[5], "GET");
        assert_eq!(fields[8], "HIER_DIRECT/192.0.2.1");
        assert_eq!(fields[9], "text/plain");
        let url = fields[6].strip_prefix("http://example.com/t").unwrap();
        let (task, index) = url.split_once("/r").unwrap();
        let (task, index): (usize, usize) = (task.parse().unwrap(), index.parse().unwrap());
        assert_eq!(
            fields[4],
            index.to_string(),
            "bytes field matches the record"
        );
        assert!(seen.insert((task, index)), "duplicate line {line}");
    }
    assert_eq!(seen.len(), TASKS * PER_TASK);
}

#[tokio::test]
async fn finish_waits_for_clones_still_logging() {
    let dir = TempDir::new("late");
    let path = dir.0.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Combined).unwrap();
    let late = log.clone();
    drop(log);
    let straggler = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        late.log(record(1, 2));
    });
    writer.finish().await;
    straggler.await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("\"GET http://example.com/t1/r2 HTTP/1.1\" 200 2 \"-\" \"test\""));
}

#[tokio::test]
async fn lines_are_written_without_waiting_for_a_full_chunk() {
    let dir = TempDir::new("prompt");
    let path = dir.0.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    log.log(record(0, 0));
    assert_eq!(
        wait_for_lines(&path, 1).await,
        1,
        "one record, written while the log is open"
    );
    drop(log);
    writer.finish().await;
}

/// Polls `path` until it holds `lines` lines (or 2 s pass); returns what it holds.
async fn wait_for_lines(path: &std::path::Path, lines: usize) -> usize {
    let mut count = 0;
    for _ in 0..200 {
        count = std::fs::read_to_string(path).unwrap().lines().count();
        if count >= lines {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    count
}

#[tokio::test]
async fn writer_wakes_again_after_going_idle() {
    let dir = TempDir::new("idle");
    let path = dir.0.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    for round in 1..=3 {
        log.log(record(0, round));
        assert_eq!(wait_for_lines(&path, round).await, round, "round {round}");
        // Long enough for an empty tick, so the writer is back to waiting on the channel.
        tokio::time::sleep(BATCH_TICK * 3).await;
    }
    drop(log);
    writer.finish().await;
    assert_eq!(wait_for_lines(&path, 3).await, 3);
}

#[tokio::test]
async fn spawn_reports_an_unopenable_file() {
    let dir = TempDir::new("bad");
    let path = dir.0.join("no-such-dir").join("access.log");
    let err = AccessLogWriter::spawn(LogSink::File(path), LogFormat::Squid).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("no-such-dir"), "{err}");
}

#[tokio::test]
async fn stdout_writer_stops_when_handles_are_dropped() {
    let (log, writer) = AccessLogWriter::spawn(LogSink::Stdout, LogFormat::Squid).unwrap();
    drop(log);
    tokio::time::timeout(Duration::from_secs(5), writer.finish())
        .await
        .expect("finish returns once the only handle is gone");
}

#[test]
fn disabled_log_drops_records() {
    let log = AccessLog::disabled();
    assert!(!log.is_enabled());
    log.log(record(0, 0));
    assert_eq!(log.dropped(), 0, "a disabled log counts nothing");
    assert!(!AccessLog::default().is_enabled());
    assert_eq!(format!("{log:?}"), "AccessLog { enabled: false }");
}

/// The `(task, index)` of each line of a Squid-format file made of `record(task, index)`.
fn record_ids(path: &std::path::Path) -> Vec<(usize, usize)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let url = line.split_whitespace().nth(6).expect(line);
            let ids = url.strip_prefix("http://example.com/t").expect(line);
            let (task, index) = ids.split_once("/r").expect(line);
            (task.parse().unwrap(), index.parse().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn reopen_after_rename_splits_lines_between_the_files() {
    let dir = TempDir::new("rotate");
    let path = dir.0.join("access.log");
    let rotated = dir.0.join("access.log.1");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    let reopen = writer.reopen_handle();
    for i in 0..3 {
        log.log(record(0, i));
    }
    assert_eq!(wait_for_lines(&path, 3).await, 3);
    // logrotate: rename, then signal. A line logged in between still goes to the old file.
    std::fs::rename(&path, &rotated).unwrap();
    log.log(record(0, 3));
    assert_eq!(wait_for_lines(&rotated, 4).await, 4);
    reopen.request();
    reopen.request(); // a second request before the first is served: one reopen
    assert!(
        wait_for(|| path.exists()).await,
        "the configured path is recreated"
    );
    for i in 4..6 {
        log.log(record(0, i));
    }
    drop(log);
    writer.finish().await;
    assert_eq!(record_ids(&rotated), [(0, 0), (0, 1), (0, 2), (0, 3)]);
    assert_eq!(record_ids(&path), [(0, 4), (0, 5)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_under_load_loses_and_duplicates_nothing() {
    let dir = TempDir::new("rotate-load");
    let path = dir.0.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    let reopen = writer.reopen_handle();
    let producer = tokio::spawn(async move {
        for index in 0..PER_TASK * 4 {
            log.log(record(1, index));
            if index % 50 == 49 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    // Rotate three times while records keep coming.
    let mut rotated = Vec::new();
    for n in 1..=3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let to = dir.0.join(format!("access.log.{n}"));
        if std::fs::rename(&path, &to).is_ok() {
            rotated.push(to);
        }
        reopen.request();
        assert!(wait_for(|| path.exists()).await, "reopen {n}");
    }
    producer.await.unwrap();
    writer.finish().await;
    let mut all: Vec<(usize, usize)> = rotated.iter().flat_map(|p| record_ids(p)).collect();
    all.extend(record_ids(&path));
    let expected: Vec<(usize, usize)> = (0..PER_TASK * 4).map(|i| (1, i)).collect();
    assert_eq!(all.len(), expected.len(), "lines lost or duplicated");
    assert_eq!(all, expected, "every line once, in order across the files");
    assert!(!rotated.is_empty());
}

#[tokio::test]
async fn reopen_failure_keeps_the_old_file() {
    let dir = TempDir::new("rotate-fail");
    let sub = dir.0.join("logs");
    std::fs::create_dir(&sub).unwrap();
    let path = sub.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    let reopen = writer.reopen_handle();
    log.log(record(0, 0));
    assert_eq!(wait_for_lines(&path, 1).await, 1);
    // The directory moves away: the path cannot be reopened, the old descriptor still works.
    let moved = dir.0.join("logs.old");
    std::fs::rename(&sub, &moved).unwrap();
    reopen.request();
    tokio::time::sleep(BATCH_TICK * 2).await;
    log.log(record(0, 1));
    drop(log);
    writer.finish().await;
    assert_eq!(record_ids(&moved.join("access.log")), [(0, 0), (0, 1)]);
}

#[tokio::test]
async fn reopen_of_stdout_is_ignored() {
    let (log, writer) = AccessLogWriter::spawn(LogSink::Stdout, LogFormat::Squid).unwrap();
    writer.reopen_handle().request();
    tokio::time::sleep(BATCH_TICK).await;
    drop(log);
    tokio::time::timeout(Duration::from_secs(5), writer.finish())
        .await
        .expect("the writer still stops normally");
}

/// Polls `condition` every 5 ms for up to 2 s.
async fn wait_for(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..400 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    condition()
}

/// Records waiting in `log`'s queue (taken by the writer: no longer counted).
fn queued(log: &AccessLog) -> usize {
    let sender = &log.queue.as_ref().expect("an enabled log").sender;
    sender.max_capacity() - sender.capacity()
}

#[tokio::test]
async fn full_queue_drops_and_counts_instead_of_growing() {
    let dir = TempDir::new("full");
    let path = dir.0.join("access.log");
    let (log, writer) =
        AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
    // A current-thread runtime: the writer cannot run until this test awaits, as if stalled.
    let clone = log.clone();
    for index in 0..QUEUE_CAPACITY + 1000 {
        let by = if index % 2 == 0 { &log } else { &clone };
        by.log(record(0, index));
    }
    assert_eq!(
        queued(&log),
        QUEUE_CAPACITY,
        "the queue holds the bound, no more"
    );
    assert_eq!(
        log.dropped(),
        1000,
        "every record past the bound dropped and counted"
    );
    assert_eq!(clone.dropped(), 1000, "one counter for all clones");
    drop((log, clone));
    assert_eq!(
        writer.task.await.unwrap(),
        1000,
        "the writer warned about all of them"
    );
    let ids = record_ids(&path);
    let expected: Vec<(usize, usize)> = (0..QUEUE_CAPACITY).map(|i| (0, i)).collect();
    assert_eq!(
        ids, expected,
        "the first QUEUE_CAPACITY records written, in order"
    );
}

/// A `Write` whose first write blocks until released, as a full pipe or a hung disk does;
/// keeps what it is given.
#[derive(Clone, Default)]
struct StallingOutput(Arc<(Mutex<Stall>, Condvar)>);

#[derive(Default)]
struct Stall {
    entered: bool,
    released: bool,
    written: Vec<u8>,
}

impl StallingOutput {
    fn entered(&self) -> bool {
        self.0 .0.lock().unwrap().entered
    }

    fn release(&self) {
        self.0 .0.lock().unwrap().released = true;
        self.0 .1.notify_all();
    }

    fn released(&self) -> bool {
        self.0 .0.lock().unwrap().released
    }

    fn lines(&self) -> usize {
        let stall = self.0 .0.lock().unwrap();
        stall.written.iter().filter(|&&b| b == b'\n').count()
    }
}

/// Releases the stalled write when the test ends, passed or failed: the runtime cannot shut
/// down while the blocking pool's thread is stuck in it.
struct ReleaseOnDrop(StallingOutput);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Write for StallingOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (stall, released) = &*self.0;
        let mut stall = stall.lock().unwrap();
        stall.entered = true;
        while !stall.released {
            stall = released.wait(stall).unwrap();
        }
        stall.written.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Diagnostics (`tracing`) of this thread, collected while the guard lives.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    fn warnings(&self) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|line| line.contains("WARN"))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn stalled_output_drops_records_and_the_writer_warns() {
    const CAPACITY: usize = 64;
    const OVER: usize = 10;
    const WARN_INTERVAL: Duration = Duration::from_millis(50);
    // A current-thread runtime: the writer task runs on this thread, so its warning is
    // captured here; its blocked write is on the blocking pool.
    let (captured, _guard) = Captured::start();
    let output = StallingOutput::default();
    let _release = ReleaseOnDrop(output.clone());
    let (log, writer) = AccessLogWriter::start(
        Output::Test(Box::new(output.clone())),
        LogFormat::Squid,
        CAPACITY,
        WARN_INTERVAL,
    );
    log.log(record(0, 0));
    assert!(
        wait_for(|| output.entered()).await,
        "the writer's first write blocks"
    );
    for index in 1..=CAPACITY + OVER {
        log.log(record(0, index));
    }
    assert_eq!(queued(&log), CAPACITY);
    assert_eq!(log.dropped(), OVER as u64);
    // The write still hangs, and the writer says what it costs.
    assert!(
        wait_for(|| captured.warnings().len() == 1).await,
        "a warning while the output is stalled"
    );
    // More drops, still stalled: one more warning, at most one per interval.
    log.log(record(0, 1000));
    assert_eq!(log.dropped(), OVER as u64 + 1);
    assert!(
        wait_for(|| captured.warnings().len() == 2).await,
        "{:?}",
        captured.warnings()
    );
    // No new drops: several intervals pass without another warning.
    tokio::time::sleep(WARN_INTERVAL * 4).await;
    assert_eq!(captured.warnings().len(), 2);
    assert!(!output.released() && output.lines() == 0, "stuck all along");

    output.release();
    drop(log);
    assert_eq!(writer.task.await.unwrap(), OVER as u64 + 1);
    assert_eq!(output.lines(), 1 + CAPACITY, "everything queued is written");
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains(
            "access log could not keep up (output stalled or too slow): 10 records dropped \
             since the last warning, 10 since start; at most 64 wait to be written"
        ),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains(": 1 records dropped since the last warning, 11 since start;"),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_that_keeps_up_drops_nothing() {
    const CAPACITY: usize = 64;
    const ROUNDS: usize = 20;
    const BURST: usize = 60;
    let dir = TempDir::new("keeps-up");
    let path = dir.0.join("access.log");
    let output = Output::File(open_log(&path).unwrap(), path.clone());
    let (log, writer) =
        AccessLogWriter::start(output, LogFormat::Squid, CAPACITY, DROP_WARNING_INTERVAL);
    // Many times the capacity in all, never more than it at once: the writer gives the room
    // back as it takes records.
    for round in 0..ROUNDS {
        for index in 0..BURST {
            log.log(record(round, index));
        }
        assert!(wait_for(|| queued(&log) == 0).await, "round {round}");
    }
    assert_eq!(log.dropped(), 0);
    drop(log);
    assert_eq!(writer.task.await.unwrap(), 0, "no warning");
    assert_eq!(record_ids(&path).len(), ROUNDS * BURST);
}

#[test]
fn drop_warnings_are_rate_limited() {
    let (captured, _guard) = Captured::start();
    let dropped = Arc::new(AtomicU64::new(0));
    let mut warnings = DropWarnings::new(dropped.clone(), 64, DROP_WARNING_INTERVAL);
    let start = Instant::now();
    assert_eq!(warnings.check(start), 0, "nothing dropped, nothing said");
    assert_eq!(warnings.next_warning(), None);

    dropped.store(5, Ordering::Relaxed);
    assert_eq!(
        warnings.check(start),
        5,
        "the first drops are reported at once"
    );
    dropped.store(8, Ordering::Relaxed);
    let later = start + Duration::from_secs(1);
    assert_eq!(warnings.check(later), 0, "held back by the interval");
    assert_eq!(warnings.next_warning(), Some(start + DROP_WARNING_INTERVAL));
    assert_eq!(warnings.check(start + DROP_WARNING_INTERVAL), 3);
    assert_eq!(warnings.next_warning(), None);
    let quiet = start + DROP_WARNING_INTERVAL * 3;
    assert_eq!(warnings.check(quiet), 0, "nothing new");
    dropped.store(9, Ordering::Relaxed);
    assert_eq!(
        warnings.check(quiet),
        1,
        "after a quiet interval, at once again"
    );
    dropped.store(11, Ordering::Relaxed);
    assert_eq!(warnings.check(quiet), 0);
    assert_eq!(warnings.finish(), 11, "stopping: the rest, interval or not");

    let lines = captured.warnings();
    let expected = [(5, 5), (3, 8), (1, 9), (2, 11)];
    assert_eq!(lines.len(), expected.len(), "{lines:?}");
    for (line, (new, total)) in lines.iter().zip(expected) {
        assert!(
            line.contains(&format!(
                ": {new} records dropped since the last warning, {total} since start;"
            )),
            "{line}"
        );
    }
}
