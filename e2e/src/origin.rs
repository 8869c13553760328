//! The test origin: an HTTP/1.1 server on std threads (one per connection) that records every
//! request it receives and counts accepted connections, so tests can assert what the proxy sent
//! upstream (hop-by-hop removal, Via, X-Forwarded-For, connection reuse) and what it did *not*
//! send (a malformed request must never reach the origin).

use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::message::{self, Header};
use crate::origin_routes::{self, Reply};

/// How long an origin connection may sit idle before the origin closes it.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request as the origin received it, complete with its body.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// The request-target exactly as sent (origin-form from a proxy, RFC 9112 §3.2.1).
    pub target: String,
    pub version: String,
    pub headers: Vec<Header>,
    pub body_len: u64,
    /// The body as received (after removing its framing), shared so clones are cheap.
    pub body: Arc<[u8]>,
    /// The request head exactly as received.
    pub raw_head: String,
    /// Which accepted connection (1-based, in accept order) carried this request.
    pub connection: usize,
    /// The address the request came from (the proxy's, or the client's when it is spoofed).
    pub peer: Option<SocketAddr>,
}

impl RecordedRequest {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        message::find(&self.headers, name)
    }

    /// Every value of header `name`, in wire order.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
            .collect()
    }

    /// The path of the target without the query (also for an absolute-form target).
    pub fn path(&self) -> &str {
        path_of(&self.target)
    }
}

/// The path of a request-target, accepting origin-form and absolute-form.
pub(crate) fn path_of(target: &str) -> &str {
    let without_scheme = target
        .strip_prefix("http://")
        .map(|rest| rest.find('/').map_or("/", |i| &rest[i..]))
        .unwrap_or(target);
    without_scheme.split('?').next().unwrap_or(without_scheme)
}

#[derive(Default)]
pub(crate) struct State {
    pub stop: AtomicBool,
    connections: AtomicUsize,
    closed: AtomicUsize,
    heads: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    streams: Mutex<Vec<TcpStream>>,
}

impl State {
    /// Complete requests received so far (the one being answered included).
    pub(crate) fn request_count(&self) -> usize {
        self.requests.lock().expect("origin lock").len()
    }
}

/// A running test origin on 127.0.0.1 (ephemeral port), stopped on drop.
pub struct Origin {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl Origin {
    /// Starts the origin. Routes are chosen by path; `src/origin_routes.rs` lists them.
    pub fn start() -> Origin {
        Origin::start_on("127.0.0.1:0")
    }

    /// Starts the origin on `addr` (e.g. `"10.0.2.2:80"` inside a network namespace).
    pub fn start_on(addr: &str) -> Origin {
        let listener =
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind test origin on {addr}: {e}"));
        let addr = listener.local_addr().expect("origin address");
        let state = Arc::new(State::default());
        let accept_state = Arc::clone(&state);
        let accept = std::thread::Builder::new()
            .name(format!("origin-{}", addr.port()))
            .spawn(move || accept_loop(&listener, &accept_state))
            .expect("spawn origin accept thread");
        Origin {
            addr,
            state,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`, as a route's `origins` entry.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Connections that have ended (closed by either side) so far.
    pub fn closed_connections(&self) -> usize {
        self.state.closed.load(Ordering::SeqCst)
    }

    /// Request heads received so far, whether or not their bodies arrived whole.
    pub fn heads_seen(&self) -> usize {
        self.state.heads.load(Ordering::SeqCst)
    }

    /// Complete requests (head and whole body) received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests.lock().expect("origin lock").clone()
    }

    pub fn request_count(&self) -> usize {
        self.state.requests.lock().expect("origin lock").len()
    }

    /// The only request received; panics (listing what arrived) unless exactly one did.
    pub fn single_request(&self) -> RecordedRequest {
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            1,
            "expected exactly one request at the origin, got {requests:#?}"
        );
        requests.into_iter().next().expect("one request")
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        for s in self
            .state
            .streams
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    for stream in listener.incoming() {
        if state.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let id = state.connections.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(clone) = stream.try_clone() {
            state.streams.lock().expect("origin lock").push(clone);
        }
        let conn_state = Arc::clone(state);
        let spawned = std::thread::Builder::new()
            .name(format!("origin-conn-{id}"))
            .spawn(move || {
                let _ = serve_connection(&stream, id, &conn_state);
                // Other handles to this socket live in `State::streams`; dropping ours would
                // not close it, so end it explicitly.
                let _ = stream.shutdown(Shutdown::Both);
                conn_state.closed.fetch_add(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            eprintln!("test origin: could not spawn a connection thread");
        }
    }
}

/// Serves requests on one connection until either side closes it.
fn serve_connection(stream: &TcpStream, id: usize, state: &State) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
    loop {
        let Some(head) = message::read_head(&mut reader)? else {
            return Ok(());
        };
        state.heads.fetch_add(1, Ordering::SeqCst);
        let mut parts = head.start_line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return bad_request(&mut writer);
        };
        let Ok(framing) = message::framing(&head.headers, true) else {
            return bad_request(&mut writer);
        };
        if message::has_token(&head.headers, "expect", "100-continue") {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        if let Some(pause) = origin_routes::pause_before_body(path_of(target)) {
            // Lets a test fill the proxy's buffers toward this origin (bounded-memory checks).
            std::thread::sleep(pause);
        }
        let mut body = Vec::new();
        // An incomplete or invalid body ends the connection without recording a request.
        let body_len = message::read_body(&mut reader, framing, &mut |chunk| {
            body.extend_from_slice(chunk);
        })?;
        let request = RecordedRequest {
            method: method.to_string(),
            target: target.to_string(),
            version: version.to_string(),
            headers: head.headers,
            body_len,
            body: body.into(),
            raw_head: String::from_utf8_lossy(&head.raw).into_owned(),
            connection: id,
            peer: stream.peer_addr().ok(),
        };
        let client_wants_close = message::has_token(&request.headers, "connection", "close")
            || (version == "HTTP/1.0"
                && !message::has_token(&request.headers, "connection", "keep-alive"));
        state
            .requests
            .lock()
            .expect("origin lock")
            .push(request.clone());
        let reply = origin_routes::respond(&request, &mut writer, state, client_wants_close)?;
        if reply == Reply::Close || client_wants_close {
            let _ = writer.flush();
            let _ = writer.shutdown(Shutdown::Write);
            return Ok(());
        }
    }
}

fn bad_request(writer: &mut TcpStream) -> io::Result<()> {
    writer
        .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    writer.shutdown(Shutdown::Write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw_client::RawClient;

    #[test]
    fn path_of_handles_both_target_forms() {
        let cases = [
            ("/a/b?x=1", "/a/b"),
            ("/", "/"),
            ("http://h:1/bytes/5?q", "/bytes/5"),
            ("http://h:1", "/"),
        ];
        for (target, path) in cases {
            assert_eq!(path_of(target), path, "{target}");
        }
    }

    #[test]
    fn origin_records_requests_and_reuses_connections() {
        let origin = Origin::start();
        let mut client = RawClient::connect(origin.addr());
        client.send(b"POST /echo HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
        let r = client.read_response();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"abcde");
        assert_eq!(r.header("x-body-len"), Some("5"));
        client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: o\r\n\r\n");
        let r = client.read_response();
        assert_eq!(r.body, crate::pattern(10));
        assert_eq!(origin.connections(), 1);
        let requests = origin.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].body_len, 5);
        assert_eq!(&requests[0].body[..], b"abcde");
        assert_eq!(requests[1].target, "/bytes/10");
        assert_eq!(requests[1].header("HOST"), Some("o"));
    }

    #[test]
    fn origin_does_not_record_an_invalid_chunked_body() {
        let origin = Origin::start();
        let mut client = RawClient::connect(origin.addr());
        client.send(b"POST /echo HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(client.wait_closed(Duration::from_secs(5)));
        assert_eq!(origin.heads_seen(), 1);
        assert_eq!(origin.request_count(), 0);
    }
}
