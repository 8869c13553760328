//! Response heads for an HTTP/2 client: a stored object's (as the pipeline planned the hit),
//! a relayed origin response's, an interim one's and Sepia's own answers, each an
//! `http::Response<()>` for the h2 crate to encode. Names are lower-cased (RFC 9113 §8.2.1)
//! and the connection-specific fields an HTTP/1.1 head may hold are dropped (§8.2.2); a
//! field HTTP/2 cannot carry (a value with bytes `http` refuses) is dropped too. The length
//! of the content goes in `content-length` whenever it is known, as HTTP/2 allows (§8.1.1).

use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Response, StatusCode};
use sepia_cache_policy::{write_content_range, Fields, RangeOutcome, NOT_MODIFIED_FIELDS};
use sepia_http1::reason_phrase;
use sepia_store::Object;

use super::checks::is_connection_specific;
use crate::cache::{FieldMap, Meta};
use crate::model::{
    is_hop, BodyLength, FieldView, HeaderId, LocalAnswer, Method, ResponseView, LOCAL_ANSWER_TYPE,
};
use crate::pipeline::{HitPlan, StoredAnswer};

/// A head being built, and the bytes of its fields (names and values, what the access log
/// counts for it: the HPACK-coded size is known only to the h2 crate).
pub struct Head {
    pub response: Response<()>,
    pub bytes: u64,
}

impl Head {
    fn new(status: u16) -> Head {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        Head { response, bytes: 9 }
    }

    /// Adds a field; one that HTTP/2 cannot carry is left out.
    fn put(&mut self, name: &[u8], value: &[u8]) {
        if is_connection_specific(name) {
            return;
        }
        let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) else {
            return;
        };
        self.bytes += (name.len() + value.len()) as u64;
        self.response.headers_mut().append(n, v);
    }

    /// Adds a field Sepia writes itself (a name HTTP/2 carries, a value of digits).
    fn put_u64(&mut self, name: HeaderName, n: u64) {
        self.bytes += (name.as_str().len() + itoa::Buffer::new().format(n).len()) as u64;
        self.response
            .headers_mut()
            .append(name, HeaderValue::from(n));
    }

    /// Adds a stored field whose value is a slice of `head`, the stored head: the value is
    /// shared with it, not copied (one allocation and copy less per field of every hit).
    fn put_stored(&mut self, head: &Bytes, name: &[u8], value: &[u8]) {
        if is_connection_specific(name) {
            return;
        }
        let Ok(n) = HeaderName::from_bytes(name) else {
            return;
        };
        let Ok(v) = HeaderValue::from_maybe_shared(head.slice_ref(value)) else {
            return;
        };
        self.bytes += (name.len() + value.len()) as u64;
        self.response.headers_mut().append(n, v);
    }

    /// Adds a field Sepia writes itself, whose name needs no parsing nor checking.
    fn put_named(&mut self, name: HeaderName, value: &[u8]) {
        let Ok(v) = HeaderValue::from_bytes(value) else {
            return;
        };
        self.bytes += (name.as_str().len() + value.len()) as u64;
        self.response.headers_mut().append(name, v);
    }
}

/// Cache-Status (RFC 9211), a name the `http` crate does not know: built from a static, not
/// parsed.
fn cache_status_name() -> HeaderName {
    HeaderName::from_static("cache-status")
}

/// Fields a hit writes itself, whatever was stored (see `h1/stored_head.rs`).
fn written_per_hit(name: &[u8]) -> bool {
    [&b"age"[..], b"content-length", b"transfer-encoding"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

/// The head of a complete stored object answered as `answer` plans (RFC 9110 §13.2.2, §14,
/// §15.4.5), and the bytes of the stored body that follow it.
pub fn stored(
    obj: &Object<Meta>,
    answer: &StoredAnswer<'_>,
    via: Option<&[u8]>,
) -> (Head, std::ops::Range<u64>) {
    let entry = obj.meta();
    let stored = entry.layout.fields(obj.head());
    let mut head = Head::new(answer.plan.status(entry.meta.status));
    let len = obj.body_len();
    let (length, body) = match answer.plan {
        HitPlan::NotModified => {
            for (name, value) in stored.lines() {
                if NOT_MODIFIED_FIELDS
                    .iter()
                    .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
                {
                    head.put_stored(obj.head(), name, value);
                }
            }
            (None, 0..0)
        }
        HitPlan::PreconditionFailed => (Some(0), 0..0),
        HitPlan::Full => {
            put_cached_fields(&mut head, obj, via);
            (Some(len), if answer.head_only { 0..0 } else { 0..len })
        }
        HitPlan::Partial { start, end } => {
            put_fields(&mut head, obj.head(), &stored, via, true);
            let range = RangeOutcome::Partial { start, end };
            put_content_range(&mut head, range, answer.representation_len);
            let first = start - answer.body_offset;
            let body = if answer.head_only {
                first..first
            } else {
                first..end + 1 - answer.body_offset
            };
            (Some(end - start + 1), body)
        }
        HitPlan::Unsatisfiable => {
            // A minimal 416 (RFC 9110 §15.5.17), as the h1 front end sends.
            put_content_range(
                &mut head,
                RangeOutcome::Unsatisfiable,
                answer.representation_len,
            );
            (Some(0), 0..0)
        }
    };
    per_hit(&mut head, length, answer);
    (head, body)
}

/// The head of an object still being filled, whose content follows as it arrives.
pub fn fill(
    obj: &Object<Meta>,
    length: BodyLength,
    answer: &StoredAnswer<'_>,
    via: Option<&[u8]>,
) -> Head {
    let entry = obj.meta();
    let mut head = Head::new(entry.meta.status);
    put_cached_fields(&mut head, obj, via);
    let known = match length {
        BodyLength::Known(n) => Some(n),
        BodyLength::None => Some(0),
        BodyLength::Unknown => None,
    };
    per_hit(&mut head, known, answer);
    head
}

/// [`put_fields`] for a whole stored response, from the map its first HTTP/2 hit built: a
/// clone shares every name and value, where building the map again parsed each name and
/// checked each value (callgrind, `h2load -c 100 -m 32` of a 1 KiB hit with 8 stored fields:
/// 6,800 instructions per request for the head, of 44,000).
fn put_cached_fields(head: &mut Head, obj: &Object<Meta>, via: Option<&[u8]>) {
    let cached = obj.meta().h2_fields.get_or_init(|| {
        let mut built = Head::new(200);
        let stored = obj.meta().layout.fields(obj.head());
        put_fields(&mut built, obj.head(), &stored, None, false);
        let fields = std::mem::take(built.response.headers_mut());
        // Room for the fields each hit adds (Via, Content-Length, Age, Cache-Status): a clone
        // keeps it, and appending them then never rebuilds the map's index.
        let mut map = http::HeaderMap::with_capacity(fields.len() + 4);
        map.extend(fields);
        FieldMap {
            map,
            bytes: built.bytes - Head::new(200).bytes,
        }
    });
    *head.response.headers_mut() = cached.map.clone();
    head.bytes += cached.bytes;
    if let Some(via) = via {
        head.put_named(http::header::VIA, via);
    }
}

/// The stored fields but those a hit writes itself (and, for a 206, Content-Range), then
/// Sepia's Via (kept beside the stored fields, not among them).
fn put_fields(
    head: &mut Head,
    raw: &Bytes,
    stored: &impl Fields,
    via: Option<&[u8]>,
    partial: bool,
) {
    for (name, value) in stored.lines() {
        let replaced = partial && name.eq_ignore_ascii_case(b"content-range");
        if !written_per_hit(name) && !replaced {
            head.put_stored(raw, name, value);
        }
    }
    if let Some(via) = via {
        head.put_named(http::header::VIA, via);
    }
}

/// Content-Length, Age (RFC 9111 §5.1) and Cache-Status (RFC 9211).
fn per_hit(head: &mut Head, length: Option<u64>, answer: &StoredAnswer<'_>) {
    if let Some(n) = length {
        head.put_u64(http::header::CONTENT_LENGTH, n);
    }
    head.put_u64(http::header::AGE, answer.age);
    if !answer.cache_status.is_empty() {
        head.put_named(cache_status_name(), answer.cache_status);
    }
}

fn put_content_range(head: &mut Head, range: RangeOutcome, len: u64) {
    let mut value = Vec::with_capacity(48);
    write_content_range(range, len, &mut value);
    head.put(b"content-range", &value);
}

/// A response relayed from an origin: its end-to-end fields (RFC 9110 §7.6.1), Via (§7.6.3),
/// Cache-Status and the length of the content, which HEAD and 304 answers state without
/// carrying it (§8.6).
pub fn relayed(
    resp: &impl ResponseView,
    length: BodyLength,
    method: Method,
    via: Option<&[u8]>,
    cache_status: &[u8],
) -> Head {
    let mut head = Head::new(resp.status());
    put_passed(&mut head, resp);
    if let Some(via) = via {
        head.put_named(http::header::VIA, via);
    }
    if !cache_status.is_empty() {
        head.put_named(cache_status_name(), cache_status);
    }
    match length {
        BodyLength::Known(n) => head.put_u64(http::header::CONTENT_LENGTH, n),
        BodyLength::None if method == Method::Head || resp.status() == 304 => {
            if let Some(n) = resp.declared_length() {
                head.put_u64(http::header::CONTENT_LENGTH, n);
            }
        }
        BodyLength::None | BodyLength::Unknown => {}
    }
    head
}

/// An interim response (RFC 9110 §15.2): its status and end-to-end fields.
pub fn interim(resp: &impl ResponseView) -> Head {
    let mut head = Head::new(resp.status());
    put_passed(&mut head, resp);
    head
}

/// The origin's fields but the hop-by-hop ones and its framing.
fn put_passed(head: &mut Head, resp: &impl ResponseView) {
    let fields = resp.fields();
    let connection = fields.connection_names();
    for f in fields.each() {
        if !is_hop(f, &connection) && f.id != HeaderId::ContentLength {
            head.put(f.name, f.value);
        }
    }
}

/// An answer Sepia makes itself and its content: a status line and a sentence as plain text
/// (as the h1 front end's), never stored downstream (`no-store`).
pub fn local(answer: LocalAnswer, via: Option<&[u8]>, challenge: &[u8]) -> (Head, Bytes) {
    let reason = String::from_utf8_lossy(reason_phrase(answer.status));
    let body = Bytes::from(format!("{} {reason}\n{}\n", answer.status, answer.detail));
    let mut head = Head::new(answer.status);
    head.put(
        b"date",
        httpdate::fmt_http_date(SystemTime::now()).as_bytes(),
    );
    head.put(b"content-type", LOCAL_ANSWER_TYPE);
    head.put(b"cache-control", b"no-store");
    if let Some(via) = via {
        head.put_named(http::header::VIA, via);
    }
    if answer.status == 407 {
        head.put(b"proxy-authenticate", challenge);
    }
    if answer.retry_after != 0 {
        head.put_u64(http::header::RETRY_AFTER, u64::from(answer.retry_after));
    }
    head.put_u64(http::header::CONTENT_LENGTH, body.len() as u64);
    (head, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::parsed::response;

    #[test]
    fn relayed_heads_drop_what_http2_cannot_carry() {
        let resp = response(
            "HTTP/1.1 200 OK\r\nConnection: x-hop\r\nKeep-Alive: 5\r\nX-Hop: 1\r\n\
             Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n\
             X-Kept: yes\r\nETag: \"e\"\r\n\r\n",
        );
        let head = relayed(
            &resp,
            BodyLength::Unknown,
            Method::Get,
            Some(b"1.1 s"),
            b"s; fwd=miss",
        );
        let h = head.response.headers();
        for gone in [
            "connection",
            "keep-alive",
            "x-hop",
            "transfer-encoding",
            "upgrade",
            "proxy-connection",
        ] {
            assert!(!h.contains_key(gone), "{gone} kept: {h:?}");
        }
        assert_eq!(h["x-kept"], "yes");
        assert_eq!(h["etag"], "\"e\"");
        assert_eq!(h["via"], "1.1 s");
        assert_eq!(h["cache-status"], "s; fwd=miss");
        assert!(!h.contains_key("content-length"));
        assert_eq!(head.response.status(), 200);
    }

    #[test]
    fn head_answers_keep_the_length() {
        let resp = response("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n");
        let head = relayed(&resp, BodyLength::None, Method::Head, None, b"");
        assert_eq!(head.response.headers()["content-length"], "42");
        let known = relayed(&resp, BodyLength::Known(42), Method::Get, None, b"");
        assert_eq!(
            known
                .response
                .headers()
                .get_all("content-length")
                .iter()
                .count(),
            1
        );
    }

    #[test]
    fn local_answers_say_why_and_challenge_on_407() {
        let (head, body) = local(
            LocalAnswer {
                status: 407,
                detail: "who?",
                retry_after: 0,
            },
            None,
            b"Basic realm=\"x\"",
        );
        assert_eq!(head.response.status(), 407);
        assert_eq!(
            head.response.headers()["proxy-authenticate"],
            "Basic realm=\"x\""
        );
        assert_eq!(&body[..], b"407 Proxy Authentication Required\nwho?\n");
        assert_eq!(
            head.response.headers()["content-length"],
            body.len().to_string().as_str()
        );
        assert!(head.response.headers().get("retry-after").is_none());
    }

    #[test]
    fn a_503_for_down_origins_says_when_to_retry() {
        let answer = LocalAnswer {
            status: 503,
            detail: "down",
            retry_after: 10,
        };
        let (head, _) = local(answer, None, b"");
        assert_eq!(head.response.headers()["retry-after"], "10");
    }
}
