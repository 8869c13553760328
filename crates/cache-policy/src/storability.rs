//! Whether a response may be stored (RFC 9111 §3).
//!
//! Scope decisions:
//! - Only responses to `GET` are stored as responses. A `HEAD` response has no
//!   content so it is never stored; it may freshen a stored `GET` response
//!   (RFC 9111 §4.3.5, see [`crate::freshen_headers`]), and a `HEAD` request
//!   can be answered from a stored `GET` response.
//! - A `POST` response is storable for later `GET`s of the same URI only when
//!   it has explicit freshness and `Content-Location` equal to the target URI
//!   (RFC 9110 §9.3.3): see [`storable_post_response`].
//! - `206` and `304` responses are not stored as complete responses: partial
//!   content is not combined (RFC 9111 §3.3 is optional) and a 304 only
//!   freshens (§4.3.4). A `200` that carries a `Content-Range` field is
//!   an ordinary complete response.
//! - `Vary: *` is not stored: it can never be selected (§4.1).

use crate::cache_control::{RequestCacheControl, ResponseCacheControl};
use crate::config::PolicyConfig;
use crate::dates::Expires;
use crate::fields::Fields;
use crate::status::{is_final, is_heuristically_cacheable, is_understood};
use crate::stored::StoredMeta;
use crate::targeted::governing;
use crate::uri::resolve_reference_key;
use crate::vary::Vary;
use sepia_http1::HeaderId;

/// The storability verdict, with the reason when negative so logs, the
/// `Cache-Status` `detail` and tests can tell why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storability {
    /// The response may be stored.
    Storable,
    /// The response must not be stored, for this reason.
    NotStorable(NotStorableReason),
}

impl Storability {
    /// Whether the verdict is [`Storability::Storable`].
    pub fn is_storable(self) -> bool {
        self == Storability::Storable
    }
}

/// Why a response is not storable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStorableReason {
    /// The request method's responses are not stored (only `GET`, §3).
    Method,
    /// 1xx interim response (§3).
    NonFinalStatus,
    /// 206: partial content is not stored (§3.3 is optional).
    PartialContent,
    /// 304: only freshens a stored response (§4.3.4).
    NotModified,
    /// `no-store` in the request (§5.2.1.5).
    RequestNoStore,
    /// `must-understand` with a status code this cache does not implement
    /// (§5.2.2.3).
    StatusNotUnderstood,
    /// `no-store` in the response (§5.2.2.5).
    ResponseNoStore,
    /// `private` in a shared cache (§5.2.2.7).
    Private,
    /// Request had `Authorization`; the response lacks `public`, `s-maxage`
    /// and `must-revalidate` (§3.5).
    Authorization,
    /// `Vary: *` (§4.1).
    VaryStar,
    /// No explicit freshness, not `public`, and a status that is not
    /// heuristically cacheable (§3).
    NoFreshnessInformation,
    /// `POST` response whose `Content-Location` is not the target URI
    /// (RFC 9110 §9.3.3).
    ContentLocationMismatch,
}

impl NotStorableReason {
    /// A short stable token for logs and `Cache-Status` `detail`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotStorableReason::Method => "method",
            NotStorableReason::NonFinalStatus => "non-final-status",
            NotStorableReason::PartialContent => "partial-content",
            NotStorableReason::NotModified => "not-modified",
            NotStorableReason::RequestNoStore => "request-no-store",
            NotStorableReason::StatusNotUnderstood => "status-not-understood",
            NotStorableReason::ResponseNoStore => "no-store",
            NotStorableReason::Private => "private",
            NotStorableReason::Authorization => "authorization",
            NotStorableReason::VaryStar => "vary-star",
            NotStorableReason::NoFreshnessInformation => "no-freshness-information",
            NotStorableReason::ContentLocationMismatch => "content-location-mismatch",
        }
    }
}

/// Decides whether the response to a request may be stored (RFC 9111 §3).
///
/// `method` is the request method as received (methods are case-sensitive,
/// RFC 9110 §9.1).
pub fn is_storable<Q: Fields, P: Fields>(
    method: &[u8],
    request: &Q,
    status: u16,
    response: &P,
    config: &PolicyConfig,
) -> Storability {
    if method != b"GET" {
        return Storability::NotStorable(NotStorableReason::Method);
    }
    ResponseFacts::read(request, status, response, config).verdict(config, false)
}

/// [`is_storable`] for a response whose [`StoredMeta`] is built already (a cache builds it
/// for every response it may store, from the same fields): the same verdict, without parsing
/// the response's `Cache-Control`, `Expires` and `Vary` a second time.
pub fn is_storable_stored<Q: Fields>(
    method: &[u8],
    request: &Q,
    meta: &StoredMeta,
    config: &PolicyConfig,
) -> Storability {
    if method != b"GET" {
        return Storability::NotStorable(NotStorableReason::Method);
    }
    ResponseFacts::of_stored(request, meta, meta.status).verdict(config, false)
}

/// Decides whether a `206` may be kept as a piece of its representation (RFC 9111 §3.3: "a 206
/// (Partial Content) response MAY be stored as if it were an incomplete 200 (OK) response"):
/// every rule of [`is_storable_stored`] but the one that refuses partial content. The caller
/// checks that the 206 has one `Content-Range` with a known complete length and content of
/// exactly that range's length.
pub fn is_storable_piece<Q: Fields>(
    method: &[u8],
    request: &Q,
    meta: &StoredMeta,
    config: &PolicyConfig,
) -> Storability {
    if method != b"GET" || meta.status != 206 {
        return Storability::NotStorable(NotStorableReason::Method);
    }
    // Judged as the incomplete 200 it stands for.
    ResponseFacts::of_stored(request, meta, 200).verdict(config, false)
}

/// Decides whether a `POST` response may be stored and reused for later
/// `GET` requests of `request_key` (RFC 9110 §9.3.3): it needs explicit
/// freshness and a `Content-Location` that resolves to the target URI
/// (`request_key`, from [`crate::primary_key`]), plus every rule of
/// [`is_storable`] other than the method.
pub fn storable_post_response<Q: Fields, P: Fields>(
    request: &Q,
    status: u16,
    response: &P,
    request_key: &[u8],
    config: &PolicyConfig,
) -> Storability {
    let mut resolved = Vec::new();
    let same_uri = response
        .first(HeaderId::ContentLocation)
        .is_some_and(|location| {
            resolve_reference_key(request_key, location, &mut resolved) && resolved == request_key
        });
    if !same_uri {
        return Storability::NotStorable(NotStorableReason::ContentLocationMismatch);
    }
    ResponseFacts::read(request, status, response, config).verdict(config, true)
}

/// The few facts storability depends on, read once.
struct ResponseFacts {
    request_cc: RequestCacheControl,
    has_authorization: bool,
    status: u16,
    response_cc: ResponseCacheControl,
    expires: Expires,
    vary_star: bool,
}

impl ResponseFacts {
    /// The facts of a response whose metadata is built, judged as having `status`.
    fn of_stored<Q: Fields>(request: &Q, meta: &StoredMeta, status: u16) -> Self {
        Self {
            request_cc: RequestCacheControl::parse(request),
            has_authorization: request.contains(HeaderId::Authorization),
            status,
            response_cc: meta.cache_control,
            expires: meta.expires,
            vary_star: meta.vary == Vary::Star,
        }
    }

    fn read<Q: Fields, P: Fields>(
        request: &Q,
        status: u16,
        response: &P,
        config: &PolicyConfig,
    ) -> Self {
        let governing = governing(response, config.targets());
        Self {
            request_cc: RequestCacheControl::parse(request),
            has_authorization: request.contains(HeaderId::Authorization),
            status,
            response_cc: governing.cache_control,
            expires: governing.expires,
            vary_star: Vary::parse(response) == Vary::Star,
        }
    }

    fn verdict(&self, config: &PolicyConfig, require_explicit_freshness: bool) -> Storability {
        use NotStorableReason as Why;
        let cc = &self.response_cc;
        let shared = config.shared();
        let not = Storability::NotStorable;
        if !is_final(self.status) {
            return not(Why::NonFinalStatus);
        }
        if self.status == 206 {
            return not(Why::PartialContent);
        }
        if self.status == 304 {
            return not(Why::NotModified);
        }
        if self.request_cc.no_store() {
            return not(Why::RequestNoStore);
        }
        if cc.must_understand() {
            // §5.2.2.3: a cache that understands the status ignores no-store.
            if !is_understood(self.status) {
                return not(Why::StatusNotUnderstood);
            }
        } else if cc.no_store() {
            return not(Why::ResponseNoStore);
        }
        if shared && cc.private() {
            return not(Why::Private);
        }
        if shared
            && self.has_authorization
            && !(cc.public() || cc.s_maxage().is_some() || cc.must_revalidate())
        {
            return not(Why::Authorization);
        }
        if self.vary_star {
            return not(Why::VaryStar);
        }
        let explicit = self.expires.is_present()
            || cc.max_age().is_some()
            || (shared && cc.s_maxage().is_some());
        let allowed = if require_explicit_freshness {
            explicit
        } else {
            explicit
                || cc.public()
                || (!shared && cc.private())
                || is_heuristically_cacheable(self.status)
        };
        if !allowed {
            return not(Why::NoFreshnessInformation);
        }
        Storability::Storable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;
    use NotStorableReason as Why;

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    /// The verdict of `is_storable`, checked against `is_storable_stored` on the same response.
    fn verdict(method: &str, request: Pairs, status: u16, response: Pairs) -> Storability {
        let config = PolicyConfig::default();
        let (request, response) = (
            FieldList::from_pairs(request),
            FieldList::from_pairs(response),
        );
        let verdict = is_storable(method.as_bytes(), &request, status, &response, &config);
        let meta = StoredMeta::from_response(status, &response, 0, 0, b"http://a/", &config);
        assert_eq!(
            is_storable_stored(method.as_bytes(), &request, &meta, &config),
            verdict,
            "{method} {status} {response:?}"
        );
        verdict
    }

    #[test]
    fn storability_table() {
        let ok = Storability::Storable;
        let not = Storability::NotStorable;
        let fresh: Pairs = &[("Cache-Control", "max-age=3600")];
        let cases: &[(&str, Pairs, u16, Pairs, Storability)] = &[
            ("GET", &[], 200, fresh, ok),
            ("GET", &[], 200, &[], ok),
            ("HEAD", &[], 200, fresh, not(Why::Method)),
            ("POST", &[], 200, fresh, not(Why::Method)),
            ("get", &[], 200, fresh, not(Why::Method)),
            ("GET", &[], 103, fresh, not(Why::NonFinalStatus)),
            ("GET", &[], 206, fresh, not(Why::PartialContent)),
            ("GET", &[], 304, fresh, not(Why::NotModified)),
            (
                "GET",
                &[],
                200,
                &[
                    ("Cache-Control", "max-age=1"),
                    ("Content-Range", "bytes 0-1/2"),
                ],
                ok,
            ),
            (
                "GET",
                &[("Cache-Control", "no-store")],
                200,
                fresh,
                not(Why::RequestNoStore),
            ),
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "max-age=10000, no-store")],
                not(Why::ResponseNoStore),
            ),
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "No-StOrE")],
                not(Why::ResponseNoStore),
            ),
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "private, max-age=3600")],
                not(Why::Private),
            ),
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "private=\"x\", max-age=3600")],
                ok,
            ),
            ("GET", &[], 200, &[("Cache-Control", "no-cache")], ok),
            // Authorization (§3.5).
            (
                "GET",
                &[("Authorization", "FOO")],
                200,
                &[("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")],
                not(Why::Authorization),
            ),
            (
                "GET",
                &[("Authorization", "FOO")],
                200,
                &[("Cache-Control", "max-age=3600, public")],
                ok,
            ),
            (
                "GET",
                &[("Authorization", "FOO")],
                200,
                &[("Cache-Control", "max-age=3600, must-revalidate")],
                ok,
            ),
            (
                "GET",
                &[("Authorization", "FOO")],
                200,
                &[("Cache-Control", "s-maxage=3600")],
                ok,
            ),
            (
                "GET",
                &[("Authorization", "FOO")],
                200,
                &[("Cache-Control", "max-age=3600, proxy-revalidate")],
                not(Why::Authorization),
            ),
            // Vary: * never matches.
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "max-age=1"), ("Vary", "Foo, *")],
                not(Why::VaryStar),
            ),
            // Freshness information or heuristic status.
            (
                "GET",
                &[],
                201,
                &[("Last-Modified", "Thu, 01 Jan 2015 00:00:00 GMT")],
                not(Why::NoFreshnessInformation),
            ),
            ("GET", &[], 403, &[], not(Why::NoFreshnessInformation)),
            ("GET", &[], 502, &[], not(Why::NoFreshnessInformation)),
            ("GET", &[], 599, &[], not(Why::NoFreshnessInformation)),
            ("GET", &[], 599, &[("Cache-Control", "public")], ok),
            ("GET", &[], 599, &[("Expires", "0")], ok),
            (
                "GET",
                &[],
                500,
                &[("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")],
                ok,
            ),
            ("GET", &[], 302, &[("Cache-Control", "s-maxage=5")], ok),
            ("GET", &[], 404, &[], ok),
            ("GET", &[], 204, &[], ok),
            ("GET", &[], 501, &[], ok),
            // must-understand.
            (
                "GET",
                &[],
                599,
                &[("Cache-Control", "max-age=3600, must-understand")],
                not(Why::StatusNotUnderstood),
            ),
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "max-age=3600, must-understand, no-store")],
                ok,
            ),
        ];
        for (method, request, status, response, expected) in cases {
            assert_eq!(
                verdict(method, request, *status, response),
                *expected,
                "{method} {request:?} {status} {response:?}"
            );
        }
    }

    #[test]
    fn private_cache_rules() {
        let config = PolicyConfig::builder().shared(false).build().unwrap();
        let check = |request: Pairs, response: Pairs| {
            is_storable(
                b"GET",
                &FieldList::from_pairs(request),
                599,
                &FieldList::from_pairs(response),
                &config,
            )
        };
        assert!(check(&[], &[("Cache-Control", "private")]).is_storable());
        assert!(check(&[("Authorization", "x")], &[("Cache-Control", "max-age=5")]).is_storable());
        assert!(!check(&[], &[("Cache-Control", "s-maxage=5")]).is_storable());
    }

    #[test]
    fn post_responses_need_content_location_and_explicit_freshness() {
        let config = PolicyConfig::default();
        let key = b"http://h/test/1";
        let cases: &[(Pairs, Storability)] = &[
            (
                &[
                    ("Content-Location", "http://h/test/1"),
                    ("Expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
                ],
                Storability::Storable,
            ),
            (
                &[
                    ("Content-Location", "/test/1"),
                    ("Cache-Control", "max-age=60"),
                ],
                Storability::Storable,
            ),
            (
                &[("Content-Location", "1"), ("Cache-Control", "max-age=60")],
                Storability::Storable,
            ),
            (
                &[("Content-Location", "/test/1")],
                Storability::NotStorable(Why::NoFreshnessInformation),
            ),
            (
                &[
                    ("Content-Location", "/test/2"),
                    ("Cache-Control", "max-age=60"),
                ],
                Storability::NotStorable(Why::ContentLocationMismatch),
            ),
            (
                &[("Cache-Control", "max-age=60")],
                Storability::NotStorable(Why::ContentLocationMismatch),
            ),
            (
                &[
                    ("Content-Location", "/test/1"),
                    ("Cache-Control", "max-age=60, no-store"),
                ],
                Storability::NotStorable(Why::ResponseNoStore),
            ),
        ];
        for (response, expected) in cases {
            let got = storable_post_response(
                &FieldList::new(),
                200,
                &FieldList::from_pairs(response),
                key,
                &config,
            );
            assert_eq!(got, *expected, "{response:?}");
        }
    }

    #[test]
    fn a_206_is_judged_as_the_incomplete_200_it_stands_for() {
        let ok = Storability::Storable;
        let not = Storability::NotStorable;
        let config = PolicyConfig::default();
        let piece: Pairs = &[("Content-Range", "bytes 0-4/10"), ("ETag", "\"p\"")];
        let cases: &[(&str, Pairs, u16, Pairs, Storability)] = &[
            ("GET", &[], 206, &[("Cache-Control", "max-age=60")], ok),
            // Heuristically cacheable, like a 200 (RFC 9110 §15.1).
            ("GET", &[], 206, &[], ok),
            (
                "GET",
                &[],
                206,
                &[("Cache-Control", "no-store")],
                not(Why::ResponseNoStore),
            ),
            (
                "GET",
                &[],
                206,
                &[("Cache-Control", "private")],
                not(Why::Private),
            ),
            (
                "GET",
                &[("Cache-Control", "no-store")],
                206,
                &[],
                not(Why::RequestNoStore),
            ),
            (
                "GET",
                &[("Authorization", "x")],
                206,
                &[],
                not(Why::Authorization),
            ),
            ("GET", &[], 206, &[("Vary", "*")], not(Why::VaryStar)),
            ("HEAD", &[], 206, &[], not(Why::Method)),
            // Not a piece at all.
            (
                "GET",
                &[],
                200,
                &[("Cache-Control", "max-age=60")],
                not(Why::Method),
            ),
        ];
        for (method, request, status, response, expected) in cases {
            let mut fields: Vec<(&str, &str)> = piece.to_vec();
            fields.extend_from_slice(response);
            let response = FieldList::from_pairs(&fields);
            let meta = StoredMeta::from_response(*status, &response, 0, 0, b"http://a/", &config);
            let request = FieldList::from_pairs(request);
            let got = is_storable_piece(method.as_bytes(), &request, &meta, &config);
            assert_eq!(got, *expected, "{method} {status} {fields:?}");
        }
    }

    #[test]
    fn reasons_have_distinct_tokens() {
        let all = [
            Why::Method,
            Why::NonFinalStatus,
            Why::PartialContent,
            Why::NotModified,
            Why::RequestNoStore,
            Why::StatusNotUnderstood,
            Why::ResponseNoStore,
            Why::Private,
            Why::Authorization,
            Why::VaryStar,
            Why::NoFreshnessInformation,
            Why::ContentLocationMismatch,
        ];
        let mut tokens: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), all.len());
    }
}
