//! An https origin for the tests: a small TLS-terminating front (Python's `ssl`, one thread per
//! connection) that relays each connection's plaintext to a plain [`crate::Origin`] over a
//! connection of its own, so the origin's records (requests, `X-Conn-Id`) stay the test's
//! evidence. The front reports every connection it accepts: over TLS or in clear text (it
//! takes both on one port, to show that Sepia never mixes them), and whether the TLS handshake
//! resumed a session.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::tls::TestCert;
use crate::wait_until;

/// The front: accepts on 127.0.0.1:0, prints `port N`, then one line per connection
/// (`tls resumed=0|1`, or `plain`), and relays bytes both ways until either side closes.
const FRONT: &str = r#"
import select, socket, ssl, sys, threading

cert, key, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
context.set_alpn_protocols(["http/1.1"])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print("port", listener.getsockname()[1], flush=True)
lock = threading.Lock()

def report(line):
    with lock:
        print(line, flush=True)

def relay(client, origin):
    while True:
        pending = isinstance(client, ssl.SSLSocket) and client.pending() > 0
        ready = [client] if pending else select.select([client, origin], [], [])[0]
        for side in ready:
            other = origin if side is client else client
            try:
                data = side.recv(65536)
            except (ssl.SSLError, OSError):
                return
            if not data:
                return
            other.sendall(data)

def serve(sock):
    try:
        first = sock.recv(1, socket.MSG_PEEK)
        if first == b"\x16":
            client = context.wrap_socket(sock, server_side=True)
            report("tls resumed=%d" % int(client.session_reused))
        else:
            client = sock
            report("plain")
        origin = socket.create_connection(("127.0.0.1", upstream))
        try:
            relay(client, origin)
        finally:
            origin.close()
        if client is not sock:
            # close_notify: what tells a close-delimited body's end from a truncation
            # (RFC 9112 section 9.8).
            client.settimeout(1)
            try:
                client.unwrap()
            except (ssl.SSLError, OSError):
                pass
    except (ssl.SSLError, OSError) as e:
        report("failed %s" % e)
    finally:
        sock.close()

while True:
    sock, _ = listener.accept()
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
"#;

/// What the front has seen.
#[derive(Default, Debug, Clone)]
pub struct FrontSeen {
    /// TLS connections, in accept order: whether each resumed a session.
    pub tls: Vec<bool>,
    /// Plain connections.
    pub plain: usize,
    /// Connections that failed (a refused handshake included).
    pub failed: usize,
}

/// An https origin on 127.0.0.1 (ephemeral port) in front of a plain origin; stopped on drop.
pub struct TlsOrigin {
    addr: SocketAddr,
    child: Child,
    seen: Arc<Mutex<FrontSeen>>,
}

impl TlsOrigin {
    /// Serves `cert` (and its key) in front of the plain origin at `upstream`.
    pub fn start(cert: &TestCert, upstream: SocketAddr) -> TlsOrigin {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(FRONT)
            .args([
                cert.cert_str(),
                cert.key_str(),
                &upstream.port().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run python3");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let port: u16 = first
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the TLS front did not start: {first:?}"));
        let seen = Arc::new(Mutex::new(FrontSeen::default()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut seen = record.lock().expect("front lock");
                match line.as_str() {
                    "plain" => seen.plain += 1,
                    "tls resumed=0" => seen.tls.push(false),
                    "tls resumed=1" => seen.tls.push(true),
                    _ => seen.failed += 1,
                }
            }
        });
        TlsOrigin {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            seen,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// `https://NAME:PORT`, for a certificate made for NAME (which must resolve to 127.0.0.1).
    pub fn url_named(&self, name: &str) -> String {
        format!("https://{name}:{}", self.addr.port())
    }

    /// What the front has seen so far.
    pub fn seen(&self) -> FrontSeen {
        self.seen.lock().expect("front lock").clone()
    }

    /// Waits until the front has reported `n` connections of any kind; returns what it saw.
    pub fn wait_for_connections(&self, n: usize) -> FrontSeen {
        wait_until(Duration::from_secs(5), || {
            let s = self.seen();
            s.tls.len() + s.plain + s.failed >= n
        });
        self.seen()
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
