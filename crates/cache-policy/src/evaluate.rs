//! Whether a stored response may serve a request (RFC 9111 §4, §4.2.4,
//! §5.2.1; RFC 5861).

use crate::cache_control::RequestCacheControl;
use crate::config::PolicyConfig;
use crate::freshness::Freshness;
use crate::stored::StoredMeta;

/// What to do with a stored response that matched the request's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Fresh and acceptable to the client: serve it (a hit).
    Fresh(Freshness),
    /// Stale, and the client's `max-stale` accepts that (§5.2.1.2): serve it
    /// as is; no revalidation is needed.
    StaleAllowed(Freshness),
    /// Stale within `stale-while-revalidate` (RFC 5861 §3): serve it now and
    /// revalidate in the background.
    StaleWhileRevalidate(Freshness),
    /// Must not be served without asking the origin: send a conditional
    /// request when the response has validators ([`crate::validators`]),
    /// else a plain one (§4.3.1).
    Revalidate {
        /// Why the stored response cannot be used directly.
        reason: RevalidateReason,
        /// Freshness at decision time.
        freshness: Freshness,
    },
    /// The client sent `only-if-cached` and the stored response is not
    /// usable without the origin: answer 504 (§5.2.1.7).
    GatewayTimeout,
}

impl Decision {
    /// Whether the stored response is served without waiting for the origin.
    pub fn serves_stored(&self) -> bool {
        matches!(
            self,
            Decision::Fresh(_) | Decision::StaleAllowed(_) | Decision::StaleWhileRevalidate(_)
        )
    }
}

/// Why a stored response needs the origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevalidateReason {
    /// Stale, and nothing allows serving it stale (§4.2.4).
    Stale,
    /// Stale, and `must-revalidate`, `proxy-revalidate` or `s-maxage`
    /// forbids serving it stale even though the client would accept it
    /// (§5.2.2.2, §5.2.2.8, §5.2.2.10).
    MustRevalidate,
    /// Unqualified `no-cache` in the stored response (§5.2.2.4).
    ResponseNoCache,
    /// `no-cache` (or `Pragma: no-cache`) in the request (§5.2.1.4, §5.4):
    /// `fwd=request` in `Cache-Status`.
    RequestNoCache,
    /// Older than the request's `max-age` (§5.2.1.1).
    RequestMaxAge,
    /// Not fresh enough for the request's `min-fresh` (§5.2.1.3).
    RequestMinFresh,
}

/// Decides how a stored response may serve a request at `now` (§4).
///
/// The stored response must already have matched the primary and secondary
/// keys. Checks, in order: `no-cache` on either side, the request's
/// `max-age`, freshness with `min-fresh`, then for a stale response
/// `must-revalidate` & co., `max-stale`, `stale-while-revalidate`. When the
/// result would need the origin and the request has `only-if-cached`, the
/// decision is [`Decision::GatewayTimeout`].
pub fn evaluate(
    stored: &StoredMeta,
    request: &RequestCacheControl,
    now: u64,
    config: &PolicyConfig,
) -> Decision {
    let freshness = stored.freshness(now);
    let cc = &stored.cache_control;
    let revalidate = |reason| Decision::Revalidate { reason, freshness };
    let decision = if cc.no_cache() {
        revalidate(RevalidateReason::ResponseNoCache)
    } else if request.no_cache() {
        revalidate(RevalidateReason::RequestNoCache)
    } else if request
        .max_age()
        .is_some_and(|max_age| freshness.age > u64::from(max_age))
    {
        revalidate(RevalidateReason::RequestMaxAge)
    } else if freshness.fresh {
        let min_fresh = request.min_fresh().map_or(0, u64::from);
        if freshness.lifetime - freshness.age < min_fresh {
            revalidate(RevalidateReason::RequestMinFresh)
        } else {
            Decision::Fresh(freshness)
        }
    } else {
        let staleness = freshness.staleness();
        let client_accepts = request.max_stale().is_some_and(|max_stale| {
            max_stale == RequestCacheControl::MAX_STALE_ANY || staleness <= u64::from(max_stale)
        });
        let within_swr = cc
            .stale_while_revalidate()
            .is_some_and(|swr| staleness <= u64::from(swr));
        if cc.forbids_stale(config.shared()) {
            let reason = if client_accepts || within_swr {
                RevalidateReason::MustRevalidate
            } else {
                RevalidateReason::Stale
            };
            revalidate(reason)
        } else if client_accepts {
            Decision::StaleAllowed(freshness)
        } else if within_swr {
            Decision::StaleWhileRevalidate(freshness)
        } else {
            revalidate(RevalidateReason::Stale)
        }
    };
    if request.only_if_cached() && matches!(decision, Decision::Revalidate { .. }) {
        Decision::GatewayTimeout
    } else {
        decision
    }
}

/// Whether the stored response may be served because the origin failed
/// (connection error, timeout, or a 500/502/503/504, see
/// [`is_error_status`]) while the cache tried to revalidate or refetch it.
///
/// Serving on error is allowed for a fresh response, or within the longest
/// of the response's `stale-if-error`, the request's `stale-if-error`
/// (RFC 5861 §4), the request's `max-stale` (§5.2.1.2) and the configured
/// default ([`PolicyConfig::stale_if_error_default`], 0 by default, see
/// NOTES.md on `stale-close`). Never for `no-cache` or when `must-revalidate`
/// & co. forbid stale use (§4.2.4: "MUST NOT generate a stale response if it
/// is prohibited by an explicit in-protocol directive").
pub fn usable_on_error(
    stored: &StoredMeta,
    request: &RequestCacheControl,
    now: u64,
    config: &PolicyConfig,
) -> bool {
    let cc = &stored.cache_control;
    if cc.no_cache() {
        return false;
    }
    let freshness = stored.freshness(now);
    if freshness.fresh {
        return true;
    }
    if cc.forbids_stale(config.shared()) {
        return false;
    }
    let allowance = [
        cc.stale_if_error(),
        request.stale_if_error(),
        request.max_stale(),
        Some(config.stale_if_error_default()),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0);
    allowance > 0
        && (allowance == RequestCacheControl::MAX_STALE_ANY
            || freshness.staleness() <= u64::from(allowance))
}

/// Origin status codes that count as errors for `stale-if-error`
/// (RFC 5861 §4).
pub fn is_error_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    const T0: u64 = 1_700_000_000;

    fn stored(pairs: &[(&str, &str)]) -> StoredMeta {
        StoredMeta::from_response(
            200,
            &FieldList::from_pairs(pairs),
            T0,
            T0,
            b"http://h/",
            &PolicyConfig::default(),
        )
    }

    fn request(cache_control: &str) -> RequestCacheControl {
        RequestCacheControl::parse(&FieldList::from_pairs(&[("Cache-Control", cache_control)]))
    }

    #[test]
    fn decision_table() {
        use RevalidateReason as R;
        #[derive(Debug, PartialEq)]
        enum Want {
            Fresh,
            StaleAllowed,
            Swr,
            Revalidate(RevalidateReason),
            GatewayTimeout,
        }
        // (response fields, request Cache-Control, seconds after storing, expected)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, u64, Want);
        let cases: &[Case<'_>] = &[
            (&[("Cache-Control", "max-age=3600")], "", 10, Want::Fresh),
            (
                &[("Cache-Control", "max-age=2")],
                "",
                3,
                Want::Revalidate(R::Stale),
            ),
            (
                &[("Cache-Control", "max-age=2")],
                "",
                2,
                Want::Revalidate(R::Stale),
            ),
            (&[("Cache-Control", "max-age=3")], "", 2, Want::Fresh),
            (
                &[("Cache-Control", "max-age=3600"), ("Age", "7200")],
                "",
                0,
                Want::Revalidate(R::Stale),
            ),
            // An invalid Age is ignored (RFC 9111 §5.1): fresh.
            (
                &[("Cache-Control", "max-age=3600"), ("Age", "abc")],
                "",
                0,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=3600"), ("Age", "0")],
                "",
                0,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=10000, no-cache")],
                "",
                0,
                Want::Revalidate(R::ResponseNoCache),
            ),
            (
                &[("Cache-Control", "max-age=3600, no-cache=\"a\"")],
                "",
                0,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "no-cache",
                0,
                Want::Revalidate(R::RequestNoCache),
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "max-age=0",
                1,
                Want::Revalidate(R::RequestMaxAge),
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "max-age=1",
                3,
                Want::Revalidate(R::RequestMaxAge),
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "max-age=600",
                3,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=3600"), ("Age", "1800")],
                "max-age=600",
                0,
                Want::Revalidate(R::RequestMaxAge),
            ),
            (
                &[("Cache-Control", "max-age=1500")],
                "min-fresh=2000",
                0,
                Want::Revalidate(R::RequestMinFresh),
            ),
            (
                &[("Cache-Control", "max-age=1500"), ("Age", "1000")],
                "min-fresh=1000",
                0,
                Want::Revalidate(R::RequestMinFresh),
            ),
            (
                &[("Cache-Control", "max-age=1500"), ("Age", "400")],
                "min-fresh=1000",
                0,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=1")],
                "max-stale=1000",
                3,
                Want::StaleAllowed,
            ),
            (
                &[("Cache-Control", "max-age=1500"), ("Age", "2000")],
                "max-stale=1000",
                0,
                Want::StaleAllowed,
            ),
            (
                &[("Cache-Control", "max-age=1")],
                "max-stale=1",
                3,
                Want::Revalidate(R::Stale),
            ),
            (
                &[("Cache-Control", "max-age=1")],
                "max-stale",
                100_000,
                Want::StaleAllowed,
            ),
            (
                &[("Cache-Control", "max-age=1, must-revalidate")],
                "max-stale",
                3,
                Want::Revalidate(R::MustRevalidate),
            ),
            (
                &[("Cache-Control", "max-age=1, proxy-revalidate")],
                "max-stale",
                3,
                Want::Revalidate(R::MustRevalidate),
            ),
            (
                &[("Cache-Control", "s-maxage=1")],
                "max-stale",
                3,
                Want::Revalidate(R::MustRevalidate),
            ),
            (
                &[("Cache-Control", "max-age=1, stale-while-revalidate=60")],
                "",
                30,
                Want::Swr,
            ),
            (
                &[("Cache-Control", "max-age=1, stale-while-revalidate=60")],
                "",
                62,
                Want::Revalidate(R::Stale),
            ),
            (
                &[(
                    "Cache-Control",
                    "max-age=1, must-revalidate, stale-while-revalidate=60",
                )],
                "",
                30,
                Want::Revalidate(R::MustRevalidate),
            ),
            (
                &[("Cache-Control", "max-age=1, must-revalidate")],
                "",
                30,
                Want::Revalidate(R::Stale),
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "only-if-cached",
                0,
                Want::Fresh,
            ),
            (
                &[("Cache-Control", "max-age=1")],
                "only-if-cached",
                5,
                Want::GatewayTimeout,
            ),
            (
                &[("Cache-Control", "max-age=1")],
                "only-if-cached, max-stale",
                5,
                Want::StaleAllowed,
            ),
            (
                &[("Cache-Control", "max-age=3600")],
                "only-if-cached, no-cache",
                0,
                Want::GatewayTimeout,
            ),
            (&[("Expires", "0")], "", 0, Want::Revalidate(R::Stale)),
        ];
        for (response, request_cc, after, want) in cases {
            let got = evaluate(
                &stored(response),
                &request(request_cc),
                T0 + after,
                &PolicyConfig::default(),
            );
            let got = match got {
                Decision::Fresh(_) => Want::Fresh,
                Decision::StaleAllowed(_) => Want::StaleAllowed,
                Decision::StaleWhileRevalidate(_) => Want::Swr,
                Decision::Revalidate { reason, .. } => Want::Revalidate(reason),
                Decision::GatewayTimeout => Want::GatewayTimeout,
            };
            assert_eq!(got, *want, "{response:?} / {request_cc:?} / +{after}s");
        }
    }

    #[test]
    fn decision_carries_freshness() {
        let meta = stored(&[("Cache-Control", "max-age=100"), ("Age", "10")]);
        let decision = evaluate(
            &meta,
            &RequestCacheControl::default(),
            T0 + 5,
            &PolicyConfig::default(),
        );
        assert_eq!(decision, Decision::Fresh(Freshness::new(100, 15, false)));
        assert!(decision.serves_stored());
        assert!(!Decision::GatewayTimeout.serves_stored());
    }

    #[test]
    fn s_maxage_only_binds_shared_caches() {
        let private = PolicyConfig::builder().shared(false).build().unwrap();
        let meta = stored(&[("Cache-Control", "max-age=1, s-maxage=1")]);
        let decision = evaluate(&meta, &request("max-stale"), T0 + 5, &private);
        assert!(matches!(decision, Decision::StaleAllowed(_)));
    }

    #[test]
    fn usable_on_error_table() {
        let default = PolicyConfig::default();
        let lenient = PolicyConfig::builder()
            .stale_if_error_default(60)
            .build()
            .unwrap();
        // (response fields, request cc, seconds after storing, config, expected)
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a str,
            u64,
            &'a PolicyConfig,
            bool,
        );
        let cases: &[Case<'_>] = &[
            (&[("Cache-Control", "max-age=100")], "", 5, &default, true),
            (&[("Cache-Control", "max-age=2")], "", 5, &default, false),
            (&[("Cache-Control", "max-age=2")], "", 5, &lenient, true),
            (&[("Cache-Control", "max-age=2")], "", 100, &lenient, false),
            (
                &[("Cache-Control", "max-age=2, stale-if-error=60")],
                "",
                30,
                &default,
                true,
            ),
            (
                &[("Cache-Control", "max-age=2, stale-if-error=60")],
                "",
                63,
                &default,
                false,
            ),
            (
                &[("Cache-Control", "max-age=2")],
                "stale-if-error=60",
                30,
                &default,
                true,
            ),
            (
                &[("Cache-Control", "max-age=2")],
                "max-stale",
                1_000_000,
                &default,
                true,
            ),
            (
                &[("Cache-Control", "max-age=2")],
                "max-stale=10",
                30,
                &default,
                false,
            ),
            (
                &[(
                    "Cache-Control",
                    "max-age=2, must-revalidate, stale-if-error=60",
                )],
                "",
                30,
                &default,
                false,
            ),
            (
                &[("Cache-Control", "max-age=2, proxy-revalidate")],
                "",
                5,
                &lenient,
                false,
            ),
            (&[("Cache-Control", "s-maxage=2")], "", 5, &lenient, false),
            (
                &[("Cache-Control", "max-age=100, no-cache")],
                "",
                5,
                &lenient,
                false,
            ),
        ];
        for (response, request_cc, after, config, expected) in cases {
            let got = usable_on_error(&stored(response), &request(request_cc), T0 + after, config);
            assert_eq!(got, *expected, "{response:?} / {request_cc:?} / +{after}s");
        }
    }

    #[test]
    fn error_statuses() {
        let errors: Vec<u16> = (100..600).filter(|&s| is_error_status(s)).collect();
        assert_eq!(errors, vec![500, 502, 503, 504]);
    }
}
