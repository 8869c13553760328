//! The access log record of one request: borrowed slices of the request and the outcome,
//! formatted later by the log's writer task, off the request path.

use std::time::SystemTime;

use bytes::Bytes;
use sepia_config::Mode;
use sepia_observe::AccessRecord;
use tokio::time::Instant;

use super::context::ConnInfo;
use crate::model::{FieldView, HeaderId, Outcome, RequestView, Scheme};
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
