//! Responses the proxy generates itself (errors, 100 Continue, CONNECT's 200).
//!
//! These are off the hot path, so they are formatted plainly; each carries a short text body
//! that says what went wrong, a Date (RFC 9110 §6.6.1) and `Cache-Control: no-store` so no
//! downstream cache keeps an error that may be transient.

use std::time::SystemTime;

use bytes::{BufMut, Bytes, BytesMut};
use sepia_http1::reason_phrase;

use crate::model::LOCAL_ANSWER_TYPE;

pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
pub const CONNECT_ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// A complete error response. `close` adds `Connection: close` (the caller then closes).
/// A 407 carries `challenge` as its Proxy-Authenticate value.
pub fn error_response(
    status: u16,
    detail: &str,
    close: bool,
    via: Option<&[u8]>,
    challenge: &[u8],
    retry_after: u32,
) -> Bytes {
    let reason = String::from_utf8_lossy(reason_phrase(status)).into_owned();
    let body = format!("{status} {reason}\n{detail}\n");
    let mut out = BytesMut::with_capacity(256 + body.len());
    out.put_slice(format!("HTTP/1.1 {status} {reason}\r\n").as_bytes());
    out.put_slice(b"Date: ");
    out.put_slice(httpdate::fmt_http_date(SystemTime::now()).as_bytes());
    out.put_slice(b"\r\nContent-Type: ");
    out.put_slice(LOCAL_ANSWER_TYPE);
    out.put_slice(b"\r\nCache-Control: no-store\r\n");
    if let Some(via) = via {
        out.put_slice(b"Via: ");
        out.put_slice(via);
        out.put_slice(b"\r\n");
    }
    if status == 407 {
        out.put_slice(b"Proxy-Authenticate: ");
        out.put_slice(challenge);
        out.put_slice(b"\r\n");
    }
    if retry_after != 0 {
        out.put_slice(format!("Retry-After: {retry_after}\r\n").as_bytes());
    }
    if close {
        out.put_slice(b"Connection: close\r\n");
    }
    out.put_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.put_slice(body.as_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHALLENGE: &[u8] = b"Basic realm=\"Sepia\"";

    #[test]
    fn error_response_is_a_complete_message() {
        let r = error_response(
            502,
            "origin refused the connection",
            true,
            Some(b"1.1 sepia"),
            CHALLENGE,
            0,
        );
        let text = std::str::from_utf8(&r).unwrap();
        assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
        assert!(text.contains("\r\nConnection: close\r\n"));
        assert!(text.contains("\r\nVia: 1.1 sepia\r\n"));
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        assert_eq!(body, "502 Bad Gateway\norigin refused the connection\n");
    }

    #[test]
    fn a_407_carries_a_basic_challenge() {
        let r = error_response(
            407,
            "proxy authentication required",
            false,
            None,
            b"Basic realm=\"Staff only\"",
            0,
        );
        let text = std::str::from_utf8(&r).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 407 Proxy Authentication Required\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\nProxy-Authenticate: Basic realm=\"Staff only\"\r\n"),
            "{text}"
        );
        let r = error_response(403, "denied", false, None, CHALLENGE, 0);
        assert!(!std::str::from_utf8(&r)
            .unwrap()
            .contains("Proxy-Authenticate"));
    }

    #[test]
    fn keep_alive_errors_do_not_say_close() {
        let r = error_response(403, "denied", false, None, CHALLENGE, 0);
        assert!(!std::str::from_utf8(&r)
            .unwrap()
            .contains("Connection: close"));
    }

    #[test]
    fn retry_after_only_when_given() {
        let r = error_response(503, "all down", false, None, CHALLENGE, 7);
        let text = std::str::from_utf8(&r).unwrap();
        assert!(text.contains("\r\nRetry-After: 7\r\n"), "{text}");
        let r = error_response(502, "refused", false, None, CHALLENGE, 0);
        assert!(!std::str::from_utf8(&r).unwrap().contains("Retry-After"));
    }
}
