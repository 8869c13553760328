//! `Cache-Control` parsing (RFC 9111 §5.2) into compact `Copy` structs.
//!
//! Parsing walks the field lines once, borrows every slice and allocates
//! nothing. Choices where the RFC leaves room (each one is pinned by a test):
//!
//! - Directive names are case-insensitive (§5.2); unknown extensions are
//!   ignored (§5.2.3).
//! - Arguments may be a token or a quoted string: §5.2 says recipients SHOULD
//!   accept both forms, so `max-age="3600"` means 3600.
//! - A directive repeated with a value: the first occurrence wins, one of the
//!   two options §4.2.1 offers ("either the first occurrence should be used or
//!   the response should be considered stale").
//! - An invalid `max-age` / `s-maxage` argument (not `1*DIGIT`, negative,
//!   decimal, single-quoted, missing) makes the response stale: it is recorded
//!   as 0, following §4.2.1's encouragement to consider responses with invalid
//!   freshness information stale.
//! - Values above 2^31 are capped at 2147483648 (§1.2.2).

use crate::fields::{list_members, quoted_inner, trim_ows, Fields};
use crate::structured::Value;
use sepia_http1::HeaderId;

/// Largest delta-seconds value a cache must handle; larger values, and any
/// overflow, are taken as this value (RFC 9111 §1.2.2).
pub const DELTA_SECONDS_CAP: u32 = 1 << 31;

/// Parses `delta-seconds = 1*DIGIT` (RFC 9111 §1.2.2), capping at
/// [`DELTA_SECONDS_CAP`]. Leading zeros are fine; anything else is `None`.
pub fn parse_delta_seconds(value: &[u8]) -> Option<u32> {
    if value.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        total = (total * 10 + u64::from(b - b'0')).min(u64::from(DELTA_SECONDS_CAP));
    }
    u32::try_from(total).ok()
}

/// The argument of one directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Argument<'a> {
    /// `name` alone.
    Absent,
    /// `name=token` (the bytes after `=`, whatever they are).
    Token(&'a [u8]),
    /// `name="..."`: the inside of the quoted string, escapes left in place.
    Quoted(&'a [u8]),
    /// A targeted field's Integer (RFC 9213 §2.1).
    Integer(i64),
}

impl<'a> Argument<'a> {
    /// The argument as delta-seconds, accepting both forms (RFC 9111 §5.2).
    fn delta_seconds(self) -> Option<u32> {
        match self {
            Argument::Token(t) => parse_delta_seconds(t),
            Argument::Quoted(q) => parse_delta_seconds(q),
            Argument::Integer(n) => u64::try_from(n)
                .ok()
                .map(|n| n.min(u64::from(DELTA_SECONDS_CAP)) as u32),
            Argument::Absent => None,
        }
    }
}

/// Splits one list member into directive name and argument.
fn split_directive(member: &[u8]) -> (&[u8], Argument<'_>) {
    match memchr::memchr(b'=', member) {
        None => (member, Argument::Absent),
        Some(eq) => {
            let name = &member[..eq];
            let raw = &member[eq + 1..];
            let argument = if raw.first() == Some(&b'"') {
                match quoted_inner(raw) {
                    Some(inner) => Argument::Quoted(inner),
                    // A broken quoted string is not a number or a field list.
                    None => Argument::Token(raw),
                }
            } else {
                Argument::Token(raw)
            };
            (name, argument)
        }
    }
}

/// Every directive of every `Cache-Control` line, in order.
fn directives<'a, F: Fields>(fields: &'a F) -> impl Iterator<Item = (&'a [u8], Argument<'a>)> + 'a {
    fields
        .known(HeaderId::CacheControl)
        .flat_map(list_members)
        .map(split_directive)
}

/// Field names listed by qualified `no-cache="..."` (§5.2.2.4) and, when
/// `include_private`, qualified `private="..."` (§5.2.2.7) directives.
pub(crate) fn qualified_field_names<'a, F: Fields>(
    response: &'a F,
    include_private: bool,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    directives(response)
        .filter_map(move |(name, argument)| {
            let relevant = name.eq_ignore_ascii_case(b"no-cache")
                || (include_private && name.eq_ignore_ascii_case(b"private"));
            match argument {
                Argument::Quoted(list) | Argument::Token(list) if relevant => Some(list),
                _ => None,
            }
        })
        .flat_map(list_members)
}

/// A tiny set of boolean directives.
macro_rules! flag_accessors {
    ($($(#[$doc:meta])* $method:ident => $flag:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $method(&self) -> bool {
                self.flags & Self::$flag != 0
            }
        )*
    };
}

/// Response `Cache-Control` directives (RFC 9111 §5.2.2, RFC 5861).
///
/// `Copy` and 20 bytes: [`crate::StoredMeta`] keeps one so the hit path never
/// re-parses headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseCacheControl {
    flags: u16,
    max_age: Option<u32>,
    s_maxage: Option<u32>,
    stale_while_revalidate: Option<u32>,
    stale_if_error: Option<u32>,
}

impl ResponseCacheControl {
    /// The directives as `crate::persist` keeps them: the flags, then each number (a
    /// presence bit in the top bit of a u32 would collide with real values, so an absent
    /// number is `u32::MAX` and a present one is capped below it).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.flags.to_le_bytes());
        for n in [
            self.max_age,
            self.s_maxage,
            self.stale_while_revalidate,
            self.stale_if_error,
        ] {
            let n = n.map_or(u32::MAX, |n| n.min(u32::MAX - 1));
            out.extend_from_slice(&n.to_le_bytes());
        }
        // Five u32 slots are reserved in the format; the fifth is unused (zero).
        out.extend_from_slice(&0u32.to_le_bytes());
    }

    /// What [`ResponseCacheControl::encode`] wrote.
    pub(crate) fn decode(r: &mut crate::persist::Reader<'_>) -> Option<Self> {
        let flags = r.u16()?;
        let mut number = || r.u32().map(|n| (n != u32::MAX).then_some(n));
        let cc = ResponseCacheControl {
            flags,
            max_age: number()?,
            s_maxage: number()?,
            stale_while_revalidate: number()?,
            stale_if_error: number()?,
        };
        r.u32()?;
        Some(cc)
    }

    const PUBLIC: u16 = 1 << 0;
    const PRIVATE: u16 = 1 << 1;
    const PRIVATE_FIELDS: u16 = 1 << 2;
    const NO_STORE: u16 = 1 << 3;
    const NO_CACHE: u16 = 1 << 4;
    const NO_CACHE_FIELDS: u16 = 1 << 5;
    const MUST_REVALIDATE: u16 = 1 << 6;
    const PROXY_REVALIDATE: u16 = 1 << 7;
    const NO_TRANSFORM: u16 = 1 << 8;
    const IMMUTABLE: u16 = 1 << 9;
    const MUST_UNDERSTAND: u16 = 1 << 10;
    const INVALID_MAX_AGE: u16 = 1 << 11;
    const INVALID_S_MAXAGE: u16 = 1 << 12;

    /// Parses every `Cache-Control` line of a response.
    pub fn parse<F: Fields>(response: &F) -> Self {
        let mut cc = Self::default();
        for (name, argument) in directives(response) {
            cc.apply(name, argument);
        }
        cc
    }

    /// The directives of a targeted field's Dictionary members (RFC 9213 §2.1; see
    /// `targeted.rs` for the mapping), each key once.
    pub(crate) fn from_targeted<'a>(
        members: impl IntoIterator<Item = (&'a [u8], Value<'a>)>,
    ) -> Self {
        let mut cc = Self::default();
        for (name, value) in members {
            let argument = match value {
                Value::Boolean(false) => continue,
                // A qualified no-cache or private is obeyed whole (the safe reading).
                Value::Boolean(true) | Value::String(_) => Argument::Absent,
                Value::Integer(n) => Argument::Integer(n),
                // Not delta-seconds: an invalid argument.
                Value::Token(_) | Value::Decimal(_) | Value::Binary(_) | Value::InnerList => {
                    Argument::Integer(-1)
                }
            };
            cc.apply(name, argument);
        }
        cc
    }

    fn apply(&mut self, name: &[u8], argument: Argument<'_>) {
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        if is("max-age") {
            if self.max_age.is_none() {
                self.max_age = Some(argument.delta_seconds().unwrap_or_else(|| {
                    self.flags |= Self::INVALID_MAX_AGE;
                    0
                }));
            }
        } else if is("s-maxage") {
            if self.s_maxage.is_none() {
                self.s_maxage = Some(argument.delta_seconds().unwrap_or_else(|| {
                    self.flags |= Self::INVALID_S_MAXAGE;
                    0
                }));
            }
        } else if is("no-cache") {
            // §5.2.2.4: the qualified form only restricts the listed fields.
            self.flags |= match argument {
                Argument::Absent => Self::NO_CACHE,
                _ => Self::NO_CACHE_FIELDS,
            };
        } else if is("private") {
            // §5.2.2.7: same distinction as no-cache.
            self.flags |= match argument {
                Argument::Absent => Self::PRIVATE,
                _ => Self::PRIVATE_FIELDS,
            };
        } else if is("no-store") {
            self.flags |= Self::NO_STORE;
        } else if is("public") {
            self.flags |= Self::PUBLIC;
        } else if is("must-revalidate") {
            self.flags |= Self::MUST_REVALIDATE;
        } else if is("proxy-revalidate") {
            self.flags |= Self::PROXY_REVALIDATE;
        } else if is("no-transform") {
            self.flags |= Self::NO_TRANSFORM;
        } else if is("immutable") {
            self.flags |= Self::IMMUTABLE;
        } else if is("must-understand") {
            self.flags |= Self::MUST_UNDERSTAND;
        } else if is("stale-while-revalidate") {
            // RFC 5861 extensions only ever relax: an invalid one is ignored.
            if self.stale_while_revalidate.is_none() {
                self.stale_while_revalidate = argument.delta_seconds();
            }
        } else if is("stale-if-error") && self.stale_if_error.is_none() {
            self.stale_if_error = argument.delta_seconds();
        }
    }

    flag_accessors! {
        /// `public` (§5.2.2.9).
        public => PUBLIC;
        /// Unqualified `private` (§5.2.2.7): a shared cache must not store.
        private => PRIVATE;
        /// `private="field, ..."`: a shared cache may store the response
        /// without the listed fields (§5.2.2.7).
        private_fields => PRIVATE_FIELDS;
        /// `no-store` (§5.2.2.5).
        no_store => NO_STORE;
        /// Unqualified `no-cache` (§5.2.2.4): revalidate on every use.
        no_cache => NO_CACHE;
        /// `no-cache="field, ..."`: the listed fields are not stored (see
        /// [`crate::StoredFieldFilter`]); the rest is reused normally.
        no_cache_fields => NO_CACHE_FIELDS;
        /// `must-revalidate` (§5.2.2.2).
        must_revalidate => MUST_REVALIDATE;
        /// `proxy-revalidate` (§5.2.2.8).
        proxy_revalidate => PROXY_REVALIDATE;
        /// `no-transform` (§5.2.2.6).
        no_transform => NO_TRANSFORM;
        /// `immutable` (RFC 8246).
        immutable => IMMUTABLE;
        /// `must-understand` (§5.2.2.3).
        must_understand => MUST_UNDERSTAND;
        /// The first `max-age` had an invalid argument (recorded as 0).
        invalid_max_age => INVALID_MAX_AGE;
        /// The first `s-maxage` had an invalid argument (recorded as 0).
        invalid_s_maxage => INVALID_S_MAXAGE;
    }

    /// `max-age` in seconds (§5.2.2.1); `Some(0)` when invalid.
    pub fn max_age(&self) -> Option<u32> {
        self.max_age
    }

    /// `s-maxage` in seconds (§5.2.2.10); `Some(0)` when invalid.
    pub fn s_maxage(&self) -> Option<u32> {
        self.s_maxage
    }

    /// `stale-while-revalidate` in seconds (RFC 5861 §3).
    pub fn stale_while_revalidate(&self) -> Option<u32> {
        self.stale_while_revalidate
    }

    /// `stale-if-error` in seconds (RFC 5861 §4).
    pub fn stale_if_error(&self) -> Option<u32> {
        self.stale_if_error
    }

    /// Whether a stale response must not be served without revalidation:
    /// `must-revalidate` (§5.2.2.2), or for a shared cache `proxy-revalidate`
    /// (§5.2.2.8) or `s-maxage`, which implies it (§5.2.2.10).
    pub fn forbids_stale(&self, shared: bool) -> bool {
        self.must_revalidate() || (shared && (self.proxy_revalidate() || self.s_maxage.is_some()))
    }

    /// Whether a field list qualifies `no-cache` or `private`.
    pub fn has_field_qualifiers(&self) -> bool {
        self.flags & (Self::NO_CACHE_FIELDS | Self::PRIVATE_FIELDS) != 0
    }
}

/// Request `Cache-Control` directives (RFC 9111 §5.2.1), with `Pragma:
/// no-cache` folded in when the request has no `Cache-Control` (§5.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCacheControl {
    flags: u8,
    max_age: Option<u32>,
    max_stale: Option<u32>,
    min_fresh: Option<u32>,
    stale_if_error: Option<u32>,
}

impl RequestCacheControl {
    const NO_CACHE: u8 = 1 << 0;
    const NO_STORE: u8 = 1 << 1;
    const ONLY_IF_CACHED: u8 = 1 << 2;
    const NO_TRANSFORM: u8 = 1 << 3;

    /// `max_stale` value meaning `max-stale` without an argument: any
    /// staleness is acceptable (§5.2.1.2). Real arguments are capped at
    /// [`DELTA_SECONDS_CAP`], so this value cannot be confused with one.
    pub const MAX_STALE_ANY: u32 = u32::MAX;

    /// Parses a request's `Cache-Control` lines, or `Pragma` if there are none.
    pub fn parse<F: Fields>(request: &F) -> Self {
        let mut cc = Self::default();
        let mut has_cache_control = false;
        for (name, argument) in directives(request) {
            has_cache_control = true;
            cc.apply(name, argument);
        }
        // §5.4: Pragma is only looked at when Cache-Control is absent.
        if !has_cache_control && !request.contains(HeaderId::CacheControl) {
            let pragma_no_cache = request
                .known(HeaderId::Pragma)
                .flat_map(list_members)
                .any(|m| trim_ows(m).eq_ignore_ascii_case(b"no-cache"));
            if pragma_no_cache {
                cc.flags |= Self::NO_CACHE;
            }
        }
        cc
    }

    fn apply(&mut self, name: &[u8], argument: Argument<'_>) {
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        if is("max-age") {
            // An unusable limit is taken as the strictest one: revalidate.
            if self.max_age.is_none() {
                self.max_age = Some(argument.delta_seconds().unwrap_or(0));
            }
        } else if is("max-stale") {
            // §5.2.1.2: no argument means any staleness; a broken argument
            // grants nothing rather than everything.
            if self.max_stale.is_none() {
                self.max_stale = match argument {
                    Argument::Absent => Some(Self::MAX_STALE_ANY),
                    _ => Some(argument.delta_seconds().unwrap_or(0)),
                };
            }
        } else if is("min-fresh") {
            if self.min_fresh.is_none() {
                self.min_fresh = argument.delta_seconds();
            }
        } else if is("no-cache") {
            self.flags |= Self::NO_CACHE;
        } else if is("no-store") {
            self.flags |= Self::NO_STORE;
        } else if is("only-if-cached") {
            self.flags |= Self::ONLY_IF_CACHED;
        } else if is("no-transform") {
            self.flags |= Self::NO_TRANSFORM;
        } else if is("stale-if-error") && self.stale_if_error.is_none() {
            self.stale_if_error = argument.delta_seconds();
        }
    }

    flag_accessors! {
        /// `no-cache` (§5.2.1.4) or `Pragma: no-cache` (§5.4).
        no_cache => NO_CACHE;
        /// `no-store` (§5.2.1.5): do not store the response to this request.
        no_store => NO_STORE;
        /// `only-if-cached` (§5.2.1.7): answer from cache or with 504.
        only_if_cached => ONLY_IF_CACHED;
        /// `no-transform` (§5.2.1.6).
        no_transform => NO_TRANSFORM;
    }

    /// `max-age` (§5.2.1.1); an invalid argument reads as 0.
    pub fn max_age(&self) -> Option<u32> {
        self.max_age
    }

    /// `max-stale` (§5.2.1.2); [`Self::MAX_STALE_ANY`] when unbounded.
    pub fn max_stale(&self) -> Option<u32> {
        self.max_stale
    }

    /// `min-fresh` (§5.2.1.3).
    pub fn min_fresh(&self) -> Option<u32> {
        self.min_fresh
    }

    /// `stale-if-error` sent by the client (RFC 5861 §4).
    pub fn stale_if_error(&self) -> Option<u32> {
        self.stale_if_error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    fn response(lines: &[&str]) -> ResponseCacheControl {
        let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("Cache-Control", *l)).collect();
        ResponseCacheControl::parse(&FieldList::from_pairs(&pairs))
    }

    #[test]
    fn delta_seconds_syntax_and_cap() {
        let cases: &[(&str, Option<u32>)] = &[
            ("0", Some(0)),
            ("3600", Some(3600)),
            ("003600", Some(3600)),
            ("2147483647", Some(2_147_483_647)),
            ("2147483648", Some(DELTA_SECONDS_CAP)),
            ("2147483649", Some(DELTA_SECONDS_CAP)),
            ("99999999999", Some(DELTA_SECONDS_CAP)),
            ("999999999999999999999999999", Some(DELTA_SECONDS_CAP)),
            ("", None),
            ("-3600", None),
            ("3600.0", None),
            ("3600a", None),
            ("a3600", None),
            (" 3600", None),
            ("'3600'", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                parse_delta_seconds(value.as_bytes()),
                *expected,
                "{value:?}"
            );
        }
    }

    #[test]
    fn response_max_age_forms() {
        // (lines, max_age, invalid flag)
        let cases: &[(&[&str], Option<u32>, bool)] = &[
            (&["max-age=3600"], Some(3600), false),
            (&["MaX-aGe=3600"], Some(3600), false),
            (&["foobar, max-age=3600"], Some(3600), false),
            (&["max-age=\"3600\""], Some(3600), false),
            (&["max-age='3600'"], Some(0), true),
            (&["max-age=-3600"], Some(0), true),
            (&["max-age=3600.5"], Some(0), true),
            (&["max-age"], Some(0), true),
            (&["max-age= 3600"], Some(0), true),
            // "max-age " is not the max-age directive at all.
            (&["max-age =3600"], None, false),
            (&["extension=\"max-age=3600\", max-age=1"], Some(1), false),
            (&["max-age=1, extension=\"max-age=3600\""], Some(1), false),
            (
                &["extension=\"max-age=3600\", max-age=\"1\""],
                Some(1),
                false,
            ),
            (&["max-age=3600, max-age=1800"], Some(3600), false),
            (&["max-age=1", "max-age=1800"], Some(1), false),
            (&["max-age=abc, max-age=60"], Some(0), true),
            (&["max-age=99999999999"], Some(DELTA_SECONDS_CAP), false),
            (&["no-store"], None, false),
        ];
        for (lines, max_age, invalid) in cases {
            let cc = response(lines);
            assert_eq!(cc.max_age(), *max_age, "{lines:?}");
            assert_eq!(cc.invalid_max_age(), *invalid, "{lines:?}");
        }
    }

    #[test]
    fn response_flags() {
        type Check = fn(&ResponseCacheControl) -> bool;
        let cases: &[(&str, Check)] = &[
            ("public", ResponseCacheControl::public),
            ("Private", ResponseCacheControl::private),
            (
                "private=\"set-cookie\"",
                ResponseCacheControl::private_fields,
            ),
            ("No-StOrE", ResponseCacheControl::no_store),
            ("no-cache", ResponseCacheControl::no_cache),
            ("no-cache=\"a, b\"", ResponseCacheControl::no_cache_fields),
            ("must-revalidate", ResponseCacheControl::must_revalidate),
            ("proxy-revalidate", ResponseCacheControl::proxy_revalidate),
            ("no-transform", ResponseCacheControl::no_transform),
            ("immutable", ResponseCacheControl::immutable),
            ("must-understand", ResponseCacheControl::must_understand),
        ];
        for (line, check) in cases {
            assert!(check(&response(&[line])), "{line} should set its flag");
            assert!(
                !check(&response(&["max-age=1"])),
                "{line} must not be set by max-age"
            );
        }
        // Qualified forms do not set the unqualified flag.
        assert!(!response(&["no-cache=\"a\""]).no_cache());
        assert!(!response(&["private=\"a\""]).private());
        assert!(response(&["no-cache=\"a\""]).has_field_qualifiers());
        assert!(!response(&["no-cache"]).has_field_qualifiers());
    }

    #[test]
    fn response_extension_values() {
        let cc = response(&[
            "max-age=2, stale-while-revalidate=30",
            "stale-if-error=\"60\"",
        ]);
        assert_eq!(cc.stale_while_revalidate(), Some(30));
        assert_eq!(cc.stale_if_error(), Some(60));
        let cc = response(&["stale-while-revalidate=x, s-maxage=5, s-maxage=9"]);
        assert_eq!(cc.stale_while_revalidate(), None);
        assert_eq!(cc.s_maxage(), Some(5));
        assert!(response(&["s-maxage=x"]).invalid_s_maxage());
    }

    #[test]
    fn forbids_stale_rules() {
        let cases: &[(&str, bool, bool)] = &[
            ("must-revalidate", true, true),
            ("must-revalidate", false, true),
            ("proxy-revalidate", true, true),
            ("proxy-revalidate", false, false),
            ("s-maxage=2", true, true),
            ("s-maxage=2", false, false),
            ("max-age=2", true, false),
        ];
        for (line, shared, expected) in cases {
            assert_eq!(
                response(&[line]).forbids_stale(*shared),
                *expected,
                "{line} shared={shared}"
            );
        }
    }

    #[test]
    fn request_directives() {
        let parse =
            |pairs: &[(&str, &str)]| RequestCacheControl::parse(&FieldList::from_pairs(pairs));
        let cc = parse(&[("Cache-Control", "max-age=0, max-stale, min-fresh=10")]);
        assert_eq!(cc.max_age(), Some(0));
        assert_eq!(cc.max_stale(), Some(RequestCacheControl::MAX_STALE_ANY));
        assert_eq!(cc.min_fresh(), Some(10));
        let cc = parse(&[(
            "cache-control",
            "max-stale=1000, only-if-cached, no-store, stale-if-error=5",
        )]);
        assert_eq!(cc.max_stale(), Some(1000));
        assert!(cc.only_if_cached() && cc.no_store() && !cc.no_cache());
        assert_eq!(cc.stale_if_error(), Some(5));
        assert_eq!(parse(&[("Cache-Control", "max-age=x")]).max_age(), Some(0));
        assert_eq!(
            parse(&[("Cache-Control", "max-stale=x")]).max_stale(),
            Some(0)
        );
        assert!(parse(&[("Cache-Control", "NO-CACHE")]).no_cache());
        assert!(parse(&[("Cache-Control", "no-transform")]).no_transform());
        // Pragma: no-cache counts only without Cache-Control (§5.4).
        assert!(parse(&[("Pragma", "no-cache")]).no_cache());
        assert!(parse(&[("Pragma", "foo, No-Cache")]).no_cache());
        assert!(!parse(&[("Pragma", "foo")]).no_cache());
        assert!(!parse(&[
            ("Pragma", "no-cache"),
            ("Cache-Control", "nothing-to-see-here")
        ])
        .no_cache());
        assert!(!parse(&[("Pragma", "no-cache"), ("Cache-Control", "")]).no_cache());
        assert_eq!(parse(&[]), RequestCacheControl::default());
    }
}
