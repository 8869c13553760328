use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use sepia_http1::ResponseHead;
use tokio::io::ReadBuf;

use super::*;
use crate::h1::fields::H1Fields;

const LIMIT: Duration = Duration::from_secs(5);

/// A reader that yields its input in pieces of three bytes, so decoders see split framing.
struct Trickle(VecDeque<Vec<u8>>);

impl Trickle {
    fn new(input: &[u8]) -> Trickle {
        Trickle(input.chunks(3).map(<[u8]>::to_vec).collect())
    }
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(piece) = self.0.pop_front() {
            buf.put_slice(&piece);
        }
        Poll::Ready(Ok(()))
    }
}

/// Decodes `input` as `framing` and writes it out framed as `out` behind "HEAD|".
async fn relay(
    framing: BodyFraming,
    input: &[u8],
    out: BodyOut,
) -> (Result<u64, BodyReadError>, Vec<u8>) {
    let head = ResponseHead::default();
    let fields = H1Fields(head.headers());
    let mut src = Trickle::new(input);
    let mut buf = BytesMut::new();
    let mut body = BodyDecoder::new(framing);
    let mut dst = Vec::new();
    let mut prefix: &[u8] = b"HEAD|";
    let mut sent = 0;
    loop {
        match body.next(&mut src, &mut buf, LIMIT, &fields).await {
            Ok(BodyPiece::Data(data)) => {
                sent += write_piece(&mut dst, prefix, &data, out, LIMIT)
                    .await
                    .unwrap();
                prefix = b"";
            }
            Ok(BodyPiece::End(trailers)) => {
                sent += write_end(&mut dst, prefix, &trailers, out, LIMIT)
                    .await
                    .unwrap();
                return (Ok(sent), dst);
            }
            Err(e) => return (Err(e), dst),
        }
    }
}

#[tokio::test]
async fn length_body_relayed_raw_with_prefix() {
    let (r, out) = relay(BodyFraming::Length(10), b"0123456789extra", BodyOut::Raw).await;
    assert_eq!(out, b"HEAD|0123456789");
    assert_eq!(r.unwrap(), 15);
}

#[tokio::test]
async fn chunked_body_rechunked_with_allowed_trailers_only() {
    let input = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Sum: 1\r\nContent-Length: 99\r\n\r\n";
    let (r, out) = relay(BodyFraming::Chunked, input, BodyOut::Chunked).await;
    let mut decoder = ChunkedDecoder::new();
    let mut wire = BytesMut::from(&out[5..]);
    let mut data = Vec::new();
    let mut trailers = Bytes::new();
    while let Some(ev) = decoder.decode(&mut wire).unwrap() {
        match ev {
            ChunkEvent::Data(d) => data.extend_from_slice(&d),
            ChunkEvent::End { trailers: t } => trailers = t,
        }
    }
    assert_eq!(&out[..5], b"HEAD|");
    assert_eq!(data, b"Wikipedia");
    assert_eq!(
        &trailers[..],
        b"X-Sum: 1\r\n",
        "Content-Length is never a trailer"
    );
    assert_eq!(r.unwrap() as usize, out.len());
}

#[tokio::test]
async fn chunked_body_dechunked_for_raw_output() {
    let (r, out) = relay(BodyFraming::Chunked, b"3\r\nabc\r\n0\r\n\r\n", BodyOut::Raw).await;
    assert_eq!(out, b"HEAD|abc");
    r.unwrap();
}

#[tokio::test]
async fn close_delimited_body_ends_at_eof() {
    let (r, out) = relay(BodyFraming::UntilClose, b"all of it", BodyOut::Chunked).await;
    assert!(out.starts_with(b"HEAD|"));
    assert!(out.ends_with(b"0\r\n\r\n"));
    r.unwrap();
}

#[tokio::test]
async fn short_length_body_is_an_error_not_a_clean_end() {
    let (r, out) = relay(BodyFraming::Length(100), b"only this", BodyOut::Raw).await;
    assert!(matches!(r, Err(BodyReadError::Closed)));
    assert!(out.len() < 5 + 100);
}

#[tokio::test]
async fn truncated_chunked_body_never_writes_a_last_chunk() {
    let (r, out) = relay(BodyFraming::Chunked, b"5\r\nabcde\r\n", BodyOut::Chunked).await;
    assert!(matches!(r, Err(BodyReadError::Closed)));
    assert!(!out.ends_with(b"0\r\n\r\n"));
}

#[tokio::test]
async fn bad_chunk_size_is_a_framing_error() {
    let (r, _) = relay(
        BodyFraming::Chunked,
        b"zz\r\nabc\r\n0\r\n\r\n",
        BodyOut::Raw,
    )
    .await;
    assert!(matches!(r, Err(BodyReadError::Framing)));
}

#[tokio::test]
async fn an_empty_body_ends_at_once_and_a_raw_end_writes_only_the_prefix() {
    let (r, out) = relay(BodyFraming::Empty, b"", BodyOut::Raw).await;
    assert_eq!(out, b"HEAD|");
    assert_eq!(r.unwrap(), 5);
}

#[test]
fn unknown_lengths_go_chunked_or_end_the_connection() {
    assert_eq!(
        BodyOut::for_length(BodyLength::Known(3), false),
        (BodyOut::Raw, true)
    );
    assert_eq!(
        BodyOut::for_length(BodyLength::Unknown, true),
        (BodyOut::Chunked, true)
    );
    assert_eq!(
        BodyOut::for_length(BodyLength::Unknown, false),
        (BodyOut::Raw, false)
    );
    assert_eq!(
        BodyOut::for_length(BodyLength::None, true),
        (BodyOut::Raw, true)
    );
}
