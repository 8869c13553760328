//! http-cache-tests 0.4.5 freshness families replayed through the policy:
//! cc-freshness, cc-parse, expires, cc-response, heuristic, status, auth,
//! other (age-parse and expires-parse: `suite_parsing.rs`). Each case is the suite's request sequence;
//! `Cached` means the origin was not contacted.

mod support;

use sepia_cache_policy::PolicyConfig;
use support::{Date, Expect, MiniCache, Step, Val, S};
use Expect::{Cached, EtagValidated, NotCached};

type Headers = &'static [(&'static str, Val)];

/// The common two-request shape: store, optionally wait 3 s, ask again.
fn second_request(name: &str, response: Headers, pause: bool, expect: Expect) {
    let mut first = Step::get(response);
    if pause {
        first = first.pause();
    }
    let steps = [first, Step::get(&[]).expect(expect)];
    MiniCache::new(PolicyConfig::default()).check(name, &steps);
}

#[test]
fn cc_freshness_and_parsing() {
    let cases: &[(&str, Headers, Expect)] = &[
        ("freshness-none", &[], NotCached),
        (
            "freshness-max-age",
            &[("Cache-Control", S("max-age=3600"))],
            Cached,
        ),
        (
            "freshness-max-age-0",
            &[("Cache-Control", S("max-age=0"))],
            NotCached,
        ),
        (
            "freshness-max-age-max-minus-1",
            &[("Cache-Control", S("max-age=2147483647"))],
            Cached,
        ),
        (
            "freshness-max-age-max",
            &[("Cache-Control", S("max-age=2147483648"))],
            Cached,
        ),
        (
            "freshness-max-age-max-plus-1",
            &[("Cache-Control", S("max-age=2147483649"))],
            Cached,
        ),
        (
            "freshness-max-age-max-plus",
            &[("Cache-Control", S("max-age=99999999999"))],
            Cached,
        ),
        (
            "freshness-max-age-age",
            &[
                ("Date", Date(0)),
                ("Cache-Control", S("max-age=3600")),
                ("Age", S("7200")),
            ],
            NotCached,
        ),
        (
            "freshness-max-age-date",
            &[("Date", Date(-7200)), ("Cache-Control", S("max-age=3600"))],
            NotCached,
        ),
        (
            "freshness-max-age-expires",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Expires", Date(-7200)),
                ("Date", Date(0)),
            ],
            Cached,
        ),
        (
            "freshness-max-age-expires-invalid",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Expires", S("0")),
                ("Date", Date(0)),
            ],
            Cached,
        ),
        (
            "freshness-max-age-0-expires",
            &[
                ("Expires", Date(3600)),
                ("Cache-Control", S("max-age=0")),
                ("Date", Date(0)),
            ],
            NotCached,
        ),
        (
            "freshness-max-age-extension",
            &[("Cache-Control", S("foobar, max-age=3600"))],
            Cached,
        ),
        (
            "freshness-max-age-case-insenstive",
            &[("Cache-Control", S("MaX-aGe=3600"))],
            Cached,
        ),
        (
            "freshness-max-age-negative",
            &[("Cache-Control", S("max-age=-3600"))],
            NotCached,
        ),
        (
            "freshness-s-maxage-shared",
            &[("Cache-Control", S("s-maxage=3600"))],
            Cached,
        ),
        (
            "freshness-max-age-s-maxage-shared-longer",
            &[("Cache-Control", S("max-age=3600, s-maxage=1"))],
            NotCached,
        ),
        (
            "freshness-max-age-s-maxage-shared-longer-reversed",
            &[("Cache-Control", S("s-maxage=1, max-age=3600"))],
            NotCached,
        ),
        (
            "freshness-max-age-s-maxage-shared-longer-multiple",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Cache-Control", S("s-maxage=1")),
            ],
            NotCached,
        ),
        (
            "freshness-max-age-s-maxage-shared-shorter",
            &[("Cache-Control", S("max-age=1, s-maxage=3600"))],
            Cached,
        ),
        (
            "freshness-max-age-s-maxage-shared-shorter-expires",
            &[
                ("Expires", Date(-10)),
                ("Cache-Control", S("max-age=0, s-maxage=3600")),
            ],
            Cached,
        ),
        // cc-parse
        (
            "freshness-max-age-quoted (check)",
            &[("Cache-Control", S("max-age=\"3600\""))],
            Cached,
        ),
        (
            "freshness-max-age-single-quoted",
            &[("Cache-Control", S("max-age='3600'"))],
            NotCached,
        ),
        (
            "freshness-max-age-ignore-quoted",
            &[("Cache-Control", S("extension=\"max-age=3600\", max-age=1"))],
            NotCached,
        ),
        (
            "freshness-max-age-ignore-quoted-rev",
            &[("Cache-Control", S("max-age=1, extension=\"max-age=3600\""))],
            NotCached,
        ),
        (
            "freshness-max-age-ignore-quoted-all",
            &[(
                "Cache-Control",
                S("extension=\"max-age=3600\", max-age=\"1\""),
            )],
            NotCached,
        ),
        (
            "freshness-max-age-ignore-quoted-all-rev",
            &[(
                "Cache-Control",
                S("max-age=\"1\", extension=\"max-age=3600\""),
            )],
            NotCached,
        ),
        (
            "freshness-max-age-leading-zero",
            &[("Cache-Control", S("max-age=003600"))],
            Cached,
        ),
        (
            "freshness-max-age-space-before-equals (check)",
            &[("Cache-Control", S("max-age =3600"))],
            NotCached,
        ),
        (
            "freshness-max-age-space-after-equals (check)",
            &[("Cache-Control", S("max-age= 3600"))],
            NotCached,
        ),
        (
            "freshness-max-age-multiple-line (check)",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Cache-Control", S("max-age=1800")),
            ],
            Cached,
        ),
        (
            "freshness-max-age-two-fresh-stale-sameline (check)",
            &[("Cache-Control", S("max-age=1800, max-age=1"))],
            Cached,
        ),
    ];
    for (name, response, expect) in cases {
        second_request(name, response, true, *expect);
    }
}

#[test]
fn expires() {
    let cases: &[(&str, Headers, bool, Expect)] = &[
        (
            "freshness-expires-future",
            &[("Expires", Date(30 * 86_400)), ("Date", Date(0))],
            true,
            Cached,
        ),
        (
            "freshness-expires-past",
            &[("Expires", Date(-30 * 86_400)), ("Date", Date(0))],
            true,
            NotCached,
        ),
        (
            "freshness-expires-present",
            &[("Expires", Date(0)), ("Date", Date(0))],
            false,
            NotCached,
        ),
        (
            "freshness-expires-old-date",
            &[("Expires", Date(300)), ("Date", Date(400))],
            true,
            NotCached,
        ),
        (
            "freshness-expires-invalid",
            &[("Expires", S("0")), ("Date", Date(0))],
            true,
            NotCached,
        ),
        (
            "freshness-expires-invalid-date",
            &[("Date", S("foo")), ("Expires", Date(10))],
            false,
            Cached,
        ),
        (
            "freshness-expires-age-slow-date",
            &[("Date", Date(-10)), ("Expires", Date(10)), ("Age", S("25"))],
            false,
            NotCached,
        ),
        (
            "freshness-expires-age-fast-date",
            &[("Date", Date(10)), ("Expires", Date(20)), ("Age", S("15"))],
            false,
            NotCached,
        ),
    ];
    for (name, response, pause, expect) in cases {
        second_request(name, response, *pause, *expect);
    }
}

#[test]
fn cc_response_directives() {
    let cases: &[(&str, Headers, Expect)] = &[
        (
            "cc-resp-private-shared",
            &[("Cache-Control", S("private, max-age=3600"))],
            NotCached,
        ),
        (
            "cc-resp-no-store",
            &[("Cache-Control", S("no-store"))],
            NotCached,
        ),
        (
            "cc-resp-no-store-case-insensitive",
            &[("Cache-Control", S("No-StOrE"))],
            NotCached,
        ),
        (
            "cc-resp-no-store-fresh",
            &[
                ("Cache-Control", S("max-age=10000, no-store")),
                ("Expires", Date(10_000)),
                ("Date", Date(0)),
            ],
            NotCached,
        ),
        (
            "cc-resp-no-cache",
            &[
                ("Cache-Control", S("max-age=10000, no-cache")),
                ("Expires", Date(10_000)),
                ("Date", Date(0)),
            ],
            NotCached,
        ),
        (
            "cc-resp-no-cache-case-insensitive",
            &[
                ("Cache-Control", S("max-age=10000, No-CaChE")),
                ("Expires", Date(10_000)),
                ("Date", Date(0)),
            ],
            NotCached,
        ),
        (
            "cc-resp-must-revalidate-fresh",
            &[
                ("Cache-Control", S("max-age=10000, must-revalidate")),
                ("ETag", S("\"abcd\"")),
            ],
            Cached,
        ),
        (
            "other-set-cookie",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Set-Cookie", S("a=b")),
            ],
            Cached,
        ),
    ];
    for (name, response, expect) in cases {
        second_request(name, response, false, *expect);
    }
    // Stored, then revalidated on use.
    for (name, response) in [
        (
            "cc-resp-no-cache-revalidate",
            &[("Cache-Control", S("no-cache")), ("ETag", S("\"abcd\""))][..],
        ),
        (
            "cc-resp-no-cache-revalidate-fresh",
            &[
                ("Cache-Control", S("max-age=10000, no-cache")),
                ("Expires", Date(10_000)),
                ("Date", Date(0)),
                ("ETag", S("\"abcd\"")),
            ][..],
        ),
    ] {
        let steps = [
            Step::get(response),
            Step::get(response).expect(EtagValidated),
        ];
        MiniCache::new(PolicyConfig::default()).check(name, &steps);
    }
    let must = [
        ("Cache-Control", S("max-age=2, must-revalidate")),
        ("ETag", S("\"abcd\"")),
    ];
    let steps = [
        Step::get(&must),
        Step::get(&must).expect(Cached).pause(),
        Step::get(&must).expect(EtagValidated),
    ];
    MiniCache::new(PolicyConfig::default()).check("cc-resp-must-revalidate-stale", &steps);
}

#[test]
fn heuristic_freshness_by_status() {
    type Case = (u16, Option<(&'static str, Val)>, Expect);
    let cases: &[Case] = &[
        (200, None, Cached),
        (201, None, NotCached),
        (202, None, NotCached),
        (203, None, Cached),
        (204, None, Cached),
        (403, None, NotCached),
        (404, None, Cached),
        (405, None, Cached),
        (410, None, Cached),
        (414, None, Cached),
        (501, None, Cached),
        (502, None, NotCached),
        (503, None, NotCached),
        (504, None, NotCached),
        (599, None, NotCached),
        (599, Some(("Cache-Control", S("public"))), Cached),
    ];
    for (status, extra, expect) in cases {
        let mut response = vec![("Last-Modified", Date(-86_400)), ("Date", Date(0))];
        response.extend(extra.iter().copied());
        let steps = [
            Step::get(&response).status(*status),
            Step::get(&response).status(*status).expect(*expect),
        ];
        MiniCache::new(PolicyConfig::default()).check(&format!("heuristic-{status}"), &steps);
    }
}

#[test]
fn status_codes_with_explicit_freshness() {
    let fresh: Headers = &[
        ("Expires", Date(100_000)),
        ("Last-Modified", Date(0)),
        ("Date", Date(0)),
    ];
    let stale: Headers = &[
        ("Expires", Date(-5000)),
        ("Last-Modified", Date(-100_000)),
        ("Date", Date(0)),
    ];
    for status in [
        200, 203, 204, 299, 301, 302, 303, 307, 308, 400, 404, 410, 499, 500, 502, 503, 504, 599,
    ] {
        let steps = [
            Step::get(fresh).status(status),
            Step::get(fresh).status(status).expect(Cached),
        ];
        MiniCache::new(PolicyConfig::default()).check(&format!("status-{status}-fresh"), &steps);
        let steps = [
            Step::get(stale).status(status),
            Step::get(stale).status(status).expect(NotCached),
        ];
        MiniCache::new(PolicyConfig::default()).check(&format!("status-{status}-stale"), &steps);
    }
    let response = [("Cache-Control", S("max-age=3600, must-understand"))];
    let steps = [
        Step::get(&response).status(599),
        Step::get(&response).status(599).expect(NotCached),
    ];
    MiniCache::new(PolicyConfig::default()).check("status-599-must-understand", &steps);
}

#[test]
fn authorization() {
    let cases: &[(&str, Headers, Expect)] = &[
        (
            "other-authorization",
            &[("Expires", Date(30 * 86_400)), ("Date", Date(0))],
            NotCached,
        ),
        (
            "other-authorization-public",
            &[
                ("Cache-Control", S("max-age=3600, public")),
                ("Date", Date(0)),
            ],
            Cached,
        ),
        (
            "other-authorization-must-revalidate",
            &[
                ("Cache-Control", S("max-age=3600, must-revalidate")),
                ("Date", Date(0)),
            ],
            Cached,
        ),
        (
            "other-authorization-smaxage",
            &[("Cache-Control", S("s-maxage=3600")), ("Date", Date(0))],
            Cached,
        ),
    ];
    for (name, response, expect) in cases {
        let steps = [
            Step::get(response)
                .request(&[("Authorization", S("FOO"))])
                .pause(),
            Step::get(&[]).expect(*expect),
        ];
        MiniCache::new(PolicyConfig::default()).check(name, &steps);
    }
}

#[test]
fn other_requirements() {
    let expires: Headers = &[("Expires", Date(30 * 86_400)), ("Date", Date(0))];
    let got = MiniCache::new(PolicyConfig::default()).check(
        "other-age-gen",
        &[Step::get(expires).pause(), Step::get(&[]).expect(Cached)],
    );
    assert!(got[1].header("Age").unwrap().parse::<u64>().unwrap() > 2);
    assert_eq!(
        got[1].header("Date"),
        got[0].header("Date"),
        "other-date-update"
    );

    for (name, response) in [
        (
            "other-age-update-expires",
            &[
                ("Expires", Date(30 * 86_400)),
                ("Date", Date(0)),
                ("Age", S("30")),
            ][..],
        ),
        (
            "other-age-update-max-age",
            &[
                ("Cache-Control", S("max-age=600")),
                ("Date", Date(0)),
                ("Age", S("30")),
            ][..],
        ),
    ] {
        let got = MiniCache::new(PolicyConfig::default()).check(
            name,
            &[Step::get(response).pause(), Step::get(&[]).expect(Cached)],
        );
        assert!(
            got[1].header("Age").unwrap().parse::<u64>().unwrap() > 32,
            "{name}"
        );
    }

    let fresh: Headers = &[
        ("Expires", Date(100_000)),
        ("Last-Modified", Date(0)),
        ("Date", Date(0)),
    ];
    let steps = [
        Step::get(fresh).target("/test/uuid?test=1"),
        Step::get(fresh)
            .target("/test/uuid?test=2")
            .expect(NotCached),
    ];
    MiniCache::new(PolicyConfig::default()).check("query-args-different", &steps);
    let steps = [
        Step::get(fresh).target("/test/uuid?test=1"),
        Step::get(fresh).target("/test/uuid?test=1").expect(Cached),
    ];
    MiniCache::new(PolicyConfig::default()).check("query-args-same", &steps);
    let steps = [
        Step::get(&[("Cache-Control", S("max-age=3600"))]),
        Step::get(&[])
            .request(&[("Cookie", S("a=b"))])
            .expect(Cached),
    ];
    MiniCache::new(PolicyConfig::default()).check("other-cookie", &steps);
}

#[test]
fn request_directives() {
    type Case = (&'static str, Headers, Headers, Expect);
    let cases: &[Case] = &[
        (
            "ccreq-ma0",
            &[("Cache-Control", S("max-age=3600"))],
            &[("Cache-Control", S("max-age=0"))],
            NotCached,
        ),
        (
            "ccreq-magreaterage",
            &[("Cache-Control", S("max-age=3600")), ("Age", S("1800"))],
            &[("Cache-Control", S("max-age=600"))],
            NotCached,
        ),
        // Stale on arrival without a validator: not worth storing (a check
        // test the suite answers "cached"; see StoredMeta::is_worth_storing).
        (
            "ccreq-max-stale-age",
            &[("Cache-Control", S("max-age=1500")), ("Age", S("2000"))],
            &[("Cache-Control", S("max-stale=1000"))],
            NotCached,
        ),
        (
            "ccreq-max-stale-age with validator",
            &[
                ("Cache-Control", S("max-age=1500")),
                ("Age", S("2000")),
                ("ETag", S("\"x\"")),
            ],
            &[("Cache-Control", S("max-stale=1000"))],
            Cached,
        ),
        (
            "ccreq-max-stale",
            &[("Cache-Control", S("max-age=1"))],
            &[("Cache-Control", S("max-stale=1000"))],
            Cached,
        ),
        (
            "ccreq-min-fresh",
            &[("Cache-Control", S("max-age=1500"))],
            &[("Cache-Control", S("min-fresh=2000"))],
            NotCached,
        ),
        (
            "ccreq-no-cache",
            &[("Cache-Control", S("max-age=3600"))],
            &[("Cache-Control", S("no-cache"))],
            NotCached,
        ),
        (
            "pragma-request-extension",
            &[("Cache-Control", S("max-age=3600"))],
            &[("Pragma", S("unrecognised-extension"))],
            Cached,
        ),
        (
            "pragma-response-no-cache",
            &[
                ("Cache-Control", S("max-age=3600")),
                ("Pragma", S("no-cache")),
            ],
            &[],
            Cached,
        ),
    ];
    for (name, response, request, expect) in cases {
        let steps = [
            Step::get(response).pause(),
            Step::get(&[]).request(request).expect(*expect),
        ];
        MiniCache::new(PolicyConfig::default()).check(name, &steps);
    }
    let got = MiniCache::new(PolicyConfig::default())
        .run(&[Step::get(&[]).request(&[("Cache-Control", S("only-if-cached"))])]);
    assert_eq!(got[0].status, 504, "ccreq-oic");
    assert!(got[0].origin_saw.is_none());
}
