//! A TLS connection, either side: a client's to a TLS listener, or Sepia's to an https origin.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// A TLS stream over TCP, and whether rustls may hold plaintext already decrypted.
///
/// Callers wait for a connection's next message with socket readiness (`poll_read_ready`),
/// which knows nothing of bytes rustls has already taken off the socket but not handed out:
/// the request a client sends with its last handshake message, or what a client pipelines
/// beyond one read buffer. Those would wait for readiness that never comes. So after the
/// handshake and after a read that filled the caller's buffer (it may have left plaintext
/// behind), readiness first asks rustls; a read that did not fill the buffer took everything
/// rustls had.
#[derive(Debug)]
pub struct TlsConn {
    stream: TlsStream<TcpStream>,
    plaintext_left: bool,
}

impl TlsConn {
    pub fn new(stream: impl Into<TlsStream<TcpStream>>) -> TlsConn {
        TlsConn {
            stream: stream.into(),
            plaintext_left: true,
        }
    }

    /// The TCP socket under the TLS.
    pub fn tcp(&self) -> &TcpStream {
        self.stream.get_ref().0
    }

    /// The application protocol agreed by ALPN (RFC 7301), if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        match &self.stream {
            TlsStream::Server(s) => s.get_ref().1.alpn_protocol(),
            TlsStream::Client(s) => s.get_ref().1.alpn_protocol(),
        }
    }

    /// Whether this idle connection can carry another request. What arrived while it was idle
    /// is read through rustls without blocking: records that are not data (TLS 1.3
    /// NewSessionTicket, KeyUpdate; RFC 8446 §4.6) are processed and leave it usable, while
    /// data (a protocol error by the peer, RFC 9112 §9.3), close_notify, the end of the
    /// stream or a TLS error make it unusable.
    pub fn idle_usable(&mut self) -> bool {
        match &mut self.stream {
            TlsStream::Client(s) => {
                let (tcp, session) = s.get_mut();
                settle_idle(tcp, session)
            }
            TlsStream::Server(s) => {
                let (tcp, session) = s.get_mut();
                settle_idle(tcp, session)
            }
        }
    }

    /// Readiness to read: at once when rustls holds plaintext (or a record it cannot
    /// decrypt, which the read will report), else the socket's.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.plaintext_left {
            let processed = match &mut self.stream {
                TlsStream::Server(s) => s.get_mut().1.process_new_packets(),
                TlsStream::Client(s) => s.get_mut().1.process_new_packets(),
            };
            match processed {
                Ok(state) if state.plaintext_bytes_to_read() == 0 => self.plaintext_left = false,
                _ => return Poll::Ready(Ok(())),
            }
        }
        self.tcp().poll_read_ready(cx)
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let room = buf.remaining();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        this.plaintext_left =
            matches!(read, Poll::Ready(Ok(()))) && room > 0 && buf.remaining() == 0;
        read
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Reads what the socket holds into `session` without waiting and processes it; see
/// [`TlsConn::idle_usable`].
fn settle_idle<D>(tcp: &TcpStream, session: &mut rustls::ConnectionCommon<D>) -> bool {
    let socket = socket2::SockRef::from(tcp);
    loop {
        // Read only when tokio saw the socket readable (`try_io`): a quiet connection costs no
        // syscall, and a read that would block clears tokio's readiness.
        let read = tcp.try_io(Interest::READABLE, || {
            let mut reader: &socket2::Socket = &socket;
            session.read_tls(&mut reader)
        });
        match read {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return false,
        }
    }
    matches!(
        session.process_new_packets(),
        Ok(state) if state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed()
    )
}
