//! Request metrics counted per worker thread and summed when read (a scrape, the dashboard).
//!
//! Each thread that records gets its own [`Shard`] on first use, registered in a process-wide
//! list: the request path writes only its own thread's cells, with a plain load and store
//! (no locked read-modify-write, no cache line shared with another worker), and allocates
//! nothing once its shard exists. [`snapshot`] adds every shard up; it is exact per cell but
//! not one atomic instant, which is all a scrape needs. A thread that ends leaves its shard in
//! the list, so totals never go backwards.
//!
//! Process-wide rather than per server because the cells must be reached from the request
//! path without a pointer to chase: one `Server` runs per process.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use crate::ResultCode;

/// The protocol a request came in over, a label of the request counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1 = 0,
    H2 = 1,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Http1, Protocol::H2];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::H2 => "h2",
        }
    }
}

/// A request method's class, a label of the request counters: the methods a cache tells
/// apart, then every other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodClass {
    Get = 0,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Purge,
    Other,
}

impl MethodClass {
    pub const ALL: [MethodClass; 8] = [
        MethodClass::Get,
        MethodClass::Head,
        MethodClass::Post,
        MethodClass::Put,
        MethodClass::Delete,
        MethodClass::Connect,
        MethodClass::Purge,
        MethodClass::Other,
    ];

    /// The class of a method as sent (methods are case-sensitive, RFC 9110 §9.1).
    pub fn of(method: &[u8]) -> MethodClass {
        match method {
            b"GET" => MethodClass::Get,
            b"HEAD" => MethodClass::Head,
            b"POST" => MethodClass::Post,
            b"PUT" => MethodClass::Put,
            b"DELETE" => MethodClass::Delete,
            b"CONNECT" => MethodClass::Connect,
            b"PURGE" => MethodClass::Purge,
            _ => MethodClass::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MethodClass::Get => "GET",
            MethodClass::Head => "HEAD",
            MethodClass::Post => "POST",
            MethodClass::Put => "PUT",
            MethodClass::Delete => "DELETE",
            MethodClass::Connect => "CONNECT",
            MethodClass::Purge => "PURGE",
            MethodClass::Other => "other",
        }
    }
}

/// Which latency histogram a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyClass {
    Hit = 0,
    Miss,
    Other,
}

impl LatencyClass {
    pub const ALL: [LatencyClass; 3] = [LatencyClass::Hit, LatencyClass::Miss, LatencyClass::Other];

    /// Hits (anything [`ResultCode::is_hit`]), misses (the origin answered), the rest
    /// (refusals, errors, tunnels).
    pub fn of(result: ResultCode) -> LatencyClass {
        match result {
            r if r.is_hit() => LatencyClass::Hit,
            ResultCode::TcpMiss
            | ResultCode::TcpRefreshModified
            | ResultCode::TcpClientRefreshMiss
            | ResultCode::TcpMissAborted => LatencyClass::Miss,
            _ => LatencyClass::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LatencyClass::Hit => "hit",
            LatencyClass::Miss => "miss",
            LatencyClass::Other => "other",
        }
    }
}

/// How a revalidation of a stored response ended (RFC 9111 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revalidation {
    /// 304: the stored response was freshened and served.
    NotModified = 0,
    /// A new response replaced it.
    Modified,
    /// The origin failed; the stale response was served or an error was.
    Failed,
}

impl Revalidation {
    pub const ALL: [Revalidation; 3] = [
        Revalidation::NotModified,
        Revalidation::Modified,
        Revalidation::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Revalidation::NotModified => "not_modified",
            Revalidation::Modified => "modified",
            Revalidation::Failed => "failed",
        }
    }
}

/// Origin connection events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginEvent {
    /// A new connection was opened (TCP, and TLS for https origins).
    Opened = 0,
    /// A request went out on a pooled connection.
    Reused,
    /// A connection attempt failed (refused, timed out, TLS refused).
    Failed,
}

impl OriginEvent {
    pub const ALL: [OriginEvent; 3] = [
        OriginEvent::Opened,
        OriginEvent::Reused,
        OriginEvent::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OriginEvent::Opened => "opened",
            OriginEvent::Reused => "reused",
            OriginEvent::Failed => "failed",
        }
    }
}

/// Latency buckets: bucket `n` holds durations of at most `16 µs × 2ⁿ` (16 µs to 33.6 s),
/// the last one everything longer.
pub const BUCKETS: usize = 23;

/// The upper bound of bucket `n` in seconds; `None` for the last (+Inf).
pub fn bucket_bound(n: usize) -> Option<f64> {
    (n + 1 < BUCKETS).then(|| (16u64 << n) as f64 / 1e6)
}

/// The bucket of `micros` microseconds.
#[inline]
fn bucket_of(micros: u64) -> usize {
    let n = (u64::BITS - (micros.saturating_sub(1) >> 4).leading_zeros()) as usize;
    n.min(BUCKETS - 1)
}

const PROTOCOLS: usize = Protocol::ALL.len();
const METHODS: usize = MethodClass::ALL.len();
const RESULTS: usize = ResultCode::ALL.len();
const CLASSES: usize = LatencyClass::ALL.len();
/// Requests per thread between two samples for the top lists.
pub const SAMPLE_EVERY: u64 = 16;
/// Samples a thread keeps until the admin listener collects them (once a second).
const SAMPLE_RING: usize = 1024;
/// Bytes of a sampled URL kept.
pub const SAMPLE_URL: usize = 120;

/// A cell only its own thread writes: a relaxed load and store, read by others with a load.
#[derive(Default)]
struct Cell(AtomicU64);

impl Cell {
    #[inline]
    fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[derive(Default)]
struct HistogramCells {
    buckets: [Cell; BUCKETS],
    sum_micros: Cell,
}

impl HistogramCells {
    #[inline]
    fn observe(&self, micros: u64) {
        self.buckets[bucket_of(micros)].add(1);
        self.sum_micros.add(micros);
    }

    fn add_to(&self, into: &mut Histogram) {
        for (sum, cell) in into.buckets.iter_mut().zip(&self.buckets) {
            *sum = sum.wrapping_add(cell.get());
        }
        into.sum_micros = into.sum_micros.wrapping_add(self.sum_micros.get());
    }
}

/// A histogram that several threads observe into (a locked add per observation), for a figure
/// of a configured object rather than of a worker: a route's origin latency. Never on the
/// hit path: a request reaches it only after an origin answered.
#[derive(Debug, Default)]
pub struct SharedHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
}

impl SharedHistogram {
    pub fn observe(&self, micros: u64) {
        self.buckets[bucket_of(micros)].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(micros, Relaxed);
    }

    /// The sums so far.
    pub fn read(&self) -> Histogram {
        Histogram {
            buckets: self.buckets.each_ref().map(|b| b.load(Relaxed)),
            sum_micros: self.sum_micros.load(Relaxed),
        }
    }
}

/// One sampled request for the top lists.
#[derive(Clone, Copy)]
pub struct Sample {
    /// Seconds since the Unix epoch (coarse).
    pub at: u64,
    pub client: IpAddr,
    pub bytes: u64,
    url: [u8; SAMPLE_URL],
    url_len: u8,
}

impl Sample {
    /// The URL, cut to [`SAMPLE_URL`] bytes.
    pub fn url(&self) -> &[u8] {
        &self.url[..usize::from(self.url_len)]
    }
}

/// A thread's cells.
struct Shard {
    listeners: usize,
    requests: Box<[Cell]>,
    bytes: Box<[Cell]>,
    latency: [HistogramCells; CLASSES],
    first_byte: [HistogramCells; CLASSES],
    origin: [Cell; 3],
    /// Origin latency of requests without a route (forward, intercepted).
    origin_latency: HistogramCells,
    revalidations: [Cell; 3],
    /// HTTP/1.1 connections waiting for their next request (see [`IdleMark`]): entered on one
    /// thread and left on another sum up right, each shard alone may be "negative".
    idle: Cell,
    ticks: Cell,
    samples: Mutex<Vec<Sample>>,
}

impl Shard {
    fn new(listeners: usize) -> Shard {
        let cells = listeners * PROTOCOLS * METHODS * RESULTS;
        Shard {
            listeners,
            requests: (0..cells).map(|_| Cell::default()).collect(),
            bytes: (0..cells).map(|_| Cell::default()).collect(),
            latency: Default::default(),
            first_byte: Default::default(),
            origin: Default::default(),
            origin_latency: Default::default(),
            revalidations: Default::default(),
            idle: Cell::default(),
            ticks: Cell::default(),
            samples: Mutex::new(Vec::with_capacity(SAMPLE_RING)),
        }
    }
}

fn index(listener: usize, protocol: Protocol, method: MethodClass, result: ResultCode) -> usize {
    ((listener * PROTOCOLS + protocol as usize) * METHODS + method as usize) * RESULTS
        + result as usize
}

static SHARDS: Mutex<Vec<Arc<Shard>>> = Mutex::new(Vec::new());
static LISTENERS: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    static LOCAL: Arc<Shard> = {
        let shard = Arc::new(Shard::new(LISTENERS.load(Relaxed).max(1)));
        SHARDS.lock().unwrap_or_else(PoisonError::into_inner).push(shard.clone());
        shard
    };
}

/// How many listeners requests are counted for (their index is a label). Call before
/// serving: shards made before keep their size, and count a larger index nowhere.
pub fn set_listeners(n: usize) {
    LISTENERS.store(n.max(1), Relaxed);
}

/// A reading of the monotonic clock (`CLOCK_MONOTONIC`, the one `Instant` reads) in
/// nanoseconds: subtracting two is one integer subtraction, where `Instant`'s checked
/// `timespec` arithmetic cost a keep-alive hit about 90 instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    #[inline]
    pub fn now() -> Stamp {
        use nix::time::{clock_gettime, ClockId};
        // CLOCK_MONOTONIC cannot fail on Linux; a failure reads as 0 (a zero duration).
        let Ok(t) = clock_gettime(ClockId::CLOCK_MONOTONIC) else {
            return Stamp(0);
        };
        let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
        Stamp(secs.wrapping_mul(1_000_000_000).wrapping_add(nanos))
    }

    /// Microseconds from `earlier` to this one (0 if it is later).
    #[inline]
    pub fn micros_since(self, earlier: Stamp) -> u64 {
        self.0.saturating_sub(earlier.0) / 1_000
    }
}

/// One answered request, as the pipeline's last step knows it.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub listener: usize,
    pub protocol: Protocol,
    pub method: MethodClass,
    pub result: ResultCode,
    /// Bytes written to the client, heads included.
    pub bytes: u64,
    /// Microseconds from the complete request head to the end of the response, when timed.
    pub elapsed_micros: Option<u64>,
    /// Microseconds from the complete request head to the response head handed to the
    /// connection; `None` for a response sent in one piece (its first byte is its last).
    pub first_byte_micros: Option<u64>,
}

/// Counts one request; every [`SAMPLE_EVERY`]th of a thread also calls `sample` for its
/// URL and client, kept for the top lists. Allocates nothing.
#[inline]
pub fn record(r: &Request, sample: impl FnOnce(&mut dyn FnMut(&[&[u8]], IpAddr))) {
    let _ = LOCAL.try_with(|shard| {
        if r.listener < shard.listeners {
            let i = index(r.listener, r.protocol, r.method, r.result);
            shard.requests[i].add(1);
            shard.bytes[i].add(r.bytes);
        }
        let class = LatencyClass::of(r.result) as usize;
        if let Some(total) = r.elapsed_micros {
            shard.latency[class].observe(total);
            shard.first_byte[class].observe(r.first_byte_micros.unwrap_or(total));
        }
        let tick = shard.ticks.get();
        shard.ticks.add(1);
        if tick % SAMPLE_EVERY == 0 {
            sample(&mut |parts, client| keep_sample(shard, parts, client, r.bytes));
        }
    });
}

#[cold]
fn keep_sample(shard: &Shard, parts: &[&[u8]], client: IpAddr, bytes: u64) {
    let mut url = [0u8; SAMPLE_URL];
    let mut len = 0;
    for part in parts {
        let n = part.len().min(SAMPLE_URL - len);
        url[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    let sample = Sample {
        at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        client,
        bytes,
        url,
        url_len: u8::try_from(len).unwrap_or(u8::MAX),
    };
    let mut samples = shard.samples.lock().unwrap_or_else(PoisonError::into_inner);
    if samples.len() < SAMPLE_RING {
        samples.push(sample);
    }
}

/// Counts an origin connection event.
#[inline]
pub fn origin(event: OriginEvent) {
    let _ = LOCAL.try_with(|shard| shard.origin[event as usize].add(1));
}

/// Times an origin's answer to a request without a route (forward, intercepted): from the
/// request sent to the response head, in microseconds.
#[inline]
pub fn origin_latency(micros: u64) {
    let _ = LOCAL.try_with(|shard| shard.origin_latency.observe(micros));
}

/// While it lives, a client connection waits for its next request (idle, not yet parked):
/// `sepia_client_connections_idle`. A plain load and store in the worker's own cell each way.
pub struct IdleMark(());

impl IdleMark {
    #[inline]
    pub fn enter() -> IdleMark {
        let _ = LOCAL.try_with(|shard| shard.idle.add(1));
        IdleMark(())
    }
}

impl Drop for IdleMark {
    #[inline]
    fn drop(&mut self) {
        // Minus one, in the wrapping arithmetic the sums use.
        let _ = LOCAL.try_with(|shard| shard.idle.add(u64::MAX));
    }
}

/// Counts a revalidation's end.
#[inline]
pub fn revalidation(outcome: Revalidation) {
    let _ = LOCAL.try_with(|shard| shard.revalidations[outcome as usize].add(1));
}

/// Takes every thread's samples kept since the last call (their buffers keep their room).
pub fn take_samples(into: &mut impl Extend<Sample>) {
    let shards = SHARDS.lock().unwrap_or_else(PoisonError::into_inner);
    for shard in shards.iter() {
        let mut samples = shard.samples.lock().unwrap_or_else(PoisonError::into_inner);
        into.extend(samples.drain(..));
    }
}

/// A histogram's sums: per-bucket counts (not cumulative) and the sum of the observations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub buckets: [u64; BUCKETS],
    pub sum_micros: u64,
}

impl Histogram {
    /// Observations.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// Every shard added up.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    listeners: usize,
    requests: Vec<u64>,
    bytes: Vec<u64>,
    pub latency: [Histogram; CLASSES],
    pub first_byte: [Histogram; CLASSES],
    pub origin: [u64; 3],
    /// Origin latency of requests without a route.
    pub origin_latency: Histogram,
    pub revalidations: [u64; 3],
    /// Client connections waiting for their next request, not parked.
    pub client_idle: u64,
}

/// One non-zero request cell of a [`Snapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestCell {
    pub listener: usize,
    pub protocol: Protocol,
    pub method: MethodClass,
    pub result: ResultCode,
    pub requests: u64,
    pub bytes: u64,
}

impl Snapshot {
    /// The request counters that are not zero.
    pub fn requests(&self) -> impl Iterator<Item = RequestCell> + '_ {
        (0..self.listeners).flat_map(move |listener| {
            Protocol::ALL.into_iter().flat_map(move |protocol| {
                MethodClass::ALL.into_iter().flat_map(move |method| {
                    ResultCode::ALL.into_iter().filter_map(move |result| {
                        let i = index(listener, protocol, method, result);
                        (self.requests[i] != 0).then(|| RequestCell {
                            listener,
                            protocol,
                            method,
                            result,
                            requests: self.requests[i],
                            bytes: self.bytes[i],
                        })
                    })
                })
            })
        })
    }
}

/// Adds every thread's cells up.
pub fn snapshot() -> Snapshot {
    let shards = SHARDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let listeners = shards.iter().map(|s| s.listeners).max().unwrap_or(1);
    let cells = listeners * PROTOCOLS * METHODS * RESULTS;
    let mut snap = Snapshot {
        listeners,
        requests: vec![0; cells],
        bytes: vec![0; cells],
        ..Snapshot::default()
    };
    let mut idle = 0u64;
    for shard in &shards {
        for (i, (r, b)) in shard.requests.iter().zip(&*shard.bytes).enumerate() {
            snap.requests[i] = snap.requests[i].wrapping_add(r.get());
            snap.bytes[i] = snap.bytes[i].wrapping_add(b.get());
        }
        shard.origin_latency.add_to(&mut snap.origin_latency);
        idle = idle.wrapping_add(shard.idle.get());
        for c in 0..CLASSES {
            shard.latency[c].add_to(&mut snap.latency[c]);
            shard.first_byte[c].add_to(&mut snap.first_byte[c]);
        }
        for e in 0..3 {
            snap.origin[e] = snap.origin[e].wrapping_add(shard.origin[e].get());
            snap.revalidations[e] =
                snap.revalidations[e].wrapping_add(shard.revalidations[e].get());
        }
    }
    // Read shard by shard while connections come and go: a sum caught between a leave and
    // its enter on another shard may dip below zero for a moment.
    snap.client_idle = u64::try_from(idle as i64).unwrap_or(0);
    snap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_upper_bound() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(16), 0);
        assert_eq!(bucket_of(17), 1);
        assert_eq!(bucket_of(32), 1);
        assert_eq!(bucket_of(33), 2);
        assert_eq!(bucket_of(1_000), 6); // 1,024 µs
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for n in 0..BUCKETS - 1 {
            let bound = (bucket_bound(n).unwrap() * 1e6).round() as u64;
            assert_eq!(bucket_of(bound), n);
            assert_eq!(bucket_of(bound + 1), n + 1);
        }
        assert_eq!(bucket_bound(BUCKETS - 1), None);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        set_listeners(2);
        let before = snapshot();
        let count = |s: &Snapshot| {
            s.requests()
                .filter(|c| c.listener == 1 && c.method == MethodClass::Purge)
                .map(|c| (c.requests, c.bytes))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1024 {
                        let r = Request {
                            listener: 1,
                            protocol: Protocol::H2,
                            method: MethodClass::Purge,
                            result: ResultCode::TcpMemHit,
                            bytes: 10,
                            elapsed_micros: Some(100),
                            first_byte_micros: None,
                        };
                        record(&r, |keep| {
                            keep(&[b"http://a/", b"b"], [127, 0, 0, 1].into())
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let after = snapshot();
        let (b, a) = (count(&before), count(&after));
        assert_eq!((a.0 - b.0, a.1 - b.1), (4096, 40_960));
        let hits = &after.latency[LatencyClass::Hit as usize];
        assert!(hits.count() >= 4000);
        assert!(hits.buckets[bucket_of(100)] >= 4000);
        let mut samples = Vec::new();
        take_samples(&mut samples);
        let ours = samples.iter().filter(|s| s.url() == b"http://a/b").count();
        assert_eq!(ours, 4 * 1024 / SAMPLE_EVERY as usize);
    }
}
