//! A client connection with bytes already read off it put back in front: the h1 session reads
//! the start of a prior-knowledge h2c connection (RFC 9113 §3.3) before it knows the
//! connection is not HTTP/1.1, and the HTTP/2 server must still read the whole preface.
//! Everything the client sends passes the [`ControlMeter`] on its way to the h2 crate.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::meter::{ControlMeter, Flood, BUDGET, WINDOW};
use crate::transport::Conn;

/// `early` is read first, then the connection; writes go straight to the connection.
pub struct Rewound {
    early: Bytes,
    conn: Conn,
    meter: ControlMeter,
}

impl Rewound {
    pub fn new(early: Bytes, conn: Conn) -> Rewound {
        Rewound {
            early,
            conn,
            meter: ControlMeter::new(),
        }
    }
}

impl AsyncRead for Rewound {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if this.early.is_empty() {
            ready!(Pin::new(&mut this.conn).poll_read(cx, buf))?;
        } else {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early[..n]);
            this.early.advance(n);
        }
        let read = &buf.filled()[before..];
        if this.meter.scan(read, Instant::now()) == Err(Flood) {
            tracing::warn!(
                peer = ?this.conn.peer_addr().ok(),
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

impl AsyncWrite for Rewound {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.conn.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
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
        let mut rewound = Rewound::new(Bytes::from_static(b"PRI * "), Conn::Tcp(server));
        client.write_all(b"HTTP/2.0").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        rewound.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"PRI * HTTP/2.0");
        rewound.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
    }
}
