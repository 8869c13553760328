//! What the disk tier keeps beside a stored response (`sepia_store::Persist` for [`Entry`]):
//! how many field lines the stored head's layout covers (a `Via` the proxy appended follows
//! them), the piece a `206` stored, the policy's metadata (`StoredMeta::encode`), then the
//! head's layout (`HeadLayout::encode`). Nothing is parsed from the head on the way back
//! (the layout is checked against it): a disk hit paid ~2,500 instructions re-parsing the
//! head and ~2,500 more reading the metadata's fields from it (callgrind, bench/disk.sh
//! count). The field count comes first and the metadata's version byte right after the
//! piece, as in the first format, so a record of that format is refused by that byte
//! before anything newer is read from it.

use std::sync::OnceLock;

use bytes::Bytes;
use sepia_cache_policy::{Piece, StoredMeta};
use sepia_store::Persist;

use super::entry::Entry;
use crate::h1::stored_head::HeadLayout;

impl Persist for Entry {
    fn encode(&self, head: &[u8], out: &mut Vec<u8>) {
        let lines = u32::try_from(self.layout.lines()).unwrap_or(u32::MAX);
        out.extend_from_slice(&lines.to_le_bytes());
        match &self.piece {
            None => out.push(0),
            Some(p) => {
                out.push(1);
                for n in [p.first, p.last, p.complete] {
                    out.extend_from_slice(&n.to_le_bytes());
                }
            }
        }
        self.meta.encode(out);
        self.layout.encode(head, out);
    }

    fn decode(head: &Bytes, bytes: &Bytes) -> Option<Entry> {
        let (lines, rest) = bytes.split_first_chunk::<4>()?;
        let (&has_piece, mut rest) = rest.split_first()?;
        let piece = match has_piece {
            0 => None,
            1 => {
                let mut n = [0u64; 3];
                for v in &mut n {
                    let (b, r) = rest.split_first_chunk::<8>()?;
                    *v = u64::from_le_bytes(*b);
                    rest = r;
                }
                Some(Piece {
                    first: n[0],
                    last: n[1],
                    complete: n[2],
                })
            }
            _ => return None,
        };
        let meta_on = bytes.slice_ref(rest);
        let (meta, mut rest) = StoredMeta::decode(&meta_on)?;
        let lines = u32::from_le_bytes(*lines) as usize;
        let (status, layout, content_type) = HeadLayout::decode(head, lines, &mut rest)?;
        // The status is in both; they disagree only if the record is not what was written.
        if meta.status != status || !rest.is_empty() {
            return None;
        }
        Some(Entry {
            meta,
            content_type,
            layout,
            piece,
            h2_fields: OnceLock::new(),
            // Stored before this process's bans, or after some: checked against them all.
            born: std::sync::atomic::AtomicU64::new(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::stored_head;
    use sepia_cache_policy::{FieldList, Fields, PolicyConfig};

    fn entry(via: Option<&[u8]>, piece: Option<Piece>) -> (Bytes, Entry) {
        let fields = FieldList::from_pairs(&[
            ("Content-Type", "text/css"),
            ("Cache-Control", "max-age=300"),
            ("ETag", "\"a\""),
            ("Date", "Thu, 26 Nov 2026 10:00:00 GMT"),
        ]);
        let policy = PolicyConfig::builder().shared(true).build().unwrap();
        let meta =
            StoredMeta::from_response(200, &fields, 1_795_000_000, 1_795_000_002, b"k", &policy);
        let (head, layout) = stored_head::build(200, b"OK", || fields.lines(), via);
        let entry = Entry::new(meta, &head, layout).with_piece(piece);
        (head, entry)
    }

    #[test]
    fn an_entry_comes_back_from_its_head_and_encoding() {
        let piece = Piece {
            first: 10,
            last: 19,
            complete: 100,
        };
        for (via, piece) in [(None, None), (Some(&b"1.1 sepia"[..]), Some(piece))] {
            let (head, entry) = entry(via, piece);
            let mut encoded = Vec::new();
            entry.encode(&head, &mut encoded);
            let bytes = Bytes::from(encoded.clone());
            let back = Entry::decode(&head, &bytes).expect("decodes");
            assert_eq!(back.meta, entry.meta);
            assert_eq!(back.piece, entry.piece);
            assert_eq!(back.content_type, entry.content_type);
            assert_eq!(back.layout.lines(), 4);
            assert!(back
                .layout
                .fields(&head)
                .lines()
                .eq(entry.layout.fields(&head).lines()));
            // Cut short, with a byte too many, or against another head: not this entry.
            assert!(Entry::decode(&head, &bytes.slice(..bytes.len() - 1)).is_none());
            let mut longer = encoded.clone();
            longer.push(0);
            assert!(Entry::decode(&head, &Bytes::from(longer)).is_none());
            let none = FieldList::new();
            let (other, _) = stored_head::build(404, b"Not Found", || none.lines(), None);
            assert!(Entry::decode(&other, &bytes).is_none());
        }
    }

    /// A record of the first format (the metadata's version byte 1, after the line count
    /// and the piece) is refused: a miss, never read as the current format.
    #[test]
    fn a_record_of_the_first_format_is_refused() {
        let (head, entry) = entry(None, None);
        let mut encoded = Vec::new();
        entry.encode(&head, &mut encoded);
        assert!(Entry::decode(&head, &Bytes::from(encoded.clone())).is_some());
        // lines (4 bytes), no piece (1), then the metadata's version.
        assert_eq!(encoded[5], 2);
        encoded[5] = 1;
        assert!(Entry::decode(&head, &Bytes::from(encoded)).is_none());
    }
}
