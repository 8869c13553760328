//! Proves the hot-path promise of DESIGN.md: once a connection's buffers are warm, decoding a
//! request head, a response head and a body allocates nothing (Squid 2.6: 47 allocations per
//! request). Run without the test harness so the counting allocator sees only this thread.

use std::alloc::System;

use sepia_http1::{
    parse_trailers, BytesMut, ChunkEvent, ChunkedDecoder, Limits, RequestDecoder, RequestHead,
    ResponseDecoder, ResponseHead,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const REQUEST: &[u8] = b"GET /images/logo.png?v=3 HTTP/1.1\r\nHost: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: image/avif,image/webp,*/*\r\nAccept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\nReferer: https://www.example.com/\r\n\
Cookie: session=abc123; theme=dark\r\nIf-None-Match: \"5f2b-1a\"\r\nCache-Control: max-age=0\r\n\r\n";

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
Server: origin\r\nContent-Type: image/png\r\nCache-Control: public, max-age=3600\r\n\
ETag: \"5f2b-1a\"\r\nTransfer-Encoding: chunked\r\nVary: Accept-Encoding\r\n\r\n\
400\r\n";

const ROUNDS: usize = 1000;

fn main() {
    // Everything the decoders will need is allocated up front, as a warm connection has it.
    let mut requests = BytesMut::with_capacity(REQUEST.len() * (ROUNDS + 1));
    for _ in 0..=ROUNDS {
        requests.extend_from_slice(REQUEST);
    }
    let mut responses = BytesMut::with_capacity((RESPONSE.len() + 1024 + 7) * (ROUNDS + 1));
    for _ in 0..=ROUNDS {
        responses.extend_from_slice(RESPONSE);
        responses.extend_from_slice(&[b'x'; 1024]);
        responses.extend_from_slice(b"\r\n0\r\n\r\n");
    }
    let mut req_decoder = RequestDecoder::new(Limits::default());
    let mut resp_decoder = ResponseDecoder::new(Limits::default());
    let mut req = RequestHead::default();
    let mut resp = ResponseHead::default();
    // The first message grows the field lists and turns each buffer into a shared one (one
    // allocation each, once per connection).
    assert!(req_decoder.decode(&mut requests, &mut req).unwrap());
    assert!(resp_decoder.decode(&mut responses, &mut resp).unwrap());
    drain_body(&mut responses);

    let region = Region::new(GLOBAL);
    let mut body_bytes = 0;
    for _ in 0..ROUNDS {
        assert!(req_decoder.decode(&mut requests, &mut req).unwrap());
        assert!(resp_decoder.decode(&mut responses, &mut resp).unwrap());
        body_bytes += drain_body(&mut responses);
    }
    let stats = region.change();
    assert_eq!(req.headers().len(), 10);
    assert_eq!(body_bytes, 1024 * ROUNDS);
    assert!(requests.is_empty() && responses.is_empty());
    println!(
        "{ROUNDS} request heads + response heads + chunked bodies: {} allocations, {} reallocations",
        stats.allocations, stats.reallocations
    );
    assert_eq!(stats.allocations, 0, "decoding allocated");
    assert_eq!(stats.reallocations, 0, "decoding reallocated");
}

fn drain_body(buf: &mut BytesMut) -> usize {
    let mut decoder = ChunkedDecoder::new();
    let mut n = 0;
    loop {
        match decoder.decode(buf).unwrap() {
            Some(ChunkEvent::Data(d)) => n += d.len(),
            Some(ChunkEvent::End { trailers }) => {
                // What the relay does with every trailer section: free when there is none.
                assert!(parse_trailers(&trailers).unwrap().is_empty());
                return n;
            }
            None => panic!("body incomplete"),
        }
    }
}
