//! Building the heads Sepia sends: the request toward the origin and the response toward the
//! client. Both copy the received fields except the hop-by-hop ones (RFC 9110 §7.6.1: the
//! standard list plus every field the Connection header names), then add Sepia's own: Via
//! (§7.6.3), X-Forwarded-For / Forwarded (RFC 7239), and the framing of the body as Sepia will
//! send it. Everything is appended into one reused buffer: no per-field allocation.

use bytes::BytesMut;
use sepia_config::{HeaderPolicy, XForwardedFor};
use sepia_http1::{
    end_head, put_header, put_header_u64, put_request_line, put_status_line, ConnectionMembers,
    Header, HeaderId, Method, RequestHead, ResponseHead, Version,
};

use crate::relay::BodyOut;

/// True when `h` must not be forwarded: hop-by-hop by definition, or named in Connection (any
/// field, well-known ones such as Cache-Control included, RFC 9110 §7.6.1).
fn is_hop(h: Header<'_>, connection: &ConnectionMembers<'_>) -> bool {
    h.id.is_hop_by_hop() || (!connection.is_empty() && connection.lists(h.name))
}

/// How the client's conditional fields reach the origin. A cache fill strips them (the
/// cache answers them itself from the stored response, RFC 9111 §4.3.2); a revalidation
/// replaces them with the stored response's validators (§4.3.1).
pub struct Conditionals<'a> {
    pub strip: bool,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
}

impl Conditionals<'static> {
    pub const AS_RECEIVED: Conditionals<'static> = Conditionals {
        strip: false,
        if_none_match: None,
        if_modified_since: None,
    };
    pub const STRIP: Conditionals<'static> = Conditionals {
        strip: true,
        if_none_match: None,
        if_modified_since: None,
    };
}

/// The conditionals a cache answers itself from what it stores (RFC 9111 §4.3.2). If-Match,
/// If-Unmodified-Since and If-Range go to the origin, whose answer (412, 200) is what the
/// client must get.
fn is_conditional(id: HeaderId) -> bool {
    matches!(id, HeaderId::IfNoneMatch | HeaderId::IfModifiedSince)
}

/// What the proxy knows about the client, computed once per connection.
pub struct ClientInfo {
    /// The client's address as text, for X-Forwarded-For.
    pub ip_text: String,
    /// The RFC 7239 `for=` value (IPv6 quoted and bracketed, §6).
    pub forwarded_for: String,
}

impl ClientInfo {
    pub fn new(ip: std::net::IpAddr) -> ClientInfo {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        let forwarded_for = match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("\"[{v6}]\""),
        };
        ClientInfo {
            ip_text: ip.to_string(),
            forwarded_for,
        }
    }
}

/// The request head for the origin. `target` is the origin-form; `host` the Host value to send.
/// `framing` is how the body will be sent (the same framing as received, re-encoded).
#[allow(clippy::too_many_arguments)] // every input of the head is a separate, borrowed piece
pub fn origin_request(
    out: &mut BytesMut,
    req: &RequestHead,
    target: &[u8],
    host: &[u8],
    policy: &HeaderPolicy,
    via: &[u8],
    client: &ClientInfo,
    cond: &Conditionals<'_>,
) {
    put_request_line(out, req.method_raw(), target, Version::Http11);
    put_header(out, b"Host", host);
    let headers = req.headers();
    let connection = headers.connection_members();
    let mut xff_written = false;
    for h in headers.iter() {
        if is_hop(h, &connection) || (cond.strip && is_conditional(h.id)) {
            continue;
        }
        match h.id {
            // Sepia writes these itself below; Expect is answered by Sepia (100 Continue) and
            // Proxy-Authorization is meant for this proxy, never for the origin (RFC 9110 §11.7.2).
            HeaderId::Host
            | HeaderId::ContentLength
            | HeaderId::Expect
            | HeaderId::ProxyAuthorization => continue,
            HeaderId::XForwardedFor => match policy.x_forwarded_for {
                XForwardedFor::Off => put_header(out, h.name, h.value),
                XForwardedFor::Replace => {}
                XForwardedFor::Append => {
                    if !xff_written {
                        // All received lines joined into one, with the client appended last.
                        out.extend_from_slice(b"X-Forwarded-For: ");
                        let mut first = true;
                        for v in headers.get_all(HeaderId::XForwardedFor) {
                            if !first {
                                out.extend_from_slice(b", ");
                            }
                            out.extend_from_slice(v);
                            first = false;
                        }
                        out.extend_from_slice(b", ");
                        out.extend_from_slice(client.ip_text.as_bytes());
                        out.extend_from_slice(b"\r\n");
                        xff_written = true;
                    }
                }
            },
            _ => put_header(out, h.name, h.value),
        }
    }
    if !xff_written && policy.x_forwarded_for != XForwardedFor::Off {
        put_header(out, b"X-Forwarded-For", client.ip_text.as_bytes());
    }
    if policy.forwarded {
        out.extend_from_slice(b"Forwarded: for=");
        out.extend_from_slice(client.forwarded_for.as_bytes());
        out.extend_from_slice(b";proto=http\r\n");
    }
    if policy.via {
        put_header(out, b"Via", via);
    }
    if let Some(etag) = cond.if_none_match {
        put_header(out, b"If-None-Match", etag);
    }
    if let Some(date) = cond.if_modified_since {
        put_header(out, b"If-Modified-Since", date);
    }
    match req.body_framing() {
        sepia_http1::BodyFraming::Length(n) => put_header_u64(out, b"Content-Length", n),
        sepia_http1::BodyFraming::Chunked => put_header(out, b"Transfer-Encoding", b"chunked"),
        _ => {
            // Methods whose semantics anticipate a body say so even when it is empty
            // (RFC 9110 §8.6): keep an explicit zero length for them.
            if req.content_length == Some(0) {
                put_header_u64(out, b"Content-Length", 0);
            }
        }
    }
    end_head(out);
}

/// How the response body goes to the client, decided from the origin's framing and the
/// client's version: HTTP/1.1 clients get chunked instead of close-delimited bodies so the
/// connection survives; HTTP/1.0 clients cannot parse chunked (RFC 9112 §7.1).
pub fn client_body_out(framing: sepia_http1::BodyFraming, client: Version) -> (BodyOut, bool) {
    use sepia_http1::BodyFraming::*;
    match (framing, client) {
        (Empty, _) | (Length(_), _) => (BodyOut::Raw, true),
        (Chunked | UntilClose, Version::Http11) => (BodyOut::Chunked, true),
        // The body ends when the connection closes.
        (Chunked | UntilClose, Version::Http10) => (BodyOut::Raw, false),
    }
}

/// The response head for the client.
#[allow(clippy::too_many_arguments)]
pub fn client_response(
    out: &mut BytesMut,
    resp: &ResponseHead,
    request_method: Method,
    framing: sepia_http1::BodyFraming,
    body_out: BodyOut,
    client_version: Version,
    keep_alive: bool,
    via: Option<&[u8]>,
    extra: &[u8],
) {
    put_status_line(out, Version::Http11, resp.status, resp.reason());
    let headers = resp.headers();
    let connection = headers.connection_members();
    for h in headers.iter() {
        if is_hop(h, &connection) || h.id == HeaderId::ContentLength {
            continue;
        }
        put_header(out, h.name, h.value);
    }
    if let Some(via) = via {
        put_header(out, b"Via", via);
    }
    out.extend_from_slice(extra);
    match (framing, body_out) {
        (sepia_http1::BodyFraming::Length(n), _) => put_header_u64(out, b"Content-Length", n),
        (sepia_http1::BodyFraming::Empty, _) => {
            // HEAD and 304 carry the length the full response would have (RFC 9110 §8.6).
            let keeps_length = request_method == Method::Head || resp.status == 304;
            if let (true, Some(n)) = (keeps_length, resp.content_length) {
                put_header_u64(out, b"Content-Length", n);
            }
        }
        (_, BodyOut::Chunked) => put_header(out, b"Transfer-Encoding", b"chunked"),
        (_, BodyOut::Raw) => {}
    }
    if !keep_alive {
        put_header(out, b"Connection", b"close");
    } else if client_version == Version::Http10 {
        put_header(out, b"Connection", b"keep-alive");
    }
    end_head(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sepia_http1::{BodyFraming, BytesMut as B, Limits, RequestDecoder, ResponseDecoder};

    fn policy(xff: XForwardedFor, forwarded: bool) -> HeaderPolicy {
        HeaderPolicy {
            via: true,
            via_pseudonym: "sepia".into(),
            x_forwarded_for: xff,
            forwarded,
        }
    }

    fn parse_req(raw: &str) -> RequestHead {
        let mut buf = B::from(raw.as_bytes());
        let mut head = RequestHead::default();
        assert!(RequestDecoder::new(Limits::default())
            .decode(&mut buf, &mut head)
            .unwrap());
        head
    }

    fn parse_resp(raw: &str) -> ResponseHead {
        let mut buf = B::from(raw.as_bytes());
        let mut head = ResponseHead::default();
        assert!(ResponseDecoder::new(Limits::default())
            .decode(&mut buf, &mut head)
            .unwrap());
        head
    }

    fn origin_head(raw: &str, xff: XForwardedFor, forwarded: bool) -> String {
        let req = parse_req(raw);
        let mut out = BytesMut::new();
        let client = ClientInfo::new("192.0.2.7".parse().unwrap());
        origin_request(
            &mut out,
            &req,
            b"/p",
            b"origin:80",
            &policy(xff, forwarded),
            b"1.1 sepia",
            &client,
            &Conditionals::AS_RECEIVED,
        );
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn conditionals_are_stripped_or_replaced_by_the_cache() {
        let req = parse_req(
            "GET /p HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"client\"\r\n\
             If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\nIf-Range: x\r\nX-Keep: 1\r\n\r\n",
        );
        let client = ClientInfo::new("192.0.2.7".parse().unwrap());
        let build = |cond: &Conditionals<'_>| {
            let mut out = BytesMut::new();
            let p = policy(XForwardedFor::Off, false);
            origin_request(&mut out, &req, b"/p", b"a", &p, b"1.1 sepia", &client, cond);
            String::from_utf8(out.to_vec()).unwrap()
        };
        let stripped = build(&Conditionals::STRIP);
        assert!(
            !stripped.contains("If-None-Match") && !stripped.contains("If-Modified-Since"),
            "{stripped}"
        );
        assert!(
            stripped.contains("If-Range: x\r\n"),
            "If-Range is the origin's to answer"
        );
        assert!(stripped.contains("X-Keep: 1\r\n"));
        let revalidating = build(&Conditionals {
            strip: true,
            if_none_match: Some(b"\"stored\""),
            if_modified_since: None,
        });
        assert!(revalidating.contains("If-None-Match: \"stored\"\r\n"));
        assert!(!revalidating.contains("client") && !revalidating.contains("If-Modified-Since"));
        assert_eq!(revalidating.matches("If-None-Match").count(), 1);
        let passed = build(&Conditionals::AS_RECEIVED);
        assert!(passed.contains("If-None-Match: \"client\"") && passed.contains("If-Range: x"));
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
    fn ipv6_forwarded_for_is_quoted() {
        let c = ClientInfo::new("2001:db8::1".parse().unwrap());
        assert_eq!(c.forwarded_for, "\"[2001:db8::1]\"");
        let mapped = ClientInfo::new("::ffff:192.0.2.1".parse().unwrap());
        assert_eq!(mapped.ip_text, "192.0.2.1");
    }

    fn client_head(raw: &str, method: Method, version: Version, keep: bool) -> String {
        let resp = parse_resp(raw);
        let framing = resp.body_framing(method);
        let (body_out, _) = client_body_out(framing, version);
        let mut out = BytesMut::new();
        client_response(
            &mut out,
            &resp,
            method,
            framing,
            body_out,
            version,
            keep,
            Some(b"1.1 sepia"),
            b"Cache-Status: sepia; hit\r\n",
        );
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn close_delimited_response_goes_out_chunked_to_http11() {
        let h = client_head(
            "HTTP/1.0 200 OK\r\nConnection: close\r\nX-A: 1\r\n\r\n",
            Method::Get,
            Version::Http11,
            true,
        );
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(h.contains("Transfer-Encoding: chunked\r\n"));
        assert!(!h.contains("Connection"), "{h}");
        assert!(h.contains("X-A: 1\r\n"));
        assert!(h.contains("Via: 1.1 sepia\r\n"));
        assert_eq!(
            client_body_out(BodyFraming::UntilClose, Version::Http10),
            (BodyOut::Raw, false)
        );
    }

    #[test]
    fn head_and_304_keep_content_length() {
        let h = client_head(
            "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n",
            Method::Head,
            Version::Http11,
            true,
        );
        assert!(h.contains("Content-Length: 42\r\n"), "{h}");
        let h = client_head(
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
            Method::Get,
            Version::Http11,
            true,
        );
        assert!(!h.contains("Content-Length"), "{h}");
    }

    #[test]
    fn connection_header_reflects_the_decision() {
        let h = client_head(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
            Method::Get,
            Version::Http10,
            true,
        );
        assert!(h.contains("Connection: keep-alive\r\n"));
        let h = client_head(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
            Method::Get,
            Version::Http11,
            false,
        );
        assert!(h.contains("Connection: close\r\n"));
    }
}
