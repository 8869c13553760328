//! `[route.health]`: passive health (`fail_after`, `down_for`) and active checks (`interval`,
//! `path`, `expect`, `timeout`, `rise`, `fall`, `host`), checked into an [`OriginHealth`].

use std::ops::Range;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::error::ConfigError;
use crate::model::{ActiveCheck, OriginHealth, StatusRange};
use crate::raw::{Bounded, Parsed, RawHealth};

/// Shortest `interval`: checks more often than this are load, not information.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_EXPECT: StatusRange = StatusRange { min: 200, max: 399 };
/// HAProxy's defaults (`rise 2`, `fall 3`).
const DEFAULT_RISE: u32 = 2;
const DEFAULT_FALL: u32 = 3;

/// An `expect` value as written: a status (integer) or a string such as `"2xx-3xx"`.
#[derive(Debug)]
pub(crate) struct ExpectValue(String);

impl<'de> Deserialize<'de> for ExpectValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::raw::text_or_integer(
            deserializer,
            "a status (200) or a range of statuses (\"2xx-3xx\", \"200-299\")",
        )
        .map(ExpectValue)
    }
}

/// `200`, `"2xx"`, `"200-299"`, `"2xx-3xx"`: statuses 100 to 599, the low end first.
pub(crate) fn parse_expect(text: &str) -> Result<StatusRange, String> {
    let bad = || {
        format!(
            "invalid status range \"{text}\" (expected a status such as 200, or a range such \
             as \"2xx\", \"200-299\" or \"2xx-3xx\", within 100 to 599)"
        )
    };
    let one = |part: &str| -> Option<(u16, u16)> {
        let b = part.as_bytes();
        if b.len() != 3 || !(b'1'..=b'5').contains(&b[0]) {
            return None;
        }
        if &b[1..] == b"xx" {
            let hundreds = u16::from(b[0] - b'0') * 100;
            return Some((hundreds, hundreds + 99));
        }
        let n: u16 = part
            .parse()
            .ok()
            .filter(|_| b.iter().all(u8::is_ascii_digit))?;
        Some((n, n))
    };
    let (low, high) = match text.split_once('-') {
        None => one(text).ok_or_else(bad)?,
        Some((a, b)) => {
            let (a, b) = (one(a).ok_or_else(bad)?, one(b).ok_or_else(bad)?);
            (a.0, b.1)
        }
    };
    if low > high {
        return Err(format!(
            "invalid status range \"{text}\": its low end is above its high end"
        ));
    }
    Ok(StatusRange {
        min: low,
        max: high,
    })
}

/// A request target the check can send as it is: origin-form, visible ASCII (RFC 9112 §3.2.1).
fn valid_path(path: &str) -> bool {
    path.starts_with('/') && path.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// A Host value: a name or IP literal with an optional port, nothing that could end the field.
fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 260
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
}

/// Route `index`'s `[route.health]`.
pub(crate) fn resolve_health(
    mut raw: RawHealth,
    index: usize,
    file: &str,
    text: &str,
) -> Result<OriginHealth, ConfigError> {
    let fail = |span: Range<usize>, key: &str, why: String| {
        ConfigError::at(
            file,
            text,
            Some(span),
            Some(format!("route[{index}].health.{key}")),
            why,
        )
    };
    let down_for = raw.down_for.get_ref().0;
    if down_for < Duration::from_secs(1) {
        let why = "must be at least 1s".to_string();
        return Err(fail(raw.down_for.span(), "down_for", why));
    }
    let fail_after = raw.fail_after.0 as u32;
    let active = match raw.interval.take() {
        Some(interval) => Some(active_check(interval, raw, &fail)?),
        None => match without_interval(&raw) {
            Some((span, key)) => {
                let why = "active checks are on only with `interval` set (add it, or remove \
                           this key)";
                return Err(fail(span, key, why.into()));
            }
            None => None,
        },
    };
    Ok(OriginHealth {
        fail_after,
        down_for,
        active,
    })
}

/// The first active-check key set without `interval`, which would do nothing.
fn without_interval(raw: &RawHealth) -> Option<(Range<usize>, &'static str)> {
    [
        raw.path.as_ref().map(|v| (v.span(), "path")),
        raw.expect.as_ref().map(|v| (v.span(), "expect")),
        raw.timeout.as_ref().map(|v| (v.span(), "timeout")),
        raw.rise.as_ref().map(|v| (v.span(), "rise")),
        raw.fall.as_ref().map(|v| (v.span(), "fall")),
        raw.host.as_ref().map(|v| (v.span(), "host")),
    ]
    .into_iter()
    .flatten()
    .next()
}

/// The active checks of a `[route.health]` whose `interval` is set.
fn active_check(
    interval: Spanned<Parsed<Duration>>,
    raw: RawHealth,
    fail: &dyn Fn(Range<usize>, &str, String) -> ConfigError,
) -> Result<ActiveCheck, ConfigError> {
    let RawHealth {
        path,
        expect,
        timeout,
        rise,
        fall,
        host,
        ..
    } = raw;
    let interval_span = interval.span();
    let interval = interval.into_inner().0;
    if interval < MIN_INTERVAL {
        return Err(fail(
            interval_span,
            "interval",
            "must be at least 100ms".into(),
        ));
    }
    let path = match path {
        None => "/".to_string(),
        Some(p) if valid_path(p.get_ref()) => p.into_inner(),
        Some(p) => {
            let why = format!("invalid path \"{}\" (expected an origin-form target such as \"/health\": a '/' then visible ASCII, no '#')", p.get_ref());
            return Err(fail(p.span(), "path", why));
        }
    };
    let expect = match expect {
        None => DEFAULT_EXPECT,
        Some(e) => parse_expect(&e.get_ref().0).map_err(|why| fail(e.span(), "expect", why))?,
    };
    let timeout = match timeout {
        None => DEFAULT_TIMEOUT,
        Some(t) if t.get_ref().0.is_zero() => {
            return Err(fail(t.span(), "timeout", "must be more than 0s".into()))
        }
        Some(t) => t.into_inner().0,
    };
    let host = match host {
        None => None,
        Some(h) if valid_host(h.get_ref()) => Some(h.into_inner()),
        Some(h) => {
            let why = format!("invalid host \"{}\" (expected a name or address with an optional port, such as \"www.example.com\")", h.get_ref());
            return Err(fail(h.span(), "host", why));
        }
    };
    let count = |v: Option<Spanned<Bounded<1, 100>>>, default| {
        v.map_or(default, |v| v.into_inner().0 as u32)
    };
    Ok(ActiveCheck {
        interval,
        path,
        expect,
        timeout,
        rise: count(rise, DEFAULT_RISE),
        fall: count(fall, DEFAULT_FALL),
        host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_takes_statuses_and_ranges() {
        let r = |min, max| Ok(StatusRange { min, max });
        assert_eq!(parse_expect("200"), r(200, 200));
        assert_eq!(parse_expect("2xx"), r(200, 299));
        assert_eq!(parse_expect("2xx-3xx"), r(200, 399));
        assert_eq!(parse_expect("200-204"), r(200, 204));
        assert_eq!(parse_expect("204-3xx"), r(204, 399));
        for bad in [
            "", "20", "600", "099", "6xx", "2x", "3xx-2xx", "+200", "2xx-", "abc",
        ] {
            assert!(parse_expect(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_and_hosts_cannot_break_the_request() {
        assert!(valid_path("/") && valid_path("/health?full=1"));
        assert!(!valid_path("health") && !valid_path("/a b") && !valid_path("/a\r\nX: y"));
        assert!(valid_host("www.example.com") && valid_host("[::1]:8080"));
        assert!(!valid_host("") && !valid_host("a b") && !valid_host("a\r\nb"));
    }
}
