//! A byte-exact HTTP client over a plain TCP socket: sends whatever the test wrote (malformed
//! heads, pipelined requests, half a head) and reads responses with a strict parser, so tests
//! can assert status, framing and whether the connection was closed.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::message::Response;

/// Default read timeout: generous, since the machine running the suite may be busy.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// One client connection.
pub struct RawClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RawClient {
    /// Connects to `addr`; panics with the address if that fails.
    pub fn connect(addr: SocketAddr) -> RawClient {
        RawClient::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// Connects to `addr`, or says why not (a proxy that may be gone).
    pub fn try_connect(addr: SocketAddr) -> io::Result<RawClient> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(RawClient {
            reader: BufReader::with_capacity(64 * 1024, stream),
            writer,
        })
    }

    /// Sends `bytes` in one write; panics if the connection refuses them.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("send to proxy");
    }

    /// Sends `bytes`, reporting failure (e.g. the proxy already closed after rejecting a head).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Reads the next complete response; panics if there is none.
    pub fn read_response(&mut self) -> Response {
        self.try_read_response()
            .expect("read a response from the proxy")
    }

    /// Reads the response to a HEAD request (no body whatever the headers say).
    pub fn read_head_response(&mut self) -> Response {
        Response::read(&mut self.reader, true).expect("read a HEAD response from the proxy")
    }

    /// Reads a response that has no body by definition: to HEAD, or a 2xx to CONNECT after
    /// which the connection becomes a tunnel (RFC 9110 §9.3.6).
    pub fn read_bodiless_response(&mut self) -> Response {
        Response::read(&mut self.reader, true).expect("read a bodiless response from the proxy")
    }

    /// Reads exactly one head, interim (1xx) or final, leaving any body unread: for watching
    /// `100 Continue` arrive before the request body is sent. Returns the status and the head.
    pub fn read_single_head(&mut self) -> (u16, String) {
        let head = crate::message::read_head(&mut self.reader)
            .expect("read a head from the proxy")
            .expect("connection closed before a head");
        let status = head
            .start_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {:?}", head.start_line));
        (status, String::from_utf8_lossy(&head.raw).into_owned())
    }

    /// Reads the next complete response.
    pub fn try_read_response(&mut self) -> io::Result<Response> {
        Response::read(&mut self.reader, false)
    }

    /// Reads exactly `n` bytes (e.g. tunnelled data); panics on EOF or timeout.
    pub fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.reader
            .read_exact(&mut buf)
            .expect("read tunnelled bytes");
        buf
    }

    /// Everything the peer sends until it closes (or resets, or the read timeout passes).
    /// Waits for the first byte of an answer without consuming it: `Ok(false)` when the
    /// connection ended in order first (a kept-alive connection the server closed while the
    /// request crossed its FIN: a client may send it again, RFC 9112 §9.3.1).
    pub fn try_answer_began(&mut self) -> io::Result<bool> {
        Ok(!self.reader.fill_buf()?.is_empty())
    }

    pub fn read_until_close(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.reader.read_to_end(&mut out);
        out
    }

    /// Waits up to `timeout` for the peer to close the connection, discarding any bytes that
    /// arrive meanwhile. True if it closed (FIN or RST), false if it was still open.
    pub fn wait_closed(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            if self.reader.get_ref().set_read_timeout(Some(left)).is_err() {
                return true;
            }
            let result = self.reader.fill_buf().map(<[u8]>::len);
            match result {
                Ok(0) => return true,
                Ok(n) => self.reader.consume(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// Changes the read timeout (e.g. to assert a proxy timeout fires within a bound).
    pub fn set_read_timeout(&mut self, timeout: Duration) {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout))
            .expect("set read timeout");
    }

    /// Half-closes the sending side (the peer reads EOF).
    pub fn shutdown_write(&mut self) {
        let _ = self.writer.shutdown(Shutdown::Write);
    }

    /// A second handle on the socket, e.g. for a writer thread while this one reads.
    pub fn writer_handle(&self) -> TcpStream {
        self.writer.try_clone().expect("clone stream")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn wait_closed_distinguishes_open_and_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = RawClient::connect(listener.local_addr().unwrap());
        let (server, _) = listener.accept().unwrap();
        assert!(!client.wait_closed(Duration::from_millis(100)));
        drop(server);
        assert!(client.wait_closed(Duration::from_secs(5)));
    }
}
