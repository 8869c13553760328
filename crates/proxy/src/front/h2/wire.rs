//! The client connection as the h2 crate sees it ([`Wire`]): bytes already read off it put
//! back in front, and the frames it writes gathered into one write per poll of the
//! connection's task ([`Sender`]).
//!
//! Early bytes: the h1 session reads the start of a prior-knowledge h2c connection (RFC 9113
//! §3.3) before it knows the connection is not HTTP/1.1, and the HTTP/2 server must still
//! read the whole preface.
//!
//! Gathered writes: the h2 crate flushes its frame buffer whenever it queues a DATA frame of
//! 256 bytes or more (it keeps the payload aside, then must write it before the next frame),
//! and over TLS every write is a TLS record and a `sendmsg`. A batch of 32 streams answered
//! with 1 KiB each was 32 records and 32 system calls. Here writes are copied into a staging
//! buffer and a flush is a promise kept when the task's poll ends: [`Sender::poll_send`]
//! writes the whole batch at once (one `sendmsg`, records of up to 16 KiB), or sooner when
//! the staged bytes reach [`STAGE_LIMIT`]. The buffer is the worker thread's, given back once
//! written, so an idle connection holds none.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::meter::{ControlMeter, Flood, BUDGET, WINDOW};
use crate::transport::Conn;

/// Staged bytes past which a write first sends what is staged: four full TLS records, a
/// bound on what one connection holds beyond the h2 crate's own 16 KiB frame buffer.
const STAGE_LIMIT: usize = 64 * 1024;

/// The connection and what is staged for it, shared by the h2 crate's [`Wire`] and the
/// connection task's [`Sender`] (both used by that one task only: the lock is never contended).
struct Shared {
    early: Bytes,
    conn: Conn,
    out: Vec<u8>,
    /// Bytes of `out` the connection took.
    written: usize,
    /// Written to the connection since its last complete flush (TLS records it may hold).
    unflushed: bool,
    /// A write failed: every later use of the connection fails the same way.
    failed: Option<io::ErrorKind>,
}

/// `early` is read first, then the connection; writes are staged (see the module's comment).
/// Everything the client sends passes the [`ControlMeter`] on its way to the h2 crate.
pub struct Wire {
    shared: Arc<Mutex<Shared>>,
    meter: ControlMeter,
}

/// Sends what the h2 crate staged; polled at the end of every poll of the connection's task.
pub struct Sender {
    shared: Arc<Mutex<Shared>>,
}

impl Wire {
    pub fn new(early: Bytes, conn: Conn) -> (Wire, Sender) {
        let shared = Arc::new(Mutex::new(Shared {
            early,
            conn,
            out: Vec::new(),
            written: 0,
            unflushed: false,
            failed: None,
        }));
        let sender = Sender {
            shared: shared.clone(),
        };
        let wire = Wire {
            shared,
            meter: ControlMeter::new(),
        };
        (wire, sender)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stages `bufs`, first sending what is staged when that reached the limit.
    fn stage(&self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut shared = self.lock();
        shared.check()?;
        if shared.out.len() >= STAGE_LIMIT {
            std::task::ready!(shared.poll_send(cx))?;
        }
        let n: usize = bufs.iter().map(|b| b.len()).sum();
        if shared.out.capacity() == 0 {
            shared.out = take_stage(n);
        }
        for buf in bufs {
            shared.out.extend_from_slice(buf);
        }
        Poll::Ready(Ok(n))
    }
}

thread_local! {
    /// The staging buffer of the worker thread, lent to a connection from its first write of
    /// a poll until the batch is sent (most batches leave within the poll that wrote them). A
    /// buffer per connection was a 64 KiB allocation and release per batch, and the large
    /// extents it freed were carved for other connections' buffers, pages already touched.
    static STAGE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer to stage `n` bytes in, empty: the worker's if it is free, else a new one with all
/// the room at once (growing it copied the batch again: jemalloc's realloc was 600
/// instructions per 1 KiB response in a batch of 32).
fn take_stage(n: usize) -> Vec<u8> {
    let lent = STAGE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if lent.capacity() >= n {
        return lent;
    }
    Vec::with_capacity(n.max(STAGE_LIMIT))
}

/// A staging buffer whose bytes were sent: kept as the worker's if it has none (and it is not
/// one grown far past the limit by a single large write), else released.
fn give_back_stage(mut out: Vec<u8>) {
    if out.capacity() > 2 * STAGE_LIMIT {
        return;
    }
    out.clear();
    STAGE.with(|s| {
        let mut spare = s.borrow_mut();
        if spare.capacity() == 0 {
            *spare = out;
        }
    });
}

impl Sender {
    /// Writes what is staged and flushes the connection, as far as it takes them now; when it
    /// does not, the socket wakes the task to call this again. A failure is kept for the h2
    /// crate's next use of the connection, and the task woken so that it comes.
    pub fn poll_send(&self, cx: &mut Context<'_>) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.failed.is_none() && matches!(shared.poll_send(cx), Poll::Ready(Err(_))) {
            cx.waker().wake_by_ref();
        }
    }
}

impl Shared {
    fn check(&self) -> io::Result<()> {
        match self.failed {
            Some(kind) => Err(kind.into()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: io::Error) -> Poll<io::Result<()>> {
        self.failed = Some(e.kind());
        Poll::Ready(Err(e))
    }

    /// Writes the staged bytes, releases the buffer, then flushes the connection.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let staged = &self.out[self.written..];
            match Pin::new(&mut self.conn).poll_write(cx, staged) {
                Poll::Ready(Ok(0)) => return self.fail(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.unflushed = true;
                }
                Poll::Ready(Err(e)) => return self.fail(e),
                Poll::Pending => return Poll::Pending,
            }
        }
        if self.out.capacity() > 0 {
            give_back_stage(std::mem::take(&mut self.out));
            self.written = 0;
        }
        if self.unflushed {
            match Pin::new(&mut self.conn).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return self.fail(e),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        {
            let mut shared = this.lock();
            if shared.early.is_empty() {
                std::task::ready!(Pin::new(&mut shared.conn).poll_read(cx, buf))?;
            } else {
                let n = shared.early.len().min(buf.remaining());
                buf.put_slice(&shared.early[..n]);
                shared.early.advance(n);
                if shared.early.is_empty() {
                    // An empty slice still holds the h1 session's whole read buffer.
                    shared.early = Bytes::new();
                }
            }
        }
        if this.meter.scan(&buf.filled()[before..], Instant::now()) == Err(Flood) {
            let peer = this.lock().conn.peer_addr().ok();
            tracing::warn!(
                ?peer,
                "HTTP/2 client closed: more than {BUDGET} PING, SETTINGS or PRIORITY frames \
                 within {WINDOW:?} (RFC 9113 §10.5)"
            );
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP/2 control frame flood",
            )));
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stage(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stage(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// A promise: [`Sender::poll_send`] sends the staged bytes when the task's poll ends.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.lock().check())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = self.lock();
        shared.check()?;
        std::task::ready!(shared.poll_send(cx))?;
        Pin::new(&mut shared.conn).poll_shutdown(cx)
    }
}

/// Runs `fut`, sending what it staged on `sender`'s connection whenever a poll of it ends.
/// `fut` is pinned by the caller, so that this adds no copy of it to the caller's future.
pub fn sending<'a, F: Future + ?Sized>(
    mut fut: Pin<&'a mut F>,
    sender: &'a Sender,
) -> impl Future<Output = F::Output> + 'a {
    std::future::poll_fn(move |cx| {
        let polled = fut.as_mut().poll(cx);
        sender.poll_send(cx);
        polled
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    #[tokio::test]
    async fn early_bytes_come_first_then_the_socket() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        let (mut wire, sender) = Wire::new(Bytes::from_static(b"PRI * "), Conn::Tcp(server));
        client.write_all(b"HTTP/2.0").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        wire.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"PRI * HTTP/2.0");
        let writes = std::pin::pin!(async {
            wire.write_all(b"ba").await.unwrap();
            wire.flush().await.unwrap();
            wire.write_all(b"ck").await.unwrap();
        });
        sending(writes, &sender).await;
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
    }

    #[tokio::test]
    async fn staged_bytes_past_the_limit_go_out_before_more_are_taken() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        let (mut wire, _sender) = Wire::new(Bytes::new(), Conn::Tcp(server));
        let piece = vec![7u8; STAGE_LIMIT];
        wire.write_all(&piece).await.unwrap();
        wire.write_all(b"!").await.unwrap();
        let mut got = vec![0u8; STAGE_LIMIT];
        client.read_exact(&mut got).await.unwrap();
        assert!(got.iter().all(|&b| b == 7));
        wire.shutdown().await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"!");
    }
}
