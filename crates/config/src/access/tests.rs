//! `[[acl]]` / `[[http_access]]` through whole files: what loads, how it decides, and every
//! kind of error with its line and key.

use std::net::IpAddr;
use std::time::SystemTime;

use sepia_access::{Dst, LocalZone, Request, TimeZone, Verdict};

use crate::Config;

const LISTENER: &str = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";

const RULES: &str = r#"
[[acl]]
name = "office"
type = "src"
values = ["10.0.0.0/8", "2001:db8::/32"]

[[acl]]
name = "ua_curl"
type = "req_header"
header = "User-Agent"
values = ["^curl/"]
ignore_case = true

[[acl]]
name = "safe_ports"
type = "port"
values = [80, "8000-8080"]

[[acl]]
name = "every_day"
type = "time"
values = ["SMTWHFA 00:00-24:00"]

[[http_access]]
action = "deny"
acl = ["!office"]

[[http_access]]
action = "deny"
acl = ["!safe_ports"]

[[http_access]]
action = "allow"
acl = ["ua_curl", "every_day"]
"#;

fn check(config: &Config, client: &str, port: u16, ua: &[u8]) -> Verdict {
    let headers: &[(&str, &[u8])] = &[("user-agent", ua)];
    let tz = LocalZone::fixed(TimeZone::UTC);
    let req = Request {
        client: client.parse::<IpAddr>().unwrap(),
        dst: Dst::Unresolved,
        host: b"example.com",
        port,
        method: b"GET",
        url: b"http://example.com/",
        path: b"/",
        headers: &headers,
        user: None,
        now: SystemTime::now(),
        tz: &tz,
    };
    config.http_access.as_ref().unwrap().check(&req).unwrap()
}

#[test]
fn rules_load_and_decide_in_order() {
    let config = Config::from_toml_str(&format!("{LISTENER}{RULES}"), "t.toml").unwrap();
    let rules = config.http_access.as_ref().unwrap();
    assert_eq!(rules.len(), 3);
    assert!(rules.acl("all").is_some() && rules.acl("ua_curl").is_some());
    assert_eq!(check(&config, "10.1.1.1", 80, b"curl/8"), Verdict::Allow);
    assert_eq!(
        check(&config, "2001:db8::9", 8080, b"CURL/8"),
        Verdict::Allow
    );
    assert_eq!(check(&config, "192.168.1.1", 80, b"curl/8"), Verdict::Deny);
    assert_eq!(check(&config, "10.1.1.1", 25, b"curl/8"), Verdict::Deny);
    assert_eq!(check(&config, "10.1.1.1", 80, b"wget"), Verdict::Deny);
}

#[test]
fn without_rules_nothing_changes() {
    let config = Config::from_toml_str(LISTENER, "t.toml").unwrap();
    assert_eq!(config.http_access, None);
    assert_eq!(config, Config::builtin_default());
}

/// Each case: the sections after the listener, then the exact error text (line 4 is the first
/// line after the listener).
#[test]
fn errors_name_file_line_and_key() {
    let acl = |ty: &str, values: &str| {
        format!("[[acl]]\nname = \"a\"\ntype = \"{ty}\"\nvalues = {values}\n")
    };
    let allow_a = "[[http_access]]\naction = \"allow\"\nacl = [\"a\"]\n";
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{}[[http_access]]\naction = \"allow\"\nacl = [\"a\",\n \"!b\"]\n", acl("src", "[\"::1\"]")),
            "t.toml:11: key 'http_access[0].acl[1]': unknown ACL \"b\" (define it in an [[acl]] \
             table; known: all, a)",
        ),
        (
            format!("{}{allow_a}", acl("srcip", "[\"::1\"]")),
            "t.toml:6: key 'acl[0].type': unknown ACL type \"srcip\" (expected one of src, dst, \
             dstdomain, port, method, url_regex, urlpath_regex, time, req_header, proxy_auth)",
        ),
        (
            format!("{}{allow_a}", acl("src", "[\n  \"10.0.0.0/8\",\n  \"10.0.0.1/8\",\n]")),
            "t.toml:9: key 'acl[0].values[1]': network \"10.0.0.1/8\" has host bits set (did \
             you mean \"10.0.0.0/8\"?)",
        ),
        (
            format!("{}{allow_a}", acl("dst", "[\"10.0.0.0/33\"]")),
            "t.toml:7: key 'acl[0].values[0]': invalid network \"10.0.0.0/33\" (expected CIDR \
             like \"10.0.0.0/8\" or \"fc00::/7\", or a single address)",
        ),
        (
            format!("{}{allow_a}", acl("url_regex", "[\"(open\"]")),
            "t.toml:7: key 'acl[0].values[0]': invalid regular expression: regex parse error:\n    (open\n    ^\nerror: unclosed group",
        ),
        (
            format!("{}{allow_a}", acl("time", "[\"MTWHF 17:00-08:00\"]")),
            "t.toml:7: key 'acl[0].values[0]': time range \"17:00-08:00\" ends before it starts \
             (a range cannot cross midnight: use two values) (expected days from SMTWHFA \
             (Sunday to Saturday, D = Monday to Friday) and/or a range hh:mm-hh:mm, e.g. \
             \"MTWHF 08:00-17:30\")",
        ),
        (
            format!("{}{allow_a}", acl("port", "[80, 70000]")),
            "t.toml:7: key 'acl[0].values[1]': invalid port \"70000\" (expected a port 1 to \
             65535 or a range such as \"8000-8080\")",
        ),
        (
            format!("{}{}{allow_a}", acl("src", "[\"::1\"]"), acl("port", "[80]")),
            "t.toml:9: key 'acl[1].name': duplicate ACL name \"a\"",
        ),
        (
            format!("{}{allow_a}", acl("method", "[]")),
            "t.toml:7: key 'acl[0].values': an ACL needs at least one value",
        ),
        (
            format!("{}{allow_a}", acl("dstdomain", "[\"\"]")),
            "t.toml:7: key 'acl[0].values[0]': empty value",
        ),
        (
            format!("{}{allow_a}", acl("req_header", "[\"x\"]")),
            "t.toml:6: key 'acl[0].header': a req_header ACL needs header = \"Field-Name\"",
        ),
        (
            format!("{}ignore_case = true\n{allow_a}", acl("src", "[\"::1\"]")),
            "t.toml:8: key 'acl[0].ignore_case': ignore_case does not apply to src ACLs (only \
             url_regex, urlpath_regex, req_header and proxy_auth)",
        ),
        (
            format!("{}regex = true\n{allow_a}", acl("src", "[\"::1\"]")),
            "t.toml:8: key 'acl[0].regex': unknown key (expected one of name, type, values, \
             header, ignore_case)",
        ),
        (
            "[[acl]]\nname = \"all\"\ntype = \"src\"\nvalues = [\"::1\"]\n[[http_access]]\naction = \"allow\"\nacl = [\"all\"]\n".into(),
            "t.toml:5: key 'acl[0].name': \"all\" is predefined (every client, IPv4 and IPv6) \
             and cannot be redefined",
        ),
        (
            "[[http_access]]\naction = \"permit\"\nacl = [\"all\"]\n".into(),
            "t.toml:5: key 'http_access[0].action': invalid value \"permit\" (expected \"allow\" \
             or \"deny\")",
        ),
        (
            "[[http_access]]\naction = \"allow\"\nacl = []\n".into(),
            "t.toml:6: key 'http_access[0].acl': a rule needs at least one ACL name (use \"all\" \
             to match every request)",
        ),
        (
            "[[http_access]]\naction = \"allow\"\n".into(),
            "t.toml:4: key 'http_access[0].acl': required key is missing",
        ),
        (
            acl("src", "[\"::1\"]"),
            "t.toml:5: key 'acl[0]': [[acl]] tables have no effect without [[http_access]] \
             rules (add rules that use them, or remove them)",
        ),
        (
            "[forward]\nallow = [\"10.0.0.0/8\"]\n[[http_access]]\naction = \"allow\"\nacl = [\"all\"]\n".into(),
            "t.toml:5: key 'forward.allow': forward.allow cannot be combined with \
             [[http_access]] rules, which govern every request: use an [[acl]] of type \"src\" \
             with these networks and an allow rule",
        ),
        (
            format!("{}{allow_a}", acl("proxy_auth", "[\"REQUIRED\", \"bob\"]")),
            "t.toml:7: key 'acl[0].values': \"REQUIRED\" (any authenticated user) must be the \
             only value",
        ),
    ];
    for (sections, want) in cases {
        let text = format!("{LISTENER}{sections}");
        let err = Config::from_toml_str(&text, "t.toml").unwrap_err();
        assert_eq!(err.to_string(), want, "file:\n{text}");
    }
}

#[test]
fn the_access_rules_example_in_the_readme_is_valid() {
    let doc = include_str!("../../../../README.md");
    let section = &doc[doc
        .find("### Access rules")
        .expect("the README documents access rules")..];
    let start = section.find("```toml\n").expect("with a toml example") + 8;
    let len = section[start..].find("```").unwrap();
    let text = format!("{LISTENER}{}", &section[start..start + len]);
    let config = Config::from_toml_str(&text, "README.md").unwrap();
    let rules = config.http_access.unwrap();
    assert_eq!(rules.len(), 6);
    assert!(rules.acl("ua_curl").is_some());
}
