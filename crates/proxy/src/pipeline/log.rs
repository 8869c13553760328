//! The access log record of one request: borrowed slices of the request and the outcome,
//! formatted later by the log's writer task, off the request path.

use std::time::SystemTime;

use bytes::Bytes;
use sepia_config::Mode;
use sepia_observe::metrics::{self, MethodClass, Protocol, Stamp};
use sepia_observe::AccessRecord;
use tokio::time::Instant;

use super::context::ConnInfo;
use crate::model::{FieldView, HeaderId, Method, Outcome, RequestView, Scheme};
use crate::state::State;

/// When a request began, on both clocks: the wall clock for the log's timestamp, the
/// monotonic one for its duration.
#[derive(Clone, Copy)]
pub(super) struct Timing {
    started: SystemTime,
    clock: Instant,
}

impl Timing {
    pub(super) fn now() -> Timing {
        Timing {
            started: SystemTime::now(),
            clock: Instant::now(),
        }
    }
}

/// Counts the request in its worker's metrics (`sepia_observe::metrics`): by listener,
/// protocol, method class and result, its bytes, its latency and time to first byte; and
/// every few requests a sample of its URL and client for the dashboard's top lists.
/// The method's class from its parsed form (the bytes only for the rare others, e.g. PURGE).
fn method_class(req: &impl RequestView) -> MethodClass {
    match req.method() {
        Method::Get => MethodClass::Get,
        Method::Head => MethodClass::Head,
        Method::Post => MethodClass::Post,
        Method::Put => MethodClass::Put,
        Method::Delete => MethodClass::Delete,
        Method::Connect => MethodClass::Connect,
        _ => MethodClass::of(req.method_raw()),
    }
}

pub(super) fn count(conn: &ConnInfo, req: &impl RequestView, started: Stamp, o: &Outcome) {
    let now = Stamp::now();
    let protocol = match req.version().numbers().0 {
        2 => Protocol::H2,
        _ => Protocol::Http1,
    };
    let request = metrics::Request {
        listener: conn.listener,
        protocol,
        method: method_class(req),
        result: o.result,
        bytes: o.bytes_sent,
        elapsed_micros: Some(now.micros_since(started)),
        first_byte_micros: o.first_byte.map(|t| t.micros_since(started)),
    };
    metrics::record(&request, |keep| {
        let target = req.target();
        let client = conn.client.peer.ip();
        if target.first() == Some(&b'/') {
            let host = req.host().unwrap_or_default();
            keep(&[conn.scheme.as_bytes(), b"://", host, target], client);
        } else {
            keep(&[target], client);
        }
    });
}

pub(super) fn record(
    state: &State,
    conn: &ConnInfo,
    req: &impl RequestView,
    user: Option<&str>,
    timing: Timing,
    o: &Outcome,
) {
    // Squid 5.7 logs a request it could not parse as `NONE error:invalid-request`, and one it
    // parsed but refused (e.g. `GET /x` to a forward proxy) with its method and target.
    let (method, target) = if !req.method_raw().is_empty() && !req.target().is_empty() {
        (req.share(req.method_raw()), req.share(req.target()))
    } else {
        (
            Bytes::from_static(b"NONE"),
            Bytes::from_static(b"error:invalid-request"),
        )
    };
    let origin_form = target.first() == Some(&b'/');
    let fields = req.fields();
    let (version_major, version_minor) = req.version().numbers();
    state.log.log(AccessRecord {
        start: timing.started,
        elapsed: timing.clock.elapsed(),
        client: conn.client.peer,
        result: o.result,
        status: o.status,
        bytes_sent: o.bytes_sent,
        method,
        scheme_host: if origin_form && conn.mode != Mode::Forward {
            fields.shared(HeaderId::Host)
        } else {
            None
        },
        tls: conn.scheme == Scheme::Https,
        target,
        version_major,
        version_minor,
        // Copied only for authenticated requests, and only when logging.
        user: user.map(|u| Bytes::copy_from_slice(u.as_bytes())),
        hierarchy: o.hierarchy(),
        peer: o.peer,
        content_type: o.content_type.clone(),
        referer: fields.shared(HeaderId::Referer),
        user_agent: fields.shared(HeaderId::UserAgent),
    });
}
