//! Chunked bodies fed in arbitrary pieces: never a panic, the read pattern never changes the
//! result, and the result matches a simple whole-buffer reference decoder. Every trailer
//! section the decoder yields (and the raw input) goes through the trailer filter, which must
//! accept what the decoder accepted and keep only allowed fields (`sepia_fuzz::check_trailers`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&seed, body)) = data.split_first() {
        sepia_fuzz::check_chunked(seed, body);
    }
});
