use super::*;

/// The body data, the trailers (once the end was seen) and the bytes left after the body.
type Outcome = Result<(Vec<u8>, Option<Bytes>, Vec<u8>), ChunkError>;

/// Feeds `input` in pieces of `piece` bytes.
fn run(input: &[u8], piece: usize) -> Outcome {
    let mut decoder = ChunkedDecoder::new();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut trailers = None;
    let mut fed = 0;
    loop {
        match decoder.decode(&mut buf)? {
            Some(ChunkEvent::Data(d)) => {
                assert!(!d.is_empty(), "empty data event");
                data.extend_from_slice(&d);
            }
            Some(ChunkEvent::End { trailers: t }) => {
                assert!(decoder.is_done());
                trailers = Some(t);
            }
            None if fed < input.len() => {
                let end = (fed + piece).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
            None => return Ok((data, trailers, buf.to_vec())),
        }
    }
}

/// Runs `input` whole, byte by byte and in pieces of 2, 3, 7; all must agree.
fn run_all_splits(input: &[u8]) -> Outcome {
    let whole = run(input, input.len().max(1));
    for piece in [1, 2, 3, 7] {
        assert_eq!(
            run(input, piece),
            whole,
            "piece {piece} of {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

#[test]
fn decodes_valid_bodies() {
    type Case = (&'static [u8], &'static [u8], &'static [u8], &'static [u8]);
    let cases: &[Case] = &[
        // (input, data, trailers, left over)
        (b"0\r\n\r\n", b"", b"", b""),
        (b"5\r\nhello\r\n0\r\n\r\n", b"hello", b"", b""),
        (
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT",
            b"hello world",
            b"",
            b"NEXT",
        ),
        (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789", b"", b""),
        (b"a\r\n0123456789\r\n00\r\n\r\n", b"0123456789", b"", b""),
        (b"0005\r\nhello\r\n0\r\n\r\n", b"hello", b"", b""),
        (
            b"5;ext=1\r\nhello\r\n0;x;y=\"q\"\r\n\r\n",
            b"hello",
            b"",
            b"",
        ),
        (b"5 ;ext\r\nhello\r\n0\t\r\n\r\n", b"hello", b"", b""),
        (
            b"3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-B:\r\n\r\n",
            b"abc",
            b"X-Sum: 1\r\nX-B:\r\n",
            b"",
        ),
        (b"2\r\n\r\n\r\n0\r\n\r\n", b"\r\n", b"", b""),
    ];
    for (input, data, trailers, left) in cases {
        let (got, t, rest) = run_all_splits(input).unwrap();
        let what = String::from_utf8_lossy(input);
        assert_eq!(got, *data, "{what}");
        assert_eq!(t.as_deref(), Some(*trailers), "{what}");
        assert_eq!(rest, *left, "{what}");
    }
}

#[test]
fn rejects_invalid_bodies() {
    use ChunkError::*;
    let cases: &[(&str, &[u8], ChunkError)] = &[
        ("empty size", b"\r\nabc\r\n", BadSize),
        ("leading space", b" 5\r\nhello\r\n0\r\n\r\n", BadSize),
        ("0x prefix", b"0x5\r\nhello\r\n0\r\n\r\n", BadSize),
        ("sign", b"+5\r\nhello\r\n0\r\n\r\n", BadSize),
        ("negative", b"-1\r\n", BadSize),
        ("junk after size", b"5z\r\nhello\r\n", BadSize),
        ("digits after space", b"5 5\r\nhello\r\n", BadSize),
        (
            "extension without semicolon",
            b"5 ext\r\nhello\r\n",
            BadSize,
        ),
        ("NUL in extension", b"5;a\0\r\nhello\r\n", BadSize),
        (
            "bare LF after size",
            b"5\nhello\r\n0\r\n\r\n",
            BadLineEnding,
        ),
        (
            "bare LF in extension",
            b"5;a\nhello\r\n0\r\n\r\n",
            BadLineEnding,
        ),
        ("bare CR after size", b"5\rhello\r\n", BadLineEnding),
        (
            "data longer than size",
            b"3\r\nhello\r\n0\r\n\r\n",
            BadLineEnding,
        ),
        ("data without CRLF", b"5\r\nhello0\r\n\r\n", BadLineEnding),
        (
            "data followed by LF only",
            b"5\r\nhello\n0\r\n\r\n",
            BadLineEnding,
        ),
        ("data followed by CR junk", b"5\r\nhello\rx", BadLineEnding),
        ("17 hex digits", b"10000000000000000\r\n", SizeOverflow),
        ("trailer without colon", b"0\r\nJunk\r\n\r\n", BadTrailer),
        ("trailer obs-fold", b"0\r\nX: a\r\n b\r\n\r\n", BadTrailer),
        (
            "trailer space before colon",
            b"0\r\nX : a\r\n\r\n",
            BadTrailer,
        ),
        ("trailer NUL", b"0\r\nX: a\0\r\n\r\n", BadTrailer),
        ("trailer bare CR", b"0\r\nX: a\rb\r\n\r\n", BadTrailer),
        ("trailer bare LF", b"0\r\nX: a\n\r\n", BadLineEnding),
        ("end with bare LF", b"0\r\n\n", BadLineEnding),
    ];
    for (what, input, want) in cases {
        assert_eq!(
            run(input, input.len()).map(|_| ()),
            Err(want.clone()),
            "{what}"
        );
        for piece in [1, 3] {
            assert_eq!(
                run(input, piece).map(|_| ()),
                Err(want.clone()),
                "{what} piece {piece}"
            );
        }
    }
}

#[test]
fn largest_size_fits() {
    // 2^64-1 fits in the size: the decoder then waits for (a lot of) data.
    let mut buf = BytesMut::from(&b"ffffffffffffffff\r\nab"[..]);
    let mut d = ChunkedDecoder::new();
    assert_eq!(
        d.decode(&mut buf),
        Ok(Some(ChunkEvent::Data(Bytes::from_static(b"ab"))))
    );
    assert_eq!(d.decode(&mut buf), Ok(None));
    assert!(!d.is_done());
}

#[test]
fn bounds_extensions_and_trailers() {
    let mut long_ext = b"5;".to_vec();
    long_ext.resize(MAX_CHUNK_EXTENSION_BYTES, b'a');
    long_ext.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    assert_eq!(run(&long_ext, 1000).unwrap().0, b"hello");
    let mut too_long = b"5;".to_vec();
    too_long.resize(MAX_CHUNK_EXTENSION_BYTES + 10, b'a');
    assert_eq!(
        run(&too_long, 1000).map(|_| ()),
        Err(ChunkError::ExtensionTooLong)
    );

    let mut trailers = b"0\r\n".to_vec();
    let line = b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    while trailers.len() - 3 + line.len() <= MAX_TRAILER_BYTES {
        trailers.extend_from_slice(line);
    }
    let mut ok = trailers.clone();
    ok.extend_from_slice(b"\r\n");
    assert_eq!(
        run(&ok, 4096).unwrap().1.map(|t| t.len()),
        Some(trailers.len() - 3)
    );
    trailers.extend_from_slice(line);
    trailers.extend_from_slice(b"\r\n");
    assert_eq!(
        run(&trailers, 4096).map(|_| ()),
        Err(ChunkError::TrailersTooLarge)
    );
    // Without an end in sight, the error comes as soon as the bound is passed.
    let endless = vec![b'a'; MAX_TRAILER_BYTES + 2];
    let mut buf = BytesMut::from(&b"0\r\n"[..]);
    buf.extend_from_slice(&endless);
    assert_eq!(
        ChunkedDecoder::new().decode(&mut buf),
        Err(ChunkError::TrailersTooLarge)
    );
}

#[test]
fn data_is_zero_copy_and_done_is_final() {
    let mut buf = BytesMut::from(&b"4\r\nabcd\r\n0\r\n\r\nGET"[..]);
    let data_ptr = buf[3..].as_ptr();
    let mut d = ChunkedDecoder::new();
    match d.decode(&mut buf) {
        Ok(Some(ChunkEvent::Data(data))) => assert_eq!(data.as_ptr(), data_ptr),
        other => panic!("{other:?}"),
    }
    assert!(!d.is_done());
    assert_eq!(
        d.decode(&mut buf),
        Ok(Some(ChunkEvent::End {
            trailers: Bytes::new()
        }))
    );
    assert!(d.is_done());
    assert_eq!(d.decode(&mut buf), Ok(None));
    assert_eq!(&buf[..], b"GET");
}

#[test]
fn large_chunk_arrives_in_pieces() {
    let mut d = ChunkedDecoder::new();
    let mut buf = BytesMut::from(&b"10000\r\n"[..]);
    assert_eq!(d.decode(&mut buf), Ok(None));
    let mut total = 0;
    for _ in 0..16 {
        buf.extend_from_slice(&[b'x'; 4096]);
        match d.decode(&mut buf) {
            Ok(Some(ChunkEvent::Data(data))) => total += data.len(),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(total, 0x10000);
    buf.extend_from_slice(b"\r\n0\r\n\r\n");
    assert!(matches!(
        d.decode(&mut buf),
        Ok(Some(ChunkEvent::End { .. }))
    ));
}
