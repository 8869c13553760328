//! A quick timing of the head decoders (no criterion needed): `cargo run --release -p
//! sepia-http1 --example decode_bench`. Each iteration appends one message to the read buffer,
//! as a socket read would, then decodes it, so the time includes that copy. An optional argument
//! sets the iteration count (small counts suit `valgrind --tool=callgrind`, which gives
//! instructions per decode where timings are noisy).

use std::hint::black_box;
use std::time::Instant;

use sepia_http1::{BytesMut, Limits, RequestDecoder, RequestHead, ResponseDecoder, ResponseHead};

const REQUEST: &[u8] = b"GET /images/logo.png?v=3 HTTP/1.1\r\nHost: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: image/avif,image/webp,*/*\r\nAccept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\nReferer: https://www.example.com/\r\n\
Cookie: session=abc123; theme=dark\r\nIf-None-Match: \"5f2b-1a\"\r\nCache-Control: max-age=0\r\n\r\n";

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
Server: origin\r\nContent-Type: image/png\r\nCache-Control: public, max-age=3600\r\n\
ETag: \"5f2b-1a\"\r\nContent-Length: 1024\r\nVary: Accept-Encoding\r\n\
Last-Modified: Sun, 31 Dec 2023 00:00:00 GMT\r\nAccept-Ranges: bytes\r\n\r\n";

fn main() {
    let iterations: u32 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("a count"));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut head = RequestHead::default();
    let start = Instant::now();
    for _ in 0..iterations {
        buf.extend_from_slice(REQUEST);
        assert!(decoder.decode(&mut buf, &mut head).unwrap());
        black_box(&head);
    }
    report("request head", REQUEST.len(), iterations, start.elapsed());

    let mut decoder = ResponseDecoder::new(Limits::default());
    let mut head = ResponseHead::default();
    let start = Instant::now();
    for _ in 0..iterations {
        buf.extend_from_slice(RESPONSE);
        assert!(decoder.decode(&mut buf, &mut head).unwrap());
        black_box(&head);
    }
    report("response head", RESPONSE.len(), iterations, start.elapsed());
}

fn report(what: &str, len: usize, iterations: u32, elapsed: std::time::Duration) {
    let ns = elapsed.as_nanos() as f64 / f64::from(iterations);
    let mb_s = len as f64 / ns * 1e3;
    println!("{what} ({len} bytes): {ns:.0} ns per decode, {mb_s:.0} MB/s");
}
