//! The request head sent to an origin: the received fields except the hop-by-hop ones (RFC
//! 9110 §7.6.1: the standard list plus every field the Connection header names) and those
//! Sepia answers or writes itself, then Sepia's own: Via (§7.6.3), X-Forwarded-For /
//! Forwarded (RFC 7239), the validators of a revalidation, and the framing of the content as it
//! will be sent. Everything is appended into one reused buffer: no per-field allocation.

use bytes::BytesMut;
use sepia_config::{HeaderPolicy, XForwardedFor};
use sepia_http1::{end_head, put_header, put_header_u64, put_request_line, Version};

use crate::h1::fields::put_run;
use crate::model::{
    is_hop, BodyLength, ClientInfo, Field, FieldView, HeaderId, RequestView, Scheme,
};
use crate::upstream::request::Conditionals;

/// What the head says besides the client's request.
pub struct HeadParts<'a> {
    /// The origin-form target.
    pub target: &'a [u8],
    /// The Host value.
    pub host: &'a [u8],
    pub policy: &'a HeaderPolicy,
    /// The Via value Sepia adds.
    pub via: &'a [u8],
    pub client: &'a ClientInfo,
    /// The scheme the client used to reach Sepia (Forwarded's `proto`, RFC 7239 §5.4).
    pub client_scheme: Scheme,
    pub cond: &'a Conditionals<'a>,
}

/// The conditionals a cache answers itself from what it stores (RFC 9111 §4.3.2). If-Match,
/// If-Unmodified-Since and If-Range go to the origin, whose answer (412, 200) is what the
/// client must get.
fn is_conditional(id: HeaderId) -> bool {
    matches!(id, HeaderId::IfNoneMatch | HeaderId::IfModifiedSince)
}

/// Appends the request head for the origin to `out`.
pub fn build(out: &mut BytesMut, req: &impl RequestView, parts: &HeadParts<'_>) {
    put_request_line(out, req.method_raw(), parts.target, Version::Http11);
    put_header(out, b"Host", parts.host);
    let fields = req.fields();
    let xff_written = put_received_fields(out, &fields, parts);
    put_own_fields(out, parts, xff_written);
    match req.body() {
        BodyLength::Known(n) => put_header_u64(out, b"Content-Length", n),
        BodyLength::Unknown => put_header(out, b"Transfer-Encoding", b"chunked"),
        // Methods whose semantics anticipate content say so even when it is empty (RFC 9110
        // §8.6): keep an explicit zero length for them.
        BodyLength::None if req.declared_length() == Some(0) => {
            put_header_u64(out, b"Content-Length", 0)
        }
        BodyLength::None => {}
    }
    end_head(out);
}

/// Copies the client's fields that go on; returns whether X-Forwarded-For was written. Lines
/// copied unchanged are written a run of adjacent ones at a time ([`put_run`]).
fn put_received_fields(out: &mut BytesMut, fields: &impl FieldView, parts: &HeadParts<'_>) -> bool {
    let connection = fields.connection_names();
    let mut xff_written = false;
    let mut run = 0..0;
    for (i, f) in fields.each().enumerate() {
        if copied_unchanged(f, &connection, parts) {
            run.end = i + 1;
            continue;
        }
        put_run(out, fields, std::mem::replace(&mut run, i + 1..i + 1));
        if f.id == HeaderId::XForwardedFor
            && parts.policy.x_forwarded_for == XForwardedFor::Append
            && !xff_written
            && !is_hop(f, &connection)
        {
            put_appended_xff(out, fields.each(), &parts.client.ip_text);
            xff_written = true;
        }
    }
    put_run(out, fields, run);
    xff_written
}

/// Whether the client's field `f` goes to the origin as it came.
fn copied_unchanged(
    f: Field<'_>,
    connection: &impl Fn(&[u8]) -> bool,
    parts: &HeadParts<'_>,
) -> bool {
    if is_hop(f, connection) || (parts.cond.strip && is_conditional(f.id)) {
        return false;
    }
    let replaced_range = matches!(f.id, HeaderId::Range | HeaderId::IfRange);
    if replaced_range && parts.cond.range.is_some() {
        return false;
    }
    match f.id {
        // Sepia writes these itself; Expect is answered by Sepia (100 Continue) and
        // Proxy-Authorization is meant for this proxy, never for the origin (RFC 9110 §11.7.2).
        HeaderId::Host
        | HeaderId::ContentLength
        | HeaderId::Expect
        | HeaderId::ProxyAuthorization => false,
        HeaderId::XForwardedFor => parts.policy.x_forwarded_for == XForwardedFor::Off,
        _ => true,
    }
}

/// Every received X-Forwarded-For line joined into one, with the client appended last.
fn put_appended_xff<'f>(out: &mut BytesMut, fields: impl Iterator<Item = Field<'f>>, client: &str) {
    out.extend_from_slice(b"X-Forwarded-For: ");
    for f in fields.filter(|f| f.id == HeaderId::XForwardedFor) {
        out.extend_from_slice(f.value);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(client.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The fields Sepia adds: X-Forwarded-For (when none was received), Forwarded, Via, and the
/// validators of a revalidation.
fn put_own_fields(out: &mut BytesMut, parts: &HeadParts<'_>, xff_written: bool) {
    let policy = parts.policy;
    if !xff_written && policy.x_forwarded_for != XForwardedFor::Off {
        put_header(out, b"X-Forwarded-For", parts.client.ip_text.as_bytes());
    }
    if policy.forwarded {
        out.extend_from_slice(b"Forwarded: for=");
        out.extend_from_slice(parts.client.forwarded_for.as_bytes());
        out.extend_from_slice(b";proto=");
        out.extend_from_slice(parts.client_scheme.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if policy.via {
        put_header(out, b"Via", parts.via);
    }
    if let Some(etag) = parts.cond.if_none_match {
        put_header(out, b"If-None-Match", etag);
    }
    if let Some(date) = parts.cond.if_modified_since {
        put_header(out, b"If-Modified-Since", date);
    }
    if let Some(ask) = &parts.cond.range {
        put_header(out, b"Range", ask.range);
        put_header(out, b"If-Range", ask.if_range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::parsed::request as parse_req;
    use crate::upstream::request::RangeAsk;

    fn policy(xff: XForwardedFor, forwarded: bool) -> HeaderPolicy {
        HeaderPolicy {
            via: true,
            via_pseudonym: "sepia".into(),
            x_forwarded_for: xff,
            forwarded,
        }
    }

    fn parts<'a>(
        policy: &'a HeaderPolicy,
        client: &'a ClientInfo,
        host: &'a [u8],
        cond: &'a Conditionals<'a>,
    ) -> HeadParts<'a> {
        HeadParts {
            target: b"/p",
            host,
            policy,
            via: b"1.1 sepia",
            client,
            client_scheme: Scheme::Http,
            cond,
        }
    }

    fn origin_head(raw: &str, xff: XForwardedFor, forwarded: bool) -> String {
        let req = parse_req(raw);
        let mut out = BytesMut::new();
        let client = ClientInfo::new("192.0.2.7:1".parse().unwrap());
        let policy = policy(xff, forwarded);
        build(
            &mut out,
            &req,
            &parts(&policy, &client, b"origin:80", &Conditionals::AS_RECEIVED),
        );
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn conditionals_are_stripped_or_replaced_by_the_cache() {
        let req = parse_req(
            "GET /p HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"client\"\r\n\
             If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\nIf-Range: x\r\nX-Keep: 1\r\n\r\n",
        );
        let client = ClientInfo::new("192.0.2.7:1".parse().unwrap());
        let head_with = |cond: &Conditionals<'_>| {
            let mut out = BytesMut::new();
            let p = policy(XForwardedFor::Off, false);
            build(&mut out, &req, &parts(&p, &client, b"a", cond));
            String::from_utf8(out.to_vec()).unwrap()
        };
        let stripped = head_with(&Conditionals::STRIP);
        assert!(
            !stripped.contains("If-None-Match") && !stripped.contains("If-Modified-Since"),
            "{stripped}"
        );
        assert!(
            stripped.contains("If-Range: x\r\n"),
            "If-Range is the origin's to answer"
        );
        assert!(stripped.contains("X-Keep: 1\r\n"));
        let revalidating = head_with(&Conditionals {
            strip: true,
            if_none_match: Some(b"\"stored\""),
            if_modified_since: None,
            range: None,
        });
        assert!(revalidating.contains("If-None-Match: \"stored\"\r\n"));
        assert!(!revalidating.contains("client") && !revalidating.contains("If-Modified-Since"));
        assert_eq!(revalidating.matches("If-None-Match").count(), 1);
        let passed = head_with(&Conditionals::AS_RECEIVED);
        assert!(passed.contains("If-None-Match: \"client\"") && passed.contains("If-Range: x"));
        let completing = head_with(&Conditionals {
            range: Some(RangeAsk {
                range: b"bytes=5-9",
                if_range: b"\"piece\"",
            }),
            ..Conditionals::STRIP
        });
        assert!(completing.contains("Range: bytes=5-9\r\nIf-Range: \"piece\"\r\n"));
        assert_eq!(completing.matches("If-Range").count(), 1, "{completing}");
        assert!(!completing.contains("If-Range: x"));
    }

    #[test]
    fn hop_by_hop_fields_are_not_forwarded() {
        let head = origin_head(
            "POST /p HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret, Cache-Control\r\nX-Secret: 1\r\nCache-Control: no-cache\r\n\
             Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n\
             Proxy-Authorization: Basic Zm9vOmJhcg==\r\nExpect: 100-continue\r\nX-Kept: yes\r\n\
             Content-Length: 3\r\n\r\n",
            XForwardedFor::Off,
            false,
        );
        for gone in [
            "Connection",
            "X-Secret",
            "Keep-Alive",
            "TE:",
            "Upgrade",
            "Proxy-",
            "Expect",
        ] {
            assert!(!head.contains(gone), "{gone} leaked: {head}");
        }
        assert!(
            head.starts_with("POST /p HTTP/1.1\r\nHost: origin:80\r\n"),
            "{head}"
        );
        assert!(head.contains("X-Kept: yes\r\n"));
        assert!(head.contains("Via: 1.1 sepia\r\n"));
        assert!(head.contains("Content-Length: 3\r\n"));
        assert!(head.ends_with("\r\n\r\n"));
    }

    #[test]
    fn passed_lines_are_written_alike_whether_copied_in_runs_or_one_by_one() {
        // Runs broken by lines Sepia drops or writes itself, and by lines not in the written
        // form (extra spaces, an empty value).
        let head = origin_head(
            "GET /p HTTP/1.1\r\nA: 1\r\nHost: a\r\nB: 2\r\nC: 3\r\nX-Forwarded-For: 10.0.0.1\r\n\
             D:   4 \r\nE:\r\nConnection: x-hop\r\nX-Hop: 1\r\nF: 6\r\nG: 7\r\n\r\n",
            XForwardedFor::Append,
            false,
        );
        assert_eq!(
            head,
            "GET /p HTTP/1.1\r\nHost: origin:80\r\nA: 1\r\nB: 2\r\nC: 3\r\n\
             X-Forwarded-For: 10.0.0.1, 192.0.2.7\r\nD: 4\r\nE: \r\nF: 6\r\nG: 7\r\n\
             Via: 1.1 sepia\r\n\r\n"
        );
    }

    #[test]
    fn x_forwarded_for_modes() {
        let raw = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n\r\n";
        let append = origin_head(raw, XForwardedFor::Append, false);
        assert!(
            append.contains("X-Forwarded-For: 10.0.0.1, 10.0.0.2, 192.0.2.7\r\n"),
            "{append}"
        );
        assert_eq!(append.matches("X-Forwarded-For").count(), 1);
        let replace = origin_head(raw, XForwardedFor::Replace, false);
        assert!(replace.contains("X-Forwarded-For: 192.0.2.7\r\n"));
        assert_eq!(replace.matches("X-Forwarded-For").count(), 1);
        let off = origin_head(raw, XForwardedFor::Off, false);
        assert_eq!(off.matches("X-Forwarded-For").count(), 2);
        assert!(!off.contains("192.0.2.7"));
        let fresh = origin_head(
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            XForwardedFor::Append,
            true,
        );
        assert!(fresh.contains("X-Forwarded-For: 192.0.2.7\r\n"));
        assert!(fresh.contains("Forwarded: for=192.0.2.7;proto=http\r\n"));
    }

    #[test]
    fn chunked_requests_stay_chunked() {
        let head = origin_head(
            "PUT /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            XForwardedFor::Off,
            false,
        );
        assert!(head.contains("Transfer-Encoding: chunked\r\n"));
        assert!(!head.contains("Content-Length"));
    }

    #[test]
    fn an_explicit_zero_length_is_kept() {
        let head = origin_head(
            "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            XForwardedFor::Off,
            false,
        );
        assert!(head.contains("Content-Length: 0\r\n"), "{head}");
        let get = origin_head(
            "GET /p HTTP/1.1\r\nHost: a\r\n\r\n",
            XForwardedFor::Off,
            false,
        );
        assert!(!get.contains("Content-Length"), "{get}");
    }
}
