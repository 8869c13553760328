//! The key hash of the disk tier: SipHash-1-3 under a per-disk random key.
//!
//! Why our own: the hash is *persisted* (in segment summaries and the checkpoint), so it must
//! never change with a Rust or crate upgrade, which `std`'s `DefaultHasher` and foldhash do
//! not promise. Keyed, because keys are URIs chosen by clients and a predictable hash would
//! let them pile keys into one probe run of the index; the key lives in the disk's `meta`
//! file and is made at random when a disk is first used.

#[inline]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-1-3 of `data` under `key`.
pub(crate) fn siphash13(key: (u64, u64), data: &[u8]) -> u64 {
    let (k0, k1) = key;
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let m = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        v[3] ^= m;
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = (data.len() as u64) << 56;
    for (i, b) in words.remainder().iter().enumerate() {
        last |= u64::from(*b) << (8 * i);
    }
    v[3] ^= last;
    round(&mut v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for _ in 0..3 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_keyed_and_length_sensitive() {
        // Pinned values: a change here would orphan every disk cache on upgrade.
        assert_eq!(
            siphash13((1, 2), b"http://a/"),
            siphash13((1, 2), b"http://a/")
        );
        assert_ne!(
            siphash13((1, 2), b"http://a/"),
            siphash13((1, 3), b"http://a/")
        );
        assert_ne!(siphash13((1, 2), b""), siphash13((1, 2), b"\0"));
        assert_ne!(
            siphash13((1, 2), b"12345678"),
            siphash13((1, 2), b"123456789")
        );
        assert_eq!(siphash13((0, 0), b""), 0xd1fb_a762_150c_532c);
    }
}
