//! Strict parsers for ACL values and the small matchers built from them. Each error message
//! says what was wrong and what is expected; the caller adds where (file:line:key).

use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

/// A network in CIDR notation; a bare address means that one host. Host bits set under the
/// mask (`10.0.0.1/8`) are rejected as the likely typo they are.
pub fn parse_network(text: &str) -> Result<IpNet, String> {
    let net = match text.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(ip) => IpNet::from(ip),
            Err(_) => {
                return Err(format!(
                    "invalid network \"{text}\" (expected CIDR like \"10.0.0.0/8\" or \
                     \"fc00::/7\", or a single address)"
                ))
            }
        },
    };
    if net.trunc() != net {
        return Err(format!(
            "network \"{text}\" has host bits set (did you mean \"{}\"?)",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Whether `ip` is in one of `nets`. An IPv4-mapped IPv6 address (what a dual-stack socket
/// reports for an IPv4 peer) is checked as the IPv4 address it stands for, and also as itself
/// so that an explicit `::ffff:0:0/96` still works.
pub fn in_networks(nets: &[IpNet], ip: IpAddr) -> bool {
    let canonical = ip.to_canonical();
    nets.iter()
        .any(|net| net.contains(&canonical) || net.contains(&ip))
}

/// A `dstdomain` value: `example.com` (exactly that host) or `.example.com` (the domain and
/// every subdomain, as in Squid). Stored lowercase, one trailing dot removed, IPv6 literals
/// without brackets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    Exact(String),
    /// Stored with its leading dot.
    Suffix(String),
}

pub(crate) fn domain(text: &str) -> Result<Domain, String> {
    let bad = || {
        format!(
            "invalid domain \"{text}\" (expected a host name such as \"example.com\", \
             \".example.com\" for the domain and its subdomains, or an IP address)"
        )
    };
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return match inner.parse::<Ipv6Addr>() {
            Ok(ip) => Ok(Domain::Exact(ip.to_string())),
            Err(_) => Err(bad()),
        };
    }
    if let Ok(ip) = text.parse::<Ipv6Addr>() {
        return Ok(Domain::Exact(ip.to_string()));
    }
    let trimmed = text.strip_suffix('.').unwrap_or(text);
    let (suffix, name) = match trimmed.strip_prefix('.') {
        Some(name) => (true, name),
        None => (false, trimmed),
    };
    if !is_host_name(name) {
        return Err(bad());
    }
    let name = name.to_ascii_lowercase();
    Ok(if suffix {
        Domain::Suffix(format!(".{name}"))
    } else {
        Domain::Exact(name)
    })
}

impl Domain {
    /// `host` without port and without brackets; any case; one trailing dot is ignored.
    pub(crate) fn matches(&self, host: &[u8]) -> bool {
        let host = host.strip_suffix(b".").unwrap_or(host);
        match self {
            Domain::Exact(name) => name.as_bytes().eq_ignore_ascii_case(host),
            Domain::Suffix(suffix) => {
                let bare = &suffix.as_bytes()[1..];
                host.eq_ignore_ascii_case(bare)
                    || (host.len() > suffix.len()
                        && host[host.len() - suffix.len()..]
                            .eq_ignore_ascii_case(suffix.as_bytes()))
            }
        }
    }
}

/// A DNS name or IPv4 literal: dot-separated non-empty labels of letters, digits, `-`, `_`.
pub fn is_host_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A `port` value: `443` or an inclusive range `8000-8080`, ports 1 to 65535.
pub(crate) fn port_range(text: &str) -> Result<(u16, u16), String> {
    let port = |digits: &str| -> Option<u16> {
        if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u16>().ok().filter(|&p| p != 0)
    };
    let bad = || {
        format!(
            "invalid port \"{text}\" (expected a port 1 to 65535 or a range such as \
             \"8000-8080\")"
        )
    };
    let (low, high) = match text.split_once('-') {
        Some((low, high)) => (port(low).ok_or_else(bad)?, port(high).ok_or_else(bad)?),
        None => {
            let p = port(text).ok_or_else(bad)?;
            (p, p)
        }
    };
    if low > high {
        return Err(format!(
            "port range \"{text}\" is reversed (did you mean \"{high}-{low}\"?)"
        ));
    }
    Ok((low, high))
}

/// A `method` value: an HTTP token (RFC 9110 §9.1, §5.6.2), compared case-sensitively as
/// methods are.
pub(crate) fn method(text: &str) -> Result<Box<[u8]>, String> {
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !text.is_empty() && text.bytes().all(is_tchar) {
        Ok(text.as_bytes().into())
    } else {
        Err(format!(
            "invalid method \"{text}\" (expected an HTTP method token such as \"GET\" or \
             \"CONNECT\")"
        ))
    }
}

/// A header field name for `req_header`: an HTTP token.
pub(crate) fn header_name(text: &str) -> Result<(), String> {
    method(text).map(|_| ()).map_err(|_| {
        format!("invalid header name \"{text}\" (expected a field name such as \"User-Agent\")")
    })
}

/// A `proxy_auth` user name: printable, no spaces (Squid's helpers split on whitespace).
pub(crate) fn user_name(text: &str) -> Result<(), String> {
    if !text.is_empty() && text.chars().all(|c| !c.is_whitespace() && !c.is_control()) {
        Ok(())
    } else {
        Err(format!(
            "invalid user name \"{text}\" (expected \"REQUIRED\" or user names without spaces)"
        ))
    }
}

/// Days of the week as a bit set, bit 0 = Sunday (jiff's `to_sunday_zero_offset`).
pub(crate) const ALL_DAYS: u8 = 0b111_1111;

/// A `time` value: Squid's `[days] [hh:mm-hh:mm]`, at least one of the two. Days are
/// `S M T W H F A` (Sunday … Saturday) and `D` (Monday to Friday); a range matches from its
/// first minute to its last minute inclusive, as Squid does, so `08:00-17:00` includes
/// 17:00:59. Ranges do not cross midnight (write two values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimeSpec {
    pub days: u8,
    /// Minutes after midnight, `start <= end <= 1440`.
    pub start: u16,
    pub end: u16,
}

impl TimeSpec {
    /// `weekday` 0 = Sunday; `minute` after local midnight.
    pub(crate) fn matches(&self, weekday: u8, minute: u16) -> bool {
        self.days & (1 << weekday) != 0 && self.start <= minute && minute <= self.end
    }
}

pub(crate) fn time_spec(text: &str) -> Result<TimeSpec, String> {
    let expected = "expected days from SMTWHFA (Sunday to Saturday, D = Monday to Friday) \
                    and/or a range hh:mm-hh:mm, e.g. \"MTWHF 08:00-17:30\"";
    let mut days = None;
    let mut range = None;
    for token in text.split_ascii_whitespace() {
        if token.contains(':') {
            if range.is_some() {
                return Err(format!("\"{text}\" has two time ranges ({expected})"));
            }
            range = Some(time_range(token).map_err(|why| format!("{why} ({expected})"))?);
        } else {
            if days.is_some() || range.is_some() {
                return Err(format!("invalid time \"{text}\" ({expected})"));
            }
            days = Some(day_set(token).map_err(|why| format!("{why} ({expected})"))?);
        }
    }
    if days.is_none() && range.is_none() {
        return Err(format!("empty time \"{text}\" ({expected})"));
    }
    let (start, end) = range.unwrap_or((0, 24 * 60));
    Ok(TimeSpec {
        days: days.unwrap_or(ALL_DAYS),
        start,
        end,
    })
}

fn day_set(token: &str) -> Result<u8, String> {
    let mut set = 0u8;
    for c in token.chars() {
        set |= match c {
            'S' => 1 << 0,
            'M' => 1 << 1,
            'T' => 1 << 2,
            'W' => 1 << 3,
            'H' => 1 << 4,
            'F' => 1 << 5,
            'A' => 1 << 6,
            'D' => 0b011_1110,
            _ => return Err(format!("unknown day letter '{c}' in \"{token}\"")),
        };
    }
    Ok(set)
}

fn time_range(token: &str) -> Result<(u16, u16), String> {
    let bad = || format!("invalid time range \"{token}\"");
    let (start, end) = token.split_once('-').ok_or_else(bad)?;
    let start = clock(start).ok_or_else(bad)?;
    let end = clock(end).ok_or_else(bad)?;
    if start > end || start == 24 * 60 {
        return Err(format!(
            "time range \"{token}\" ends before it starts (a range cannot cross midnight: \
             use two values)"
        ));
    }
    Ok((start, end))
}

/// `h:mm` or `hh:mm`, 00:00 to 24:00.
fn clock(text: &str) -> Option<u16> {
    let (h, m) = text.split_once(':')?;
    let digits = |s: &str, max_len| {
        !s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(h, 2) || !digits(m, 2) || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    let minutes = h * 60 + m;
    (m < 60 && minutes <= 24 * 60).then_some(minutes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_v4_v6_and_mapped() {
        assert_eq!(
            parse_network("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_network("::1").unwrap().to_string(), "::1/128");
        assert!(parse_network("10.0.0.1/8")
            .unwrap_err()
            .contains("\"10.0.0.0/8\""));
        for bad in ["", "10.0.0.0/33", "banana", "10.0.0/8"] {
            assert!(
                parse_network(bad)
                    .unwrap_err()
                    .starts_with("invalid network"),
                "{bad}"
            );
        }
        let nets = [
            parse_network("10.0.0.0/8").unwrap(),
            parse_network("2001:db8::/32").unwrap(),
        ];
        let cases = [
            ("10.1.2.3", true),
            ("11.0.0.1", false),
            ("::ffff:10.9.9.9", true),
            ("2001:db8::5", true),
            ("2001:db9::5", false),
        ];
        for (ip, want) in cases {
            assert_eq!(in_networks(&nets, ip.parse().unwrap()), want, "{ip}");
        }
        let mapped = [parse_network("::ffff:0:0/96").unwrap()];
        assert!(in_networks(&mapped, "::ffff:1.2.3.4".parse().unwrap()));
    }

    #[test]
    fn domains_exact_and_suffix() {
        let exact = domain("Example.COM.").unwrap();
        assert_eq!(exact, Domain::Exact("example.com".into()));
        assert!(exact.matches(b"EXAMPLE.com"));
        assert!(exact.matches(b"example.com."));
        assert!(!exact.matches(b"www.example.com"));
        let suffix = domain(".example.com").unwrap();
        for (host, want) in [
            (&b"example.com"[..], true),
            (b"www.Example.com", true),
            (b"a.b.example.com.", true),
            (b"badexample.com", false),
            (b"example.org", false),
            (b"com", false),
        ] {
            assert_eq!(
                suffix.matches(host),
                want,
                "{}",
                String::from_utf8_lossy(host)
            );
        }
        assert!(domain("[::1]").unwrap().matches(b"::1"));
        assert!(domain("::1").unwrap().matches(b"::1"));
        assert!(domain("127.0.0.1").unwrap().matches(b"127.0.0.1"));
        for bad in [
            "",
            ".",
            "..a",
            "a b",
            "*.example.com",
            "a..b",
            "[zz]",
            "a/b",
        ] {
            assert!(
                domain(bad).unwrap_err().starts_with("invalid domain"),
                "{bad}"
            );
        }
    }

    #[test]
    fn ports_and_ranges() {
        assert_eq!(port_range("443"), Ok((443, 443)));
        assert_eq!(port_range("8000-8080"), Ok((8000, 8080)));
        assert_eq!(port_range("1-65535"), Ok((1, 65535)));
        assert!(port_range("8080-8000")
            .unwrap_err()
            .contains("\"8000-8080\""));
        for bad in ["", "0", "65536", "80-", "-80", "8x", " 80", "1-2-3", "+80"] {
            assert!(
                port_range(bad).unwrap_err().starts_with("invalid port"),
                "{bad}"
            );
        }
    }

    #[test]
    fn methods_and_names() {
        assert_eq!(&*method("CONNECT").unwrap(), b"CONNECT");
        assert!(method("GE T").is_err());
        assert!(method("").is_err());
        assert!(header_name("User-Agent").is_ok());
        assert!(header_name("User Agent").is_err());
        assert!(user_name("alice").is_ok());
        assert!(user_name("al ice").is_err());
        assert!(user_name("").is_err());
    }

    #[test]
    fn time_specs() {
        let t = time_spec("MTWHF 08:00-17:30").unwrap();
        assert_eq!((t.days, t.start, t.end), (0b011_1110, 480, 1050));
        assert!(t.matches(1, 480) && t.matches(5, 1050));
        assert!(
            !t.matches(1, 479) && !t.matches(1, 1051) && !t.matches(0, 600) && !t.matches(6, 600)
        );
        let weekend = time_spec("SA").unwrap();
        assert!(weekend.matches(0, 0) && weekend.matches(6, 1439) && !weekend.matches(3, 600));
        let hours = time_spec("00:00-24:00").unwrap();
        assert!((0..7).all(|d| hours.matches(d, 0) && hours.matches(d, 1439)));
        assert_eq!(
            time_spec("D").unwrap().days,
            time_spec("MTWHF").unwrap().days
        );
        assert_eq!(time_spec("9:05-9:05").unwrap().start, 545);
        for bad in [
            "",
            "   ",
            "X",
            "mon",
            "m",
            "08:00",
            "08:00-07:00",
            "24:00-24:00",
            "08:60-09:00",
            "25:00-26:00",
            "8:0-9:00",
            "MTWHF 08:00-17:00 S",
            "08:00-09:00 10:00-11:00",
            "08:00-09:00 M",
        ] {
            assert!(time_spec(bad).is_err(), "{bad:?}");
        }
    }
}
