//! A raw TCP echo server: the far end of CONNECT tunnels. It counts accepted connections so a
//! test can tell whether a refused CONNECT still reached it.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running echo server on 127.0.0.1 (ephemeral port), stopped on drop.
pub struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

impl EchoServer {
    pub fn start() -> EchoServer {
        EchoServer::start_on("127.0.0.1:0")
    }

    /// Starts the echo server on `addr` (e.g. `"[::1]:0"`).
    pub fn start_on(addr: &str) -> EchoServer {
        let listener =
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind echo server on {addr}: {e}"));
        let addr = listener.local_addr().expect("echo address");
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let (loop_stop, loop_count) = (Arc::clone(&stop), Arc::clone(&connections));
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if loop_stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                loop_count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || echo(stream));
            }
        });
        EchoServer {
            addr,
            stop,
            connections,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Copies everything back until the peer half-closes, then half-closes too.
fn echo(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_bytes_back() {
        let server = EchoServer::start();
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"ping").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"ping");
        assert_eq!(server.connections(), 1);
    }
}
