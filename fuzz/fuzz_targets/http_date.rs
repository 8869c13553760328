//! HTTP-dates: the cache's own IMF-fixdate parser must give exactly what `httpdate` gives for
//! any input (the answer, or the refusal), and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sepia_cache_policy::{parse_http_date, unix_seconds};

fuzz_target!(|data: &[u8]| {
    let trimmed = data
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .map_or(&data[..0], |start| {
            let end = data.iter().rposition(|&b| b != b' ' && b != b'\t').unwrap();
            &data[start..=end]
        });
    let reference = std::str::from_utf8(trimmed)
        .ok()
        .and_then(|text| httpdate::parse_http_date(text).ok())
        .map(unix_seconds);
    assert_eq!(parse_http_date(data), reference, "{data:?}");
});
