//! Observability off the hot path: the access log and process counters.
//!
//! The request path builds an [`AccessRecord`] from `Bytes` slices it already holds and hands
//! it to [`AccessLog::log`]; it formats nothing. A background task ([`AccessLogWriter`])
//! formats records (Squid's native format, Apache combined, or JSON lines) and writes them in
//! batches; on request it reopens its file (log rotation).
//! [`Counters`] are lock-free atomics the proxy bumps and a metrics endpoint reads.
//!
//! This crate depends on no other Sepia crate (in particular not on `sepia-config`): the
//! binary maps its configuration onto [`LogSink`] and [`LogFormat`].

mod counters;
mod format;
mod json;
pub mod metrics;
mod record;
mod writer;

pub use counters::{Counter, Counters, CountersSnapshot};
pub use format::{format_combined, format_json, format_squid, LineFormatter, LogFormat};
pub use record::{AccessRecord, Hierarchy, ResultCode};
pub use writer::{
    AccessLog, AccessLogWriter, LogReopen, LogSink, BATCH_TICK, DROP_WARNING_INTERVAL,
    QUEUE_CAPACITY, WRITE_CHUNK,
};
