//! A connection to a client or an origin.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use super::intercept::spoofed_socket;
use super::tls::TlsConn;

/// A connection, whatever carries it.
#[derive(Debug)]
pub enum Conn {
    Tcp(TcpStream),
    /// Boxed: rustls' state is over a kilobyte, and a parked plain connection must stay small.
    Tls(Box<TlsConn>),
}

impl Conn {
    /// Opens a connection to `addr` within `limit`, from the (non-local) client address
    /// `source` when given: a transparent socket, as TPROXY's `spoof_client` needs.
    pub async fn connect(
        addr: SocketAddr,
        source: Option<IpAddr>,
        limit: Duration,
    ) -> io::Result<Conn> {
        let connecting = async {
            match source {
                None => TcpStream::connect(addr).await,
                Some(ip) => spoofed_socket(ip, addr)?.connect(addr).await,
            }
        };
        match tokio::time::timeout(limit, connecting).await {
            Ok(Ok(stream)) => {
                // Heads and bodies are written whole; Nagle would only add latency.
                stream.set_nodelay(true)?;
                Ok(Conn::Tcp(stream))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
        }
    }

    /// Whether an idle connection is still usable: it must have nothing to read, since data
    /// would be a protocol error by the peer and end of stream means it closed its side.
    /// A plain socket is peeked, not read, and only when tokio saw it readable (`try_io`), so
    /// that a quiet connection costs no syscall. Over TLS, records that are not data (a TLS
    /// 1.3 session ticket, a key update) may arrive while the connection is idle: rustls reads
    /// and processes them without blocking (`TlsConn::idle_usable`).
    pub fn looks_open(&mut self) -> bool {
        match self {
            Conn::Tcp(s) => {
                let mut probe = [std::mem::MaybeUninit::<u8>::uninit()];
                let peeked = s.try_io(Interest::READABLE, || {
                    socket2::SockRef::from(&*s).peek(&mut probe)
                });
                matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            Conn::Tls(s) => s.idle_usable(),
        }
    }

    /// Readiness to read, without reading: what an idle connection waits for.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Conn::Tcp(s) => s.poll_read_ready(cx),
            Conn::Tls(s) => s.poll_read_ready(cx),
        }
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.socket().peer_addr()
    }

    /// The two directions, usable at once (a tunnel pumps both). Plain TCP uses the socket's
    /// own borrowed halves, which take no lock per poll; TLS, one state for both directions,
    /// `tokio::io::split`'s.
    pub fn split(&mut self) -> (ConnRead<'_>, ConnWrite<'_>) {
        match self {
            Conn::Tcp(s) => {
                let (r, w) = s.split();
                (ConnRead::Tcp(r), ConnWrite::Tcp(w))
            }
            Conn::Tls(s) => {
                let (r, w) = tokio::io::split(&mut **s);
                (ConnRead::Tls(r), ConnWrite::Tls(w))
            }
        }
    }

    /// The TCP socket under the connection, for `sendfile(2)`; `None` where the bytes must
    /// pass through user space (TLS).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Conn::Tcp(s) => Some(s),
            Conn::Tls(_) => None,
        }
    }

    /// The protocol ALPN chose on a TLS connection (RFC 7301).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Conn::Tcp(_) => None,
            Conn::Tls(s) => s.alpn(),
        }
    }

    /// The TCP socket under the connection, TLS or not.
    fn socket(&self) -> &TcpStream {
        match self {
            Conn::Tcp(s) => s,
            Conn::Tls(s) => s.tcp(),
        }
    }
}

/// The reading half of a split [`Conn`].
pub enum ConnRead<'a> {
    Tcp(ReadHalf<'a>),
    Tls(tokio::io::ReadHalf<&'a mut TlsConn>),
}

/// The writing half of a split [`Conn`].
pub enum ConnWrite<'a> {
    Tcp(WriteHalf<'a>),
    Tls(tokio::io::WriteHalf<&'a mut TlsConn>),
}

impl AsyncRead for ConnRead<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnRead::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ConnRead::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnWrite<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWrite::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            ConnWrite::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Tcp(s) => Pin::new(s).poll_flush(cx),
            ConnWrite::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            ConnWrite::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}
