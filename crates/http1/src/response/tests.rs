use super::*;

fn decode(input: &[u8]) -> Result<ResponseHead, ParseError> {
    let mut buf = BytesMut::from(input);
    let mut head = ResponseHead::default();
    match ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head)? {
        true => Ok(head),
        false => panic!("incomplete: {:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn parses_a_response() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nCache-Control: max-age=60\r\n\r\nhello";
    let mut buf = BytesMut::from(&input[..]);
    let mut head = ResponseHead::default();
    assert_eq!(
        ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
        Ok(true)
    );
    assert_eq!(&buf[..], b"hello");
    assert_eq!(
        (head.version, head.status, head.reason()),
        (Version::Http11, 200, &b"OK"[..])
    );
    assert_eq!(head.content_length, Some(5));
    assert_eq!(
        head.headers().get(HeaderId::CacheControl),
        Some(&b"max-age=60"[..])
    );
    assert!(head.keep_alive && head.reusable(Method::Get));
    assert_eq!(head.body_framing(Method::Get), BodyFraming::Length(5));
    assert!(head.raw.as_ptr_range().contains(&head.reason().as_ptr()));
}

#[test]
fn body_framing_rules() {
    let cases: &[(&[u8], Method, BodyFraming)] = &[
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            Method::Head,
            BodyFraming::Empty,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\n",
            Method::Get,
            BodyFraming::Empty,
        ),
        (
            b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            Method::Get,
            BodyFraming::Empty,
        ),
        (
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
            Method::Get,
            BodyFraming::Empty,
        ),
        (
            b"HTTP/1.1 200 OK\r\n\r\n",
            Method::Connect,
            BodyFraming::Empty,
        ),
        (
            b"HTTP/1.1 407 Auth\r\nContent-Length: 2\r\n\r\n",
            Method::Connect,
            BodyFraming::Length(2),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            Method::Get,
            BodyFraming::Chunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            Method::Get,
            BodyFraming::Length(0),
        ),
        (
            b"HTTP/1.1 200 OK\r\n\r\n",
            Method::Get,
            BodyFraming::UntilClose,
        ),
        (
            b"HTTP/1.0 200 OK\r\n\r\n",
            Method::Post,
            BodyFraming::UntilClose,
        ),
    ];
    for (input, method, want) in cases {
        let head = decode(input).unwrap();
        assert_eq!(
            head.body_framing(*method),
            *want,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
    let close_delimited = decode(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
    assert!(close_delimited.keep_alive && !close_delimited.reusable(Method::Get));
    assert!(close_delimited.reusable(Method::Head));
}

#[test]
fn te_and_cl_together_means_chunked_without_reuse() {
    let head = decode(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n",
    )
    .unwrap();
    assert!(head.chunked);
    assert_eq!(head.content_length, None);
    assert!(!head.keep_alive);
    assert_eq!(head.body_framing(Method::Get), BodyFraming::Chunked);
    assert!(
        head.headers().get(HeaderId::ContentLength).is_none(),
        "CL removed before forwarding"
    );
    assert_eq!(head.headers().len(), 2);
}

#[test]
fn connection_persistence() {
    let cases: &[(&[u8], bool)] = &[
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            false,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            true,
        ),
    ];
    for (input, keep) in cases {
        assert_eq!(
            decode(input).unwrap().keep_alive,
            *keep,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
    let head = decode(b"HTTP/1.1 200 OK\r\nConnection: X-A, x-b\r\n\r\n").unwrap();
    assert!(head.headers().connection_lists(b"x-a") && head.headers().connection_lists(b"X-B"));
    assert!(!head.headers().connection_lists(b"close"));
}

#[test]
fn lenient_where_the_rfc_allows() {
    // Whitespace before the colon: accepted, and the name slice excludes it (§5.1).
    let head = decode(b"HTTP/1.1 200 OK\r\nServer : x\r\nContent-Length: 0\r\n\r\n").unwrap();
    assert_eq!(head.headers().iter().next().unwrap().name, b"Server");
    assert_eq!(head.headers().iter().next().unwrap().id, HeaderId::Server);
    // No reason phrase, several spaces, bare LFs, a 6xx/9xx status.
    let cases: &[(&[u8], u16, &[u8])] = &[
        (b"HTTP/1.1 204\r\n\r\n", 204, b""),
        (b"HTTP/1.1 204 \r\n\r\n", 204, b""),
        (b"HTTP/1.1  200  Fine  Thanks\r\n\r\n", 200, b"Fine  Thanks"),
        (b"HTTP/1.1 200 OK\n\n", 200, b"OK"),
        (
            b"HTTP/1.1 999 Request denied\r\n\r\n",
            999,
            b"Request denied",
        ),
    ];
    for (input, status, reason) in cases {
        let head = decode(input).unwrap();
        assert_eq!((head.status, head.reason()), (*status, *reason));
    }
}

#[test]
fn obs_fold_is_replaced_by_spaces() {
    let input = b"HTTP/1.1 200 OK\r\nX-Long: a\r\n  b\r\n\tc\r\nContent-Length: 2\r\n\r\nok";
    let mut buf = BytesMut::from(&input[..]);
    let mut head = ResponseHead::default();
    assert_eq!(
        ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
        Ok(true)
    );
    assert_eq!(&buf[..], b"ok");
    assert_eq!(head.headers().len(), 2);
    assert_eq!(head.headers().iter().next().unwrap().value, b"a    b  \tc");
    assert_eq!(head.content_length, Some(2));
    assert!(!head.raw.windows(2).any(|w| w == b"\n " || w == b"\n\t"));
    // Whitespace before the first field line is not a fold (RFC 9112 §2.2).
    assert!(decode(b"HTTP/1.1 200 OK\r\n X: a\r\n\r\n").is_err());
}

#[test]
fn rejects_bad_responses() {
    use ParseError::*;
    let cases: &[(&str, &[u8], ParseError)] = &[
        (
            "differing CL",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            BadFraming("differing Content-Length values"),
        ),
        (
            "invalid CL",
            b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
            BadFraming("invalid Content-Length"),
        ),
        (
            "CL list",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1,2\r\n\r\n",
            BadFraming("differing Content-Length values"),
        ),
        (
            "TE not ending in chunked",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            BadFraming("Transfer-Encoding does not end in chunked"),
        ),
        (
            "TE chunked then gzip on two lines",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
            BadFraming("Transfer-Encoding does not end in chunked"),
        ),
        (
            "TE empty",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
            BadFraming("Transfer-Encoding does not end in chunked"),
        ),
        (
            "TE gzip then chunked twice",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            BadFraming("chunked applied more than once"),
        ),
        (
            "TE coding that is not a token",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip/2\r\n\r\n",
            BadFraming("invalid transfer coding"),
        ),
        (
            "TE quoted parameter",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: x;a=\"1,chunked\"\r\n\r\n",
            BadFraming("invalid transfer coding"),
        ),
        (
            "TE folded into one element (obs-fold)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n chunked\r\n\r\n",
            BadFraming("invalid transfer coding"),
        ),
        (
            "TE gzip in HTTP/1.0",
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            BadFraming("Transfer-Encoding in an HTTP/1.0 response"),
        ),
        (
            "TE gzip and a differing CL",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            BadFraming("differing Content-Length values"),
        ),
        (
            "chunked twice",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            BadFraming("chunked applied more than once"),
        ),
        (
            "TE in HTTP/1.0",
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            BadFraming("Transfer-Encoding in an HTTP/1.0 response"),
        ),
        (
            "NUL in value",
            b"HTTP/1.1 200 OK\r\nX: a\0\r\n\r\n",
            Malformed("invalid field value"),
        ),
        (
            "bare CR in value",
            b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
            Malformed("invalid field value"),
        ),
        (
            "status 099",
            b"HTTP/1.1 099 Low\r\n\r\n",
            Malformed("invalid status code"),
        ),
        (
            "two-digit status",
            b"HTTP/1.1 20 OK\r\n\r\n",
            Malformed("invalid status-line"),
        ),
        (
            "HTTP/2",
            b"HTTP/2.0 200 OK\r\n\r\n",
            Malformed("unsupported HTTP version"),
        ),
        (
            "not HTTP",
            b"ICY 200 OK\r\n\r\n",
            Malformed("unsupported HTTP version"),
        ),
        (
            "empty name",
            b"HTTP/1.1 200 OK\r\n: x\r\n\r\n",
            Malformed("invalid field name"),
        ),
    ];
    for (what, input, want) in cases {
        assert_eq!(decode(input).map(|_| ()), Err(want.clone()), "{what}");
    }
}

#[test]
fn reuses_header_storage_and_handles_splits() {
    let input = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
    let mut decoder = ResponseDecoder::new(Limits::default());
    let mut head = ResponseHead::default();
    let mut buf = BytesMut::new();
    let mut first = None;
    for cut in 1..input.len() {
        buf.extend_from_slice(&input[..cut]);
        assert_eq!(decoder.decode(&mut buf, &mut head), Ok(false), "cut {cut}");
        assert!(
            head.headers().is_empty() && head.reason().is_empty(),
            "cut {cut}"
        );
        buf.extend_from_slice(&input[cut..]);
        assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true), "cut {cut}");
        assert!(buf.is_empty());
        assert_eq!(head.headers().len(), 3);
        let now = (head.fields.as_ptr(), head.fields.capacity());
        assert_eq!(
            *first.get_or_insert(now),
            now,
            "headers reallocated at cut {cut}"
        );
    }
}

#[test]
fn other_transfer_codings_are_valid_in_responses() {
    // RFC 9112 §6.1: "If any transfer coding other than chunked is applied to a response's
    // content, the sender MUST either apply chunked as the final transfer coding or terminate
    // the message by closing the connection."
    type Case = (&'static [u8], bool, BodyFraming, bool);
    let cases: &[Case] = &[
        // §6.3 rule 4: not chunked last, so "reading the connection until it is closed".
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            false,
            BodyFraming::UntilClose,
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: x-Custom;level=9, deflate\r\n\r\n",
            false,
            BodyFraming::UntilClose,
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            true,
            BodyFraming::Chunked,
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            true,
            BodyFraming::Chunked,
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            true,
            BodyFraming::Chunked,
            false,
        ),
    ];
    for (input, chunked, framing, coded) in cases {
        let what = String::from_utf8_lossy(input);
        let head = decode(input).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            (head.chunked, head.transfer_coded),
            (*chunked, *coded),
            "{what}"
        );
        assert_eq!(head.body_framing(Method::Get), *framing, "{what}");
        assert_eq!(head.content_length, None, "{what}");
        // The field stays in the head: it is what names the codings to pass on.
        assert!(
            head.headers().get(HeaderId::TransferEncoding).is_some(),
            "{what}"
        );
        // Close-delimited bodies never leave the connection reusable; chunked ones may.
        assert_eq!(head.reusable(Method::Get), *chunked, "{what}");
        // No body for HEAD, 304 and the like, whatever the codings (§6.3 rule 1).
        assert_eq!(
            head.body_framing(Method::Head),
            BodyFraming::Empty,
            "{what}"
        );
    }
    let mut head = decode(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").unwrap();
    head.clear();
    assert!(!head.transfer_coded);
}

#[test]
fn transfer_coded_with_content_length_is_close_delimited_without_it() {
    // §6.3 rule 3: Transfer-Encoding overrides Content-Length, which is removed before
    // forwarding; the length it claims is never used.
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\nabcdef"[..],
    );
    let mut head = ResponseHead::default();
    assert_eq!(
        ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
        Ok(true)
    );
    assert!(head.transfer_coded && !head.chunked);
    assert_eq!(head.content_length, None);
    assert!(head.headers().get(HeaderId::ContentLength).is_none());
    assert_eq!(head.body_framing(Method::Get), BodyFraming::UntilClose);
    assert!(!head.keep_alive && !head.reusable(Method::Get));
    assert_eq!(&buf[..], b"abcdef", "the body is left whole, not cut at 3");
}
