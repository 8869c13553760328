//! [`StoredMeta`] kept beside a response in a persistent store, and read back.
//!
//! Everything is kept, so that reading a stored response back parses nothing: what depended
//! on the configuration when the response was stored (which field governed, a targeted field
//! of RFC 9213 chosen by the listener's target list, its directives, `Expires` as it applied,
//! the freshness lifetime with heuristic rules by URL, RFC 9111 §4.2.2, and the times of the
//! exchange, §4.2.3), and since version 2 what the stored head would give again too (dates,
//! validators, `Age`, `Vary`, `Content-Language`, `Content-Length`): parsing those on every
//! disk hit was about a fifth of what a 4 KiB disk hit cost beyond a memory hit
//! (bench/RESULTS.md, 2026-11-27). A response restored after a restart is then fresh for
//! exactly as long as it would have been without one, and its metadata is the one it was
//! stored with. The byte strings (validators, `Vary` names, `Content-Language`) come back as
//! slices of the encoding, not copies.

use crate::age::AgeHeader;
use crate::cache_control::ResponseCacheControl;
use crate::dates::Expires;
use crate::stored::StoredMeta;
use crate::targeted::PolicySource;
use crate::vary::Vary;
use bytes::Bytes;

/// Format of the encoding; a different byte is not read (the object is a miss). Version 1
/// kept only what the head could not give back; its records are misses since version 2.
const VERSION: u8 = 2;

/// Bytes [`StoredMeta::encode`] writes when no optional field is present (the tests check
/// every encoding against it).
#[cfg(test)]
pub(crate) const FIXED_LEN: usize =
    1 + 8 + 8 + 2 + 2 + 4 * 5 + 1 + 9 + 8 + 1 + 8 + 9 + 9 + 5 + 9 + 1 + 1 + 1 + 1;

impl StoredMeta {
    /// Appends the metadata (see the module).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.extend_from_slice(&self.request_time.to_le_bytes());
        out.extend_from_slice(&self.response_time.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        self.cache_control.encode(out);
        // A target list holds at most `TargetList::MAX` (32) names, so the index fits.
        out.push(match self.source {
            PolicySource::CacheControl => 0,
            PolicySource::Targeted(index) => index.saturating_add(1),
        });
        let (tag, at) = match self.expires {
            Expires::Absent => (0u8, 0),
            Expires::Invalid => (1, 0),
            Expires::At(at) => (2, at),
        };
        out.push(tag);
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&self.freshness_lifetime.to_le_bytes());
        out.push(u8::from(self.heuristic));
        out.extend_from_slice(&self.corrected_initial_age.to_le_bytes());
        // Version 2: what the head gives, as it was read at store time.
        put_u64_opt(out, self.date);
        put_u64_opt(out, self.last_modified);
        let (tag, seconds) = match self.age {
            AgeHeader::Absent => (0u8, 0),
            AgeHeader::Invalid => (1, 0),
            AgeHeader::Seconds(s) => (2, s),
        };
        out.push(tag);
        out.extend_from_slice(&seconds.to_le_bytes());
        put_u64_opt(out, self.content_length);
        match &self.vary {
            Vary::None => out.push(0),
            Vary::Star => out.push(1),
            Vary::Fields(names) => {
                out.push(2);
                put_bytes(out, names);
            }
        }
        for b in [&self.last_modified_raw, &self.etag, &self.content_language] {
            match b {
                None => out.push(0),
                Some(b) => {
                    out.push(1);
                    put_bytes(out, b);
                }
            }
        }
    }

    /// The metadata [`StoredMeta::encode`] wrote at the start of `bytes`; `None` if it is
    /// not that (another version, cut short, or values that cannot be). Returns the bytes
    /// after the encoding too. Byte strings are slices of `bytes`.
    pub fn decode(bytes: &Bytes) -> Option<(StoredMeta, &[u8])> {
        let mut r = Reader(bytes);
        if r.u8()? != VERSION {
            return None;
        }
        let request_time = r.u64()?;
        let response_time = r.u64()?;
        let status = r.u16()?;
        let cache_control = ResponseCacheControl::decode(&mut r)?;
        let source = match r.u8()? {
            0 => PolicySource::CacheControl,
            n => PolicySource::Targeted(n - 1),
        };
        let expires = match (r.u8()?, r.u64()?) {
            (0, _) => Expires::Absent,
            (1, _) => Expires::Invalid,
            (2, at) => Expires::At(at),
            _ => return None,
        };
        let freshness_lifetime = r.u64()?;
        let heuristic = match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let corrected_initial_age = r.u64()?;
        let date = r.u64_opt()?;
        let last_modified = r.u64_opt()?;
        let age = match (r.u8()?, r.u32()?) {
            (0, _) => AgeHeader::Absent,
            (1, _) => AgeHeader::Invalid,
            (2, s) => AgeHeader::Seconds(s),
            _ => return None,
        };
        let content_length = r.u64_opt()?;
        let vary = match r.u8()? {
            0 => Vary::None,
            1 => Vary::Star,
            2 => Vary::Fields(bytes.slice_ref(r.bytes()?)),
            _ => return None,
        };
        let mut opt_bytes = || match r.u8()? {
            0 => Some(None),
            1 => r.bytes().map(|b| Some(bytes.slice_ref(b))),
            _ => None,
        };
        let last_modified_raw = opt_bytes()?;
        let etag = opt_bytes()?;
        let content_language = opt_bytes()?;
        let meta = StoredMeta {
            request_time,
            response_time,
            status,
            cache_control,
            source,
            date,
            expires,
            last_modified,
            last_modified_raw,
            etag,
            age,
            vary,
            content_language,
            content_length,
            freshness_lifetime,
            heuristic,
            corrected_initial_age,
        };
        Some((meta, r.0))
    }
}

fn put_u64_opt(out: &mut Vec<u8>, n: Option<u64>) {
    out.push(u8::from(n.is_some()));
    out.extend_from_slice(&n.unwrap_or(0).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // A stored head is far below 4 GiB (the codec caps it), and these are parts of it.
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&b[..len as usize]);
}

/// Little-endian fields read off the front of a slice.
pub(crate) struct Reader<'b>(pub &'b [u8]);

impl<'b> Reader<'b> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn u64_opt(&mut self) -> Option<Option<u64>> {
        match (self.u8()?, self.u64()?) {
            (0, _) => Some(None),
            (1, n) => Some(Some(n)),
            _ => None,
        }
    }
    /// A length (u32) and that many bytes.
    fn bytes(&mut self) -> Option<&'b [u8]> {
        let len = self.u32()? as usize;
        let b = self.0.get(..len)?;
        self.0 = &self.0[len..];
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use crate::fields::FieldList;
    use crate::targeted::TargetList;

    fn round_trip(meta: &StoredMeta) {
        let mut out = vec![0xee];
        meta.encode(&mut out);
        let len = out.len() - 1;
        let strings = [
            meta.last_modified_raw.as_ref(),
            meta.etag.as_ref(),
            meta.content_language.as_ref(),
            match &meta.vary {
                Vary::Fields(names) => Some(names),
                _ => None,
            },
        ];
        let string_bytes: usize = strings.iter().flatten().map(|b| 4 + b.len()).sum();
        assert_eq!(len, FIXED_LEN + string_bytes);
        out.push(0x55);
        let encoded = Bytes::from(out);
        let after_marker = encoded.slice(1..);
        let (back, rest) = StoredMeta::decode(&after_marker).expect("decodes");
        assert_eq!(&back, meta);
        assert_eq!(rest, [0x55]);
        for cut in 0..len {
            assert!(
                StoredMeta::decode(&encoded.slice(1..1 + cut)).is_none(),
                "cut at {cut}"
            );
        }
        let mut other = encoded[1..].to_vec();
        other[0] = VERSION + 1;
        assert!(StoredMeta::decode(&Bytes::from(other)).is_none());
    }

    /// A record written by version 1 (the fixed part alone, the head-derived fields parsed
    /// again on reading) is refused, never read as version 2: the disk copy is a miss.
    #[test]
    fn a_version_1_encoding_is_refused() {
        let policy = PolicyConfig::builder().shared(true).build().unwrap();
        let response = FieldList::from_pairs(&[("Cache-Control", "max-age=60")]);
        let meta = StoredMeta::from_response(200, &response, 1, 2, b"k", &policy);
        let mut v2 = Vec::new();
        meta.encode(&mut v2);
        // Version 1 wrote the same fixed fields, then nothing more.
        let v1_len = 1 + 8 + 8 + 2 + 2 + 4 * 5 + 1 + 9 + 8 + 1 + 8;
        let mut v1 = v2[..v1_len].to_vec();
        v1[0] = 1;
        assert!(StoredMeta::decode(&Bytes::from(v1.clone())).is_none());
        // Followed by other bytes (the proxy's layout): refused all the same.
        v1.extend_from_slice(&v2[v1_len..]);
        assert!(StoredMeta::decode(&Bytes::from(v1)).is_none());
    }

    #[test]
    fn every_kind_of_stored_response_comes_back_the_same() {
        let plain = PolicyConfig::builder().shared(true).build().unwrap();
        let cdn = plain.with_targets(TargetList::new(["x-other", "cdn-cache-control"]));
        let cases: &[(&PolicyConfig, &[(&str, &str)])] = &[
            (
                &plain,
                &[(
                    "Cache-Control",
                    "max-age=60, must-revalidate, stale-if-error=5",
                )],
            ),
            (
                &plain,
                &[("Date", "Thu, 26 Nov 2026 10:00:00 GMT"), ("Expires", "0")],
            ),
            (
                &plain,
                &[
                    ("Date", "Thu, 26 Nov 2026 10:00:00 GMT"),
                    ("Last-Modified", "Mon, 02 Nov 2026 10:00:00 GMT"),
                    ("ETag", "W/\"v1\""),
                    ("Age", "30"),
                    ("Vary", "Accept-Language, Accept-Encoding"),
                    ("Content-Language", "fr"),
                    ("Content-Length", "1234"),
                ],
            ),
            (
                &plain,
                &[
                    ("Expires", "Thu, 26 Nov 2026 11:00:00 GMT"),
                    ("Cache-Control", "s-maxage=9, max-age=3, private=\"x\""),
                ],
            ),
            (&plain, &[("Vary", "*"), ("Age", "x")]),
            (
                &cdn,
                &[
                    ("CDN-Cache-Control", "max-age=600"),
                    ("Cache-Control", "no-store"),
                    ("Expires", "0"),
                ],
            ),
        ];
        for (policy, lines) in cases {
            let response = FieldList::from_pairs(lines);
            let meta = StoredMeta::from_response(
                200,
                &response,
                1_795_000_000,
                1_795_000_001,
                b"http://a/x.png",
                policy,
            );
            round_trip(&meta);
        }
        // A heuristic lifetime from a refresh rule cannot be computed again without the rule.
        let rules = PolicyConfig::builder()
            .shared(true)
            .refresh_rule(
                r"\.png$",
                crate::config::HeuristicRule {
                    min: 7,
                    percent: 50,
                    max: 99_999,
                },
            )
            .build()
            .unwrap();
        let response = FieldList::from_pairs(&[
            ("Date", "Thu, 26 Nov 2026 10:00:00 GMT"),
            ("Last-Modified", "Mon, 02 Nov 2026 10:00:00 GMT"),
        ]);
        let meta = StoredMeta::from_response(
            200,
            &response,
            1_795_000_000,
            1_795_000_001,
            b"http://a/x.png",
            &rules,
        );
        assert!(meta.heuristic);
        round_trip(&meta);
    }
}
