//! Allocation budget of the access log, measured with a counting global allocator: logging
//! costs at most the channel's amortised block allocations, and formatting into a reused
//! buffer costs nothing. One test per binary, so no other test's allocations are counted.

use std::alloc::System;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sepia_observe::{
    AccessLogWriter, AccessRecord, Hierarchy, LineFormatter, LogFormat, LogSink, ResultCode,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn record(start: SystemTime) -> AccessRecord {
    AccessRecord {
        start,
        elapsed: Duration::from_millis(3),
        client: "192.0.2.9:50000".parse().unwrap(),
        result: ResultCode::TcpHit,
        status: 200,
        bytes_sent: 5120,
        method: Bytes::from_static(b"GET"),
        scheme_host: Some(Bytes::from_static(b"www.example.com")),
        tls: false,
        target: Bytes::from_static(b"/static/app.js"),
        version_major: 1,
        version_minor: 1,
        user: None,
        hierarchy: Hierarchy::None,
        peer: None,
        content_type: Some(Bytes::from_static(b"application/javascript")),
        referer: Some(Bytes::from_static(b"http://www.example.com/")),
        // Escaping paths too: a quote, a control byte and an invalid UTF-8 byte.
        user_agent: Some(Bytes::from_static(b"curl/8.0 \"x\"\t\xff")),
    }
}

const RECORDS: u64 = 10_000;

#[test]
fn logging_and_formatting_allocation_budget() {
    let start = SystemTime::now();
    let records: Vec<AccessRecord> = (0..RECORDS).map(|_| record(start)).collect();

    // The counter is process-wide, so the test harness's own threads can add a stray
    // allocation; a real per-line allocation shows 10,000 times in every attempt, so the
    // best of three attempts must be exactly zero.
    let best_of_three = |measure: &mut dyn FnMut() -> usize| (0..3).map(|_| measure()).min();

    // Formatting: after the first line (buffer growth, the date of this second), none.
    for format in [LogFormat::Squid, LogFormat::Combined, LogFormat::Json] {
        let mut formatter = LineFormatter::new(format);
        let mut out = Vec::with_capacity(1 << 20);
        formatter.format(&records[0], &mut out);
        out.clear();
        let best = best_of_three(&mut || {
            let region = Region::new(GLOBAL);
            for rec in &records {
                formatter.format(rec, &mut out);
                if out.len() > (1 << 20) - 512 {
                    out.clear();
                }
            }
            region.change().allocations
        });
        assert_eq!(best, Some(0), "{format:?}");
        assert!(!out.is_empty());
    }

    // A disabled log drops records without touching the allocator.
    let disabled = sepia_observe::AccessLog::disabled();
    let best = best_of_three(&mut || {
        let region = Region::new(GLOBAL);
        for rec in &records {
            disabled.log(rec.clone());
        }
        region.change().allocations
    });
    assert_eq!(best, Some(0), "disabled log");

    // Logging: on a current-thread runtime the writer cannot run while this loop does, so
    // what is counted is `log` alone: the channel's blocks of 32 slots, nothing per record.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = std::env::temp_dir().join(format!("sepia-observe-alloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let (log, writer) =
            AccessLogWriter::spawn(LogSink::File(path.clone()), LogFormat::Squid).unwrap();
        let region = Region::new(GLOBAL);
        for rec in records {
            log.log(rec);
        }
        let change = region.change();
        eprintln!("log: {change:?} for {RECORDS} records");
        assert!(
            change.allocations as u64 <= RECORDS / 32 + 2,
            "log: {} allocations for {RECORDS} records",
            change.allocations
        );
        drop(log);
        writer.finish().await;
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines as u64, RECORDS);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
