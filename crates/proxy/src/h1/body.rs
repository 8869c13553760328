//! Streams a message body from one socket to another in bounded memory.
//!
//! The body is decoded from its incoming framing (RFC 9112 §6: Content-Length, chunked, or until
//! close) and re-framed for the outgoing side: raw bytes, or chunked so a close-delimited origin
//! response can still go out on a persistent client connection. Data is never copied: each read
//! lands in the connection's buffer and leaves as a `Bytes` slice of it in a gather write, with
//! the head (or chunk framing) that precedes it.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sepia_http1::{
    BodyFraming, ChunkError, ChunkEvent, ChunkSizeLine, ChunkedDecoder, LengthDecoder, CRLF,
};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::io::{read_more, write_parts_within};

/// Room made in the read buffer before each read of a body: big enough that a large body moves
/// in few syscalls, small enough that thousands of transfers fit in memory.
const BODY_READ_ROOM: usize = 64 * 1024;

/// How the incoming body is delimited, with the decoder's progress.
pub enum BodyIn {
    Length(LengthDecoder),
    Chunked(ChunkedDecoder),
    UntilClose,
}

impl BodyIn {
    /// `None` for a message without a body.
    pub fn new(framing: BodyFraming) -> Option<BodyIn> {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => None,
            BodyFraming::Length(n) => Some(BodyIn::Length(LengthDecoder::new(n))),
            BodyFraming::Chunked => Some(BodyIn::Chunked(ChunkedDecoder::new())),
            BodyFraming::UntilClose => Some(BodyIn::UntilClose),
        }
    }
}

/// How the body is framed on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyOut {
    /// As is: the head carries Content-Length, or the connection closes after the body.
    Raw,
    /// Re-chunked (RFC 9112 §7.1); trailers received in a chunked body are passed on.
    Chunked,
}

#[derive(Debug)]
pub enum RelayError {
    /// The source ended before the body was complete (origin died mid-body, client hung up).
    SourceClosed,
    /// Reading the source failed or timed out.
    Source(io::Error),
    /// The source's chunked framing was invalid.
    Framing(ChunkError),
    /// Writing to the destination failed or timed out.
    Dest(io::Error),
    /// Writing to the destination failed, but with a tee the source was still read to its
    /// end and every piece passed to the tee (a cache fill others are reading survives the
    /// client that started it).
    DestAfterDrain(io::Error),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::SourceClosed => {
                f.write_str("the sender closed before the body was complete")
            }
            RelayError::Source(e) => write!(f, "reading the body failed: {e}"),
            RelayError::Framing(e) => write!(f, "invalid chunked framing: {e:?}"),
            RelayError::Dest(e) => write!(f, "writing the body failed: {e}"),
            RelayError::DestAfterDrain(e) => {
                write!(f, "writing the body failed (source drained): {e}")
            }
        }
    }
}

/// A sink that sees every piece of body data as it passes (the cache's store writer).
pub type Tee<'a> = &'a mut (dyn FnMut(&[u8]) + Send);

/// Deadlines for one relay: each read and each write must progress within its limit.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    pub read: Duration,
    pub write: Duration,
}

/// Relays the whole body. `prefix` (typically the message head) is written together with the
/// first piece of body; `tee`, when given, sees every piece of body data as it passes. Returns the number of bytes written to `dst`, prefix included.
#[allow(clippy::too_many_arguments)] // two endpoints, each with its buffer/framing, plus limits
pub async fn relay_body<R, W>(
    src: &mut R,
    buf: &mut BytesMut,
    body: &mut BodyIn,
    dst: &mut W,
    out: BodyOut,
    prefix: &[u8],
    limits: Deadlines,
    mut tee: Option<Tee<'_>>,
) -> Result<u64, RelayError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut prefix = prefix;
    let mut sent = 0u64;
    let mut dest_failed: Option<io::Error> = None;
    loop {
        let step = match body {
            BodyIn::Length(d) => match d.decode(buf) {
                Some(data) => Step::Data(data),
                None if d.is_done() => Step::End(Bytes::new()),
                None => Step::NeedMore,
            },
            BodyIn::Chunked(d) => match d.decode(buf).map_err(RelayError::Framing)? {
                Some(ChunkEvent::Data(data)) => Step::Data(data),
                Some(ChunkEvent::End { trailers }) => Step::End(trailers),
                None => Step::NeedMore,
            },
            BodyIn::UntilClose if !buf.is_empty() => Step::Data(buf.split().freeze()),
            BodyIn::UntilClose => Step::NeedMore,
        };
        match step {
            Step::Data(data) => {
                if let Some(tee) = tee.as_mut() {
                    tee(&data);
                }
                if dest_failed.is_none() {
                    match write_data(dst, prefix, &data, out, limits.write).await {
                        Ok(n) => sent += n,
                        Err(RelayError::Dest(e)) if tee.is_some() => dest_failed = Some(e),
                        Err(e) => return Err(e),
                    }
                }
                prefix = &[];
            }
            Step::End(trailers) => {
                if let Some(e) = dest_failed {
                    return Err(RelayError::DestAfterDrain(e));
                }
                sent += write_end(dst, prefix, &trailers, out, limits.write).await?;
                return Ok(sent);
            }
            Step::NeedMore => {
                let n = read_more(src, buf, BODY_READ_ROOM, limits.read)
                    .await
                    .map_err(RelayError::Source)?;
                if n == 0 {
                    if matches!(body, BodyIn::UntilClose) {
                        // A close-delimited body ends at EOF (RFC 9112 §6.3 rule 8).
                        if let Some(e) = dest_failed {
                            return Err(RelayError::DestAfterDrain(e));
                        }
                        sent += write_end(dst, prefix, &[], out, limits.write).await?;
                        return Ok(sent);
                    }
                    return Err(RelayError::SourceClosed);
                }
            }
        }
    }
}

enum Step {
    Data(Bytes),
    End(Bytes),
    NeedMore,
}

async fn write_data<W: AsyncWrite + Unpin>(
    dst: &mut W,
    prefix: &[u8],
    data: &[u8],
    out: BodyOut,
    limit: Duration,
) -> Result<u64, RelayError> {
    let total = match out {
        BodyOut::Raw => {
            write_parts_within(dst, &[prefix, data], limit)
                .await
                .map_err(RelayError::Dest)?;
            prefix.len() + data.len()
        }
        BodyOut::Chunked => {
            let size = ChunkSizeLine::new(data.len() as u64);
            let parts = [prefix, size.as_bytes(), data, CRLF];
            write_parts_within(dst, &parts, limit)
                .await
                .map_err(RelayError::Dest)?;
            parts.iter().map(|p| p.len()).sum()
        }
    };
    Ok(total as u64)
}

async fn write_end<W: AsyncWrite + Unpin>(
    dst: &mut W,
    prefix: &[u8],
    trailers: &[u8],
    out: BodyOut,
    limit: Duration,
) -> Result<u64, RelayError> {
    // last-chunk, then the trailer section, then the empty line (RFC 9112 §7.1.2).
    let parts: [&[u8]; 4] = match out {
        BodyOut::Raw => [prefix, &[], &[], &[]],
        BodyOut::Chunked => [prefix, b"0\r\n", trailers, CRLF],
    };
    write_parts_within(dst, &parts, limit)
        .await
        .map_err(RelayError::Dest)?;
    Ok(parts.iter().map(|p| p.len() as u64).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Deadlines = Deadlines {
        read: Duration::from_secs(5),
        write: Duration::from_secs(5),
    };

    async fn run(
        framing: BodyFraming,
        input: &[u8],
        out: BodyOut,
    ) -> (Result<u64, RelayError>, Vec<u8>) {
        // The source yields the input in small pieces, so decoders see split framing.
        let mut src = tokio_test_reader(input);
        let mut buf = BytesMut::new();
        let mut body = BodyIn::new(framing).unwrap();
        let mut dst = Vec::new();
        let r = relay_body(
            &mut src, &mut buf, &mut body, &mut dst, out, b"HEAD|", LIMITS, None,
        )
        .await;
        (r, dst)
    }

    fn tokio_test_reader(input: &[u8]) -> impl AsyncRead + Unpin {
        let mut b = tokio_test_builder();
        for piece in input.chunks(3) {
            b.read(piece);
        }
        b.build()
    }

    fn tokio_test_builder() -> tokio_io_mock::Builder {
        tokio_io_mock::Builder::new()
    }

    /// A minimal scripted reader (tokio-test's mock is not a dependency here).
    mod tokio_io_mock {
        use std::collections::VecDeque;
        use std::pin::Pin;
        use std::task::{Context, Poll};
        use tokio::io::{AsyncRead, ReadBuf};

        pub struct Builder(VecDeque<Vec<u8>>);
        impl Builder {
            pub fn new() -> Self {
                Builder(VecDeque::new())
            }
            pub fn read(&mut self, piece: &[u8]) -> &mut Self {
                self.0.push_back(piece.to_vec());
                self
            }
            pub fn build(&mut self) -> Reader {
                Reader(std::mem::take(&mut self.0))
            }
        }
        pub struct Reader(VecDeque<Vec<u8>>);
        impl AsyncRead for Reader {
            fn poll_read(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<std::io::Result<()>> {
                if let Some(piece) = self.0.pop_front() {
                    buf.put_slice(&piece);
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    #[tokio::test]
    async fn length_body_relayed_raw_with_prefix() {
        let (r, out) = run(BodyFraming::Length(10), b"0123456789extra", BodyOut::Raw).await;
        assert_eq!(out, b"HEAD|0123456789");
        assert_eq!(r.unwrap(), 15);
    }

    #[tokio::test]
    async fn chunked_body_rechunked_with_trailers() {
        let input = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Sum: 1\r\n\r\n";
        let (r, out) = run(BodyFraming::Chunked, input, BodyOut::Chunked).await;
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
        assert_eq!(&trailers[..], b"X-Sum: 1\r\n");
        assert_eq!(r.unwrap() as usize, out.len());
    }

    #[tokio::test]
    async fn chunked_body_dechunked_for_raw_output() {
        let (r, out) = run(BodyFraming::Chunked, b"3\r\nabc\r\n0\r\n\r\n", BodyOut::Raw).await;
        assert_eq!(out, b"HEAD|abc");
        r.unwrap();
    }

    #[tokio::test]
    async fn close_delimited_body_ends_at_eof() {
        let (r, out) = run(BodyFraming::UntilClose, b"all of it", BodyOut::Chunked).await;
        assert!(out.starts_with(b"HEAD|"));
        assert!(out.ends_with(b"0\r\n\r\n"));
        r.unwrap();
    }

    #[tokio::test]
    async fn short_length_body_is_an_error_not_a_clean_end() {
        let (r, out) = run(BodyFraming::Length(100), b"only this", BodyOut::Raw).await;
        assert!(matches!(r, Err(RelayError::SourceClosed)));
        assert!(out.len() < 5 + 100);
    }

    #[tokio::test]
    async fn truncated_chunked_body_never_writes_a_last_chunk() {
        let (r, out) = run(BodyFraming::Chunked, b"5\r\nabcde\r\n", BodyOut::Chunked).await;
        assert!(matches!(r, Err(RelayError::SourceClosed)));
        assert!(!out.ends_with(b"0\r\n\r\n"));
    }

    /// A writer whose peer has gone away.
    struct Gone;
    impl tokio::io::AsyncWrite for Gone {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::task::Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_tee_drains_the_source_after_the_destination_fails() {
        let mut src = tokio_test_reader(b"0123456789abcdef");
        let mut buf = BytesMut::new();
        let mut body = BodyIn::new(BodyFraming::Length(16)).unwrap();
        let mut seen = Vec::new();
        let mut tee = |d: &[u8]| seen.extend_from_slice(d);
        let r = relay_body(
            &mut src,
            &mut buf,
            &mut body,
            &mut Gone,
            BodyOut::Raw,
            b"",
            LIMITS,
            Some(&mut tee),
        )
        .await;
        assert!(matches!(r, Err(RelayError::DestAfterDrain(_))), "{r:?}");
        assert_eq!(seen, b"0123456789abcdef", "the fill got the whole body");
        // Without a tee there is nothing to drain for: stop at once.
        let mut src = tokio_test_reader(b"0123456789abcdef");
        let mut body = BodyIn::new(BodyFraming::Length(16)).unwrap();
        let r = relay_body(
            &mut src,
            &mut BytesMut::new(),
            &mut body,
            &mut Gone,
            BodyOut::Raw,
            b"",
            LIMITS,
            None,
        )
        .await;
        assert!(matches!(r, Err(RelayError::Dest(_))), "{r:?}");
    }

    #[tokio::test]
    async fn bad_chunk_size_is_a_framing_error() {
        let (r, _) = run(
            BodyFraming::Chunked,
            b"zz\r\nabc\r\n0\r\n\r\n",
            BodyOut::Raw,
        )
        .await;
        assert!(matches!(r, Err(RelayError::Framing(_))));
    }
}
