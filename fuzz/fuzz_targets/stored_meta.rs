//! Stored metadata as read back from a disk record (`StoredMeta::decode`): the record's
//! checksum guards against damage, but the decoder must still never panic on any bytes,
//! and whatever it accepts must be what it means: encoded again, it decodes to the same
//! metadata, and the bytes it says follow the encoding are the input's tail.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sepia_cache_policy::StoredMeta;

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let Some((meta, rest)) = StoredMeta::decode(&input) else {
        return;
    };
    assert!(data.ends_with(rest));
    let mut again = Vec::new();
    meta.encode(&mut again);
    assert_eq!(again.len(), data.len() - rest.len(), "the encoding's length");
    let again = Bytes::from(again);
    let (back, tail) = StoredMeta::decode(&again).expect("its own encoding decodes");
    assert_eq!(back, meta);
    assert!(tail.is_empty());
});
