//! The deterministic byte pattern that `/bytes/N` serves, and SHA-256 helpers, so that large
//! bodies can be checked end to end without keeping a second copy around.

use sha2::{Digest, Sha256};

/// Byte `i` of the pattern. Not periodic at 256 (or any power of two), so a dropped, duplicated
/// or reordered buffer anywhere in a stream changes the content, not just the length.
pub fn pattern_byte(i: usize) -> u8 {
    ((i % 251) as u8) ^ ((i / 251) as u8).rotate_left(3)
}

/// The first `len` bytes of the pattern.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(pattern_byte).collect()
}

/// Writes pattern bytes `offset..offset + out.len()` into `out`.
pub fn fill_pattern(offset: usize, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = pattern_byte(offset + i);
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
    fn fill_pattern_matches_pattern_at_any_offset() {
        let whole = pattern(10_000);
        let mut part = vec![0u8; 3000];
        fill_pattern(4321, &mut part);
        assert_eq!(part, whole[4321..7321]);
    }
}
