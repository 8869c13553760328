//! Conditional requests: validating a stored response with the origin
//! (RFC 9111 §4.3.1) and answering a client's conditionals from cache
//! (RFC 9111 §4.3.2, RFC 9110 §13.1, §13.2.2).

use crate::dates::sole_date;
use crate::etag::{field_matches, Comparison};
use crate::fields::Fields;
use crate::stored::StoredMeta;
use sepia_http1::HeaderId;

/// Validators to put on a request that revalidates a stored response
/// (§4.3.1): the stored entity-tag as `If-None-Match`, and the stored
/// `Last-Modified` exactly as received as `If-Modified-Since`, each only
/// when the stored response has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validators<'a> {
    /// Value for `If-None-Match`.
    pub if_none_match: Option<&'a [u8]>,
    /// Value for `If-Modified-Since`.
    pub if_modified_since: Option<&'a [u8]>,
}

impl Validators<'_> {
    /// Whether there is anything to validate with; without validators a
    /// revalidation is a plain request.
    pub fn is_empty(&self) -> bool {
        self.if_none_match.is_none() && self.if_modified_since.is_none()
    }
}

/// The validators for revalidating `stored` (§4.3.1).
///
/// Sending both is what §4.3.1 recommends: an origin that ignores
/// entity-tags can still answer on the date.
pub fn validators(stored: &StoredMeta) -> Validators<'_> {
    Validators {
        if_none_match: stored.etag.as_deref(),
        if_modified_since: stored.last_modified_raw.as_deref(),
    }
}

/// Request fields that make a request conditional (RFC 9110 §13.1).
pub const CONDITIONAL_FIELDS: [&str; 5] = [
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
];

/// What to do with a client's own conditional fields
/// ([`CONDITIONAL_FIELDS`]) on a request the cache forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionalForwarding {
    /// Forward them unchanged: the cache will not store or use the response
    /// (a pass), so the origin evaluates them.
    PassThrough,
    /// Remove them: the cache wants a complete response to store (a miss it
    /// will fill) and then answers them itself with
    /// [`evaluate_conditionals`]. Otherwise a client's 304 would leave the
    /// cache empty.
    Strip,
    /// Remove them and send the stored response's [`validators`] instead: the
    /// cache is revalidating its copy; the client's conditionals are then
    /// answered from the refreshed (or replaced) response (§4.3.2).
    Replace,
}

/// Decides [`ConditionalForwarding`] for a forwarded request.
///
/// `revalidating` is the stored response being revalidated, if any: its own
/// validators replace the client's, or, without validators, the client's are
/// stripped anyway, because a 304 answering the client's conditionals says
/// nothing about the stored response and must not freshen it. Without a
/// stored response, `will_store` says whether the response is meant to fill
/// the cache.
pub fn conditional_forwarding(
    revalidating: Option<&StoredMeta>,
    will_store: bool,
) -> ConditionalForwarding {
    match revalidating {
        Some(stored) if !validators(stored).is_empty() => ConditionalForwarding::Replace,
        Some(_) => ConditionalForwarding::Strip,
        None if will_store => ConditionalForwarding::Strip,
        None => ConditionalForwarding::PassThrough,
    }
}

/// The result of evaluating a client's preconditions against a stored
/// response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionalOutcome {
    /// Serve the stored response normally (no condition, or they pass).
    Proceed,
    /// Answer `304 Not Modified` with [`NOT_MODIFIED_FIELDS`] of the stored
    /// response (RFC 9110 §15.4.5).
    NotModified,
    /// Answer `412 Precondition Failed` (RFC 9110 §15.5.13).
    PreconditionFailed,
}

/// Fields a 304 generated from cache carries: the ones RFC 9110 §15.4.5
/// requires when they would be in a 200, `Last-Modified` to guide cache
/// updates downstream, and the generated `Age` (RFC 9111 §4: a response
/// built from a stored one without validation carries `Age`).
pub const NOT_MODIFIED_FIELDS: [&str; 8] = [
    "age",
    "cache-control",
    "content-location",
    "date",
    "etag",
    "expires",
    "last-modified",
    "vary",
];

/// Evaluates `If-Match`, `If-Unmodified-Since`, `If-None-Match` and
/// `If-Modified-Since` against a stored response in the order of RFC 9110
/// §13.2.2. (`If-Range` belongs to range handling: [`crate::range_for_stored`].)
///
/// - Preconditions apply only when the stored status is 2xx (§13.2.1).
/// - `If-None-Match` uses weak comparison, lists and `*`; on a match `GET` /
///   `HEAD` get 304, other methods 412 (§13.1.2).
/// - `If-Modified-Since` counts only for `GET` / `HEAD` without
///   `If-None-Match` (RFC 9110 §13.1.3). It is compared with the stored
///   response's [`StoredMeta::modification_date`]: "If a request contains an
///   If-Modified-Since header field and the Last-Modified header field is not
///   present in a selected stored response, a cache SHOULD use the stored
///   response's Date field value (or, if no Date field is present, the time
///   that the stored response was received) to evaluate the conditional"
///   (RFC 9111 §4.3.2). "If the selected representation's last modification
///   date is earlier or equal to the date provided in the field value, the
///   condition is false" (§13.1.3), and that is a 304; a later one is a 200.
///   So a fresh response without `Last-Modified` whose `Date` is *later*
///   than the client's date is served whole: the client's copy is older.
/// - An `If-Modified-Since` or `If-Unmodified-Since` that is not exactly one
///   valid HTTP-date (any of the three formats, RFC 9110 §5.6.7) is ignored
///   (§13.1.3, §13.1.4), and so is a second line of it (a list of two).
/// - `If-Match` (strong comparison) and `If-Unmodified-Since` are answered
///   with 412 when they fail, as the origin would for the same
///   representation. `If-Unmodified-Since` needs a `Last-Modified`.
///
/// No clock is passed: the stored response's receipt time places a two-digit
/// RFC 850 year (§5.6.7), which only matters some 50 years from now.
pub fn evaluate_conditionals<R: Fields>(
    method: &[u8],
    request: &R,
    stored: &StoredMeta,
) -> ConditionalOutcome {
    if !(200..300).contains(&stored.status) {
        return ConditionalOutcome::Proceed;
    }
    let etag = stored.etag.as_deref();
    if request.contains(HeaderId::IfMatch) {
        if !field_matches(request, b"if-match", etag, Comparison::Strong) {
            return ConditionalOutcome::PreconditionFailed;
        }
    } else if let (Some(limit), Some(last_modified)) = (
        sole_date(request, HeaderId::IfUnmodifiedSince, stored.response_time),
        stored.last_modified,
    ) {
        if last_modified > limit {
            return ConditionalOutcome::PreconditionFailed;
        }
    }
    let get_or_head = method == b"GET" || method == b"HEAD";
    if request.contains(HeaderId::IfNoneMatch) {
        if field_matches(request, b"if-none-match", etag, Comparison::Weak) {
            return if get_or_head {
                ConditionalOutcome::NotModified
            } else {
                ConditionalOutcome::PreconditionFailed
            };
        }
        return ConditionalOutcome::Proceed;
    }
    if get_or_head {
        if let Some(since) = sole_date(request, HeaderId::IfModifiedSince, stored.response_time) {
            if stored.modification_date() <= since {
                return ConditionalOutcome::NotModified;
            }
        }
    }
    ConditionalOutcome::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use crate::fields::FieldList;

    const T0: u64 = 1_700_000_000;

    fn date(secs: u64) -> String {
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
    }

    fn stored_with(status: u16, pairs: &[(&str, &str)]) -> StoredMeta {
        StoredMeta::from_response(
            status,
            &FieldList::from_pairs(pairs),
            T0,
            T0,
            b"http://h/",
            &PolicyConfig::default(),
        )
    }

    #[test]
    fn validators_come_from_the_stored_response() {
        let lm = date(T0 - 3000);
        let both = stored_with(200, &[("ETag", "W/\"abcdef\""), ("Last-Modified", &lm)]);
        let v = validators(&both);
        assert_eq!(v.if_none_match, Some(&b"W/\"abcdef\""[..]));
        assert_eq!(v.if_modified_since, Some(lm.as_bytes()));
        assert!(!v.is_empty());
        let none = stored_with(200, &[("Cache-Control", "max-age=1")]);
        assert!(validators(&none).is_empty());
        // An unparseable Last-Modified is still echoed byte for byte.
        let odd = stored_with(200, &[("Last-Modified", "Wed, 01 Jan 2020 00:00:00 GMT")]);
        assert_eq!(
            validators(&odd).if_modified_since,
            Some(&b"Wed, 01 Jan 2020 00:00:00 GMT"[..])
        );
    }

    #[test]
    fn forwarding_choice() {
        let with_etag = stored_with(200, &[("ETag", "\"a\"")]);
        let without = stored_with(200, &[]);
        let cases: &[(Option<&StoredMeta>, bool, ConditionalForwarding)] = &[
            (Some(&with_etag), true, ConditionalForwarding::Replace),
            (Some(&with_etag), false, ConditionalForwarding::Replace),
            (Some(&without), true, ConditionalForwarding::Strip),
            (Some(&without), false, ConditionalForwarding::Strip),
            (None, true, ConditionalForwarding::Strip),
            (None, false, ConditionalForwarding::PassThrough),
        ];
        for (stored, will_store, expected) in cases {
            assert_eq!(
                conditional_forwarding(*stored, *will_store),
                *expected,
                "{will_store}"
            );
        }
    }

    /// RFC 9111 §4.3.2 for a stored response without `Last-Modified`: the
    /// client's `If-Modified-Since` is compared with the stored `Date`, or
    /// without one with the receipt time (T0 here), by RFC 9110 §13.1.3's rule
    /// (not modified when that date is earlier than or equal to the client's).
    #[test]
    fn if_modified_since_without_last_modified() {
        use ConditionalOutcome::{NotModified as Nm, Proceed as Go};
        let dated = stored_with(
            200,
            &[
                ("Cache-Control", "max-age=10000"),
                ("Date", &date(T0 - 100)),
            ],
        );
        let undated = stored_with(200, &[("Cache-Control", "max-age=10000")]);
        let bad_date = stored_with(200, &[("Date", "yesterday")]);
        let bad_lm = stored_with(200, &[("Last-Modified", "0"), ("Date", &date(T0 - 100))]);
        let lm_and_date = stored_with(
            200,
            &[
                ("Last-Modified", &date(T0 - 5000)),
                ("Date", &date(T0 - 100)),
            ],
        );
        let ims = |offset: i64| date(T0.saturating_add_signed(offset));
        let cases: &[(&StoredMeta, String, ConditionalOutcome)] = &[
            // conditional-lm-fresh-no-lm: the stored Date is 3000 s *later* than the
            // client's date, so the representation may have changed since: 200.
            (&dated, ims(-100 - 3000), Go),
            (&dated, ims(-101), Go),
            (&dated, ims(-100), Nm),
            (&dated, ims(-99), Nm),
            (&dated, ims(1000), Nm),
            // Same instant in the two obsolete formats, and in lower case.
            (&dated, "Tuesday, 14-Nov-23 22:11:40 GMT".into(), Nm),
            (&dated, "Tue Nov 14 22:11:40 2023".into(), Nm),
            (&dated, "tue, 14 nov 2023 22:11:40 gmt".into(), Nm),
            (&dated, "Tue Nov 14 22:11:39 2023".into(), Go),
            // Neither Last-Modified nor a valid Date: the receipt time.
            (&undated, ims(-1), Go),
            (&undated, ims(0), Nm),
            (&bad_date, ims(-1), Go),
            (&bad_date, ims(0), Nm),
            // An invalid Last-Modified counts as absent: Date decides.
            (&bad_lm, ims(-101), Go),
            (&bad_lm, ims(-100), Nm),
            // A valid Last-Modified decides, whatever the Date.
            (&lm_and_date, ims(-5000), Nm),
            (&lm_and_date, ims(-5001), Go),
            (&lm_and_date, ims(-4000), Nm),
        ];
        assert_eq!(
            crate::dates::parse_http_date(b"Tuesday, 14-Nov-23 22:11:40 GMT", T0),
            Some(T0 - 100)
        );
        for (stored, since, expected) in cases {
            let request = FieldList::from_pairs(&[("If-Modified-Since", since.as_str())]);
            let got = evaluate_conditionals(b"GET", &request, stored);
            assert_eq!(
                got,
                *expected,
                "{since} against {:?}",
                stored.modification_date()
            );
        }
    }

    /// A precondition date that is not exactly one valid HTTP-date is ignored
    /// (RFC 9110 §13.1.3, §13.1.4): the stored response is served.
    #[test]
    fn precondition_dates_must_be_single_and_valid() {
        use ConditionalOutcome::{PreconditionFailed as Pf, Proceed as Go};
        let full = stored_with(
            200,
            &[("Last-Modified", &date(T0 - 3000)), ("Date", &date(T0))],
        );
        let later = date(T0 - 2000);
        let earlier = date(T0 - 5000);
        let list = format!("{later}, {later}");
        type Case<'a> = (&'a [(&'a str, &'a str)], ConditionalOutcome);
        let cases: &[Case<'_>] = &[
            (
                &[("If-Modified-Since", &later), ("If-Modified-Since", &later)],
                Go,
            ),
            (&[("If-Modified-Since", &list)], Go),
            (
                &[("If-Modified-Since", "Tue, 14 Nov 2023 22:11:40 UTC")],
                Go,
            ),
            (
                &[("If-Modified-Since", &later), ("If-Modified-Since", "")],
                ConditionalOutcome::NotModified,
            ),
            (
                &[
                    ("If-Unmodified-Since", &earlier),
                    ("If-Unmodified-Since", &earlier),
                ],
                Go,
            ),
            (
                &[("If-Unmodified-Since", &format!("{earlier}, {earlier}"))],
                Go,
            ),
            (&[("If-Unmodified-Since", &earlier)], Pf),
        ];
        for (request, expected) in cases {
            let got = evaluate_conditionals(b"GET", &FieldList::from_pairs(request), &full);
            assert_eq!(got, *expected, "{request:?}");
        }
    }

    #[test]
    fn conditional_table() {
        use ConditionalOutcome::{NotModified as Nm, PreconditionFailed as Pf, Proceed as Go};
        let lm = date(T0 - 3000);
        let before = date(T0 - 5000);
        let after = date(T0 - 2000);
        // T0 - 3000 is Tue, 14 Nov 2023 21:23:20 GMT; the same instant in RFC 850 form.
        let same_rfc850 = "Tuesday, 14-Nov-23 21:23:20 GMT";
        assert_eq!(
            crate::dates::parse_http_date(same_rfc850.as_bytes(), T0),
            Some(T0 - 3000)
        );
        let stored_date = date(T0);
        let full = stored_with(
            200,
            &[
                ("ETag", "\"abcdef\""),
                ("Last-Modified", &lm),
                ("Date", &stored_date),
            ],
        );
        let no_lm = stored_with(200, &[("Date", &stored_date)]);
        let not_found = stored_with(404, &[("ETag", "\"abcdef\"")]);
        type Case<'a> = (
            &'a str,
            &'a StoredMeta,
            &'a [(&'a str, &'a str)],
            ConditionalOutcome,
        );
        let cases: &[Case<'_>] = &[
            ("GET", &full, &[], Go),
            ("GET", &full, &[("If-None-Match", "\"abcdef\"")], Nm),
            ("HEAD", &full, &[("If-None-Match", "\"abcdef\"")], Nm),
            ("GET", &full, &[("If-None-Match", "W/\"abcdef\"")], Nm),
            (
                "GET",
                &full,
                &[("If-None-Match", "\"1234\", \"abcdef\"")],
                Nm,
            ),
            ("GET", &full, &[("If-None-Match", "*")], Nm),
            ("GET", &full, &[("If-None-Match", "\"other\"")], Go),
            ("DELETE", &full, &[("If-None-Match", "\"abcdef\"")], Pf),
            // If-None-Match takes precedence over If-Modified-Since.
            (
                "GET",
                &full,
                &[
                    ("If-None-Match", "\"abcdef\""),
                    ("If-Modified-Since", &before),
                ],
                Nm,
            ),
            (
                "GET",
                &full,
                &[
                    ("If-None-Match", "\"other\""),
                    ("If-Modified-Since", &after),
                ],
                Go,
            ),
            ("GET", &full, &[("If-Modified-Since", &lm)], Nm),
            ("GET", &full, &[("If-Modified-Since", &after)], Nm),
            ("GET", &full, &[("If-Modified-Since", &before)], Go),
            ("GET", &full, &[("If-Modified-Since", same_rfc850)], Nm),
            ("GET", &full, &[("If-Modified-Since", "garbage")], Go),
            ("POST", &full, &[("If-Modified-Since", &after)], Go),
            // No Last-Modified: Date stands in (RFC 9111 §4.3.2).
            ("GET", &no_lm, &[("If-Modified-Since", &before)], Go),
            ("GET", &no_lm, &[("If-Modified-Since", &date(T0 + 10))], Nm),
            // If-Match / If-Unmodified-Since.
            ("GET", &full, &[("If-Match", "\"abcdef\"")], Go),
            ("GET", &full, &[("If-Match", "W/\"abcdef\"")], Pf),
            ("GET", &full, &[("If-Match", "\"nope\"")], Pf),
            ("GET", &full, &[("If-Match", "*")], Go),
            ("GET", &full, &[("If-Unmodified-Since", &after)], Go),
            ("GET", &full, &[("If-Unmodified-Since", &before)], Pf),
            (
                "GET",
                &full,
                &[("If-Match", "\"abcdef\""), ("If-Unmodified-Since", &before)],
                Go,
            ),
            ("GET", &no_lm, &[("If-Unmodified-Since", &before)], Go),
            // Preconditions do not apply to a stored 404.
            ("GET", &not_found, &[("If-None-Match", "\"abcdef\"")], Go),
        ];
        for (method, stored, request, expected) in cases {
            let got =
                evaluate_conditionals(method.as_bytes(), &FieldList::from_pairs(request), stored);
            assert_eq!(got, *expected, "{method} {request:?}");
        }
    }
}
