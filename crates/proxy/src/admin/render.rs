//! `/metrics` (the OpenMetrics text format, written by the `prometheus-client` crate from the
//! sums gathered at scrape time) and `/stats` (the same figures as JSON).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sepia_auth::HelperStats;
use sepia_observe::metrics::{
    bucket_bound, Histogram, LatencyClass, OriginEvent, Revalidation, Snapshot, BUCKETS,
};
use sepia_store::StoreStats;

use crate::upstream::CheckResult;
use serde_json::{json, Value};

use super::process::Process;
use super::schema::{self, Kind};
use super::top::{Ranked, SAMPLE_EVERY, WINDOW_SECS};

/// Everything a scrape reports, read at one moment.
#[derive(Debug, Default)]
pub struct Gathered {
    pub requests: Snapshot,
    pub store: StoreStats,
    pub listeners: Vec<String>,
    pub clients: ClientCounts,
    pub log_dropped: u64,
    pub purges: [u64; 3],
    pub process: Process,
    pub uptime_seconds: f64,
    /// Each route origin's health and counts.
    pub origins: Vec<OriginFigures>,
    /// Each route's origin latency: (route host, histogram).
    pub route_latency: Vec<(String, Histogram)>,
    /// The auth helper pool's queue and answers, when `[auth]` uses a helper.
    pub auth_helper: Option<HelperStats>,
}

/// The server's counts of client connections, read at scrape time.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientCounts {
    pub open: u64,
    /// Parked: in the parking lot or a small task of their own (idle for a second or more).
    pub parked: u64,
}

/// One route origin's figures, read at scrape time.
#[derive(Debug, Default)]
pub struct OriginFigures {
    /// The route's host pattern.
    pub route: String,
    /// "host:port".
    pub origin: String,
    pub up: bool,
    /// Connection events by [`OriginEvent`].
    pub connections: [u64; 3],
    /// Health check results by [`CheckResult`].
    pub checks: [u64; 4],
}

/// The `route` and `origin` of figures of requests without a route (forward, intercepted).
const DIRECT: &str = "-";

/// The purge kinds, the `kind` label of `sepia_purges`.
pub const PURGE_KINDS: [&str; 3] = ["url", "prefix", "tag"];

/// The OpenMetrics text of `g`.
pub fn metrics_text(g: Gathered) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(g));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// One family's samples as the crate encodes them.
enum Samples<'a> {
    Values(Vec<(Labels<'a>, f64)>),
    Histograms(Vec<(Labels<'a>, &'a Histogram)>),
}

fn one<'a>(v: u64) -> Samples<'a> {
    Samples::Values(vec![(Vec::new(), v as f64)])
}

fn labelled<'a>(label: &'static str, names: &[&'static str], values: &[u64]) -> Samples<'a> {
    let all = names.iter().zip(values);
    Samples::Values(all.map(|(n, v)| (vec![(label, *n)], *v as f64)).collect())
}

fn classes(h: &[Histogram; 3]) -> Samples<'_> {
    let all = LatencyClass::ALL.iter().zip(h.iter());
    Samples::Histograms(all.map(|(c, h)| (vec![("class", c.as_str())], h)).collect())
}

type Families<'a> = Vec<(&'static str, Samples<'a>)>;

impl Gathered {
    /// Every family, in the schema's order.
    fn families(&self) -> Families<'_> {
        let mut all = self.request_families();
        all.extend(self.store_families());
        all.extend(self.process_families());
        all
    }

    /// What the workers count: requests, latencies, origin connections, revalidations.
    fn request_families(&self) -> Families<'_> {
        let mut requests = Vec::new();
        let mut bytes = Vec::new();
        for c in self.requests.requests() {
            let listener = self.listeners.get(c.listener).map_or("?", String::as_str);
            let labels = vec![
                ("listener", listener),
                ("protocol", c.protocol.as_str()),
                ("method", c.method.as_str()),
                ("result", c.result.as_str()),
            ];
            requests.push((labels.clone(), c.requests as f64));
            bytes.push((labels, c.bytes as f64));
        }
        let revals = Revalidation::ALL.map(Revalidation::as_str);
        let r = &self.requests;
        vec![
            ("sepia_requests", Samples::Values(requests)),
            ("sepia_response_bytes", Samples::Values(bytes)),
            ("sepia_request_duration_seconds", classes(&r.latency)),
            ("sepia_first_byte_seconds", classes(&r.first_byte)),
            ("sepia_client_connections_open", one(self.clients.open)),
            ("sepia_client_connections_idle", one(r.client_idle)),
            ("sepia_client_connections_parked", one(self.clients.parked)),
            ("sepia_origin_connections", self.origin_connections()),
            ("sepia_origin_latency_seconds", self.origin_latency()),
            (
                "sepia_revalidations",
                labelled("outcome", &revals, &r.revalidations),
            ),
            ("sepia_origin_up", self.origin_up()),
            ("sepia_health_checks", self.health_checks()),
        ]
    }

    /// Per route origin and event; requests without a route under `-` once they made any.
    fn origin_connections(&self) -> Samples<'_> {
        let mut all = Vec::new();
        let direct = (DIRECT, DIRECT, &self.requests.origin);
        let origins = self.origins.iter();
        let origins = origins.map(|o| (o.route.as_str(), o.origin.as_str(), &o.connections));
        let counted = |(_, _, counts): &(&str, &str, &[u64; 3])| counts.iter().any(|&n| n != 0);
        let direct = Some(direct).filter(counted);
        for (route, origin, counts) in origins.chain(direct) {
            for (event, n) in OriginEvent::ALL.iter().zip(counts) {
                let labels = vec![
                    ("route", route),
                    ("origin", origin),
                    ("event", event.as_str()),
                ];
                all.push((labels, *n as f64));
            }
        }
        Samples::Values(all)
    }

    /// Per route; requests without a route under `-` once there were any.
    fn origin_latency(&self) -> Samples<'_> {
        let direct = &self.requests.origin_latency;
        let direct = (direct.count() != 0).then_some((DIRECT, direct));
        let routes = self.route_latency.iter().map(|(r, h)| (r.as_str(), h));
        let all = routes.chain(direct).map(|(r, h)| (vec![("route", r)], h));
        Samples::Histograms(all.collect())
    }

    /// `sepia_origin_up`: 1 per route origin that is up, 0 for one marked down.
    fn origin_up(&self) -> Samples<'_> {
        let all = self.origins.iter().map(|o| {
            let labels = vec![("route", o.route.as_str()), ("origin", o.origin.as_str())];
            (labels, if o.up { 1.0 } else { 0.0 })
        });
        Samples::Values(all.collect())
    }

    /// `sepia_health_checks`: per route origin and result, for routes with active checks.
    fn health_checks(&self) -> Samples<'_> {
        let mut all = Vec::new();
        for o in self
            .origins
            .iter()
            .filter(|o| o.checks.iter().any(|&n| n != 0))
        {
            for (result, n) in CheckResult::ALL.iter().zip(&o.checks) {
                let labels = vec![
                    ("route", o.route.as_str()),
                    ("origin", o.origin.as_str()),
                    ("result", result.as_str()),
                ];
                all.push((labels, *n as f64));
            }
        }
        Samples::Values(all)
    }

    /// The store's counts (memory and disk tiers) and the purges.
    fn store_families(&self) -> Families<'_> {
        let s = &self.store;
        let lookups = [s.hits, s.misses, s.collapsed];
        vec![
            ("sepia_cache_objects", one(s.objects)),
            ("sepia_cache_bytes", one(s.bytes)),
            ("sepia_cache_budget_bytes", one(s.budget_bytes)),
            (
                "sepia_cache_lookups",
                labelled("result", &["hit", "miss", "collapsed"], &lookups),
            ),
            ("sepia_cache_admissions", one(s.insertions)),
            ("sepia_cache_evictions", one(s.evictions)),
            ("sepia_cache_removals", one(s.removals)),
            ("sepia_cache_rejected_too_big", one(s.rejected_too_big)),
            ("sepia_cache_aborted_fills", one(s.aborted_fills)),
            ("sepia_cache_body_files", one(s.body_files)),
            ("sepia_disk_objects", one(s.disk_objects)),
            ("sepia_disk_bytes", one(s.disk_bytes)),
            ("sepia_disk_index_bytes", one(s.disk_index_bytes)),
            ("sepia_disk_reads", one(s.disk_reads)),
            ("sepia_disk_hits", one(s.disk_hits)),
            ("sepia_disk_ring_reads", one(s.disk_ring_reads)),
            ("sepia_disk_writes", one(s.disk_writes)),
            ("sepia_disk_write_bytes", one(s.disk_write_bytes)),
            ("sepia_disk_write_skips", one(s.disk_write_skips)),
            ("sepia_disk_fill_writes", one(s.disk_fill_writes)),
            ("sepia_disk_fill_write_bytes", one(s.disk_fill_write_bytes)),
            (
                "sepia_disk_checksum_failures",
                one(s.disk_checksum_failures),
            ),
            ("sepia_disk_faults", one(s.disk_faults)),
            ("sepia_disks_failed", one(s.disks_failed)),
            ("sepia_purges", labelled("kind", &PURGE_KINDS, &self.purges)),
        ]
    }

    /// The access log's drops, the auth helpers and what the process costs.
    fn process_families(&self) -> Families<'_> {
        let p = &self.process;
        let float = |v: f64| Samples::Values(vec![(Vec::new(), v)]);
        let helper = self.auth_helper.as_ref();
        let queue = helper.map_or(Vec::new(), |h| {
            let states = [("queued", h.queued), ("in_flight", h.in_flight)];
            states.map(|(s, n)| (vec![("state", s)], n as f64)).to_vec()
        });
        let answers = helper.map_or(Vec::new(), |h| {
            let all = HelperStats::ANSWERS.iter().zip(h.answers);
            all.map(|(r, n)| (vec![("result", *r)], n as f64)).collect()
        });
        vec![
            ("sepia_auth_helper_requests", Samples::Values(queue)),
            ("sepia_auth_helper_answers", Samples::Values(answers)),
            ("sepia_access_log_dropped", one(self.log_dropped)),
            ("sepia_process_cpu_seconds", float(p.cpu_seconds)),
            ("sepia_process_resident_memory_bytes", one(p.rss_bytes)),
            ("sepia_process_open_fds", one(p.open_fds)),
            ("sepia_process_max_fds", one(p.max_fds)),
            ("sepia_uptime_seconds", float(self.uptime_seconds)),
        ]
    }
}

impl Collector for Gathered {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for (name, samples) in self.families() {
            let family = schema::find(name);
            let kind = match family.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = encoder.encode_descriptor(name, family.help, None, kind)?;
            match samples {
                Samples::Values(values) if family.labels.is_empty() => {
                    // One sample, written without a label set (no `{}`).
                    if let Some((labels, v)) = values.into_iter().next() {
                        debug_assert!(labels.is_empty(), "{name}");
                        Number(family.kind, v).encode(metric)?;
                    }
                }
                Samples::Values(values) => {
                    for (labels, v) in values {
                        debug_assert!(same_labels(&labels, family.labels), "{name}");
                        Number(family.kind, v).encode(metric.encode_family(&labels)?)?;
                    }
                }
                Samples::Histograms(hs) => {
                    for (labels, h) in hs {
                        debug_assert!(same_labels(&labels, family.labels), "{name}");
                        let buckets: Vec<(f64, u64)> = (0..BUCKETS)
                            .map(|n| (bucket_bound(n).unwrap_or(f64::MAX), h.buckets[n]))
                            .collect();
                        let sum = h.sum_micros as f64 / 1e6;
                        metric
                            .encode_family(&labels)?
                            .encode_histogram::<NoLabelSet>(sum, h.count(), &buckets, None)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether a sample's label names are its family's, in the schema's order.
fn same_labels(labels: &Labels<'_>, schema: &[&str]) -> bool {
    labels
        .iter()
        .map(|(name, _)| *name)
        .eq(schema.iter().copied())
}

/// A counter's or gauge's value (`Value` is serde_json's).
#[derive(Debug)]
struct Number(Kind, f64);

impl EncodeMetric for Number {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        // Whole numbers (every count) are written as integers, the rest as floats.
        let whole = self.1.fract() == 0.0 && self.1.abs() < 9.0e15;
        match (self.0, whole) {
            (Kind::Counter, true) => {
                encoder.encode_counter::<NoLabelSet, u64, f64>(&(self.1 as u64), None)
            }
            (Kind::Counter, false) => encoder.encode_counter::<NoLabelSet, f64, f64>(&self.1, None),
            (_, true) => encoder.encode_gauge(&(self.1 as i64)),
            (_, false) => encoder.encode_gauge(&self.1),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Kind::Counter => MetricType::Counter,
            _ => MetricType::Gauge,
        }
    }
}

impl std::fmt::Debug for Samples<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Samples")
    }
}

/// Each route origin's health and counts, for `/stats` and the dashboard.
fn origins_json(origins: &[OriginFigures]) -> Value {
    let events = OriginEvent::ALL.map(OriginEvent::as_str);
    let results = CheckResult::ALL.map(CheckResult::as_str);
    let all = origins.iter().map(|o| {
        let connections: serde_json::Map<_, _> = events
            .iter()
            .zip(o.connections)
            .map(|(e, n)| (e.to_string(), json!(n)))
            .collect();
        let checks: serde_json::Map<_, _> = results
            .iter()
            .zip(o.checks)
            .map(|(r, n)| (r.to_string(), json!(n)))
            .collect();
        json!({"route": o.route, "origin": o.origin, "up": o.up,
               "connections": connections, "checks": checks})
    });
    Value::Array(all.collect())
}

/// Latency histograms by class, for `/stats`.
fn histograms(h: &[Histogram; 3]) -> Value {
    let mut m = serde_json::Map::new();
    for (c, h) in LatencyClass::ALL.iter().zip(h) {
        m.insert(
            c.as_str().into(),
            json!({"buckets": h.buckets.to_vec(), "sum_seconds": h.sum_micros as f64 / 1e6, "count": h.count()}),
        );
    }
    Value::Object(m)
}

/// The auth helpers' queue and answers, for `/stats`.
fn helper_json(h: &HelperStats) -> Value {
    let answers = HelperStats::ANSWERS.iter().zip(h.answers);
    let answers: serde_json::Map<_, _> = answers.map(|(r, n)| (r.to_string(), json!(n))).collect();
    json!({"queued": h.queued, "in_flight": h.in_flight, "answers": answers})
}

/// Origin connection events of every route origin and of requests without a route.
fn origin_events(g: &Gathered) -> [u64; 3] {
    let mut sum = g.requests.origin;
    for o in &g.origins {
        for (s, n) in sum.iter_mut().zip(o.connections) {
            *s += n;
        }
    }
    sum
}

/// `/stats`: the same figures as JSON, plus the top lists.
pub fn stats_json(g: &Gathered, top_urls: &[Ranked], top_clients: &[Ranked], bans: usize) -> Value {
    let (mut total, mut hits, mut bytes, mut hit_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut by_result = serde_json::Map::new();
    let mut detail = Vec::new();
    for c in g.requests.requests() {
        total += c.requests;
        bytes += c.bytes;
        if c.result.is_hit() {
            hits += c.requests;
            hit_bytes += c.bytes;
        }
        let e = by_result.entry(c.result.as_str()).or_insert(json!(0));
        *e = json!(e.as_u64().unwrap_or(0) + c.requests);
        detail.push(json!({
            "listener": g.listeners.get(c.listener),
            "protocol": c.protocol.as_str(),
            "method": c.method.as_str(),
            "result": c.result.as_str(),
            "requests": c.requests,
            "bytes": c.bytes,
        }));
    }
    let bounds: Vec<Option<f64>> = (0..BUCKETS).map(bucket_bound).collect();
    let ranked = |r: &[Ranked]| {
        let all = r
            .iter()
            .map(|r| json!({"name": r.name, "samples": r.samples, "bytes": r.bytes}));
        Value::Array(all.collect())
    };
    let s = &g.store;
    let three =
        |names: [&str; 3], v: &[u64; 3]| json!({names[0]: v[0], names[1]: v[1], names[2]: v[2]});
    json!({
        "uptime_seconds": g.uptime_seconds,
        "listeners": g.listeners,
        "requests": {"total": total, "hits": hits, "bytes": bytes, "hit_bytes": hit_bytes},
        "by_result": by_result,
        "requests_detail": detail,
        "latency_bounds_seconds": bounds,
        "latency": histograms(&g.requests.latency),
        "first_byte": histograms(&g.requests.first_byte),
        "client_connections_open": g.clients.open,
        "client_connections": {"idle": g.requests.client_idle, "parked": g.clients.parked},
        "origin_connections": three(["opened", "reused", "failed"], &origin_events(g)),
        "origins": origins_json(&g.origins),
        "revalidations": three(["not_modified", "modified", "failed"], &g.requests.revalidations),
        "cache": {
            "objects": s.objects, "bytes": s.bytes, "budget_bytes": s.budget_bytes,
            "lookups_hit": s.hits, "lookups_miss": s.misses, "collapsed": s.collapsed,
            "admissions": s.insertions, "evictions": s.evictions, "removals": s.removals,
            "rejected_too_big": s.rejected_too_big, "aborted_fills": s.aborted_fills,
            "body_files": s.body_files,
            "disk_objects": s.disk_objects, "disk_bytes": s.disk_bytes,
            "disk_index_bytes": s.disk_index_bytes, "disk_reads": s.disk_reads,
            "disk_hits": s.disk_hits, "disk_ring_reads": s.disk_ring_reads,
            "disk_writes": s.disk_writes,
            "disk_write_bytes": s.disk_write_bytes, "disk_write_skips": s.disk_write_skips,
            "disk_fill_writes": s.disk_fill_writes,
            "disk_fill_write_bytes": s.disk_fill_write_bytes,
            "disk_checksum_failures": s.disk_checksum_failures, "disk_faults": s.disk_faults,
            "disks_failed": s.disks_failed, "bans": bans,
        },
        "purges": three(PURGE_KINDS, &g.purges),
        "access_log_dropped": g.log_dropped,
        "auth_helper": g.auth_helper.as_ref().map(helper_json),
        "process": {
            "cpu_seconds": g.process.cpu_seconds, "rss_bytes": g.process.rss_bytes,
            "open_fds": g.process.open_fds, "max_fds": g.process.max_fds,
        },
        "top": {
            "window_seconds": WINDOW_SECS, "sample_every": SAMPLE_EVERY,
            "urls": ranked(top_urls), "clients": ranked(top_clients),
        },
    })
}
