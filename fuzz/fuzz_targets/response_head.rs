//! Response heads split at an arbitrary point: never a panic, the split never changes the
//! verdict, and every accepted head satisfies the codec's invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sepia_fuzz::{check_head_slices, split_input};
use sepia_http1::{
    BodyFraming, BytesMut, HeaderId, Limits, Method, ParseError, ResponseDecoder, ResponseHead,
    Version,
};

const LIMITS: Limits = Limits {
    max_head_bytes: 4096,
    max_headers: 32,
};

#[derive(Debug, PartialEq)]
enum Seen {
    Head(Vec<u8>),
    Error(ParseError),
}

fn decode_all(input: &[u8], split: usize) -> Vec<Seen> {
    let mut decoder = ResponseDecoder::new(LIMITS);
    let mut head = ResponseHead::default();
    let mut buf = BytesMut::from(&input[..split]);
    let mut fed_all = false;
    let mut seen = Vec::new();
    loop {
        match decoder.decode(&mut buf, &mut head) {
            Ok(true) => {
                check_response(&head);
                seen.push(Seen::Head(head.raw().to_vec()));
                // Interim (1xx) responses are followed by another head; anything else by a body.
                if head.status >= 200 {
                    break;
                }
            }
            Ok(false) if !fed_all => {
                buf.extend_from_slice(&input[split..]);
                fed_all = true;
            }
            Ok(false) => break,
            Err(e) => {
                seen.push(Seen::Error(e));
                break;
            }
        }
    }
    seen
}

fn check_response(head: &ResponseHead) {
    assert!(head.raw().len() <= LIMITS.max_head_bytes);
    assert!(head.headers().len() <= LIMITS.max_headers);
    assert!((100..=999).contains(&head.status));
    assert!(
        !(head.chunked && head.content_length.is_some()),
        "CL and TE both set"
    );
    check_head_slices(head.raw(), head.headers().iter().map(|h| (h.name, h.value)));
    for h in head.headers().iter() {
        assert_eq!(h.id, HeaderId::from_name(h.name));
    }
    let te = head.headers().get(HeaderId::TransferEncoding).is_some();
    if te {
        // Transfer-Encoding overrides Content-Length, which is removed (RFC 9112 §6.3 rule 3),
        // and is never accepted in HTTP/1.0 (§6.1).
        assert!(head.content_length.is_none(), "a length kept next to TE");
        assert!(
            head.headers().get(HeaderId::ContentLength).is_none(),
            "CL kept next to TE"
        );
        assert_eq!(head.version, Version::Http11, "TE in HTTP/1.0");
        // A Transfer-Encoding field says chunked, or names the other codings (or both).
        assert!(
            head.chunked || head.transfer_coded,
            "TE that frames nothing"
        );
    } else {
        assert!(!head.chunked && !head.transfer_coded, "codings without TE");
    }
    for method in [Method::Get, Method::Head, Method::Connect, Method::Post] {
        let framing = head.body_framing(method);
        match framing {
            BodyFraming::Chunked => assert!(head.chunked),
            BodyFraming::Length(n) => assert_eq!(head.content_length, Some(n)),
            BodyFraming::UntilClose => assert!(!head.chunked && head.content_length.is_none()),
            BodyFraming::Empty => {}
        }
        if method == Method::Head {
            assert_eq!(framing, BodyFraming::Empty);
        }
        assert_eq!(
            head.reusable(method),
            head.keep_alive && framing != BodyFraming::UntilClose
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((split, input)) = split_input(data) else {
        return;
    };
    let whole = decode_all(input, input.len());
    let pieced = decode_all(input, split);
    assert_eq!(whole, pieced, "the split at {split} changed the verdict");
});
