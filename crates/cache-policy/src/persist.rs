//! [`StoredMeta`] kept beside a response in a persistent store, and read back.
//!
//! What can be read again from the stored head (dates, validators, `Age`, `Vary`,
//! `Content-Language`, `Content-Length`) is parsed again on the way back, as at store time.
//! What depended on the configuration when the response was stored is kept instead: which
//! field governed (a targeted field, RFC 9213, chosen by the listener's target list), its
//! directives, `Expires` as it applied, the freshness lifetime (heuristic rules by URL,
//! RFC 9111 §4.2.2) and the times of the exchange (§4.2.3). A response restored after a
//! restart is then fresh for exactly as long as it would have been without one.

use crate::age::AgeHeader;
use crate::cache_control::ResponseCacheControl;
use crate::dates::{first_date, Expires};
use crate::fields::Fields;
use crate::stored::StoredMeta;
use crate::targeted::PolicySource;
use crate::vary::Vary;
use bytes::Bytes;
use sepia_http1::HeaderId;

/// Format of the encoding; a different byte is not read (the object is a miss).
const VERSION: u8 = 1;

/// Bytes [`StoredMeta::encode`] writes (the tests check every encoding has this length).
#[cfg(test)]
pub(crate) const ENCODED_LEN: usize = 1 + 8 + 8 + 2 + 2 + 4 * 5 + 1 + 9 + 8 + 1 + 8;

impl StoredMeta {
    /// Appends the metadata that cannot be read again from the stored head (see the module).
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
    }

    /// The metadata of a stored response whose fields are `response`, from what
    /// [`StoredMeta::encode`] wrote; `None` if `bytes` is not that (another version, cut
    /// short, or values that cannot be). Returns the bytes after the encoding too.
    pub fn decode<'b, F: Fields>(response: &F, bytes: &'b [u8]) -> Option<(StoredMeta, &'b [u8])> {
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
        let last_modified_raw = response.first(HeaderId::LastModified);
        let vary = Vary::parse(response);
        let content_language = crate::stored::kept_content_language(&vary, response);
        let meta = StoredMeta {
            request_time,
            response_time,
            status,
            cache_control,
            source,
            date: first_date(response, HeaderId::Date, response_time),
            expires,
            last_modified: last_modified_raw
                .and_then(|lm| crate::dates::parse_http_date(lm, response_time)),
            last_modified_raw: last_modified_raw.map(Bytes::copy_from_slice),
            etag: response
                .first(HeaderId::ETag)
                .filter(|e| !e.is_empty())
                .map(Bytes::copy_from_slice),
            age: AgeHeader::parse(response),
            vary,
            content_language,
            content_length: response
                .first(HeaderId::ContentLength)
                .and_then(crate::stored::parse_content_length),
            freshness_lifetime,
            heuristic,
            corrected_initial_age,
        };
        Some((meta, r.0))
    }
}

/// Little-endian fields read off the front of a slice.
pub(crate) struct Reader<'b>(pub &'b [u8]);

impl Reader<'_> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use crate::fields::FieldList;
    use crate::targeted::TargetList;

    fn round_trip(meta: &StoredMeta, response: &FieldList) {
        let mut out = vec![0xee];
        meta.encode(&mut out);
        assert_eq!(out.len(), 1 + ENCODED_LEN);
        out.push(0x55);
        let (back, rest) = StoredMeta::decode(response, &out[1..]).expect("decodes");
        assert_eq!(&back, meta);
        assert_eq!(rest, [0x55]);
        for cut in 0..ENCODED_LEN {
            assert!(
                StoredMeta::decode(response, &out[1..1 + cut]).is_none(),
                "cut at {cut}"
            );
        }
        let mut other = out[1..].to_vec();
        other[0] = VERSION + 1;
        assert!(StoredMeta::decode(response, &other).is_none());
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
            round_trip(&meta, &response);
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
        round_trip(&meta, &response);
    }
}
