//! Targeted cache control (RFC 9213) through the cache policy: the input, split at newlines,
//! is the lines of a `CDN-Cache-Control` field beside `Cache-Control: max-age=5`. Never a
//! panic; the targeted field decides only when it is a valid, non-empty Structured Field
//! Dictionary (RFC 8941), which is printable ASCII with a lower-case key first, and it decides
//! the same way whether the lines arrive as lines or joined by commas.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sepia_cache_policy::{governing, FieldList, PolicySource, TargetList};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let targets = TargetList::new(["CDN-Cache-Control"]);
    let mut pairs = vec![("Cache-Control", "max-age=5")];
    pairs.extend(text.split('\n').map(|line| ("CDN-Cache-Control", line)));
    let lines = governing(&FieldList::from_pairs(&pairs), &targets);
    if lines.source == PolicySource::CacheControl {
        assert_eq!(lines.cache_control.max_age(), Some(5));
        return;
    }
    assert_eq!(lines.source, PolicySource::Targeted(0));
    for line in text.split('\n') {
        assert!(
            line.bytes()
                .all(|b| b == b'\t' || (0x20..0x7f).contains(&b)),
            "a field with control bytes decided: {line:?}"
        );
    }
    let joined = text.split('\n').collect::<Vec<_>>().join(",");
    let one = governing(
        &FieldList::from_pairs(&[("CDN-Cache-Control", joined.as_str())]),
        &targets,
    );
    assert_eq!(
        one, lines,
        "lines and their comma-joined value decide alike"
    );
});
