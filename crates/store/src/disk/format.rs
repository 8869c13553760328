//! The bytes on disk: records, segment summaries and footers (layout in `mod.rs`).
//!
//! Every multi-byte integer is little-endian. Records start at 16-byte-aligned offsets so
//! that the index can hold offsets and lengths in 16-byte units (see `index.rs`).

use bytes::Bytes;

/// Records start and end on multiples of this.
pub(crate) const ALIGN: u64 = 16;
/// Fixed record header size.
pub(crate) const HEADER_LEN: usize = 48;
/// Bodies are checksummed in pieces of this size, so a range verifies only what it reads.
pub(crate) const CHUNK: u64 = 1 << 20;
/// One summary entry.
pub(crate) const SUMMARY_ENTRY: usize = 40;
/// The footer that ends a sealed segment.
pub(crate) const FOOTER_LEN: usize = 40;

const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"SPR1");
const FOOTER_MAGIC: u32 = u32::from_le_bytes(*b"SPS1");

/// Limits that keep a corrupt header from asking for absurd allocations.
const MAX_KEY: u32 = 64 << 10;
const MAX_HEAD: u32 = 4 << 20;

pub(crate) const KIND_OBJECT: u8 = 1;
pub(crate) const KIND_TOMBSTONE: u8 = 2;

pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The fixed header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) seq: u64,
    pub(crate) kind: u8,
    pub(crate) primary_len: u32,
    pub(crate) secondary_len: u32,
    pub(crate) meta_len: u32,
    pub(crate) head_len: u32,
    pub(crate) body_len: u64,
}

impl Header {
    pub(crate) fn chunks(&self) -> u64 {
        self.body_len.div_ceil(CHUNK)
    }

    /// Header, keys, metadata, head and the body's chunk checksums: what the record CRC covers.
    pub(crate) fn prefix_len(&self) -> u64 {
        HEADER_LEN as u64
            + u64::from(self.primary_len)
            + u64::from(self.secondary_len)
            + u64::from(self.meta_len)
            + u64::from(self.head_len)
            + 4 * self.chunks()
    }

    /// Bytes the record takes in its segment (padding included).
    pub(crate) fn record_len(&self) -> u64 {
        align_up(self.prefix_len() + self.body_len)
    }

    /// Parses and sanity-checks a header (not its checksum: see [`verify_prefix`]).
    pub(crate) fn parse(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN || le32(b, 0) != RECORD_MAGIC {
            return None;
        }
        let h = Header {
            seq: le64(b, 8),
            kind: b[16],
            primary_len: le32(b, 20),
            secondary_len: le32(b, 24),
            meta_len: le32(b, 28),
            head_len: le32(b, 32),
            body_len: le64(b, 40),
        };
        let sane = matches!(h.kind, KIND_OBJECT | KIND_TOMBSTONE)
            && le32(b, 36) == CHUNK as u32
            && h.primary_len <= MAX_KEY
            && h.secondary_len <= MAX_KEY
            && h.meta_len <= MAX_HEAD
            && h.head_len <= MAX_HEAD
            && h.body_len < (1 << 50);
        sane.then_some(h)
    }

    fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        out[4..8].fill(0);
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..20].copy_from_slice(&[self.kind, 0, 0, 0]);
        out[20..24].copy_from_slice(&self.primary_len.to_le_bytes());
        out[24..28].copy_from_slice(&self.secondary_len.to_le_bytes());
        out[28..32].copy_from_slice(&self.meta_len.to_le_bytes());
        out[32..36].copy_from_slice(&self.head_len.to_le_bytes());
        out[36..40].copy_from_slice(&(CHUNK as u32).to_le_bytes());
        out[40..48].copy_from_slice(&self.body_len.to_le_bytes());
    }
}

/// The parts of one record to write.
pub(crate) struct RecordParts<'a> {
    pub(crate) seq: u64,
    pub(crate) kind: u8,
    pub(crate) primary: &'a [u8],
    pub(crate) secondary: &'a [u8],
    pub(crate) meta: &'a [u8],
    pub(crate) head: &'a [u8],
    pub(crate) body: &'a [Bytes],
}

impl RecordParts<'_> {
    /// The record's header (lengths; the CRC is computed by `encode`).
    pub(crate) fn header(&self) -> Header {
        Header {
            seq: self.seq,
            kind: self.kind,
            primary_len: self.primary.len() as u32,
            secondary_len: self.secondary.len() as u32,
            meta_len: self.meta.len() as u32,
            head_len: self.head.len() as u32,
            body_len: self.body.iter().map(|c| c.len() as u64).sum(),
        }
    }
}

/// Appends the encoded record to `out`; returns its header.
pub(crate) fn encode(p: &RecordParts<'_>, out: &mut Vec<u8>) -> Header {
    let h = p.header();
    let start = out.len();
    out.reserve(h.record_len() as usize);
    out.resize(start + HEADER_LEN, 0);
    h.write(&mut out[start..]);
    for part in [p.primary, p.secondary, p.meta, p.head] {
        out.extend_from_slice(part);
    }
    // Chunk checksums, computed across the arrival chunks' boundaries.
    let mut crc = 0u32;
    let mut in_chunk = 0u64;
    for piece in p.body {
        let mut piece: &[u8] = piece;
        while !piece.is_empty() {
            let take = ((CHUNK - in_chunk) as usize).min(piece.len());
            crc = crc32c::crc32c_append(crc, &piece[..take]);
            in_chunk += take as u64;
            piece = &piece[take..];
            if in_chunk == CHUNK {
                out.extend_from_slice(&crc.to_le_bytes());
                (crc, in_chunk) = (0, 0);
            }
        }
    }
    if in_chunk > 0 {
        out.extend_from_slice(&crc.to_le_bytes());
    }
    let prefix_end = start + h.prefix_len() as usize;
    debug_assert_eq!(out.len(), prefix_end);
    let sum = prefix_crc(&out[start..prefix_end]);
    out[start + 4..start + 8].copy_from_slice(&sum.to_le_bytes());
    for piece in p.body {
        out.extend_from_slice(piece);
    }
    out.resize(start + h.record_len() as usize, 0);
    h
}

fn prefix_crc(prefix: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&prefix[..4]), &prefix[8..])
}

/// Parses the header and checks the prefix checksum; `b` must hold at least the prefix.
pub(crate) fn verify_prefix(b: &[u8]) -> Option<Header> {
    let h = Header::parse(b)?;
    let len = usize::try_from(h.prefix_len()).ok()?;
    if b.len() < len || le32(b, 4) != prefix_crc(&b[..len]) {
        return None;
    }
    Some(h)
}

/// The variable parts of a verified prefix.
pub(crate) struct Prefix<'a> {
    pub(crate) primary: &'a [u8],
    pub(crate) secondary: &'a [u8],
    pub(crate) meta: &'a [u8],
    pub(crate) head: &'a [u8],
    pub(crate) chunk_crcs: &'a [u8],
}

pub(crate) fn split_prefix<'a>(h: &Header, b: &'a [u8]) -> Prefix<'a> {
    let mut at = HEADER_LEN;
    let mut take = |n: u64| {
        let s = &b[at..at + n as usize];
        at += n as usize;
        s
    };
    Prefix {
        primary: take(u64::from(h.primary_len)),
        secondary: take(u64::from(h.secondary_len)),
        meta: take(u64::from(h.meta_len)),
        head: take(u64::from(h.head_len)),
        chunk_crcs: take(4 * h.chunks()),
    }
}

/// Checks body bytes starting at chunk `first_chunk` against the stored chunk checksums.
/// `body` must cover whole chunks (the last one may be the body's short tail).
pub(crate) fn verify_chunks(chunk_crcs: &[u8], first_chunk: u64, body: &[u8]) -> bool {
    body.chunks(CHUNK as usize).enumerate().all(|(i, piece)| {
        let at = (first_chunk as usize + i) * 4;
        at + 4 <= chunk_crcs.len() && le32(chunk_crcs, at) == crc32c::crc32c(piece)
    })
}

/// One record as listed in its segment's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SummaryEntry {
    pub(crate) hash: u64,
    pub(crate) seq: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) kind: u8,
}

/// Encodes `entries` and the footer that makes the segment sealed.
pub(crate) fn encode_summary(seg_id: u32, summary_at: u64, entries: &[SummaryEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * SUMMARY_ENTRY + FOOTER_LEN);
    for e in entries {
        for v in [e.hash, e.seq, e.offset, e.len, u64::from(e.kind)] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let footer_at = out.len();
    out.extend_from_slice(&FOOTER_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for v in [entries.len() as u64, summary_at, u64::from(seg_id), 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..footer_at + 4]), &out[footer_at + 8..]);
    out[footer_at + 4..footer_at + 8].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The footer's claims: entry count and where the summary starts.
pub(crate) fn parse_footer(b: &[u8], seg_id: u32) -> Option<(u64, u64)> {
    if b.len() != FOOTER_LEN || le32(b, 0) != FOOTER_MAGIC || le64(b, 24) != u64::from(seg_id) {
        return None;
    }
    Some((le64(b, 8), le64(b, 16)))
}

/// Verifies and decodes a summary (`b` = entries followed by the footer).
pub(crate) fn decode_summary(b: &[u8]) -> Option<Vec<SummaryEntry>> {
    let footer_at = b.len().checked_sub(FOOTER_LEN)?;
    let count = le64(b, footer_at + 8) as usize;
    if count.checked_mul(SUMMARY_ENTRY)? != footer_at {
        return None;
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..footer_at + 4]), &b[footer_at + 8..]);
    if crc != le32(b, footer_at + 4) {
        return None;
    }
    let entries = b[..footer_at]
        .chunks_exact(SUMMARY_ENTRY)
        .map(|e| SummaryEntry {
            hash: le64(e, 0),
            seq: le64(e, 8),
            offset: le64(e, 16),
            len: le64(e, 24),
            kind: e[32],
        })
        .collect();
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(body: &'a [Bytes]) -> RecordParts<'a> {
        RecordParts {
            seq: 9,
            kind: KIND_OBJECT,
            primary: b"http://x/",
            secondary: b"gzip",
            meta: b"m",
            head: b"HTTP/1.1 200 OK\r\n\r\n",
            body,
        }
    }

    #[test]
    fn record_round_trip_and_every_flipped_bit_is_caught() {
        let body = [Bytes::from_static(b"hello "), Bytes::from_static(b"world")];
        let mut out = Vec::new();
        let h = encode(&parts(&body), &mut out);
        assert_eq!(out.len() as u64, h.record_len());
        assert_eq!(out.len() % ALIGN as usize, 0);
        let got = verify_prefix(&out).expect("valid");
        let p = split_prefix(&got, &out);
        assert_eq!(
            (p.primary, p.secondary, p.meta),
            (&b"http://x/"[..], &b"gzip"[..], &b"m"[..])
        );
        let body_at = got.prefix_len() as usize;
        let body_bytes = &out[body_at..body_at + 11];
        assert_eq!(body_bytes, b"hello world");
        assert!(verify_chunks(p.chunk_crcs, 0, body_bytes));
        for bit in 0..(body_at + 11) * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let ok = verify_prefix(&bad).is_some_and(|h| {
                let p = split_prefix(&h, &bad);
                verify_chunks(p.chunk_crcs, 0, &bad[body_at..body_at + 11])
            });
            assert!(!ok, "flipped bit {bit} went unnoticed");
        }
    }

    #[test]
    fn large_bodies_get_one_checksum_per_chunk() {
        let big = Bytes::from(vec![7u8; (CHUNK * 2 + 5) as usize]);
        let mut out = Vec::new();
        let h = encode(&parts(&[big.slice(..100), big.slice(100..)]), &mut out);
        assert_eq!(h.chunks(), 3);
        let p = split_prefix(&h, &out);
        let body = &out[h.prefix_len() as usize..][..h.body_len as usize];
        assert!(verify_chunks(p.chunk_crcs, 1, &body[CHUNK as usize..]));
        assert!(!verify_chunks(p.chunk_crcs, 0, &body[CHUNK as usize..]));
    }

    #[test]
    fn summary_round_trip_and_damage() {
        let e = SummaryEntry {
            hash: 1,
            seq: 2,
            offset: 32,
            len: 64,
            kind: KIND_OBJECT,
        };
        let b = encode_summary(7, 4096, &[e, e]);
        let (count, at) = parse_footer(&b[b.len() - FOOTER_LEN..], 7).unwrap();
        assert_eq!((count, at), (2, 4096));
        assert!(
            parse_footer(&b[b.len() - FOOTER_LEN..], 8).is_none(),
            "another segment's"
        );
        assert_eq!(decode_summary(&b).unwrap(), vec![e, e]);
        let mut bad = b.clone();
        bad[3] ^= 4;
        assert!(decode_summary(&bad).is_none());
    }
}
