//! Socket helpers: gather writes and reads bounded by deadlines.
//!
//! Every response leaves in as few write calls as the kernel allows: the head and the body
//! slices that are already in memory go out together in one `writev` (DESIGN.md, "one gather
//! write"); a single slice in one `send`.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use sepia_store::BodyFile;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use super::Conn;

/// Most slices one gather write is asked to carry (head, chunk framing, data, trailer, …).
pub const MAX_SLICES: usize = 8;

/// Writes every byte of `parts`, in order, using vectored writes (a plain one when a single
/// slice is left). Empty parts are skipped.
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
            // TLS may keep the last record back when the socket was full; plain TCP returns
            // at once.
            return w.flush().await;
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
        // One slice goes out with `send(2)` (std's socket write), several with `writev(2)`:
        // the vectored path costs the kernel 0.16 µs more per call for nothing when there is
        // one slice (bench/tools/write_calls.c; bench/RESULTS.md, 2026-11-25, "header fields
        // as positions").
        let mut written = if n == 1 {
            w.write(&slices[0]).await?
        } else {
            w.write_vectored(&slices[..n]).await?
        };
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
    within(limit, write_all_parts(w, parts)).await
}

/// Runs a socket operation, failing with `TimedOut` if it has not finished `limit` after it
/// first had to wait. The first poll runs without a timer: most reads and writes of a busy
/// proxy complete at once, and a timer costs a clock read to arm (and an insertion into the
/// timer wheel and a removal when the operation waits). The limit counts from that first
/// poll, microseconds later than a timer armed up front would.
pub fn within<F, T>(limit: Duration, op: F) -> Within<'static, F>
where
    F: Future<Output = io::Result<T>>,
{
    Within {
        op,
        timer: None,
        deadline: None,
        limit,
    }
}

/// [`within`] with a deadline shared by several operations: `deadline` is set to `limit`
/// from now the first time one of them has to wait (unless the caller set it), and every
/// later one ends there too.
fn within_deadline<F, T>(
    deadline: &mut Option<tokio::time::Instant>,
    limit: Duration,
    op: F,
) -> Within<'_, F>
where
    F: Future<Output = io::Result<T>>,
{
    Within {
        op,
        timer: None,
        deadline: Some(deadline),
        limit,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`within`]. Written by hand rather than as an `async fn`: that kept the
    /// operation twice in its state (the argument and its pinned copy), and every session
    /// future holding one grew by some 600 bytes.
    pub struct Within<'d, F> {
        #[pin]
        op: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        deadline: Option<&'d mut Option<tokio::time::Instant>>,
        limit: Duration,
    }
}

impl<F, T> Future for Within<'_, F>
where
    F: Future<Output = io::Result<T>>,
{
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let mut this = self.project();
        if let Poll::Ready(done) = this.op.poll(cx) {
            return Poll::Ready(done);
        }
        if this.timer.is_none() {
            let limit = *this.limit;
            let at = match this.deadline.as_deref_mut() {
                Some(shared) => *shared.get_or_insert_with(|| tokio::time::Instant::now() + limit),
                None => tokio::time::Instant::now() + limit,
            };
            this.timer.set(Some(tokio::time::sleep_until(at)));
        }
        match this.timer.as_pin_mut().map(|timer| timer.poll(cx)) {
            Some(Poll::Pending) => Poll::Pending,
            _ => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
        }
    }
}

/// Sends bytes `start..end` of a stored body file with `sendfile(2)`: the kernel takes
/// references to the file's pages instead of copying them (see sepia_store's `body_file.rs`).
/// The body starts at `file.offset()` in its file (0 for a body file of its own, the record's
/// place for a body in a disk-cache segment). Fails with `TimedOut` when the peer stops
/// reading for `limit` between two progresses.
pub async fn send_file_within(
    stream: &TcpStream,
    file: &BodyFile,
    start: u64,
    end: u64,
    limit: Duration,
) -> io::Result<()> {
    debug_assert!(start <= end && end <= file.len());
    let base = file.offset();
    let mut offset = i64::try_from(base + start).map_err(io::Error::other)?;
    let end = i64::try_from(base + end).map_err(io::Error::other)?;
    while offset < end {
        // One call moves at most what the socket buffer takes; the cap keeps `count` in range.
        let count = (end - offset).min(1 << 30) as usize;
        let sent = stream.async_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(stream, file, Some(&mut offset), count)
                .map_err(io::Error::from)
        });
        match within(limit, sent).await {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`read_more`] for a message that must arrive whole by a deadline shared by several reads
/// (see [`within_deadline`]): a message that arrives in one read never reads the clock.
pub async fn read_by_deadline<R>(
    r: &mut R,
    buf: &mut BytesMut,
    room: usize,
    deadline: &mut Option<tokio::time::Instant>,
    limit: Duration,
) -> io::Result<usize>
where
    R: AsyncRead + Unpin,
{
    make_room(buf, room);
    within_deadline(deadline, limit, r.read_buf(buf)).await
}

/// [`read_by_deadline`] on a connection, for a reader that gives its buffer back between
/// messages: an unallocated `buf` is only given room once `conn` is readable (bytes, an end or
/// an error to report), so nothing is held while the peer has not answered.
pub async fn read_conn_by_deadline(
    conn: &mut Conn,
    buf: &mut BytesMut,
    room: usize,
    deadline: &mut Option<tokio::time::Instant>,
    limit: Duration,
) -> io::Result<usize> {
    if buf.capacity() == 0 {
        let ready = std::future::poll_fn(|cx| conn.poll_read_ready(cx));
        within_deadline(deadline, limit, ready).await?;
    }
    read_by_deadline(conn, buf, room, deadline, limit).await
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
    make_room(buf, room);
    within(limit, r.read_buf(buf)).await
}

fn make_room(buf: &mut BytesMut, room: usize) {
    if buf.capacity() - buf.len() < room {
        buf.reserve(room);
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

    #[tokio::test(start_paused = true)]
    async fn an_operation_that_waits_fails_after_the_limit() {
        let start = tokio::time::Instant::now();
        let r = within(
            Duration::from_secs(5),
            std::future::pending::<io::Result<()>>(),
        )
        .await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(tokio::time::Instant::now() - start, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_deadline_is_armed_by_the_first_wait_only() {
        let limit = Duration::from_secs(5);
        let start = tokio::time::Instant::now();
        let mut deadline = None;
        within_deadline(&mut deadline, limit, async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(deadline, None, "an operation done at once reads no clock");
        let two_seconds = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(())
        };
        within_deadline(&mut deadline, limit, two_seconds)
            .await
            .unwrap();
        assert_eq!(deadline, Some(start + limit));
        // A later wait ends at the same deadline, not `limit` after it began.
        let r = within_deadline(
            &mut deadline,
            limit,
            std::future::pending::<io::Result<()>>(),
        );
        assert_eq!(r.await.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(tokio::time::Instant::now(), start + limit);
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
