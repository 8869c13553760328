//! Every ACL type through whole rule sets, rule order, negation, default deny, and the two
//! facts that are fetched lazily (dst addresses, the authenticated user).

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::tz::{self, TimeZone};

use super::*;
use crate::request::{Dst, HeaderLookup, LocalZone, NoHeaders};

/// 2024-01-01 was a Monday; 10:30 UTC.
fn monday_1030_utc() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_704_067_200 + 10 * 3600 + 30 * 60)
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A GET of http://www.example.com/index.html?q=1 from 10.1.2.3.
fn request<'a>(headers: &'a (dyn HeaderLookup + Sync), tz: &'a LocalZone) -> Request<'a> {
    Request {
        client: ip("10.1.2.3"),
        dst: Dst::Unresolved,
        host: b"www.example.com",
        port: 80,
        method: b"GET",
        url: b"http://www.example.com/index.html?q=1",
        path: b"/index.html?q=1",
        headers,
        user: None,
        now: monday_1030_utc(),
        tz,
    }
}

fn acl(name: &str, ty: &str, values: &[&str]) -> Acl {
    let ty = AclType::from_name(ty).unwrap();
    Acl::new(name, ty, values, AclOptions::default()).unwrap()
}

/// Rules from `(name, type, values)` ACLs and `(action, names)` rules.
fn build(acls: &[(&str, &str, &[&str])], rules: &[(Action, &[&str])]) -> AccessRules {
    let mut built = AccessRules::new();
    for (name, ty, values) in acls {
        built.add_acl(acl(name, ty, values)).unwrap();
    }
    for (action, names) in rules {
        built.add_rule(*action, names).unwrap();
    }
    built
}

/// Rules "allow a" over one ACL `a` of `ty` with `values` and `options`.
fn allow_if_with(ty: AclType, values: &[&str], options: AclOptions<'_>) -> AccessRules {
    let mut rules = AccessRules::new();
    rules
        .add_acl(Acl::new("a", ty, values, options).unwrap())
        .unwrap();
    rules.add_rule(Action::Allow, &["a"]).unwrap();
    rules
}

/// Rules "allow <names>" over one ACL `a` of `ty` with `values`.
fn allow_if(ty: &str, values: &[&str]) -> AccessRules {
    build(&[("a", ty, values)], &[(Action::Allow, &["a"])])
}

fn allowed(rules: &AccessRules, req: &Request<'_>) -> bool {
    match rules.check(req) {
        Ok(Verdict::Allow) => true,
        Ok(Verdict::Deny) => false,
        other => panic!("unexpected {other:?} for {req:?}"),
    }
}

/// Checks `rules` against `base` changed by `set` for each case: (value, allowed?).
fn assert_cases<'a, T: Copy + std::fmt::Debug>(
    rules: &AccessRules,
    base: Request<'a>,
    cases: &[(T, bool)],
    set: impl Fn(&mut Request<'a>, T),
) {
    for &(value, want) in cases {
        let mut req = base;
        set(&mut req, value);
        assert_eq!(allowed(rules, &req), want, "{value:?}");
    }
}

#[test]
fn src_v4_v6_and_mapped() {
    let rules = allow_if("src", &["10.0.0.0/8", "2001:db8::/32"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let cases = [
        ("10.1.2.3", true),
        ("11.1.2.3", false),
        ("::ffff:10.0.0.1", true),
        ("2001:db8::1", true),
        ("::1", false),
    ];
    assert_cases(&rules, request(&NoHeaders, &tz), &cases, |r, c| {
        r.client = ip(c)
    });
}

#[test]
fn dst_asks_for_resolution_then_matches_any_address() {
    let rules = allow_if("dst", &["192.0.2.0/24", "::1"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    assert_eq!(rules.check(&req), Err(NeedDst));
    let addrs = [ip("198.51.100.1"), ip("192.0.2.7")];
    req.dst = Dst::Resolved(&addrs);
    assert!(allowed(&rules, &req));
    req.dst = Dst::Resolved(&addrs[..1]);
    assert!(!allowed(&rules, &req));
    let v6 = [ip("::1")];
    req.dst = Dst::Resolved(&v6);
    assert!(allowed(&rules, &req));
    req.dst = Dst::Failed;
    assert!(!allowed(&rules, &req));
}

#[test]
fn dst_is_not_resolved_when_an_earlier_term_fails() {
    let rules = build(
        &[
            ("lan", "src", &["192.168.0.0/16"]),
            ("inside", "dst", &["10.0.0.0/8"]),
        ],
        &[
            (Action::Deny, &["lan", "inside"]),
            (Action::Allow, &["all"]),
        ],
    );
    let tz = LocalZone::fixed(TimeZone::UTC);
    let req = request(&NoHeaders, &tz);
    assert_eq!(rules.check(&req), Ok(Verdict::Allow));
}

#[test]
fn dstdomain_exact_and_suffix() {
    let rules = allow_if("dstdomain", &["example.org", ".Example.com"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let cases = [
        (&b"www.example.com"[..], true),
        (b"EXAMPLE.COM.", true),
        (b"example.org", true),
        (b"www.example.org", false),
        (b"notexample.com", false),
    ];
    assert_cases(&rules, request(&NoHeaders, &tz), &cases, |r, h| r.host = h);
}

#[test]
fn port_singles_and_ranges() {
    let rules = allow_if("port", &["80", "8000-8080"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let cases = [
        (80, true),
        (81, false),
        (8000, true),
        (8080, true),
        (8081, false),
    ];
    assert_cases(&rules, request(&NoHeaders, &tz), &cases, |r, p| r.port = p);
}

#[test]
fn method_is_exact_and_case_sensitive() {
    let rules = allow_if("method", &["CONNECT", "PURGE"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let cases = [
        (&b"CONNECT"[..], true),
        (b"PURGE", true),
        (b"connect", false),
        (b"GET", false),
        (b"CONNECTX", false),
    ];
    assert_cases(&rules, request(&NoHeaders, &tz), &cases, |r, m| {
        r.method = m
    });
}

#[test]
fn url_and_urlpath_regexes_with_and_without_ignore_case() {
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    let url = allow_if("url_regex", &[r"^http://www\.example\.com/", "never"]);
    assert!(allowed(&url, &req));
    let path = allow_if("urlpath_regex", &[r"\.html\?"]);
    assert!(allowed(&path, &req));
    // urlpath_regex sees only the path: the host is not part of it.
    let path_host = allow_if("urlpath_regex", &["example"]);
    assert!(!allowed(&path_host, &req));
    req.url = b"http://WWW.EXAMPLE.COM/";
    assert!(!allowed(&url, &req));
    let ignore_case = AclOptions {
        ignore_case: true,
        header: None,
    };
    let ci = allow_if_with(
        AclType::UrlRegex,
        &[r"^http://www\.example\.com/"],
        ignore_case,
    );
    assert!(allowed(&ci, &req));
}

#[test]
fn time_in_the_given_zone() {
    let rules = allow_if("time", &["MTWHF 09:00-17:00"]);
    let utc = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &utc);
    assert!(allowed(&rules, &req), "Monday 10:30 UTC");
    // The same instant is 03:30 in UTC-7 and Tuesday 00:30 in UTC+14.
    let west = LocalZone::fixed(TimeZone::fixed(tz::offset(-7)));
    req.tz = &west;
    assert!(!allowed(&rules, &req));
    let east = LocalZone::fixed(TimeZone::fixed(tz::offset(14)));
    req.tz = &east;
    assert!(!allowed(&rules, &req));
    let tuesday_early = allow_if("time", &["T 00:00-01:00"]);
    assert!(allowed(&tuesday_early, &req));
    req.tz = &utc;
    req.now = monday_1030_utc() + Duration::from_secs(5 * 86_400);
    assert!(!allowed(&rules, &req), "Saturday");
    let weekend = allow_if("time", &["SA"]);
    assert!(allowed(&weekend, &req));
}

#[test]
fn time_follows_daylight_saving_rules() {
    // A POSIX TZ string needs no zoneinfo files: US Eastern, DST from the 2nd Sunday of
    // March to the 1st Sunday of November.
    let eastern = LocalZone::fixed(TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap());
    let rules = allow_if("time", &["06:00-06:59"]);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    req.tz = &eastern;
    // 2024-01-01 11:30 UTC is 06:30 EST; 2024-07-01 11:30 UTC is 07:30 EDT.
    req.now = UNIX_EPOCH + Duration::from_secs(1_704_108_600);
    assert!(allowed(&rules, &req));
    req.now = UNIX_EPOCH + Duration::from_secs(1_719_833_400);
    assert!(!allowed(&rules, &req));
}

#[test]
fn req_header_matches_any_field_value() {
    let options = AclOptions {
        ignore_case: false,
        header: Some("User-Agent"),
    };
    let rules = allow_if_with(AclType::ReqHeader, &["^curl/"], options);
    let tz = LocalZone::fixed(TimeZone::UTC);
    let curl: &[(&str, &[u8])] = &[("Accept", b"*/*"), ("user-agent", b"curl/8.5.0")];
    assert!(allowed(&rules, &request(&curl, &tz)));
    let two: &[(&str, &[u8])] = &[("User-Agent", b"Mozilla"), ("User-Agent", b"curl/1")];
    assert!(allowed(&rules, &request(&two, &tz)));
    let other: &[(&str, &[u8])] = &[("User-Agent", b"Mozilla/5.0 curl/8"), ("X-UA", b"curl/8")];
    assert!(!allowed(&rules, &request(&other, &tz)));
    assert!(!allowed(&rules, &request(&NoHeaders, &tz)));
}

#[test]
fn proxy_auth_required_and_user_lists() {
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    let any = allow_if("proxy_auth", &["REQUIRED"]);
    assert_eq!(any.check(&req), Ok(Verdict::AuthRequired));
    req.user = Some("bob");
    assert!(allowed(&any, &req));
    let listed = allow_if("proxy_auth", &["alice", "carol"]);
    assert!(!allowed(&listed, &req));
    req.user = Some("alice");
    assert!(allowed(&listed, &req));
    req.user = Some("Alice");
    assert!(
        !allowed(&listed, &req),
        "user names are case-sensitive by default"
    );
    let ci = allow_if_with(
        AclType::ProxyAuth,
        &["alice"],
        AclOptions {
            ignore_case: true,
            header: None,
        },
    );
    assert!(allowed(&ci, &req));
    req.user = None;
    assert_eq!(listed.check(&req), Ok(Verdict::AuthRequired));
}

#[test]
fn auth_is_asked_only_when_a_proxy_auth_acl_is_reached() {
    let rules = build(
        &[
            ("office", "src", &["10.0.0.0/8"]),
            ("guests", "src", &["192.168.0.0/16"]),
            ("users", "proxy_auth", &["REQUIRED"]),
        ],
        &[
            (Action::Allow, &["office"]),
            (Action::Allow, &["guests", "users"]),
        ],
    );
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    assert_eq!(rules.check(&req), Ok(Verdict::Allow));
    req.client = ip("172.16.0.1");
    assert_eq!(rules.check(&req), Ok(Verdict::Deny));
    req.client = ip("192.168.1.1");
    assert_eq!(rules.check(&req), Ok(Verdict::AuthRequired));
    req.user = Some("x");
    assert_eq!(rules.check(&req), Ok(Verdict::Allow));
}

#[test]
fn first_match_wins_negation_and_default_deny() {
    let rules = build(
        &[
            ("office", "src", &["10.0.0.0/8"]),
            ("blocked", "dstdomain", &[".bad.example"]),
            ("connect", "method", &["CONNECT"]),
            ("tls", "port", &["443"]),
        ],
        &[
            (Action::Deny, &["connect", "!tls"]),
            (Action::Deny, &["blocked"]),
            (Action::Allow, &["office"]),
        ],
    );
    let tz = LocalZone::fixed(TimeZone::UTC);
    let mut req = request(&NoHeaders, &tz);
    assert_eq!(rules.check(&req), Ok(Verdict::Allow));
    req.host = b"www.bad.example";
    assert_eq!(rules.check(&req), Ok(Verdict::Deny), "deny before allow");
    req.host = b"www.example.com";
    req.method = b"CONNECT";
    req.port = 25;
    assert_eq!(rules.check(&req), Ok(Verdict::Deny), "CONNECT !tls");
    req.port = 443;
    assert_eq!(rules.check(&req), Ok(Verdict::Allow));
    req.client = ip("8.8.8.8");
    assert_eq!(rules.check(&req), Ok(Verdict::Deny), "no rule matched");
    assert_eq!(
        AccessRules::new().check(&req),
        Ok(Verdict::Deny),
        "no rules at all"
    );

    let negated = build(
        &[("office", "src", &["10.0.0.0/8"])],
        &[(Action::Deny, &["!office"]), (Action::Allow, &["all"])],
    );
    assert_eq!(negated.check(&req), Ok(Verdict::Deny));
    req.client = ip("10.0.0.9");
    assert_eq!(negated.check(&req), Ok(Verdict::Allow));
}

#[test]
fn building_errors_say_what_is_wrong() {
    let mut rules = build(&[("a", "src", &["10.0.0.0/8"])], &[]);
    let dup = rules.add_acl(acl("a", "port", &["80"])).unwrap_err();
    assert!(dup.contains("duplicate ACL name \"a\""), "{dup}");
    let all = rules.add_acl(acl("all", "port", &["80"])).unwrap_err();
    assert!(all.contains("predefined"), "{all}");
    let name = rules.add_acl(acl("!x", "port", &["80"])).unwrap_err();
    assert!(name.contains("invalid ACL name"), "{name}");
    let unknown = rules.add_rule(Action::Allow, &["a", "!nope"]).unwrap_err();
    assert_eq!(unknown.term, Some(1));
    assert!(
        unknown.message.contains("unknown ACL \"nope\""),
        "{unknown}"
    );
    assert!(unknown.message.contains("known: all, a"), "{unknown}");
    assert_eq!(rules.add_rule(Action::Allow, &[]).unwrap_err().term, None);
    assert_eq!(rules.len(), 0);
    assert!(rules.acl("all").is_some());
}

#[test]
fn acl_errors_name_the_value() {
    let bad = |ty: AclType, values: &[&str], options: AclOptions<'_>| {
        Acl::new("x", ty, values, options).unwrap_err()
    };
    let none = AclOptions::default();
    let e = bad(AclType::Src, &["10.0.0.0/8", "10.0.0.1/8"], none);
    assert_eq!(e.value, Some(1));
    assert!(e.message.contains("host bits"), "{e}");
    assert_eq!(bad(AclType::Port, &["99999"], none).value, Some(0));
    assert_eq!(bad(AclType::Time, &["Q"], none).value, Some(0));
    let e = bad(AclType::UrlRegex, &["ok", "(unclosed"], none);
    assert_eq!(e.value, Some(1));
    assert!(e.message.starts_with("invalid regular expression"), "{e}");
    assert_eq!(bad(AclType::Src, &[], none).value, None);
    let e = bad(AclType::ReqHeader, &["x"], none);
    assert!(e.message.contains("needs header"), "{e}");
    let header = AclOptions {
        ignore_case: false,
        header: Some("Bad Name"),
    };
    assert!(bad(AclType::ReqHeader, &["x"], header)
        .message
        .contains("invalid header name"));
    let header = AclOptions {
        ignore_case: false,
        header: Some("X-A"),
    };
    assert!(bad(AclType::Src, &["::1"], header)
        .message
        .contains("only to req_header"));
    let ci = AclOptions {
        ignore_case: true,
        header: None,
    };
    assert!(bad(AclType::Port, &["80"], ci)
        .message
        .contains("ignore_case"));
    let e = bad(AclType::ProxyAuth, &["alice", "REQUIRED"], none);
    assert!(e.message.contains("only value"), "{e}");
    assert_eq!(bad(AclType::ProxyAuth, &["a b"], none).value, Some(0));
    assert_eq!(bad(AclType::Method, &["GET", "G T"], none).value, Some(1));
    assert_eq!(bad(AclType::DstDomain, &["a..b"], none).value, Some(0));
}

#[test]
fn type_names_round_trip() {
    for (name, ty) in AclType::ALL {
        assert_eq!(AclType::from_name(name), Some(ty));
        assert_eq!(ty.name(), name);
    }
    assert_eq!(AclType::from_name("SRC"), None);
    assert_eq!(AclType::from_name("browser"), None);
}

#[test]
fn equality_compares_the_source() {
    let a = allow_if("url_regex", &["^http://"]);
    let b = allow_if("url_regex", &["^http://"]);
    let c = allow_if("url_regex", &["^https://"]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}
