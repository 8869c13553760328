use bytes::BytesMut;

use super::*;
use crate::{put_trailers, ChunkEvent, ChunkedDecoder, CRLF};

/// Every field that must not be a trailer, as usually spelled.
const FORBIDDEN: &[&str] = &[
    // Framing.
    "Content-Length",
    "Transfer-Encoding",
    // Routing and forwarding.
    "Host",
    "Max-Forwards",
    "Via",
    "Forwarded",
    "X-Forwarded-For",
    // Request controls, conditionals and negotiation.
    "Cache-Control",
    "CDN-Cache-Control",
    "Expect",
    "Pragma",
    "Range",
    "TE",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Unmodified-Since",
    "If-Range",
    "Accept",
    "Accept-Charset",
    "Accept-Encoding",
    "Accept-Language",
    // Authentication.
    "Authorization",
    "Proxy-Authorization",
    "WWW-Authenticate",
    "Proxy-Authenticate",
    "Cookie",
    "Set-Cookie",
    // Response control data.
    "Age",
    "Expires",
    "Date",
    "Location",
    "Retry-After",
    "Vary",
    "Warning",
    // Content format and representation metadata.
    "Content-Type",
    "Content-Encoding",
    "Content-Language",
    "Content-Location",
    "Content-Range",
    "Last-Modified",
    // Connection-specific.
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "Upgrade",
    "Trailer",
];

/// Fields that may be trailers: granted the section by their definitions, harmless context,
/// extensions, and near misses of forbidden names.
const ALLOWED: &[&str] = &[
    "X-Checksum",
    "Server-Timing",
    "Digest",
    "Content-Digest",
    "Repr-Digest",
    "ETag",
    "Accept-Ranges",
    "Authentication-Info",
    "Proxy-Authentication-Info",
    "grpc-status",
    "grpc-message",
    "Server",
    "User-Agent",
    "Referer",
    "Content-Lengths",
    "X-Content-Length",
    "Hosts",
    "Cookies",
    "Set-Cookie2x",
    "Accept-Encodings",
    "Content_Length",
    "A-Very-Long-Extension-Field-Name-Indeed",
];

/// `name` in lower case, upper case, and with alternating case starting either way.
fn spellings(name: &str) -> [String; 5] {
    let alternate = |upper_first: bool| -> String {
        name.chars()
            .enumerate()
            .map(|(i, c)| {
                if (i % 2 == 0) == upper_first {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    };
    [
        name.to_string(),
        name.to_ascii_lowercase(),
        name.to_ascii_uppercase(),
        alternate(true),
        alternate(false),
    ]
}

fn section(lines: &[(&str, &str)]) -> Bytes {
    let mut raw = Vec::new();
    for (name, value) in lines {
        raw.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    Bytes::from(raw)
}

fn kept(trailers: &Trailers) -> Vec<(String, String)> {
    trailers
        .iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

#[test]
fn every_forbidden_field_is_refused_in_any_case() {
    for name in FORBIDDEN {
        for spelled in spellings(name) {
            assert!(!allowed_in_trailers(spelled.as_bytes()), "{spelled}");
        }
    }
    for name in ALLOWED {
        for spelled in spellings(name) {
            assert!(allowed_in_trailers(spelled.as_bytes()), "{spelled}");
        }
    }
}

#[test]
fn the_name_list_holds_only_names_header_id_does_not_know() {
    for name in FORBIDDEN_OTHER_NAMES {
        assert_eq!(HeaderId::from_name(name), HeaderId::Other, "{name:?}");
        assert_eq!(name.to_ascii_lowercase(), *name, "{name:?}");
        assert!(
            FORBIDDEN
                .iter()
                .any(|f| f.as_bytes().eq_ignore_ascii_case(name)),
            "{name:?} missing from the test table"
        );
    }
}

#[test]
fn every_forbidden_field_is_dropped_and_the_others_kept_in_order() {
    let mut lines = Vec::new();
    let mut want = Vec::new();
    for (i, name) in FORBIDDEN.iter().enumerate() {
        let spelled = spellings(name)[i % 5].clone();
        lines.push((spelled, "5".to_string()));
        let allowed = ALLOWED[i % ALLOWED.len()];
        lines.push((allowed.to_string(), format!("v{i}")));
        want.push((allowed.to_string(), format!("v{i}")));
    }
    let borrowed: Vec<(&str, &str)> = lines
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let trailers = parse_trailers(&section(&borrowed)).unwrap();
    assert_eq!(kept(&trailers), want);
    assert_eq!(trailers.len(), FORBIDDEN.len());
    assert_eq!(trailers.dropped(), FORBIDDEN.len());
}

#[test]
fn allowed_fields_are_kept_as_slices_of_the_section() {
    let raw = Bytes::from_static(
        b"X-Checksum: abc\r\nServer-Timing:total;dur=12\t \r\nDigest:  sha-256=x=\r\n\
          ETag: \"v1\"\r\nX-Empty:\r\nX-Checksum: second\r\n",
    );
    let trailers = parse_trailers(&raw).unwrap();
    let want = [
        ("X-Checksum", "abc"),
        ("Server-Timing", "total;dur=12"),
        ("Digest", "sha-256=x="),
        ("ETag", "\"v1\""),
        ("X-Empty", ""),
        ("X-Checksum", "second"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(kept(&trailers), want);
    assert_eq!(trailers.dropped(), 0);
    let range = raw.as_ptr_range();
    for (name, value) in trailers.iter() {
        assert!(range.contains(&name.as_ptr()), "name copied");
        if !value.is_empty() {
            assert!(range.contains(&value.as_ptr()), "value copied");
        }
    }
    let pairs = trailers.clone().into_vec();
    assert_eq!(pairs.len(), 6);
    assert_eq!(pairs[0], (Bytes::from("X-Checksum"), Bytes::from("abc")));
}

#[test]
fn empty_or_fully_dropped_sections_allocate_nothing() {
    let empty = parse_trailers(&Bytes::new()).unwrap();
    assert!(empty.is_empty());
    assert_eq!((empty.len(), empty.dropped()), (0, 0));
    assert_eq!(empty, Trailers::default());
    assert_eq!(empty.into_vec().capacity(), 0);

    let raw = Bytes::from_static(b"Content-Length: 5\r\nHOST: evil\r\nset-cookie: a=b\r\n");
    let all_dropped = parse_trailers(&raw).unwrap();
    assert!(all_dropped.is_empty());
    assert_eq!(all_dropped.dropped(), 3);
    assert_eq!(all_dropped.into_vec().capacity(), 0);
}

#[test]
fn malformed_lines_are_rejected() {
    use ChunkError::*;
    let cases: &[(&str, &[u8], ChunkError)] = &[
        ("no colon", b"Junk\r\n", BadTrailer),
        ("empty name", b": v\r\n", BadTrailer),
        ("space before colon", b"X-Ok : 1\r\n", BadTrailer),
        ("tab before colon", b"X-Ok\t: 1\r\n", BadTrailer),
        ("obs-fold", b"X-Ok: 1\r\n  more\r\n", BadTrailer),
        ("leading space", b" X-Ok: 1\r\n", BadTrailer),
        ("space in name", b"X Ok: 1\r\n", BadTrailer),
        ("separator in name", b"X(Ok): 1\r\n", BadTrailer),
        ("non-ASCII name", b"X-\xc3\xa9: 1\r\n", BadTrailer),
        ("NUL in value", b"X-Ok: a\0b\r\n", BadTrailer),
        ("control in value", b"X-Ok: a\x01b\r\n", BadTrailer),
        ("escape in value", b"X-Ok: \x1b[31m\r\n", BadTrailer),
        ("DEL in value", b"X-Ok: a\x7fb\r\n", BadTrailer),
        ("bare CR in value", b"X-Ok: a\rb\r\n", BadTrailer),
        ("empty line", b"\r\n", BadTrailer),
        (
            "empty line between",
            b"X-Ok: 1\r\n\r\nX-B: 2\r\n",
            BadTrailer,
        ),
        // Malformed lines are errors even where the name would be dropped anyway.
        (
            "forbidden name, space before colon",
            b"Content-Length : 5\r\n",
            BadTrailer,
        ),
        ("bare LF", b"X-Ok: 1\n", BadLineEnding),
        (
            "bare LF after a good line",
            b"X-A: 1\r\nX-B: 2\n",
            BadLineEnding,
        ),
        ("no line ending", b"X-Ok: 1", BadLineEnding),
        ("CR without LF", b"X-Ok: 1\r", BadLineEnding),
        ("lone LF", b"\n", BadLineEnding),
    ];
    for (what, raw, want) in cases {
        assert_eq!(
            parse_trailers(&Bytes::from_static(raw)),
            Err(want.clone()),
            "{what}"
        );
    }
}

/// Decodes a whole chunked body, returning its data and its trailer section.
fn decode(wire: &[u8]) -> (Vec<u8>, Bytes) {
    let mut buf = BytesMut::from(wire);
    let mut decoder = ChunkedDecoder::new();
    let mut data = Vec::new();
    loop {
        match decoder.decode(&mut buf).unwrap() {
            Some(ChunkEvent::Data(d)) => data.extend_from_slice(&d),
            Some(ChunkEvent::End { trailers }) => return (data, trailers),
            None => panic!("incomplete body"),
        }
    }
}

#[test]
fn decoded_trailers_lose_their_content_length() {
    let (data, raw) = decode(b"5\r\nhello\r\n0\r\nContent-Length: 5\r\nX-Ok: 1\r\n\r\n");
    assert_eq!(data, b"hello");
    let trailers = parse_trailers(&raw).unwrap();
    assert_eq!(kept(&trailers), [("X-Ok".to_string(), "1".to_string())]);
    assert_eq!(trailers.dropped(), 1);
}

#[test]
fn kept_fields_write_back_and_decode_again() {
    let (_, raw) = decode(
        b"3\r\nabc\r\n0\r\nX-Sum:  1 \r\nTransfer-Encoding: chunked\r\nserver-timing: a;dur=1\r\n\
          host: other\r\nX-Empty:\r\n\r\n",
    );
    let trailers = parse_trailers(&raw).unwrap();
    assert_eq!(trailers.dropped(), 2);

    // What the proxy's chunked writer sends: last-chunk, the kept fields, the final CRLF.
    let mut wire = BytesMut::from(&b"0\r\n"[..]);
    put_trailers(&mut wire, trailers.iter());
    wire.extend_from_slice(CRLF);
    assert_eq!(
        &wire[..],
        b"0\r\nX-Sum: 1\r\nserver-timing: a;dur=1\r\nX-Empty: \r\n\r\n"
    );
    let (data, again) = decode(&wire);
    assert!(data.is_empty());
    let reparsed = parse_trailers(&again).unwrap();
    assert_eq!(kept(&reparsed), kept(&trailers));
    assert_eq!(reparsed.dropped(), 0);
}

#[test]
fn retain_drops_what_the_caller_says_and_counts_it() {
    let raw = Bytes::from_static(b"X-Hop: 1\r\nX-Keep: 2\r\nx-hop: 3\r\nCookie: c\r\n");
    let mut trailers = parse_trailers(&raw).unwrap();
    assert_eq!((trailers.len(), trailers.dropped()), (3, 1));
    trailers.retain(|name, _| !name.eq_ignore_ascii_case(b"x-hop"));
    assert_eq!(kept(&trailers), [("X-Keep".to_string(), "2".to_string())]);
    assert_eq!(trailers.dropped(), 3);
}
