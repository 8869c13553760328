//! The deterministic byte pattern that `/bytes/N` serves, and SHA-256 helpers, so that large
//! bodies can be checked end to end without keeping a second copy around.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// Length of one period of the pattern: 251 × 256, a multiple of no power of two above 256,
/// so a dropped, duplicated or reordered buffer (always power-of-two sized in practice)
/// anywhere in a stream changes the content, not just the length.
const PERIOD: usize = 251 * 256;

/// Byte `i` of the pattern.
pub fn pattern_byte(i: usize) -> u8 {
    ((i % 251) as u8) ^ ((i / 251) as u8).rotate_left(3)
}

/// One period of the pattern, computed once: filling then costs a `memcpy` per period, which
/// matters because the tests run unoptimised and move hundreds of megabytes.
fn period() -> &'static [u8] {
    static PERIOD_BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    PERIOD_BYTES.get_or_init(|| (0..PERIOD).map(pattern_byte).collect())
}

/// The first `len` bytes of the pattern.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill_pattern(0, &mut out);
    out
}

/// Writes pattern bytes `offset..offset + out.len()` into `out`.
pub fn fill_pattern(offset: usize, out: &mut [u8]) {
    let period = period();
    let mut at = offset % PERIOD;
    let mut rest = out;
    while !rest.is_empty() {
        let take = rest.len().min(PERIOD - at);
        let (head, tail) = rest.split_at_mut(take);
        head.copy_from_slice(&period[at..at + take]);
        rest = tail;
        at = 0;
    }
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Lower-case hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(digest.len() * 2);
    for b in digest {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The body of the origin's `/keyed/SIZE/ID` route: `SIZE` bytes (at least the prefix) that
/// start with `ID=<id>;` and go on with the pattern from an offset chosen by the id, so no two
/// ids share a body and a response served for the wrong key is always caught.
pub fn keyed_body(id: u64, size: usize) -> Vec<u8> {
    let prefix = format!("ID={id};");
    let mut body = vec![0u8; size.max(prefix.len())];
    body[..prefix.len()].copy_from_slice(prefix.as_bytes());
    let at = prefix.len();
    fill_pattern((id as usize).wrapping_mul(7919), &mut body[at..]);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_inputs() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn pattern_is_not_periodic_at_powers_of_two() {
        let p = pattern(1 << 16);
        for period in [256usize, 512, 1024, 4096, 16384] {
            assert_ne!(p[..period], p[period..2 * period], "period {period}");
        }
    }

    #[test]
    fn pattern_follows_pattern_byte_across_periods() {
        let p = pattern(3 * PERIOD + 17);
        for (i, b) in p.iter().enumerate() {
            assert_eq!(*b, pattern_byte(i), "byte {i}");
        }
    }

    #[test]
    fn fill_pattern_matches_pattern_at_any_offset() {
        let whole = pattern(10_000);
        let mut part = vec![0u8; 3000];
        fill_pattern(4321, &mut part);
        assert_eq!(part, whole[4321..7321]);
    }
}
