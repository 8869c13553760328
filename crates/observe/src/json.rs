//! `format = "json"`: one JSON object per line (JSON Lines), for log pipelines that would
//! otherwise parse the Squid line with a regex. Written straight into the writer's buffer like
//! the other formats: no serde, no intermediate strings.
//!
//! Keys, always all present and in this order (absent values are `null`):
//!
//! | key | Squid code | value |
//! |---|---|---|
//! | `ts` | `%ts.%03tu` | when the response ended: seconds since the epoch, a number with three decimals |
//! | `elapsed_ms` | `%tr` | integer milliseconds from the request head to the last byte sent |
//! | `client` | `%>a` | client IP |
//! | `result` | `%Ss` | e.g. `"TCP_MISS"` |
//! | `status` | `%>Hs` | integer, 0 when nothing was sent |
//! | `bytes` | `%<st` | integer, bytes sent to the client, headers included |
//! | `method` | `%rm` | as received |
//! | `url` | `%ru` | as received, `http://host` prefixed to an origin-form target |
//! | `http_version` | `%rv` | `"1.0"`, `"1.1"` or `"2.0"` |
//! | `user` | `%un` | string or `null` |
//! | `hierarchy` | `%Sh` | e.g. `"HIER_DIRECT"` |
//! | `peer` | `%<a` | upstream IP or `null` |
//! | `mime_type` | `%mt` | media type of the response (no parameters) or `null` |
//! | `referer` | `%{Referer}>h` | string or `null` |
//! | `user_agent` | `%{User-Agent}>h` | string or `null` |
//!
//! Strings are the received bytes: valid UTF-8 is kept as is; `"` and `\` are escaped,
//! control characters written `\n`, `\r`, `\t`, `\b`, `\f` or `\u00XX` (DEL too), and every
//! byte sequence that is not valid UTF-8 becomes one `\ufffd` (U+FFFD, as
//! `String::from_utf8_lossy` replaces it), so every line is valid JSON whatever a client sent.

use std::net::IpAddr;

use crate::format::{
    is_plain_quoted, media_type, push_ip, push_logged_at, push_url_with, HEX_LOWER as HEX,
};
use crate::record::AccessRecord;

pub(crate) fn json_line(rec: &AccessRecord, out: &mut Vec<u8>) {
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(b"{\"ts\":");
    push_logged_at(out, rec);
    out.extend_from_slice(b",\"elapsed_ms\":");
    out.extend_from_slice(num.format(rec.elapsed.as_millis()).as_bytes());
    out.extend_from_slice(b",\"client\":");
    push_ip_string(out, Some(rec.client.ip()));
    out.extend_from_slice(b",\"result\":\"");
    out.extend_from_slice(rec.result.as_str().as_bytes());
    out.extend_from_slice(b"\",\"status\":");
    out.extend_from_slice(num.format(rec.status).as_bytes());
    out.extend_from_slice(b",\"bytes\":");
    out.extend_from_slice(num.format(rec.bytes_sent).as_bytes());
    out.extend_from_slice(b",\"method\":");
    push_string(out, Some(&rec.method));
    out.extend_from_slice(b",\"url\":\"");
    push_url_with(out, rec, push_escaped);
    out.extend_from_slice(b"\",\"http_version\":\"");
    out.extend_from_slice(num.format(rec.version_major).as_bytes());
    out.push(b'.');
    out.extend_from_slice(num.format(rec.version_minor).as_bytes());
    out.extend_from_slice(b"\",\"user\":");
    push_string(out, rec.user.as_deref());
    out.extend_from_slice(b",\"hierarchy\":\"");
    out.extend_from_slice(rec.hierarchy.as_str().as_bytes());
    out.extend_from_slice(b"\",\"peer\":");
    push_ip_string(out, rec.peer);
    out.extend_from_slice(b",\"mime_type\":");
    push_string(
        out,
        media_type(rec.content_type.as_deref()).filter(|m| !m.is_empty()),
    );
    out.extend_from_slice(b",\"referer\":");
    push_string(out, rec.referer.as_deref());
    out.extend_from_slice(b",\"user_agent\":");
    push_string(out, rec.user_agent.as_deref());
    out.extend_from_slice(b"}\n");
}

fn push_ip_string(out: &mut Vec<u8>, ip: Option<IpAddr>) {
    match ip {
        Some(ip) => {
            out.push(b'"');
            push_ip(out, ip);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON string, or `null`.
fn push_string(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => {
            out.push(b'"');
            push_escaped(out, value);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// The inside of a JSON string (RFC 8259 §7) for arbitrary bytes.
fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.iter().all(is_plain_quoted) {
        out.extend_from_slice(bytes);
        return;
    }
    for chunk in bytes.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match b {
                b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                0..0x20 | 0x7f => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]),
                // Printable ASCII and the bytes of valid multi-byte UTF-8 sequences.
                _ => out.push(b),
            }
        }
        if !chunk.invalid().is_empty() {
            out.extend_from_slice(b"\\ufffd");
        }
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
