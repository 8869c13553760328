//! Exact expected lines for the Squid and combined formats (JSON: `json_tests.rs`).

use std::net::SocketAddr;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;

use super::*;
use crate::record::{Hierarchy, ResultCode};

/// A forward-proxy miss received at 2025-11-22 07:40:00.123 UTC, ended 456 ms later.
pub(crate) fn miss() -> AccessRecord {
    AccessRecord {
        start: UNIX_EPOCH + Duration::from_millis(1_763_797_200_123),
        elapsed: Duration::from_millis(456),
        client: "127.0.0.1:54321".parse().unwrap(),
        result: ResultCode::TcpMiss,
        status: 200,
        bytes_sent: 1234,
        method: Bytes::from_static(b"GET"),
        scheme_host: None,
        tls: false,
        target: Bytes::from_static(b"http://example.com/index.html"),
        version_major: 1,
        version_minor: 1,
        user: None,
        hierarchy: Hierarchy::Direct,
        peer: Some("127.0.0.1".parse().unwrap()),
        content_type: Some(Bytes::from_static(b"text/html")),
        referer: None,
        user_agent: None,
    }
}

fn squid(rec: &AccessRecord) -> String {
    let mut out = Vec::new();
    format_squid(rec, &mut out);
    String::from_utf8(out).unwrap()
}

fn combined(rec: &AccessRecord) -> String {
    let mut out = Vec::new();
    format_combined(rec, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn squid_lines() {
    let hit = AccessRecord {
        result: ResultCode::TcpMemHit,
        hierarchy: Hierarchy::None,
        peer: None,
        elapsed: Duration::ZERO,
        scheme_host: Some(Bytes::from_static(b"www.example.com")),
        tls: false,
        target: Bytes::from_static(b"/a?b=c"),
        ..miss()
    };
    let tunnel = AccessRecord {
        result: ResultCode::TcpTunnel,
        method: Bytes::from_static(b"CONNECT"),
        target: Bytes::from_static(b"example.com:443"),
        elapsed: Duration::from_millis(1_234_567),
        bytes_sent: 987_654_321,
        peer: Some("93.184.216.34".parse().unwrap()),
        content_type: None,
        ..miss()
    };
    let denied = AccessRecord {
        result: ResultCode::TcpDenied,
        status: 403,
        bytes_sent: 0,
        hierarchy: Hierarchy::None,
        peer: None,
        content_type: Some(Bytes::from_static(b"text/plain")),
        client: "[2001:db8::7]:40000".parse().unwrap(),
        ..miss()
    };
    let nothing = AccessRecord {
        result: ResultCode::TagNone,
        status: 0,
        bytes_sent: 0,
        method: Bytes::from_static(b"NONE"),
        target: Bytes::from_static(b"error:invalid-request"),
        hierarchy: Hierarchy::None,
        peer: None,
        content_type: None,
        client: "[::ffff:10.1.2.3]:1".parse().unwrap(),
        start: UNIX_EPOCH + Duration::from_millis(5),
        elapsed: Duration::from_millis(7),
        ..miss()
    };
    let parent = AccessRecord {
        hierarchy: Hierarchy::FirstUpParent,
        user: Some(Bytes::from_static(b"alice")),
        peer: Some("::1".parse().unwrap()),
        scheme_host: Some(Bytes::from_static(b"site")),
        tls: false,
        target: Bytes::from_static(b"/"),
        result: ResultCode::TcpRefreshUnmodified,
        status: 304,
        ..miss()
    };
    let cases = [
        (
            miss(),
            "1763797200.579    456 127.0.0.1 TCP_MISS/200 1234 GET \
             http://example.com/index.html - HIER_DIRECT/127.0.0.1 text/html\n",
        ),
        (
            hit,
            "1763797200.123      0 127.0.0.1 TCP_MEM_HIT/200 1234 GET \
             http://www.example.com/a?b=c - HIER_NONE/- text/html\n",
        ),
        (
            tunnel,
            "1763798434.690 1234567 127.0.0.1 TCP_TUNNEL/200 987654321 CONNECT \
             example.com:443 - HIER_DIRECT/93.184.216.34 -\n",
        ),
        (
            denied,
            "1763797200.579    456 2001:db8::7 TCP_DENIED/403 0 GET \
             http://example.com/index.html - HIER_NONE/- text/plain\n",
        ),
        (
            nothing,
            "0.012      7 10.1.2.3 NONE_NONE/000 0 NONE error:invalid-request - HIER_NONE/- -\n",
        ),
        (
            parent,
            "1763797200.579    456 127.0.0.1 TCP_REFRESH_UNMODIFIED/304 1234 GET http://site/ \
             alice FIRSTUP_PARENT/::1 text/html\n",
        ),
    ];
    for (rec, want) in cases {
        assert_eq!(squid(&rec), want);
    }
}

#[test]
fn squid_keeps_one_line_per_record() {
    let rec = AccessRecord {
        target: Bytes::from_static(b"/a b\r\nc\x7f%20\xc3\xa9"),
        scheme_host: Some(Bytes::from_static(b"h")),
        tls: false,
        user: Some(Bytes::from_static(b"bob smith")),
        content_type: Some(Bytes::from_static(b"text/html; charset=utf-8")),
        ..miss()
    };
    let line = squid(&rec);
    assert_eq!(
        line,
        "1763797200.579    456 127.0.0.1 TCP_MISS/200 1234 GET \
         http://h/a%20b%0D%0Ac%7F%20\u{e9} bob%20smith HIER_DIRECT/127.0.0.1 text/html\n"
    );
    assert_eq!(line.split(' ').filter(|f| !f.is_empty()).count(), 10);
}

#[test]
fn squid_empty_user_is_a_dash() {
    let rec = AccessRecord {
        user: Some(Bytes::new()),
        content_type: Some(Bytes::new()),
        ..miss()
    };
    assert!(squid(&rec).ends_with(" - HIER_DIRECT/127.0.0.1 -\n"));
}

#[test]
fn combined_lines() {
    let at_2026 = UNIX_EPOCH + Duration::from_secs(1_795_332_840);
    let browser = AccessRecord {
        start: at_2026,
        referer: Some(Bytes::from_static(b"http://example.com/")),
        user_agent: Some(Bytes::from_static(b"Mozilla/5.0 (X11)")),
        ..miss()
    };
    let quoted = AccessRecord {
        start: at_2026 + Duration::from_millis(999),
        version_major: 1,
        version_minor: 0,
        status: 0,
        bytes_sent: 0,
        user: Some(Bytes::from_static(b"al ice")),
        scheme_host: Some(Bytes::from_static(b"h")),
        tls: false,
        target: Bytes::from_static(b"/\"x\"\\y\n"),
        user_agent: Some(Bytes::from_static(b"say \"hi\"\t")),
        client: "[::1]:5".parse::<SocketAddr>().unwrap(),
        ..miss()
    };
    let h2 = AccessRecord {
        version_major: 2,
        version_minor: 0,
        ..miss()
    };
    let cases = [
        (
            browser,
            "127.0.0.1 - - [22/Nov/2026:07:34:00 +0000] \"GET http://example.com/index.html \
             HTTP/1.1\" 200 1234 \"http://example.com/\" \"Mozilla/5.0 (X11)\"\n",
        ),
        (
            quoted,
            "::1 - al\\x20ice [22/Nov/2026:07:34:00 +0000] \"GET http://h/\\\"x\\\"\\\\y\\n \
             HTTP/1.0\" 000 0 \"-\" \"say \\\"hi\\\"\\t\"\n",
        ),
        (
            miss(),
            "127.0.0.1 - - [22/Nov/2025:07:40:00 +0000] \"GET http://example.com/index.html \
             HTTP/1.1\" 200 1234 \"-\" \"-\"\n",
        ),
        (
            h2,
            "127.0.0.1 - - [22/Nov/2025:07:40:00 +0000] \"GET http://example.com/index.html \
             HTTP/2.0\" 200 1234 \"-\" \"-\"\n",
        ),
    ];
    for (rec, want) in cases {
        assert_eq!(combined(&rec), want);
    }
}

#[test]
fn date_cache_follows_the_clock() {
    let mut cache = DateCache::default();
    let cases = [
        (0, "01/Jan/1970:00:00:00 +0000"),
        (1_795_332_840, "22/Nov/2026:07:34:00 +0000"),
        (1_795_332_841, "22/Nov/2026:07:34:01 +0000"),
        (951_782_400, "29/Feb/2000:00:00:00 +0000"),
        (300_000_000_000, "31/Dec/9999:23:59:59 +0000"),
    ];
    for (secs, want) in cases {
        let text = cache.combined(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(std::str::from_utf8(text).unwrap(), want, "{secs}");
    }
    let before_epoch = UNIX_EPOCH - Duration::from_secs(10);
    assert_eq!(cache.combined(before_epoch), b"01/Jan/1970:00:00:00 +0000");
}

#[test]
fn formatter_appends_without_clearing() {
    let mut formatter = LineFormatter::new(LogFormat::Squid);
    let mut out = b"earlier\n".to_vec();
    formatter.format(&miss(), &mut out);
    formatter.format(&miss(), &mut out);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.starts_with("earlier\n1763797200.579"));
}

#[test]
fn squid_widths_and_padding() {
    // (elapsed ms, status, start ms since epoch) -> expected `%ts.%03tu %6tr ... /%03>Hs`.
    let cases = [
        (0, 0, 0, "0.000      0", "/000 "),
        (7, 204, 1_000, "1.007      7", "/204 "),
        (999_999, 99, 1, "1000.000 999999", "/099 "),
        (1_000_000, 200, 995, "1000.995 1000000", "/200 "),
        (12, 1000, 1_999_990, "2000.002     12", "/1000 "),
    ];
    for (elapsed, status, start_ms, head, code) in cases {
        let rec = AccessRecord {
            start: UNIX_EPOCH + Duration::from_millis(start_ms),
            elapsed: Duration::from_millis(elapsed),
            status,
            ..miss()
        };
        let line = squid(&rec);
        assert!(line.starts_with(&format!("{head} 127.0.0.1 ")), "{line:?}");
        assert!(line.contains(&format!("TCP_MISS{code}")), "{line:?}");
    }
    // Sub-millisecond parts are truncated, as Squid divides microseconds by 1000.
    let rec = AccessRecord {
        start: UNIX_EPOCH + Duration::from_micros(5_000_999),
        elapsed: Duration::from_micros(1_999),
        ..miss()
    };
    assert!(squid(&rec).starts_with("5.002      1 "), "{}", squid(&rec));
}

#[test]
fn squid_user_is_quoted_like_squid_mime_blob() {
    let rec = AccessRecord {
        user: Some(Bytes::from_static(b"a%b[c]\\d\r\n\t\xc3\xa9 x")),
        ..miss()
    };
    let line = squid(&rec);
    assert!(
        line.contains(" a%25b%5bc%5d\\\\d\\r\\n%09%c3%a9%20x HIER_DIRECT/"),
        "{line:?}"
    );
    assert_eq!(line.split(' ').filter(|f| !f.is_empty()).count(), 10);
}

#[test]
fn squid_mime_type_is_the_media_type() {
    let cases: [(&[u8], &str); 5] = [
        (b"text/html; charset=utf-8", "text/html"),
        (b"text/html;charset=utf-8", "text/html"),
        (b"application/json\tx", "application/json"),
        (b"image/png", "image/png"),
        (b"; charset=utf-8", "-"),
    ];
    for (value, want) in cases {
        let rec = AccessRecord {
            content_type: Some(Bytes::copy_from_slice(value)),
            ..miss()
        };
        assert!(squid(&rec).ends_with(&format!(" {want}\n")), "{value:?}");
    }
}

#[test]
fn squid_empty_fields_are_dashes() {
    let rec = AccessRecord {
        method: Bytes::new(),
        target: Bytes::new(),
        ..miss()
    };
    let line = squid(&rec);
    assert!(line.contains(" 1234 - - - HIER_DIRECT/"), "{line:?}");
    assert_eq!(line.split(' ').filter(|f| !f.is_empty()).count(), 10);
}

#[test]
fn combined_escapes_like_apache() {
    let rec = AccessRecord {
        start: UNIX_EPOCH + Duration::from_secs(1_795_332_840),
        target: Bytes::from_static(b"/\x08\x0b\x01\x7f\xc3\xa9\"\\"),
        referer: Some(Bytes::from_static(b"\r\n")),
        user_agent: Some(Bytes::from_static(b"")),
        user: Some(Bytes::new()),
        ..miss()
    };
    assert_eq!(
        combined(&rec),
        "127.0.0.1 - \"\" [22/Nov/2026:07:34:00 +0000] \
         \"GET /\\b\\v\\x01\\x7f\\xc3\\xa9\\\"\\\\ HTTP/1.1\" 200 1234 \"\\r\\n\" \"\"\n"
    );
}

#[test]
fn a_request_over_tls_logs_an_https_url() {
    let over_tls = AccessRecord {
        scheme_host: Some(Bytes::from_static(b"www.example.com")),
        tls: true,
        target: Bytes::from_static(b"/a"),
        ..miss()
    };
    assert!(squid(&over_tls).contains(" GET https://www.example.com/a "));
    assert!(combined(&over_tls).contains("\"GET https://www.example.com/a HTTP/1.1\""));
}
