//! [`StoredMeta`]: everything the policy needs about a stored response,
//! extracted once at store time so that a hit never re-parses headers.

use bytes::Bytes;

use crate::age::{age_field_value, corrected_initial_age, AgeHeader};
use crate::cache_control::ResponseCacheControl;
use crate::config::PolicyConfig;
use crate::dates::{first_date, Expires};
use crate::fields::Fields;
use crate::freshness::{freshness_lifetime, Freshness};
use crate::targeted::{governing_at, Governing, PolicySource};
use crate::vary::{vary_matches, Vary};
use sepia_http1::HeaderId;

/// The per-object record the store keeps next to the stored response.
///
/// Cheap to clone: the byte fields are `Bytes` (reference counted) and the
/// rest is plain data. Fields are public so the store can persist them; build
/// one with [`StoredMeta::from_response`] so they stay consistent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMeta {
    /// When the request that produced this response was sent (§4.2.3).
    pub request_time: u64,
    /// When the response was received (§4.2.3).
    pub response_time: u64,
    /// Response status code.
    pub status: u16,
    /// The response's cache directives: its `Cache-Control`, or the targeted field that
    /// governs this cache (RFC 9213; see `source`).
    pub cache_control: ResponseCacheControl,
    /// Which field the directives came from.
    pub source: PolicySource,
    /// `Date`, `None` if absent or invalid.
    pub date: Option<u64>,
    /// `Expires` (`Absent` when a targeted field governs: RFC 9213 §2.2 ignores it then).
    pub expires: Expires,
    /// `Last-Modified`, `None` if absent or invalid.
    pub last_modified: Option<u64>,
    /// `Last-Modified` exactly as received, for `If-Modified-Since` (§4.3.1).
    pub last_modified_raw: Option<Bytes>,
    /// `ETag` exactly as received (weak prefix included).
    pub etag: Option<Bytes>,
    /// `Age` as received.
    pub age: AgeHeader,
    /// Parsed `Vary`.
    pub vary: Vary,
    /// `Content-Language`, kept only when the response varies on
    /// `Accept-Language` (see [`crate::vary_matches`]).
    pub content_language: Option<Bytes>,
    /// `Content-Length`, if present and valid.
    pub content_length: Option<u64>,
    /// Freshness lifetime fixed at store time (§4.2.1).
    pub freshness_lifetime: u64,
    /// Whether that lifetime is heuristic (§4.2.2).
    pub heuristic: bool,
    /// `corrected_initial_age` (§4.2.3), so the current age is one addition.
    pub corrected_initial_age: u64,
}

impl StoredMeta {
    /// Extracts the metadata of a response about to be stored.
    ///
    /// Times are seconds since the Unix epoch. `url_key` selects the
    /// heuristic refresh rule (normally the primary key).
    pub fn from_response<P: Fields>(
        status: u16,
        response: &P,
        request_time: u64,
        response_time: u64,
        url_key: &[u8],
        config: &PolicyConfig,
    ) -> Self {
        let Governing {
            cache_control,
            expires,
            source,
        } = governing_at(response, config.targets(), response_time);
        let date = first_date(response, HeaderId::Date, response_time);
        let last_modified_raw = response.first(HeaderId::LastModified);
        let last_modified =
            last_modified_raw.and_then(|lm| crate::dates::parse_http_date(lm, response_time));
        let age = AgeHeader::parse(response);
        let vary = Vary::parse(response);
        let content_language = kept_content_language(&vary, response);
        let content_length = response
            .first(HeaderId::ContentLength)
            .and_then(parse_content_length);
        let (freshness_lifetime, heuristic) = freshness_lifetime(
            status,
            &cache_control,
            date,
            expires,
            last_modified,
            response_time,
            config.shared(),
            config.heuristic_rule(url_key),
        );
        Self {
            request_time,
            response_time,
            status,
            cache_control,
            source,
            date,
            expires,
            last_modified,
            last_modified_raw: last_modified_raw.map(Bytes::copy_from_slice),
            etag: response
                .first(HeaderId::ETag)
                .filter(|e| !e.is_empty())
                .map(Bytes::copy_from_slice),
            age,
            vary,
            content_language,
            content_length,
            freshness_lifetime,
            heuristic,
            corrected_initial_age: corrected_initial_age(
                date,
                age.value(),
                request_time,
                response_time,
            ),
        }
    }

    /// `current_age` (§4.2.3) at `now`.
    pub fn current_age(&self, now: u64) -> u64 {
        self.corrected_initial_age
            .saturating_add(now.saturating_sub(self.response_time))
    }

    /// Lifetime, age and freshness at `now`.
    pub fn freshness(&self, now: u64) -> Freshness {
        Freshness::new(
            self.freshness_lifetime,
            self.current_age(now),
            self.heuristic,
        )
    }

    /// The `Age` value to send with this response at `now` (§5.1).
    pub fn age_field_value(&self, now: u64) -> u64 {
        age_field_value(self.current_age(now))
    }

    /// Whether the response carries a validator (`ETag` or `Last-Modified`)
    /// the cache can revalidate with (§4.3.1).
    pub fn has_validator(&self) -> bool {
        self.etag.is_some() || self.last_modified_raw.is_some()
    }

    /// Whether storing is worth it: a storable response that is stale on
    /// arrival, has no validator and allows no stale use could never be
    /// served, so the proxy should not spend memory on it. Neither could an
    /// unqualified `no-cache` response without a validator.
    pub fn is_worth_storing(&self) -> bool {
        if self.cache_control.no_cache() && !self.has_validator() {
            return false;
        }
        self.freshness_lifetime > self.corrected_initial_age
            || self.has_validator()
            || self.cache_control.stale_if_error().is_some()
            || self.cache_control.stale_while_revalidate().is_some()
    }

    /// The date a client's `If-Modified-Since` is compared with (RFC 9111
    /// §4.3.2): `Last-Modified`, else `Date`, else the receipt time. A
    /// `Last-Modified` or `Date` that is not a valid HTTP-date gives no date
    /// and counts as absent.
    pub fn modification_date(&self) -> u64 {
        self.last_modified
            .or(self.date)
            .unwrap_or(self.response_time)
    }

    /// Whether this variant may serve `request` (§4.1); see
    /// [`crate::vary_matches`].
    pub fn vary_matches<R: Fields>(
        &self,
        stored_key: &[u8],
        request: &R,
        scratch: &mut Vec<u8>,
    ) -> bool {
        vary_matches(
            &self.vary,
            self.content_language.as_deref(),
            stored_key,
            request,
            scratch,
        )
    }
}

/// `Content-Length = 1*DIGIT` (RFC 9110 §8.6); `None` if invalid or too big.
pub(crate) fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// `Content-Language`, kept only when the response varies on `Accept-Language` (see
/// [`crate::vary_matches`]).
pub(crate) fn kept_content_language<P: Fields>(vary: &Vary, response: &P) -> Option<Bytes> {
    vary.names_field(b"accept-language")
        .then(|| response.first_named(b"content-language"))
        .flatten()
        .map(Bytes::copy_from_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HeuristicRule;
    use crate::fields::FieldList;

    const NOW: u64 = 1_700_000_000;

    fn http_date(secs: u64) -> String {
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
    }

    fn meta(pairs: &[(&str, &str)]) -> StoredMeta {
        StoredMeta::from_response(
            200,
            &FieldList::from_pairs(pairs),
            NOW,
            NOW,
            b"http://h/x",
            &PolicyConfig::default(),
        )
    }

    #[test]
    fn extracts_everything_once() {
        let date = http_date(NOW - 10);
        let lm = http_date(NOW - 10_010);
        let m = meta(&[
            ("Date", &date),
            ("Cache-Control", "max-age=600, must-revalidate"),
            ("Age", "30"),
            ("ETag", "W/\"v1\""),
            ("Last-Modified", &lm),
            ("Vary", "Accept-Language"),
            ("Content-Language", "de"),
            ("Content-Length", "15"),
        ]);
        assert_eq!(m.date, Some(NOW - 10));
        assert_eq!(m.last_modified, Some(NOW - 10_010));
        assert_eq!(m.last_modified_raw.as_deref(), Some(lm.as_bytes()));
        assert_eq!(m.etag.as_deref(), Some(&b"W/\"v1\""[..]));
        assert_eq!(m.age, AgeHeader::Seconds(30));
        assert_eq!(m.content_language.as_deref(), Some(&b"de"[..]));
        assert_eq!(m.content_length, Some(15));
        assert_eq!((m.freshness_lifetime, m.heuristic), (600, false));
        assert!(m.cache_control.must_revalidate());
        // max(apparent 10, age 30 + delay 0)
        assert_eq!(m.corrected_initial_age, 30);
        assert_eq!(m.current_age(NOW + 5), 35);
        assert_eq!(m.freshness(NOW + 5), Freshness::new(600, 35, false));
        assert_eq!(m.age_field_value(NOW + 5), 35);
        assert!(m.has_validator() && m.is_worth_storing());
        assert_eq!(m.modification_date(), NOW - 10_010);
    }

    #[test]
    fn content_language_kept_only_when_varying_on_language() {
        let m = meta(&[("Content-Language", "de"), ("Vary", "Accept-Encoding")]);
        assert_eq!(m.content_language, None);
    }

    #[test]
    fn heuristic_uses_refresh_rule_for_the_url() {
        let config = PolicyConfig::builder()
            .refresh_rule(
                r"\.png$",
                HeuristicRule {
                    min: 500,
                    percent: 0,
                    max: 500,
                },
            )
            .build()
            .unwrap();
        let response = FieldList::from_pairs(&[]);
        let png = StoredMeta::from_response(200, &response, NOW, NOW, b"http://h/a.png", &config);
        let html = StoredMeta::from_response(200, &response, NOW, NOW, b"http://h/a.html", &config);
        assert_eq!((png.freshness_lifetime, png.heuristic), (500, true));
        assert_eq!((html.freshness_lifetime, html.heuristic), (0, true));
    }

    #[test]
    fn worth_storing_table() {
        let lm = http_date(NOW - 1000);
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("Cache-Control", "max-age=60")], true),
            (&[("Cache-Control", "max-age=0")], false),
            (&[("Cache-Control", "max-age=0"), ("ETag", "\"a\"")], true),
            (&[("Last-Modified", &lm)], true),
            (&[("Cache-Control", "max-age=60"), ("Age", "61")], false),
            (
                &[
                    ("Cache-Control", "max-age=1, stale-if-error=60"),
                    ("Age", "5"),
                ],
                true,
            ),
            (
                &[
                    ("Cache-Control", "max-age=1, stale-while-revalidate=60"),
                    ("Age", "5"),
                ],
                true,
            ),
            (&[("Cache-Control", "max-age=60, no-cache")], false),
            (
                &[("Cache-Control", "max-age=60, no-cache"), ("ETag", "\"a\"")],
                true,
            ),
            (&[("ETag", "")], false),
        ];
        for (pairs, expected) in cases {
            assert_eq!(meta(pairs).is_worth_storing(), *expected, "{pairs:?}");
        }
    }

    #[test]
    fn content_length_parsing() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("15", Some(15)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("1,1", None),
            ("-1", None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_content_length(value.as_bytes()), *expected, "{value}");
        }
    }

    #[test]
    fn modification_date_fallbacks() {
        let date = http_date(NOW - 5);
        assert_eq!(meta(&[("Date", &date)]).modification_date(), NOW - 5);
        assert_eq!(meta(&[("Date", "garbage")]).modification_date(), NOW);
    }
}
