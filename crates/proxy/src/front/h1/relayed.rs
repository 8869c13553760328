//! The head of a response relayed from an origin, as an HTTP/1.1 client gets it: the origin's
//! fields except the hop-by-hop ones (RFC 9110 §7.6.1) and its framing, then Via (§7.6.3), the
//! Cache-Status (RFC 9211), the framing Sepia sends the body with (with the transfer codings
//! Sepia could not remove), and the connection's fate.
//!
//! Transfer codings other than chunked (`Transfer-Encoding: gzip`, or `gzip, chunked`) are
//! valid in a response (RFC 9112 §6.1), but Sepia cannot decode them, so the body it relays
//! is still coded. Transfer-Encoding is hop-by-hop: an intermediary removes or replaces it
//! "after applying those fields' semantics" (RFC 9110 §7.6.1), and "any recipient along the
//! request/response chain MAY decode the received transfer coding(s) or apply additional
//! transfer coding(s) to the message body, assuming that corresponding changes are made to the
//! Transfer-Encoding field value" (RFC 9112 §6.1). So the field is replaced, not dropped: the
//! origin's chunked (if any) is removed, and the body goes out like any body of unknown length
//! to an HTTP/1.1 client, chunked, under `Transfer-Encoding: <the other codings>, chunked`.
//!
//! Chunked rather than the origin's close-delimited form (the field as received, the client
//! connection closed after the body): both are allowed (§6.1: "the sender MUST either apply
//! chunked as the final transfer coding or terminate the message by closing the connection"),
//! but chunking keeps the client's connection persistent, lets the client tell a complete
//! body from one cut short by the origin failing (the last chunk never comes; RFC 9112 §8), and
//! is how Sepia already relays plain close-delimited bodies; every HTTP/1.1 recipient "MUST be
//! able to parse the chunked transfer coding" (§6.1), and one that knows the other codings
//! decodes them the same either way. An HTTP/1.0 client cannot receive Transfer-Encoding at
//! all: the origin client answers it 502 before any head is built here.

use bytes::BytesMut;
use sepia_http1::{
    end_head, put_header, put_header_u64, put_status_line, put_transfer_encoding, Version,
};

use crate::h1::body::BodyOut;
use crate::h1::fields::put_run;
use crate::model::{is_hop, BodyLength, FieldView, HeaderId, Method, ResponseView};

/// What the head says besides the origin's response.
pub struct Framed<'a> {
    /// The content that follows, as the origin framed it.
    pub length: BodyLength,
    /// How Sepia frames it.
    pub out: BodyOut,
    pub request_method: Method,
    pub client_version: Version,
    /// The connection stays open after this response.
    pub keep_alive: bool,
    pub via: Option<&'a [u8]>,
    /// The Cache-Status value; empty for none.
    pub cache_status: &'a [u8],
}

/// Appends the response head for the client to `out`.
pub fn build(out: &mut BytesMut, resp: &impl ResponseView, f: &Framed<'_>) {
    put_status_line(out, Version::Http11, resp.status(), resp.reason());
    put_passed_fields(out, resp);
    if let Some(via) = f.via {
        put_header(out, b"Via", via);
    }
    if !f.cache_status.is_empty() {
        put_header(out, b"Cache-Status", f.cache_status);
    }
    match (f.length, f.out) {
        (BodyLength::Known(n), _) => put_header_u64(out, b"Content-Length", n),
        (BodyLength::None, _) => {
            // HEAD and 304 carry the length the full response would have (RFC 9110 §8.6).
            let keeps_length = f.request_method == Method::Head || resp.status() == 304;
            if let (true, Some(n)) = (keeps_length, resp.declared_length()) {
                put_header_u64(out, b"Content-Length", n);
            }
        }
        (BodyLength::Unknown, BodyOut::Chunked) => {
            // The origin's codings other than chunked, then Sepia's chunked.
            let fields = resp.fields();
            let received = fields.each().filter(|f| f.id == HeaderId::TransferEncoding);
            put_transfer_encoding(out, received.map(|f| f.value));
        }
        // Never a transfer-coded body: HTTP/1.0 clients are refused those (see above).
        (BodyLength::Unknown, BodyOut::Raw) => {}
    }
    end_with_persistence(out, f.keep_alive, f.client_version);
}

/// Ends a response head with what the client must know of the connection's fate (RFC 9112
/// §9.3, §9.6): `close` when it ends, `keep-alive` for an HTTP/1.0 client whose connection
/// stays (persistence is not its default).
pub(super) fn end_with_persistence(out: &mut BytesMut, keep: bool, client_version: Version) {
    if !keep {
        put_header(out, b"Connection", b"close");
    } else if client_version == Version::Http10 {
        put_header(out, b"Connection", b"keep-alive");
    }
    end_head(out);
}

/// The head of an interim response (RFC 9110 §15.2): its status and end-to-end fields.
pub fn interim(out: &mut BytesMut, resp: &impl ResponseView) {
    put_status_line(out, Version::Http11, resp.status(), resp.reason());
    put_passed_fields(out, resp);
    end_head(out);
}

/// The origin's fields except the hop-by-hop ones and its Content-Length (Sepia writes the
/// framing it sends). Each run of passed lines is copied at once when it arrived in the form
/// `put_header` writes (one copy instead of four appends per line); the bytes are the same.
fn put_passed_fields(out: &mut BytesMut, resp: &impl ResponseView) {
    let fields = resp.fields();
    let connection = fields.connection_names();
    let mut run = 0..0;
    for (i, f) in fields.each().enumerate() {
        if is_hop(f, &connection) || f.id == HeaderId::ContentLength {
            put_run(out, &fields, std::mem::replace(&mut run, i + 1..i + 1));
        } else {
            run.end = i + 1;
        }
    }
    put_run(out, &fields, run);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::parsed::response as parse_resp;
    use crate::h1::views;

    fn client_head(raw: &str, method: Method, version: Version, keep: bool) -> String {
        let resp = parse_resp(raw);
        let length = views::body_length(resp.body_framing(method));
        let (out, _) = BodyOut::for_length(length, version == Version::Http11);
        let mut head = BytesMut::new();
        let framed = Framed {
            length,
            out,
            request_method: method,
            client_version: version,
            keep_alive: keep,
            via: Some(b"1.1 sepia"),
            cache_status: b"sepia; hit",
        };
        build(&mut head, &resp, &framed);
        String::from_utf8(head.to_vec()).unwrap()
    }

    #[test]
    fn passed_lines_are_written_alike_whether_copied_in_runs_or_one_by_one() {
        // Runs broken by dropped lines (Connection, what it names, Content-Length) and by
        // lines not in the written form (extra spaces, an empty value), in any order.
        let h = client_head(
            "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nConnection: x-hop\r\nC:   3  \r\n\
             D: 4\r\nX-Hop: y\r\nE:\r\nF: 6\r\nContent-Length: 0\r\nG: 7\r\n\r\n",
            Method::Get,
            Version::Http11,
            true,
        );
        assert_eq!(
            h,
            "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: \r\nF: 6\r\nG: 7\r\n\
             Via: 1.1 sepia\r\nCache-Status: sepia; hit\r\nContent-Length: 0\r\n\r\n"
        );
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
        assert!(h.contains("Cache-Status: sepia; hit\r\n"), "{h}");
    }

    #[test]
    fn other_transfer_codings_are_kept_before_sepias_chunked() {
        let cases = [
            (
                "Transfer-Encoding: gzip\r\n",
                "Transfer-Encoding: gzip, chunked\r\n",
            ),
            (
                "Transfer-Encoding: gzip, chunked\r\n",
                "Transfer-Encoding: gzip, chunked\r\n",
            ),
            (
                "Transfer-Encoding: x-a;v=1\r\nTransfer-Encoding: deflate, Chunked\r\n",
                "Transfer-Encoding: x-a;v=1, deflate, chunked\r\n",
            ),
            (
                "Transfer-Encoding: chunked\r\n",
                "Transfer-Encoding: chunked\r\n",
            ),
            // Content-Length beside Transfer-Encoding is dropped, never relayed (§6.3 rule 3).
            (
                "Content-Length: 3\r\nTransfer-Encoding: gzip\r\n",
                "Transfer-Encoding: gzip, chunked\r\n",
            ),
        ];
        for (te, want) in cases {
            let raw = format!("HTTP/1.1 200 OK\r\n{te}X-A: 1\r\n\r\n");
            let h = client_head(&raw, Method::Get, Version::Http11, true);
            assert_eq!(h.matches("Transfer-Encoding").count(), 1, "{h}");
            assert!(h.contains(want), "{te:?} gave:\n{h}");
            assert!(
                !h.contains("Content-Length") && !h.contains("Connection"),
                "{h}"
            );
            assert!(h.contains("X-A: 1\r\n"), "{h}");
        }
        // No body (HEAD): no framing field at all, as for chunked.
        let h = client_head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            Method::Head,
            Version::Http11,
            true,
        );
        assert!(!h.contains("Transfer-Encoding"), "{h}");
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

    #[test]
    fn interim_heads_carry_end_to_end_fields_only() {
        let resp = parse_resp(
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: x-hop\r\nX-Hop: 1\r\n\r\n",
        );
        let mut out = BytesMut::new();
        interim(&mut out, &resp);
        assert_eq!(
            &out[..],
            &b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"[..]
        );
    }
}
