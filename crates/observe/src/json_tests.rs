//! The JSON format: exact lines, and every line valid JSON holding the record's values
//! whatever bytes the client sent (checked by parsing with serde_json).

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::format::format_json;
use crate::format::tests::miss;
use crate::record::{AccessRecord, Hierarchy, ResultCode};

fn json(rec: &AccessRecord) -> String {
    let mut out = Vec::new();
    format_json(rec, &mut out);
    String::from_utf8(out).expect("a JSON line is UTF-8")
}

fn parse(rec: &AccessRecord) -> Value {
    let line = json(rec);
    assert!(line.ends_with("}\n"), "{line:?}");
    assert_eq!(line.matches('\n').count(), 1, "{line:?}");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[test]
fn json_line_exact() {
    let rec = AccessRecord {
        referer: Some(Bytes::from_static(b"http://example.com/")),
        user_agent: Some(Bytes::from_static(b"curl/8.0")),
        content_type: Some(Bytes::from_static(b"text/html; charset=utf-8")),
        ..miss()
    };
    assert_eq!(
        json(&rec),
        "{\"ts\":1763797200.579,\"elapsed_ms\":456,\"client\":\"127.0.0.1\",\
         \"result\":\"TCP_MISS\",\"status\":200,\"bytes\":1234,\"method\":\"GET\",\
         \"url\":\"http://example.com/index.html\",\"http_version\":\"1.1\",\"user\":null,\
         \"hierarchy\":\"HIER_DIRECT\",\"peer\":\"127.0.0.1\",\"mime_type\":\"text/html\",\
         \"referer\":\"http://example.com/\",\"user_agent\":\"curl/8.0\"}\n"
    );
}

#[test]
fn json_values_and_nulls() {
    let rec = AccessRecord {
        result: ResultCode::TcpMemHit,
        hierarchy: Hierarchy::None,
        peer: None,
        content_type: None,
        version_major: 1,
        version_minor: 0,
        user: Some(Bytes::from_static(b"alice")),
        scheme_host: Some(Bytes::from_static(b"www.example.com")),
        tls: false,
        target: Bytes::from_static(b"/a?b=c"),
        client: "[2001:db8::7]:40000".parse().unwrap(),
        elapsed: Duration::from_millis(5),
        ..miss()
    };
    let v = parse(&rec);
    assert_eq!(v["ts"].as_f64(), Some(1_763_797_200.128));
    assert_eq!(v["elapsed_ms"], 5);
    assert_eq!(v["client"], "2001:db8::7");
    assert_eq!(v["result"], "TCP_MEM_HIT");
    assert_eq!(v["status"], 200);
    assert_eq!(v["bytes"], 1234);
    assert_eq!(v["url"], "http://www.example.com/a?b=c");
    assert_eq!(v["http_version"], "1.0");
    assert_eq!(v["user"], "alice");
    assert_eq!(v["hierarchy"], "HIER_NONE");
    for key in ["peer", "mime_type", "referer", "user_agent"] {
        assert!(v[key].is_null(), "{key}: {v}");
    }
    assert_eq!(v.as_object().unwrap().len(), 15);
}

#[test]
fn json_escapes_every_byte() {
    for b in 0..=255u8 {
        let raw = [b'a', b, b'z'];
        let rec = AccessRecord {
            target: Bytes::copy_from_slice(&raw),
            user_agent: Some(Bytes::copy_from_slice(&raw)),
            user: Some(Bytes::copy_from_slice(&raw)),
            ..miss()
        };
        let v = parse(&rec);
        let want = String::from_utf8_lossy(&raw);
        assert_eq!(v["url"], *want, "byte {b:#04x}");
        assert_eq!(v["user_agent"], *want, "byte {b:#04x}");
        assert_eq!(v["user"], *want, "byte {b:#04x}");
    }
}

#[test]
fn json_keeps_utf8_and_replaces_invalid_sequences() {
    let cases: [(&[u8], &str); 5] = [
        (b"caf\xc3\xa9 \xe2\x82\xac", "caf\u{e9} \u{20ac}"),
        (b"bad\xff\xfeend", "bad\u{fffd}\u{fffd}end"),
        (b"cut\xe2\x82", "cut\u{fffd}"),
        (b"q\"b\\s/\x7f", "q\"b\\s/\u{7f}"),
        (b"\r\n\t\x08\x0c\x00", "\r\n\t\u{8}\u{c}\u{0}"),
    ];
    for (raw, want) in cases {
        let rec = AccessRecord {
            referer: Some(Bytes::copy_from_slice(raw)),
            ..miss()
        };
        let line = json(&rec);
        assert!(!line.contains('\u{7f}'), "DEL is escaped: {line:?}");
        assert_eq!(parse(&rec)["referer"], want, "{line:?}");
    }
    // Valid UTF-8 stays readable rather than \u-escaped.
    let rec = AccessRecord {
        user_agent: Some(Bytes::from_static("Åsa".as_bytes())),
        ..miss()
    };
    assert!(json(&rec).contains("\"user_agent\":\"Åsa\""));
}
