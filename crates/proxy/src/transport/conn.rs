//! A connection to a client or an origin.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use super::intercept::spoofed_socket;

/// A connection, whatever carries it.
#[derive(Debug)]
pub enum Conn {
    Tcp(TcpStream),
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
    pub fn looks_open(&self) -> bool {
        match self {
            Conn::Tcp(s) => {
                let mut probe = [0u8; 1];
                matches!(s.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Readiness to read, without reading: what an idle connection waits for.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Conn::Tcp(s) => s.poll_read_ready(cx),
        }
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Conn::Tcp(s) => s.peer_addr(),
        }
    }

    /// The two directions, usable at once (a tunnel pumps both): the socket's own borrowed
    /// halves, which take no lock per poll (`tokio::io::split` would).
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        match self {
            Conn::Tcp(s) => s.split(),
        }
    }

    /// The TCP socket under the connection, for `sendfile(2)`; `None` where the bytes must
    /// pass through user space (TLS).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Conn::Tcp(s) => Some(s),
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
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
