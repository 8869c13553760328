//! Chunked bodies fed in arbitrary pieces: never a panic, the read pattern never changes the
//! result, and the result matches a simple whole-buffer reference decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&seed, body)) = data.split_first() {
        sepia_fuzz::check_chunked(seed, body);
    }
});
