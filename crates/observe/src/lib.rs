//! Observability off the hot path: the access log and process counters.
//!
//! The request path builds an [`AccessRecord`] from `Bytes` slices it already holds and hands
//! it to [`AccessLog::log`]; it formats nothing. A background task ([`AccessLogWriter`])
//! formats records in Squid's native or the combined format and writes them in batches.
//! [`Counters`] are lock-free atomics the proxy bumps and a metrics endpoint reads.
//!
//! This crate depends on no other Sepia crate (in particular not on `sepia-config`): the
//! binary maps its configuration onto [`LogSink`] and [`LogFormat`].

mod counters;
mod format;
mod record;
mod writer;

pub use counters::{Counter, Counters, CountersSnapshot};
pub use format::{format_combined, format_squid, LineFormatter, LogFormat};
pub use record::{AccessRecord, Hierarchy, ResultCode};
pub use writer::{AccessLog, AccessLogWriter, LogSink, BATCH_TICK, WRITE_CHUNK};
