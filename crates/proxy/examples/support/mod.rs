//! What the examples share: a keep-alive origin that answers every request with the same
//! cacheable 1 KiB body, on plain threads with fixed buffers (it allocates nothing per
//! request, so an allocation counted in an example is the proxy's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// Bytes in the origin's response body.
pub const BODY: usize = 1024;

/// A keep-alive HTTP/1.1 origin answering every request with the same cacheable 1 KiB body.
pub fn start_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve_origin(stream));
        }
    });
    addr
}

fn serve_origin(mut stream: TcpStream) {
    let mut response = Vec::new();
    response.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Type: text/plain\r\n",
    );
    response.extend_from_slice(format!("Content-Length: {BODY}\r\n\r\n").as_bytes());
    response.extend(std::iter::repeat_n(b'x', BODY));
    let mut buf = [0u8; 8192];
    let mut have = 0;
    loop {
        match stream.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        // Requests through the proxy have no body: answer each complete head.
        while let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            if stream.write_all(&response).is_err() {
                return;
            }
            buf.copy_within(end + 4..have, 0);
            have -= end + 4;
        }
    }
}
