//! Strict parsers for the string-valued settings. Each returns the message to show after
//! `file:line: key '…': `, so it says what was wrong and what is expected.

use std::net::{Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use sepia_access::is_host_name;

use crate::model::{
    DiskAdmission, DiskIo, EventLogFormat, EventLogLevel, HostHeader, HostMatch, LogFormat,
    LogTarget, Mode, OriginAddr, XForwardedFor,
};

/// A value parsed from one TOML string.
pub(crate) trait ConfigValue: Sized {
    /// What a wrongly typed value is told it should have been ("invalid type: integer `5`,
    /// expected …").
    const EXPECTING: &'static str = "a string";
    fn parse_value(text: &str) -> Result<Self, String>;
}

/// Matches `text` against a keyword table, exactly (keywords are lowercase, like the docs).
fn keyword<T: Copy>(text: &str, table: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, value)) = table.iter().find(|(name, _)| *name == text) {
        return Ok(*value);
    }
    let names: Vec<String> = table
        .iter()
        .map(|(name, _)| format!("\"{name}\""))
        .collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(format!("invalid value \"{text}\" (expected {expected})"))
}

impl ConfigValue for Mode {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("forward", Mode::Forward),
                ("reverse", Mode::Reverse),
                ("intercept", Mode::Intercept),
                ("tproxy", Mode::Tproxy),
            ],
        )
    }
}

impl ConfigValue for XForwardedFor {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("append", XForwardedFor::Append),
                ("replace", XForwardedFor::Replace),
                ("off", XForwardedFor::Off),
            ],
        )
    }
}

impl ConfigValue for LogFormat {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("squid", LogFormat::Squid),
                ("combined", LogFormat::Combined),
                ("json", LogFormat::Json),
            ],
        )
    }
}

impl ConfigValue for DiskIo {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[("threads", DiskIo::Threads), ("io_uring", DiskIo::IoUring)],
        )
    }
}

impl ConfigValue for DiskAdmission {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("fill", DiskAdmission::Fill),
                ("earned", DiskAdmission::Earned),
            ],
        )
    }
}

impl ConfigValue for EventLogFormat {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("text", EventLogFormat::Text),
                ("json", EventLogFormat::Json),
            ],
        )
    }
}

impl ConfigValue for EventLogLevel {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("error", EventLogLevel::Error),
                ("warn", EventLogLevel::Warn),
                ("info", EventLogLevel::Info),
                ("debug", EventLogLevel::Debug),
                ("trace", EventLogLevel::Trace),
            ],
        )
    }
}

impl ConfigValue for LogTarget {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text {
            "stdout" => Ok(LogTarget::Stdout),
            "off" => Ok(LogTarget::Off),
            "" => Err("empty path (expected \"stdout\", \"off\" or a file path)".into()),
            path => Ok(LogTarget::File(PathBuf::from(path))),
        }
    }
}

/// Any duration, zero included: digits immediately followed by one unit of `ms`, `s`, `m`,
/// `h`. No fractions, signs, spaces or unit-less numbers, so `"5"` (seconds? milliseconds?)
/// cannot be misread.
impl ConfigValue for Duration {
    const EXPECTING: &'static str = "a duration string such as \"5s\"";
    fn parse_value(text: &str) -> Result<Self, String> {
        parse_duration(text).ok_or_else(|| {
            format!(
                "invalid duration \"{text}\" (expected a whole number and a unit: \
                 \"500ms\", \"5s\", \"2m\" or \"1h\")"
            )
        })
    }
}

fn parse_duration(text: &str) -> Option<Duration> {
    let digits_end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(amount)),
        "s" => Some(Duration::from_secs(amount)),
        "m" => amount.checked_mul(60).map(Duration::from_secs),
        "h" => amount.checked_mul(3600).map(Duration::from_secs),
        "d" => amount.checked_mul(86_400).map(Duration::from_secs),
        _ => None,
    }
}

/// A duration that must be greater than zero: a zero timeout would fail every wait at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Timeout(pub Duration);

impl ConfigValue for Timeout {
    const EXPECTING: &'static str = <Duration as ConfigValue>::EXPECTING;
    fn parse_value(text: &str) -> Result<Self, String> {
        let duration = Duration::parse_value(text)?;
        if duration.is_zero() {
            return Err(format!("timeout \"{text}\" must be greater than zero"));
        }
        Ok(Timeout(duration))
    }
}

impl ConfigValue for SocketAddr {
    const EXPECTING: &'static str = "an address string such as \"127.0.0.1:3128\"";
    fn parse_value(text: &str) -> Result<Self, String> {
        text.parse().map_err(|_| {
            format!(
                "invalid address \"{text}\" (expected IPv4:port or [IPv6]:port, \
                 e.g. \"127.0.0.1:3128\" or \"[::1]:3128\")"
            )
        })
    }
}

/// A network in CIDR notation; a bare address means just that host (/32 or /128). Host bits
/// set under the mask (`10.0.0.1/8`) are rejected as the likely typo they are. The one parser
/// shared with `src` / `dst` ACLs, so both read networks alike.
impl ConfigValue for ipnet::IpNet {
    const EXPECTING: &'static str = "a network string such as \"10.0.0.0/8\"";
    fn parse_value(text: &str) -> Result<Self, String> {
        sepia_access::parse_network(text)
    }
}

/// `allow` or `deny` in `[[http_access]]`.
impl ConfigValue for sepia_access::Action {
    fn parse_value(text: &str) -> Result<Self, String> {
        keyword(
            text,
            &[
                ("allow", sepia_access::Action::Allow),
                ("deny", sepia_access::Action::Deny),
            ],
        )
    }
}

/// `*`, `*.suffix` or a host name / IP literal, lowercased. The wildcard only stands for whole
/// leading labels, so `*.example.com` does not match `example.com` itself.
impl ConfigValue for HostMatch {
    fn parse_value(text: &str) -> Result<Self, String> {
        let expected = "(expected a host name, \"*.suffix\" or \"*\")";
        if text == "*" {
            return Ok(HostMatch::Any);
        }
        if let Some(suffix) = text.strip_prefix("*.") {
            return if is_host_name(suffix) {
                Ok(HostMatch::Suffix(format!(
                    ".{}",
                    suffix.to_ascii_lowercase()
                )))
            } else {
                Err(format!("invalid route host \"{text}\" {expected}"))
            };
        }
        if is_host_name(text) || is_bracketed_ipv6(text) {
            Ok(HostMatch::Exact(text.to_ascii_lowercase()))
        } else {
            Err(format!("invalid route host \"{text}\" {expected}"))
        }
    }
}

fn is_bracketed_ipv6(text: &str) -> bool {
    text.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|inner| inner.parse::<Ipv6Addr>().is_ok())
}

/// `http://host[:port]` or `https://host[:port]` with an optional `/` and nothing else: a
/// route forwards the client's own path, so an origin path would be silently ignored.
impl ConfigValue for OriginAddr {
    const EXPECTING: &'static str = "an origin URL string such as \"http://127.0.0.1:8080\"";
    fn parse_value(text: &str) -> Result<Self, String> {
        parse_origin(text).map_err(|why| format!("invalid origin \"{text}\": {why}"))
    }
}

fn parse_origin(text: &str) -> Result<OriginAddr, String> {
    let expected = "expected http://host[:port] or https://host[:port]";
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(expected.into());
    };
    let tls = scheme.eq_ignore_ascii_case("https");
    if !tls && !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("unsupported scheme \"{scheme}\" ({expected})"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if !tail.is_empty() && tail != "/" {
        return Err(format!(
            "an origin has no path, query or fragment (got \"{tail}\"); {expected}"
        ));
    }
    if authority.contains('@') {
        return Err(format!("user information is not allowed; {expected}"));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| expected.to_string())?;
    let port = match port {
        None => OriginAddr::default_port(tls),
        Some(digits) => parse_port(digits)
            .ok_or_else(|| format!("invalid port \"{digits}\" (expected 1 to 65535)"))?,
    };
    Ok(OriginAddr {
        host: host.to_ascii_lowercase(),
        port,
        tls,
    })
}

/// Splits `host[:port]` / `[v6][:port]`; the host is returned without brackets.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        inner.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        return Some((inner, port));
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    is_host_name(host).then_some((host, port))
}

fn parse_port(digits: &str) -> Option<u16> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u16>().ok().filter(|port| *port != 0)
}

/// `pass`, `origin` (either in any case, so `"Pass"` is not mistaken for a literal), or a
/// literal Host value: visible ASCII only, since it goes on the wire as a field value
/// (RFC 9110 §5.5) and an authority has no spaces (RFC 3986 §3.2).
impl ConfigValue for HostHeader {
    fn parse_value(text: &str) -> Result<Self, String> {
        if text.eq_ignore_ascii_case("pass") {
            Ok(HostHeader::Pass)
        } else if text.eq_ignore_ascii_case("origin") {
            Ok(HostHeader::Origin)
        } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic()) {
            Ok(HostHeader::Fixed(text.to_string()))
        } else {
            Err(format!(
                "invalid host_header \"{text}\" (expected \"pass\", \"origin\" or a Host \
                 value of visible ASCII characters)"
            ))
        }
    }
}

/// Whether `text` is a DNS name as TLS names servers (RFC 1123 §2.1 labels of letters, digits
/// and inner hyphens, RFC 6066 §3): a listener certificate's names and an origin's
/// `tls_server_name`. Stricter than a route's host, which admits `_`.
pub(crate) fn is_dns_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Whether `text` is an RFC 9110 token (§5.6.2): what field names and Via's pseudonym are.
pub(crate) fn is_token(text: &str) -> bool {
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !text.is_empty() && text.bytes().all(is_tchar)
}

/// A field name in a listener's targeted cache control list (RFC 9213 §2.2): an RFC 9110
/// token (§5.1) naming a response field other than Cache-Control or Expires, whose
/// directives the targeted field replaces.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TargetedFieldName(pub String);

impl ConfigValue for TargetedFieldName {
    fn parse_value(text: &str) -> Result<Self, String> {
        if !is_token(text) {
            return Err(format!(
                "invalid field name \"{text}\" (expected an HTTP field name: letters, digits \
                 and !#$%&'*+-.^_`|~)"
            ));
        }
        if text.eq_ignore_ascii_case("cache-control") || text.eq_ignore_ascii_case("expires") {
            return Err(format!(
                "\"{text}\" cannot be a targeted field: targeted fields replace Cache-Control \
                 and Expires (RFC 9213 §2.2)"
            ));
        }
        Ok(TargetedFieldName(text.to_string()))
    }
}

/// Via's received-by pseudonym: an RFC 9110 token (§7.6.3, §5.6.2).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pseudonym(pub String);

impl ConfigValue for Pseudonym {
    fn parse_value(text: &str) -> Result<Self, String> {
        if is_token(text) {
            Ok(Pseudonym(text.to_string()))
        } else {
            Err(format!(
                "invalid via_pseudonym \"{text}\" (expected an HTTP token: letters, digits \
                 and !#$%&'*+-.^_`|~)"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let good = [
            ("500ms", Duration::from_millis(500)),
            ("0s", Duration::ZERO),
            ("5s", Duration::from_secs(5)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("300s", Duration::from_secs(300)),
        ];
        for (text, want) in good {
            assert_eq!(Duration::parse_value(text), Ok(want), "{text}");
        }
        let bad = [
            "",
            "5",
            "s",
            "1.5s",
            "-1s",
            "+1s",
            " 5s",
            "5s ",
            "5 s",
            "5S",
            "5sec",
            "1w",
            "5ms5",
            "99999999999999999999s",
            "999999999999999999m",
        ];
        for text in bad {
            let err = Duration::parse_value(text).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{text}: {err}");
        }
    }

    #[test]
    fn timeouts_must_be_positive() {
        assert_eq!(
            Timeout::parse_value("1ms"),
            Ok(Timeout(Duration::from_millis(1)))
        );
        let err = Timeout::parse_value("0ms").unwrap_err();
        assert!(err.contains("greater than zero"), "{err}");
    }

    #[test]
    fn keywords_list_the_choices() {
        assert_eq!(Mode::parse_value("reverse"), Ok(Mode::Reverse));
        assert_eq!(
            Mode::parse_value("revers").unwrap_err(),
            "invalid value \"revers\" (expected \"forward\", \"reverse\", \"intercept\" or \
             \"tproxy\")"
        );
        assert_eq!(Mode::parse_value("tproxy"), Ok(Mode::Tproxy));
        assert_eq!(Mode::parse_value("intercept"), Ok(Mode::Intercept));
        assert_eq!(
            XForwardedFor::parse_value("Append").unwrap_err(),
            "invalid value \"Append\" (expected \"append\", \"replace\" or \"off\")"
        );
        assert_eq!(LogFormat::parse_value("combined"), Ok(LogFormat::Combined));
        assert_eq!(LogFormat::parse_value("json"), Ok(LogFormat::Json));
        assert_eq!(LogTarget::parse_value("off"), Ok(LogTarget::Off));
        assert_eq!(
            LogTarget::parse_value("/var/log/a.log"),
            Ok(LogTarget::File("/var/log/a.log".into()))
        );
        assert!(LogTarget::parse_value("").is_err());
    }

    #[test]
    fn networks() {
        let good = [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("fc00::/7", "fc00::/7"),
            ("192.168.1.7", "192.168.1.7/32"),
            ("::1", "::1/128"),
        ];
        for (text, want) in good {
            assert_eq!(ipnet::IpNet::parse_value(text).unwrap().to_string(), want);
        }
        for text in ["10.0.0.0/33", "10.0.0/8", "banana", "", "10.0.0.0/"] {
            let err = ipnet::IpNet::parse_value(text).unwrap_err();
            assert!(err.starts_with("invalid network"), "{text}: {err}");
        }
        let err = ipnet::IpNet::parse_value("10.0.0.1/8").unwrap_err();
        assert!(err.contains("did you mean \"10.0.0.0/8\""), "{err}");
    }

    #[test]
    fn route_hosts() {
        let good = [
            (
                "WWW.Example.com",
                HostMatch::Exact("www.example.com".into()),
            ),
            ("*.Example.com", HostMatch::Suffix(".example.com".into())),
            ("*", HostMatch::Any),
            ("127.0.0.1", HostMatch::Exact("127.0.0.1".into())),
            ("[::1]", HostMatch::Exact("[::1]".into())),
        ];
        for (text, want) in good {
            assert_eq!(HostMatch::parse_value(text), Ok(want), "{text}");
        }
        for text in [
            "",
            "*.",
            "*example.com",
            "a.*.com",
            "**",
            "a..b",
            ".a",
            "a.",
            "a b",
            "a:80",
            "[::1",
        ] {
            let err = HostMatch::parse_value(text).unwrap_err();
            assert!(err.starts_with("invalid route host"), "{text}: {err}");
        }
    }

    #[test]
    fn origins() {
        let good = [
            ("http://127.0.0.1:8080", "127.0.0.1", 8080, false),
            ("http://Example.COM", "example.com", 80, false),
            ("HTTP://example.com/", "example.com", 80, false),
            ("http://[::1]:81", "::1", 81, false),
            ("http://[::1]", "::1", 80, false),
            ("https://example.com", "example.com", 443, true),
            ("HTTPS://example.com:8443/", "example.com", 8443, true),
            ("https://[::1]", "::1", 443, true),
        ];
        for (text, host, port, tls) in good {
            let origin = OriginAddr::parse_value(text).unwrap();
            assert_eq!(
                (origin.host.as_str(), origin.port, origin.tls),
                (host, port, tls),
                "{text}"
            );
        }
        let bad = [
            ("ftp://example.com", "unsupported scheme \"ftp\""),
            ("https://example.com/x", "no path, query or fragment"),
            ("example.com:80", "expected http://host[:port]"),
            (
                "http://example.com/x",
                "no path, query or fragment (got \"/x\")",
            ),
            ("http://example.com?q", "no path, query or fragment"),
            ("http://u@example.com", "user information"),
            ("http://example.com:0", "invalid port \"0\""),
            ("http://example.com:65536", "invalid port \"65536\""),
            ("http://example.com:", "invalid port \"\""),
            ("http://example.com:+80", "invalid port"),
            ("http://", "expected http://host[:port]"),
            ("http://[::1]x", "expected http://host[:port]"),
            ("http://[zz]:80", "expected http://host[:port]"),
            ("http://a b", "expected http://host[:port]"),
        ];
        for (text, want) in bad {
            let err = OriginAddr::parse_value(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn host_headers_and_pseudonyms() {
        assert_eq!(HostHeader::parse_value("pass"), Ok(HostHeader::Pass));
        assert_eq!(HostHeader::parse_value("Origin"), Ok(HostHeader::Origin));
        assert_eq!(
            HostHeader::parse_value("www.example.com:8080"),
            Ok(HostHeader::Fixed("www.example.com:8080".into()))
        );
        assert!(HostHeader::parse_value("a b").is_err());
        assert!(HostHeader::parse_value("").is_err());
        assert!(HostHeader::parse_value("a\r\nX: y").is_err());
        assert_eq!(
            Pseudonym::parse_value("sepia-1"),
            Ok(Pseudonym("sepia-1".into()))
        );
        assert!(Pseudonym::parse_value("a b").is_err());
        assert!(Pseudonym::parse_value("a/b").is_err());
        assert!(Pseudonym::parse_value("").is_err());
    }

    #[test]
    fn socket_addresses() {
        let addr = SocketAddr::parse_value("[::1]:3128").unwrap();
        assert_eq!(addr, "[::1]:3128".parse().unwrap());
        for text in ["localhost:3128", "127.0.0.1", "::1:3128", "127.0.0.1:99999"] {
            let err = SocketAddr::parse_value(text).unwrap_err();
            assert!(err.starts_with("invalid address"), "{text}: {err}");
        }
    }
}

/// A size in bytes: a whole number with a unit, `B`, `KiB`, `MiB` or `GiB` ("256MiB").
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ByteSize(pub u64);

impl ConfigValue for ByteSize {
    const EXPECTING: &'static str = "a size string such as \"256MiB\"";
    fn parse_value(text: &str) -> Result<Self, String> {
        let digits_end = text
            .bytes()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        let scale: u64 = match unit {
            "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => 0,
        };
        digits
            .parse::<u64>()
            .ok()
            .filter(|_| scale > 0)
            .and_then(|n| n.checked_mul(scale))
            .map(ByteSize)
            .ok_or_else(|| {
                format!(
                    "invalid size \"{text}\" (expected a whole number and a unit: \
                     \"512B\", \"64KiB\", \"256MiB\" or \"2GiB\")"
                )
            })
    }
}

/// A URL regular expression, compiled once here so a bad pattern is a configuration error.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UrlPattern(pub String);

impl ConfigValue for UrlPattern {
    const EXPECTING: &'static str = "a regular expression string";
    fn parse_value(text: &str) -> Result<Self, String> {
        regex::Regex::new(text)
            .map(|_| UrlPattern(text.to_owned()))
            .map_err(|e| format!("invalid regular expression: {e}"))
    }
}

#[cfg(test)]
mod cache_value_tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(ByteSize::parse_value("256MiB"), Ok(ByteSize(256 << 20)));
        assert_eq!(ByteSize::parse_value("512B"), Ok(ByteSize(512)));
        assert_eq!(ByteSize::parse_value("2GiB"), Ok(ByteSize(2 << 30)));
        for bad in [
            "",
            "256",
            "256MB",
            "MiB",
            "1.5MiB",
            "-1KiB",
            "99999999999999GiB",
        ] {
            assert!(ByteSize::parse_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn day_durations_and_patterns() {
        assert_eq!(
            Duration::parse_value("3d"),
            Ok(Duration::from_secs(3 * 86_400))
        );
        assert!(UrlPattern::parse_value(r"\.(jpg|png)$").is_ok());
        assert!(UrlPattern::parse_value("(unclosed").is_err());
    }
}
