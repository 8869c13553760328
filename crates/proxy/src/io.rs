//! Socket helpers: gather writes and reads bounded by deadlines.
//!
//! Every response leaves in as few `writev` calls as the kernel allows: the head and the body
//! slices that are already in memory go out together (DESIGN.md, "one gather write").

use std::io::{self, IoSlice};
use std::time::Duration;

use bytes::BytesMut;
use sepia_store::BodyFile;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Most slices one gather write is asked to carry (head, chunk framing, data, trailer, …).
pub const MAX_SLICES: usize = 8;

/// Writes every byte of `parts`, in order, using vectored writes. Empty parts are skipped.
pub async fn write_all_parts<W>(w: &mut W, parts: &[&[u8]]) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    debug_assert!(parts.len() <= MAX_SLICES);
    let mut first = 0usize; // index of the first part not fully written
    let mut offset = 0usize; // bytes of parts[first] already written
    loop {
        while first < parts.len() && offset == parts[first].len() {
            first += 1;
            offset = 0;
        }
        if first == parts.len() {
            return Ok(());
        }
        let mut slices: [IoSlice<'_>; MAX_SLICES] = [IoSlice::new(&[]); MAX_SLICES];
        let mut n = 0;
        for (i, part) in parts[first..].iter().enumerate() {
            let part = if i == 0 { &part[offset..] } else { part };
            if !part.is_empty() {
                slices[n] = IoSlice::new(part);
                n += 1;
            }
        }
        let mut written = w.write_vectored(&slices[..n]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let left = parts[first].len() - offset;
            if written >= left {
                written -= left;
                first += 1;
                offset = 0;
            } else {
                offset += written;
                written = 0;
            }
        }
    }
}

/// `write_all_parts` that fails with `TimedOut` when the peer stops reading for `limit`.
pub async fn write_parts_within<W>(w: &mut W, parts: &[&[u8]], limit: Duration) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    match tokio::time::timeout(limit, write_all_parts(w, parts)).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// Sends bytes `start..end` of a stored body file with `sendfile(2)`: the kernel takes
/// references to the file's pages instead of copying them (see sepia_store's `body_file.rs`).
/// Fails with `TimedOut` when the peer stops reading for `limit` between two progresses.
pub async fn send_file_within(
    stream: &TcpStream,
    file: &BodyFile,
    start: u64,
    end: u64,
    limit: Duration,
) -> io::Result<()> {
    debug_assert!(start <= end && end <= file.len());
    let mut offset = i64::try_from(start).map_err(io::Error::other)?;
    let end = i64::try_from(end).map_err(io::Error::other)?;
    while offset < end {
        // One call moves at most what the socket buffer takes; the cap keeps `count` in range.
        let count = (end - offset).min(1 << 30) as usize;
        let sent = stream.async_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(stream, file, Some(&mut offset), count)
                .map_err(io::Error::from)
        });
        match tokio::time::timeout(limit, sent).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
    }
    Ok(())
}

/// Reads more bytes into `buf`, making room for at least `room` first. `Ok(0)` is end of stream.
pub async fn read_more<R>(
    r: &mut R,
    buf: &mut BytesMut,
    room: usize,
    limit: Duration,
) -> io::Result<usize>
where
    R: AsyncRead + Unpin,
{
    if buf.capacity() - buf.len() < room {
        buf.reserve(room);
    }
    match tokio::time::timeout(limit, r.read_buf(buf)).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts at most `step` bytes per call, to exercise partial writes.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
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
    async fn partial_writes_keep_every_byte_in_order() {
        for step in [1, 2, 3, 7, 100] {
            let mut w = Trickle {
                out: Vec::new(),
                step,
            };
            let parts: [&[u8]; 4] = [b"HTTP/1.1 200 OK\r\n\r\n", b"", b"abc", b"defghij"];
            write_all_parts(&mut w, &parts).await.unwrap();
            assert_eq!(w.out, b"HTTP/1.1 200 OK\r\n\r\nabcdefghij", "step {step}");
        }
    }

    #[tokio::test]
    async fn nothing_to_write_is_fine() {
        let mut w = Trickle {
            out: Vec::new(),
            step: 1,
        };
        write_all_parts(&mut w, &[b"", b""]).await.unwrap();
        assert!(w.out.is_empty());
    }
}
