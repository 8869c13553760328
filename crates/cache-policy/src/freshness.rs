//! Freshness lifetime (RFC 9111 §4.2.1) and heuristic freshness (§4.2.2).

use crate::cache_control::ResponseCacheControl;
use crate::config::HeuristicRule;
use crate::dates::Expires;
use crate::status::is_heuristically_cacheable;

/// How fresh a stored response is at some moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// Freshness lifetime in seconds (§4.2.1).
    pub lifetime: u64,
    /// Current age in seconds (§4.2.3).
    pub age: u64,
    /// `lifetime > age` (§4.2).
    pub fresh: bool,
    /// The lifetime came from a heuristic (§4.2.2), not from the origin.
    pub heuristic: bool,
}

impl Freshness {
    /// Builds the record; `fresh` follows from lifetime and age.
    pub fn new(lifetime: u64, age: u64, heuristic: bool) -> Self {
        Self {
            lifetime,
            age,
            fresh: lifetime > age,
            heuristic,
        }
    }

    /// Remaining freshness in seconds, negative once stale: the `ttl`
    /// parameter of `Cache-Status` (RFC 9211 §2.5).
    pub fn ttl(&self) -> i64 {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        clamp(self.lifetime) - clamp(self.age)
    }

    /// Seconds since the response became stale; 0 while fresh.
    pub fn staleness(&self) -> u64 {
        self.age.saturating_sub(self.lifetime)
    }
}

/// The explicit freshness lifetime, if the origin gave one (§4.2.1): for a
/// shared cache `s-maxage`, then `max-age`, then `Expires` − `Date`.
///
/// `date` is `None` when `Date` is absent or invalid; the receipt time then
/// stands in (RFC 9110 §6.6.1), which keeps a valid `Expires` usable. An
/// invalid `Expires` gives 0: it is in the past (§5.3). An `Expires` before
/// `Date` gives 0.
pub fn explicit_lifetime(
    cache_control: &ResponseCacheControl,
    date: Option<u64>,
    expires: Expires,
    response_time: u64,
    shared: bool,
) -> Option<u64> {
    if shared {
        if let Some(s_maxage) = cache_control.s_maxage() {
            return Some(u64::from(s_maxage));
        }
    }
    if let Some(max_age) = cache_control.max_age() {
        return Some(u64::from(max_age));
    }
    match expires {
        Expires::Absent => None,
        Expires::Invalid => Some(0),
        Expires::At(at) => Some(at.saturating_sub(date.unwrap_or(response_time))),
    }
}

/// Whether a heuristic lifetime may be assigned (§4.2.2): only without
/// explicit expiration, and only for heuristically cacheable status codes or
/// responses marked explicitly cacheable (`public`; `private` in a private
/// cache).
pub fn heuristic_allowed(status: u16, cache_control: &ResponseCacheControl, shared: bool) -> bool {
    is_heuristically_cacheable(status)
        || cache_control.public()
        || (!shared && cache_control.private())
}

/// The complete freshness lifetime of a response and whether it is heuristic.
///
/// The heuristic interval is `Date` (or receipt time) minus `Last-Modified`,
/// scaled and clamped by `rule` (10% capped at a day by default). A response
/// with neither explicit nor allowed heuristic freshness gets 0.
#[allow(clippy::too_many_arguments)]
pub fn freshness_lifetime(
    status: u16,
    cache_control: &ResponseCacheControl,
    date: Option<u64>,
    expires: Expires,
    last_modified: Option<u64>,
    response_time: u64,
    shared: bool,
    rule: HeuristicRule,
) -> (u64, bool) {
    if let Some(lifetime) = explicit_lifetime(cache_control, date, expires, response_time, shared) {
        return (lifetime, false);
    }
    if !heuristic_allowed(status, cache_control, shared) {
        return (0, false);
    }
    let reference = date.unwrap_or(response_time);
    let since_last_modified = last_modified.map(|lm| reference.saturating_sub(lm));
    (rule.lifetime(since_last_modified), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    fn cc(value: &str) -> ResponseCacheControl {
        ResponseCacheControl::parse(&FieldList::from_pairs(&[("Cache-Control", value)]))
    }

    const NOW: u64 = 1_700_000_000;

    #[test]
    fn explicit_lifetime_precedence() {
        // (cache-control, date, expires, shared, expected)
        type Case<'a> = (&'a str, Option<u64>, Expires, bool, Option<u64>);
        let cases: &[Case<'_>] = &[
            ("max-age=3600", Some(NOW), Expires::Absent, true, Some(3600)),
            (
                "max-age=3600",
                Some(NOW),
                Expires::At(NOW - 7200),
                true,
                Some(3600),
            ),
            (
                "max-age=3600",
                Some(NOW),
                Expires::Invalid,
                true,
                Some(3600),
            ),
            (
                "max-age=0",
                Some(NOW),
                Expires::At(NOW + 3600),
                true,
                Some(0),
            ),
            (
                "max-age=-1",
                Some(NOW),
                Expires::At(NOW + 3600),
                true,
                Some(0),
            ),
            (
                "s-maxage=3600, max-age=1",
                Some(NOW),
                Expires::Absent,
                true,
                Some(3600),
            ),
            (
                "s-maxage=1, max-age=3600",
                Some(NOW),
                Expires::Absent,
                true,
                Some(1),
            ),
            (
                "s-maxage=3600, max-age=1",
                Some(NOW),
                Expires::Absent,
                false,
                Some(1),
            ),
            (
                "max-age=0, s-maxage=3600",
                Some(NOW),
                Expires::At(NOW - 10),
                true,
                Some(3600),
            ),
            ("s-maxage=60", Some(NOW), Expires::Absent, false, None),
            (
                "",
                Some(NOW),
                Expires::At(NOW + 30 * 86_400),
                true,
                Some(30 * 86_400),
            ),
            ("", Some(NOW), Expires::At(NOW), true, Some(0)),
            ("", Some(NOW), Expires::At(NOW - 1), true, Some(0)),
            ("", Some(NOW + 400), Expires::At(NOW + 300), true, Some(0)),
            ("", Some(NOW), Expires::Invalid, true, Some(0)),
            ("", None, Expires::At(NOW + 10), true, Some(10)),
            ("", Some(NOW), Expires::Absent, true, None),
        ];
        for (value, date, expires, shared, expected) in cases {
            let got = explicit_lifetime(&cc(value), *date, *expires, NOW, *shared);
            assert_eq!(
                got, *expected,
                "{value:?} {date:?} {expires:?} shared={shared}"
            );
        }
    }

    #[test]
    fn heuristic_lifetime_rules() {
        let day = 86_400;
        let rule = HeuristicRule::default();
        // (status, cache-control, last-modified, expected (lifetime, heuristic))
        type Case<'a> = (u16, &'a str, Option<u64>, (u64, bool));
        let cases: &[Case<'_>] = &[
            (200, "", Some(NOW - day), (day / 10, true)),
            (404, "", Some(NOW - day), (day / 10, true)),
            (204, "", Some(NOW - 100), (10, true)),
            (200, "", None, (0, true)),
            (200, "", Some(NOW + 100), (0, true)),
            (200, "", Some(NOW - 100 * day), (day, true)),
            (201, "", Some(NOW - day), (0, false)),
            (502, "", Some(NOW - day), (0, false)),
            (599, "public", Some(NOW - day), (day / 10, true)),
            (599, "", Some(NOW - day), (0, false)),
            (200, "max-age=5", Some(NOW - day), (5, false)),
        ];
        for (status, value, lm, expected) in cases {
            let got = freshness_lifetime(
                *status,
                &cc(value),
                Some(NOW),
                Expires::Absent,
                *lm,
                NOW,
                true,
                rule,
            );
            assert_eq!(got, *expected, "{status} {value:?} {lm:?}");
        }
        // The explicit Expires blocks heuristics even when already expired.
        let got = freshness_lifetime(
            200,
            &cc(""),
            Some(NOW),
            Expires::At(NOW - 5000),
            Some(NOW - 100_000),
            NOW,
            true,
            rule,
        );
        assert_eq!(got, (0, false));
        // Without Date the receipt time is the reference.
        let got = freshness_lifetime(
            200,
            &cc(""),
            None,
            Expires::Absent,
            Some(NOW - 1000),
            NOW,
            true,
            rule,
        );
        assert_eq!(got, (100, true));
        // A private cache may use heuristics on `private` responses.
        assert!(heuristic_allowed(599, &cc("private"), false));
        assert!(!heuristic_allowed(599, &cc("private"), true));
    }

    #[test]
    fn freshness_record() {
        let f = Freshness::new(10, 3, false);
        assert!(f.fresh);
        assert_eq!((f.ttl(), f.staleness()), (7, 0));
        let f = Freshness::new(10, 10, true);
        assert!(!f.fresh);
        assert_eq!((f.ttl(), f.staleness()), (0, 0));
        let f = Freshness::new(2, 5, false);
        assert_eq!((f.ttl(), f.staleness()), (-3, 3));
        assert_eq!(Freshness::new(u64::MAX, 0, false).ttl(), i64::MAX);
    }
}
