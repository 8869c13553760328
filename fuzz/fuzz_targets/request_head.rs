//! Request heads split at an arbitrary point: never a panic, the split never changes the
//! verdict, and every accepted head satisfies the codec's invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sepia_fuzz::{check_head_slices, split_input};
use sepia_http1::{
    BodyFraming, BytesMut, HeaderId, Limits, Method, ParseError, RequestDecoder, RequestHead,
    Version,
};

const LIMITS: Limits = Limits {
    max_head_bytes: 4096,
    max_headers: 32,
};

/// A comparable digest of one decode.
#[derive(Debug, PartialEq)]
enum Seen {
    Head(Vec<u8>),
    Error(ParseError),
}

/// Decodes every head in `input`, fed as `input[..split]` then the rest.
fn decode_all(input: &[u8], split: usize) -> Vec<Seen> {
    let mut decoder = RequestDecoder::new(LIMITS);
    let mut head = RequestHead::default();
    let mut buf = BytesMut::from(&input[..split]);
    let mut fed_all = false;
    let mut seen = Vec::new();
    loop {
        match decoder.decode(&mut buf, &mut head) {
            Ok(true) => {
                check_request(&head);
                seen.push(Seen::Head(head.raw().to_vec()));
                // The body is not a head: stop at the first message that has one.
                if head.body_framing() != BodyFraming::Empty {
                    break;
                }
            }
            Ok(false) if !fed_all => {
                buf.extend_from_slice(&input[split..]);
                fed_all = true;
            }
            Ok(false) => break,
            Err(e) => {
                assert!((400..=501).contains(&e.status()) || e.status() == 431);
                seen.push(Seen::Error(e));
                break;
            }
        }
    }
    seen
}

fn check_request(head: &RequestHead) {
    assert!(head.raw().len() <= LIMITS.max_head_bytes);
    assert!(head.headers().len() <= LIMITS.max_headers);
    assert!(head.raw().ends_with(b"\n\n") || head.raw().ends_with(b"\n\r\n"));
    assert!(
        !(head.chunked && head.content_length.is_some()),
        "CL and TE both set"
    );
    assert_eq!(head.method, Method::from_bytes(head.method_raw()));
    assert!(!head.method_raw().is_empty() && !head.target().is_empty());
    check_head_slices(head.raw(), head.headers().iter().map(|h| (h.name, h.value)));
    check_head_slices(head.raw(), [(head.method_raw(), head.target())]);
    for h in head.headers().iter() {
        assert_eq!(h.id, HeaderId::from_name(h.name));
    }
    let hosts = head.headers().get_all(HeaderId::Host).count();
    assert!(hosts <= 1);
    if head.version == Version::Http11 {
        assert_eq!(hosts, 1, "HTTP/1.1 without Host accepted");
    } else {
        assert!(!head.chunked && !head.expect_continue);
    }
    let te = head.headers().get(HeaderId::TransferEncoding).is_some();
    let cl = head.headers().get(HeaderId::ContentLength).is_some();
    assert!(!(te && cl));
    assert_eq!(te, head.chunked);
    assert_eq!(cl, head.content_length.is_some());
    match head.body_framing() {
        BodyFraming::Chunked => assert!(head.chunked),
        BodyFraming::Length(n) => assert!(n > 0 && head.content_length == Some(n)),
        BodyFraming::Empty => assert!(!head.chunked && head.content_length.unwrap_or(0) == 0),
        BodyFraming::UntilClose => panic!("a request body is never close-delimited"),
    }
    let _ = head.target_form();
}

fuzz_target!(|data: &[u8]| {
    let Some((split, input)) = split_input(data) else {
        return;
    };
    let whole = decode_all(input, input.len());
    let pieced = decode_all(input, split);
    assert_eq!(whole, pieced, "the split at {split} changed the verdict");
});
