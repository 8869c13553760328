use super::*;

fn decode_with(limits: Limits, input: &[u8]) -> Result<RequestHead, ParseError> {
    let mut buf = BytesMut::from(input);
    let mut head = RequestHead::default();
    match RequestDecoder::new(limits).decode(&mut buf, &mut head)? {
        true => Ok(head),
        false => panic!("incomplete: {:?}", String::from_utf8_lossy(input)),
    }
}

fn decode(input: &[u8]) -> Result<RequestHead, ParseError> {
    decode_with(Limits::default(), input)
}

#[test]
fn parses_a_simple_request_into_slices_of_raw() {
    let input =
        b"GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nX-Empty:\r\nAccept:  */* \r\n\r\nBODY";
    let mut buf = BytesMut::from(&input[..]);
    let mut head = RequestHead::default();
    assert_eq!(
        RequestDecoder::new(Limits::default()).decode(&mut buf, &mut head),
        Ok(true)
    );
    assert_eq!(&buf[..], b"BODY", "only the head is consumed");
    assert_eq!(head.raw.len(), input.len() - 4);
    assert_eq!(head.method, Method::Get);
    assert_eq!(head.method_raw(), b"GET");
    assert_eq!(head.target(), b"/a?b=c");
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.host(), Some(&b"example.com"[..]));
    let names: Vec<_> = head
        .headers()
        .iter()
        .map(|h| (h.id, h.name, h.value))
        .collect();
    assert_eq!(
        names,
        vec![
            (HeaderId::Host, &b"Host"[..], &b"example.com"[..]),
            (HeaderId::Other, b"X-Empty", b""),
            (HeaderId::Other, b"Accept", b"*/*"),
        ]
    );
    // Zero-copy: every field points into `raw`.
    let range = head.raw.as_ptr_range();
    for h in head.headers().iter() {
        assert!(range.contains(&h.name.as_ptr()));
        assert!(range.contains(&h.value.as_ptr()) || h.value.is_empty());
    }
    assert!(range.contains(&head.target().as_ptr()));
    assert!(head.keep_alive);
    assert!(!head.expect_continue);
    assert_eq!(head.body_framing(), BodyFraming::Empty);
    assert_eq!(head.target_form(), TargetForm::Origin);
}

#[test]
fn waits_for_more_bytes_at_every_split() {
    let input = b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    for cut in 0..input.len() - 3 {
        let mut decoder = RequestDecoder::new(Limits::default());
        let mut head = RequestHead::default();
        let mut buf = BytesMut::from(&input[..cut]);
        assert_eq!(decoder.decode(&mut buf, &mut head), Ok(false), "cut {cut}");
        // Nothing of an attempt on a partial head is left behind (the access log reads the
        // head of a request that never completed).
        assert!(
            head.method_raw().is_empty() && head.target().is_empty() && head.headers().is_empty()
        );
        buf.extend_from_slice(&input[cut..]);
        assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true), "cut {cut}");
        assert_eq!(head.body_framing(), BodyFraming::Length(3));
        assert_eq!(&buf[..], b"abc");
    }
}

#[test]
fn pipelined_requests_and_leading_empty_lines() {
    let mut buf = BytesMut::from(
        &b"\r\n\r\nGET /1 HTTP/1.1\r\nHost: a\r\n\r\n\r\nHEAD /2 HTTP/1.0\n\nGET /3"[..],
    );
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut head = RequestHead::default();
    assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true));
    assert_eq!(head.target(), b"/1");
    assert!(
        head.raw.starts_with(b"GET"),
        "leading empty lines are not part of the head"
    );
    assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true));
    assert_eq!(
        (head.target(), head.method, head.version),
        (&b"/2"[..], Method::Head, Version::Http10)
    );
    assert!(head.headers().is_empty() && !head.keep_alive);
    assert_eq!(decoder.decode(&mut buf, &mut head), Ok(false));
    assert_eq!(&buf[..], b"GET /3");
}

#[test]
fn second_decode_reuses_the_headers_allocation() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    let mut buf = BytesMut::with_capacity(4096);
    buf.extend_from_slice(input);
    buf.extend_from_slice(input);
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut head = RequestHead::default();
    assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true));
    let (ptr, cap) = (head.fields.as_ptr(), head.fields.capacity());
    assert!(cap >= 4);
    assert_eq!(decoder.decode(&mut buf, &mut head), Ok(true));
    assert_eq!(head.headers().len(), 4);
    assert_eq!((head.fields.as_ptr(), head.fields.capacity()), (ptr, cap));
}

#[test]
fn framing_and_connection_fields() {
    struct Case {
        input: &'static [u8],
        framing: BodyFraming,
        content_length: Option<u64>,
        keep_alive: bool,
        expect_continue: bool,
    }
    let cases = [
        Case {
            input: b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n",
            framing: BodyFraming::Length(5),
            content_length: Some(5),
            keep_alive: true,
            expect_continue: false,
        },
        Case {
            input: b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            framing: BodyFraming::Empty,
            content_length: Some(0),
            keep_alive: true,
            expect_continue: false,
        },
        Case {
            input: b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\nConnection: close\r\n\r\n",
            framing: BodyFraming::Chunked,
            content_length: None,
            keep_alive: false,
            expect_continue: false,
        },
        Case {
            input: b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 9\r\n\r\n",
            framing: BodyFraming::Length(9),
            content_length: Some(9),
            keep_alive: true,
            expect_continue: true,
        },
        Case {
            input: b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nConnection: Keep-Alive\r\n\r\n",
            framing: BodyFraming::Empty,
            content_length: None,
            keep_alive: true,
            expect_continue: false,
        },
    ];
    for c in cases {
        let head = decode(c.input).unwrap();
        let what = String::from_utf8_lossy(c.input);
        assert_eq!(head.body_framing(), c.framing, "{what}");
        assert_eq!(head.content_length, c.content_length, "{what}");
        assert_eq!(head.chunked, c.framing == BodyFraming::Chunked, "{what}");
        assert_eq!(head.keep_alive, c.keep_alive, "{what}");
        assert_eq!(head.expect_continue, c.expect_continue, "{what}");
    }
}

#[test]
fn header_lookups() {
    let head = decode(
        b"GET / HTTP/1.1\r\nhost: a\r\nVia: 1\r\nConnection: keep-alive, X-Hop\r\nvia: 2\r\n\r\n",
    )
    .unwrap();
    assert_eq!(head.headers().get(HeaderId::Via), Some(&b"1"[..]));
    let all: Vec<_> = head.headers().get_all(HeaderId::Via).collect();
    assert_eq!(all, vec![&b"1"[..], b"2"]);
    assert_eq!(head.headers().get(HeaderId::Age), None);
    assert!(head.headers().connection_lists(b"x-hop"));
    assert!(head.headers().connection_lists(b"Keep-Alive"));
    assert!(!head.headers().connection_lists(b"via"));
}

#[test]
fn target_forms() {
    let ok: &[(&[u8], TargetForm)] = &[
        (b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n", TargetForm::Origin),
        (
            b"GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
            TargetForm::Absolute,
        ),
        (
            b"GET coap+tcp://a HTTP/1.1\r\nHost: a\r\n\r\n",
            TargetForm::Absolute,
        ),
        (
            b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
            TargetForm::Authority,
        ),
        (
            b"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
            TargetForm::Authority,
        ),
        (
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            TargetForm::Asterisk,
        ),
    ];
    for (input, form) in ok {
        assert_eq!(
            decode(input).unwrap().target_form(),
            *form,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

/// Every case RFC 9112 (or our smuggling policy) says must be refused, one by one.
#[test]
fn rejects_what_must_be_rejected() {
    use ParseError::*;
    let bad_host = Malformed("invalid Host");
    let cases: &[(&str, &[u8], ParseError)] = &[
        ("CL and TE together (§6.1)",
         b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
         BadFraming("both Content-Length and Transfer-Encoding")),
        ("TE and CL, other order",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
         BadFraming("both Content-Length and Transfer-Encoding")),
        ("differing duplicate CL lines",
         b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
         BadFraming("differing Content-Length values")),
        ("differing CL list",
         b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n",
         BadFraming("differing Content-Length values")),
        ("non-digit CL", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5a\r\n\r\n",
         BadFraming("invalid Content-Length")),
        ("signed CL", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
         BadFraming("invalid Content-Length")),
        ("empty CL", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
         BadFraming("invalid Content-Length")),
        ("overflowing CL",
         b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n",
         BadFraming("Content-Length overflows")),
        ("TE final coding not chunked",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
         BadFraming("Transfer-Encoding does not end in chunked")),
        ("TE chunked then gzip",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
         BadFraming("Transfer-Encoding does not end in chunked")),
        ("TE chunked twice",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         BadFraming("chunked applied more than once")),
        ("TE gzip before chunked (501)",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
         UnsupportedTransferCoding),
        ("TE in HTTP/1.0",
         b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
         BadFraming("Transfer-Encoding in an HTTP/1.0 request")),
        ("TE obfuscated with a space in the name",
         b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
         Malformed("invalid field name")),
        ("whitespace before colon (§5.1)", b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
         Malformed("invalid field name")),
        ("tab before colon", b"GET / HTTP/1.1\r\nHost: a\r\nX\t: 1\r\n\r\n",
         Malformed("invalid field name")),
        ("obs-fold (§5.2)", b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
         Malformed("invalid field name")),
        ("obs-fold with tab", b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n",
         Malformed("invalid field name")),
        ("whitespace before the first field", b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
         Malformed("invalid field name")),
        ("empty field name", b"GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n",
         Malformed("invalid field name")),
        ("line without colon", b"GET / HTTP/1.1\r\nHost: a\r\nJunk\r\n\r\n",
         Malformed("invalid field name")),
        ("NUL in value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n",
         Malformed("invalid field value")),
        ("bare CR in value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
         Malformed("invalid field value")),
        ("other CTL in value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x0bb\r\n\r\n",
         Malformed("invalid field value")),
        ("DEL in value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n",
         Malformed("invalid field value")),
        ("NUL in name", b"GET / HTTP/1.1\r\nHost: a\r\nX\0: b\r\n\r\n",
         Malformed("invalid field name")),
        ("NUL in target", b"GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("CTL in target", b"GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("bare CR ending the request line", b"GET / HTTP/1.1\rHost: a\r\n\r\n",
         Malformed("invalid line ending")),
        ("two spaces in request line", b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("tab as delimiter", b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("missing target", b"GET HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("missing version", b"GET /\r\nHost: a\r\n\r\n",
         Malformed("invalid request-line")),
        ("trailing junk after version", b"GET / HTTP/1.1 x\r\nHost: a\r\n\r\n",
         Malformed("invalid line ending")),
        ("HTTP/2.0", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Malformed("unsupported HTTP version")),
        ("HTTP/0.9", b"GET / HTTP/0.9\r\nHost: a\r\n\r\n", Malformed("unsupported HTTP version")),
        ("HTTP/1.2", b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", Malformed("unsupported HTTP version")),
        ("lower-case http", b"GET / http/1.1\r\nHost: a\r\n\r\n", Malformed("unsupported HTTP version")),
        ("empty method", b" / HTTP/1.1\r\nHost: a\r\n\r\n", Malformed("invalid request-line")),
        ("repeated Host (§3.2)", b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
         Malformed("more than one Host")),
        ("repeated Host in HTTP/1.0", b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n",
         Malformed("more than one Host")),
        ("missing Host in HTTP/1.1 (§3.2)", b"GET / HTTP/1.1\r\nX: 1\r\n\r\n",
         Malformed("missing Host")),
        ("missing Host with absolute-form", b"GET http://a/ HTTP/1.1\r\n\r\n",
         Malformed("missing Host")),
        ("Host with a space", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", bad_host.clone()),
        ("Host with userinfo", b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", bad_host.clone()),
        ("Host with a path", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", bad_host),
        ("asterisk for GET", b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", Malformed("invalid request-target")),
        ("CONNECT origin-form", b"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-target")),
        ("CONNECT without port", b"CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-target")),
        ("CONNECT bad port", b"CONNECT a.example:https HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-target")),
        ("relative target", b"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", Malformed("invalid request-target")),
        ("scheme with a bad char", b"GET ht_p://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
         Malformed("invalid request-target")),
    ];
    for (what, input, want) in cases {
        assert_eq!(decode(input).map(|_| ()), Err(want.clone()), "{what}");
    }
}

#[test]
fn too_many_headers_and_too_large() {
    let mut input = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..4 {
        input.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    let limits = |max_headers| Limits {
        max_head_bytes: 1024,
        max_headers,
    };
    assert!(decode_with(limits(5), &input).is_ok());
    assert_eq!(
        decode_with(limits(4), &input).map(|_| ()),
        Err(ParseError::TooManyHeaders)
    );
    assert_eq!(ParseError::TooManyHeaders.status(), 431);
    // Limits above the stack array are capped to it.
    let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..MAX_HEADERS_CAP {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    let r = decode_with(
        Limits {
            max_head_bytes: 1 << 20,
            max_headers: 10_000,
        },
        &many,
    );
    assert_eq!(r.map(|_| ()), Err(ParseError::TooManyHeaders));

    let small = Limits {
        max_head_bytes: input.len() - 1,
        max_headers: 100,
    };
    assert_eq!(
        decode_with(small, &input).map(|_| ()),
        Err(ParseError::HeadTooLarge)
    );
    // HeadTooLarge is reported before the end of the head arrives.
    let mut decoder = RequestDecoder::new(Limits {
        max_head_bytes: 16,
        max_headers: 10,
    });
    let mut buf = BytesMut::from(&b"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"[..]);
    let r = decoder.decode(&mut buf, &mut RequestHead::default());
    assert_eq!(r, Err(ParseError::HeadTooLarge));
}

#[test]
fn accepts_what_the_rfc_allows() {
    let ok: &[&[u8]] = &[
        // Bare LF line endings (§2.2 lets a recipient accept them).
        b"GET / HTTP/1.1\nHost: a\n\n",
        // obs-text in values and the target.
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n",
        // Empty Host is allowed when the target has no authority (§3.2).
        b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        // Empty list elements are ignored (RFC 9110 §5.6.1).
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked\r\n\r\n",
        // Unknown methods are fine.
        b"PROPFIND /x HTTP/1.1\r\nHost: a\r\n\r\n",
        // HTTP/1.0 without Host.
        b"GET / HTTP/1.0\r\n\r\n",
        // Tabs inside values.
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n",
    ];
    for input in ok {
        let r = decode(input);
        assert!(r.is_ok(), "{}: {r:?}", String::from_utf8_lossy(input));
    }
    assert_eq!(decode(ok[4]).unwrap().method, Method::Other);
}

#[test]
fn errors_leave_the_raw_head_for_logging() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    let mut buf = BytesMut::from(&input[..]);
    let mut head = RequestHead::default();
    assert!(RequestDecoder::new(Limits::default())
        .decode(&mut buf, &mut head)
        .is_err());
    assert_eq!(&head.raw[..], &input[..]);
    assert_eq!(head.target(), b"/");
}
