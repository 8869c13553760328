//! The metrics' schema: every family `/metrics` exposes, with its type, labels and meaning.
//! `docs/METRICS.md` lists the same table, and a test keeps the two (and the output) equal.

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// As in `# TYPE` and `docs/METRICS.md`.
    #[cfg(test)]
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// As in `# TYPE` (a counter's samples add `_total`, a histogram's `_bucket`, `_sum`,
    /// `_count`).
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn family(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        labels,
        help,
    }
}

const REQ: &[&str] = &["listener", "protocol", "method", "result"];
use Kind::{Counter, Gauge, Histogram};

/// Every family, in the order `/metrics` writes them.
pub const FAMILIES: &[Family] = &[
    family("sepia_requests", Counter, REQ, "Requests answered, by listener address, protocol (http/1.1, h2), method class and Squid result code (TCP_HIT, TCP_MEM_HIT, TCP_MISS, ...)."),
    family("sepia_response_bytes", Counter, REQ, "Bytes written to clients, heads included, by the same labels as sepia_requests."),
    family("sepia_request_duration_seconds", Histogram, &["class"], "From a request's complete head to the end of its response, by class (hit, miss, other)."),
    family("sepia_first_byte_seconds", Histogram, &["class"], "From a request's complete head to its response head handed to the connection (a hit: its end), by class."),
    family("sepia_client_connections_open", Gauge, &[], "Client connections open (busy, idle and parked)."),
    family("sepia_client_connections_idle", Gauge, &[], "HTTP/1.1 client connections waiting for their next request, not yet parked."),
    family("sepia_client_connections_parked", Gauge, &[], "Client connections parked after a second or more without a request (the parking lot, or a small task each for TLS)."),
    family("sepia_origin_connections", Counter, &["route", "origin", "event"], "Origin connections opened, reused from the pool, or failed to open (refused, timed out, TLS refused), by route and origin (- for requests without a route: forward, intercepted)."),
    family("sepia_origin_latency_seconds", Histogram, &["route"], "From a request sent to an origin (its head written) to the origin's response head, by route (- for requests without a route)."),
    family("sepia_revalidations", Counter, &["outcome"], "Revalidations of stored responses (RFC 9111 section 4.3), foreground and background: not_modified (304), modified (replaced), failed."),
    family("sepia_origin_up", Gauge, &["route", "origin"], "Whether a route's origin is up (1) or marked down (0), by passive health (consecutive connection failures skip it for a while) or by active checks."),
    family("sepia_health_checks", Counter, &["route", "origin", "result"], "Active health checks of a route's origins ([route.health] interval), by result: ok, status (an unexpected status), timeout, error (connecting failed or the answer was not HTTP)."),
    family("sepia_cache_objects", Gauge, &[], "Objects (variants) in the memory store."),
    family("sepia_cache_bytes", Gauge, &[], "Bytes accounted against the memory budget."),
    family("sepia_cache_budget_bytes", Gauge, &[], "The memory store's byte budget (cache.memory)."),
    family("sepia_cache_lookups", Counter, &["result"], "Store lookups: hit (found), miss (a fill started), collapsed (waited on another request's fill)."),
    family("sepia_cache_admissions", Counter, &[], "Objects committed into the store."),
    family("sepia_cache_evictions", Counter, &[], "Objects evicted to stay within the budget."),
    family("sepia_cache_removals", Counter, &[], "Objects removed by purges, invalidation or replacement."),
    family("sepia_cache_rejected_too_big", Counter, &[], "Fills not stored because the object exceeded cache.max_object."),
    family("sepia_cache_aborted_fills", Counter, &[], "Fills that ended in an abort (origin failure, length mismatch)."),
    family("sepia_cache_body_files", Gauge, &[], "Stored bodies kept in files and sent with sendfile."),
    family("sepia_disk_objects", Gauge, &[], "Objects in the disk tier's indexes."),
    family("sepia_disk_bytes", Gauge, &[], "Bytes of segment files on the disks."),
    family("sepia_disk_index_bytes", Gauge, &[], "Memory held by the disk indexes."),
    family("sepia_disk_reads", Counter, &[], "Disk records read for lookups."),
    family("sepia_disk_hits", Counter, &[], "Disk reads that returned a verified object of the right key."),
    family("sepia_disk_ring_reads", Counter, &[], "Disk reads made through the io_uring (cache.disk_io)."),
    family("sepia_disk_writes", Counter, &[], "Records written to disk."),
    family("sepia_disk_write_bytes", Counter, &[], "Bytes written to disk."),
    family("sepia_disk_write_skips", Counter, &[], "Demotions skipped (write budget spent, queue full, or a body file that could not be read)."),
    family("sepia_disk_fill_writes", Counter, &[], "Of the records written, objects that had not earned a disk place, written into room the disk had never used (admission = \"fill\")."),
    family("sepia_disk_fill_write_bytes", Counter, &[], "Bytes of those records."),
    family("sepia_disk_checksum_failures", Counter, &[], "Disk records that failed their checksum."),
    family("sepia_disk_faults", Counter, &[], "Disk I/O faults (ENOSPC, EIO, files gone)."),
    family("sepia_disks_failed", Gauge, &[], "Disks given up after a fault."),
    family("sepia_purges", Counter, &["kind"], "Purges through the admin listener: url, prefix, tag."),
    family("sepia_auth_helper_requests", Gauge, &["state"], "Credentials checks at the auth helpers ([auth] helper): queued (waiting for a child) or in_flight (written to a child, not answered)."),
    family("sepia_auth_helper_answers", Counter, &["result"], "Credentials checks the auth helpers ended: ok, err, bh (the helper could not decide), unavailable (no answer within helper_timeout)."),
    family("sepia_access_log_dropped", Counter, &[], "Access log lines dropped because the writer fell behind."),
    family("sepia_process_cpu_seconds", Counter, &[], "User and system CPU time of the process."),
    family("sepia_process_resident_memory_bytes", Gauge, &[], "Resident memory of the process (VmRSS)."),
    family("sepia_process_open_fds", Gauge, &[], "Open file descriptors."),
    family("sepia_process_max_fds", Gauge, &[], "The descriptor limit (soft)."),
    family("sepia_uptime_seconds", Gauge, &[], "Seconds since Sepia started."),
];

/// The family named `name`.
pub fn find(name: &str) -> &'static Family {
    FAMILIES
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("metric family {name} is not in the schema"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::render::{metrics_text, Gathered, OriginFigures};

    /// The metric rows of `docs/METRICS.md`: name, type, labels.
    fn documented() -> Vec<(String, String, Vec<String>)> {
        let doc = include_str!("../../../../docs/METRICS.md");
        let cells = |line: &str| -> Vec<String> {
            let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
            inner.split('|').map(|c| c.trim().to_string()).collect()
        };
        doc.lines()
            .filter(|l| l.starts_with("| `sepia_"))
            .map(|line| {
                let c = cells(line);
                assert!(
                    c.len() == 4 && !c[3].is_empty(),
                    "a row without meaning: {line}"
                );
                let labels = match c[2].as_str() {
                    "–" => Vec::new(),
                    l => l
                        .split(", ")
                        .map(|l| l.trim_matches('`').to_string())
                        .collect(),
                };
                (c[0].trim_matches('`').to_string(), c[1].clone(), labels)
            })
            .collect()
    }

    /// A family's name and type; a sample's name and label names.
    type Declared = (String, String);
    type Sampled = (String, Vec<String>);

    /// A scrape's families (`# TYPE` lines) and each sample's name and label names.
    fn scraped(text: &str) -> (Vec<Declared>, Vec<Sampled>) {
        let mut families = Vec::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                families.push((name.to_string(), kind.to_string()));
            } else if !line.starts_with('#') && !line.is_empty() {
                let name_end = line.find(['{', ' ']).unwrap();
                let labels = match line[name_end..].strip_prefix('{') {
                    Some(rest) => rest[..rest.find('}').unwrap()]
                        .split(',')
                        .map(|kv| kv.split_once('=').unwrap().0.to_string())
                        .collect(),
                    None => Vec::new(),
                };
                samples.push((line[..name_end].to_string(), labels));
            }
        }
        (families, samples)
    }

    #[test]
    fn metrics_md_is_the_schema() {
        let code: Vec<_> = FAMILIES
            .iter()
            .map(|f| {
                let labels = f.labels.iter().map(|l| l.to_string()).collect();
                (f.name.to_string(), f.kind.as_str().to_string(), labels)
            })
            .collect();
        assert_eq!(documented(), code, "docs/METRICS.md and schema.rs differ");
        assert!(FAMILIES
            .iter()
            .all(|f| !f.help.is_empty() && f.name.starts_with("sepia_")));
    }

    #[test]
    fn a_scrape_writes_every_family_of_the_schema_with_its_labels() {
        use sepia_observe::metrics::{self, MethodClass, Protocol, Request};
        metrics::set_listeners(1);
        let request = Request {
            listener: 0,
            protocol: Protocol::Http1,
            method: MethodClass::Get,
            result: sepia_observe::ResultCode::TcpMemHit,
            bytes: 1000,
            elapsed_micros: Some(50),
            first_byte_micros: None,
        };
        metrics::record(&request, |_| {});
        let gathered = Gathered {
            requests: metrics::snapshot(),
            listeners: vec!["127.0.0.1:3128".into()],
            origins: vec![OriginFigures {
                route: "*".into(),
                origin: "127.0.0.1:8080".into(),
                connections: [1, 2, 3],
                checks: [4, 0, 1, 0],
                ..OriginFigures::default()
            }],
            route_latency: vec![("*".into(), metrics::Histogram::default())],
            auth_helper: Some(sepia_auth::HelperStats::default()),
            ..Gathered::default()
        };
        let text = metrics_text(gathered);
        assert!(text.ends_with("# EOF\n"), "{text}");
        let (families, samples) = scraped(&text);
        let expected: Vec<_> = FAMILIES
            .iter()
            .map(|f| (f.name.to_string(), f.kind.as_str().to_string()))
            .collect();
        assert_eq!(families, expected, "{text}");
        for (name, labels) in samples {
            let family = FAMILIES
                .iter()
                .find(|f| match f.kind {
                    Kind::Counter => name == format!("{}_total", f.name),
                    Kind::Gauge => name == f.name,
                    Kind::Histogram => ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{}{s}", f.name)),
                })
                .unwrap_or_else(|| panic!("sample {name} of no family:\n{text}"));
            let mut want: Vec<String> = family.labels.iter().map(|l| l.to_string()).collect();
            if name.ends_with("_bucket") {
                want.push("le".into());
            }
            let (mut labels, mut want) = (labels, want);
            labels.sort();
            want.sort();
            assert_eq!(labels, want, "{name}");
        }
        let hit = "sepia_requests_total{listener=\"127.0.0.1:3128\",protocol=\"http/1.1\",\
                   method=\"GET\",result=\"TCP_MEM_HIT\"}";
        assert!(text.contains(hit), "{text}");
    }
}
