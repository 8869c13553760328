//! The facts about one request that rules look at, all borrowed from the caller.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::SystemTime;

use jiff::tz::TimeZone;

/// What is known about the destination's IP addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dst<'a> {
    /// Not looked up yet: a `dst` ACL reached makes [`crate::AccessRules::check`] answer
    /// [`crate::NeedDst`] so the caller resolves only when a rule needs it.
    Unresolved,
    /// The host's addresses; an IP literal is its own single address. A `dst` ACL matches
    /// when any of them is in one of its networks.
    Resolved(&'a [IpAddr]),
    /// The lookup failed: `dst` ACLs do not match (Squid treats an unresolvable destination
    /// the same way), so `!dst_acl` does.
    Failed,
}

/// The request's header fields, looked up by name without copying.
pub trait HeaderLookup {
    /// Calls `matches` with the value of each field named `name` (compared case-insensitively,
    /// RFC 9110 §5.1), in order, until it returns true; returns whether it did.
    fn any_value(&self, name: &str, matches: &mut dyn FnMut(&[u8]) -> bool) -> bool;
}

/// A request without header fields (e.g. in tests of other ACL types).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHeaders;

impl HeaderLookup for NoHeaders {
    fn any_value(&self, _: &str, _: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        false
    }
}

/// A slice of name/value pairs, e.g. `&[("User-Agent", b"curl/8".as_slice())][..]`.
impl HeaderLookup for &[(&str, &[u8])] {
    fn any_value(&self, name: &str, matches: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .any(|(_, v)| matches(v))
    }
}

/// One request's facts.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The client's address (`src`). IPv4-mapped IPv6 is checked as IPv4.
    pub client: IpAddr,
    /// The destination's addresses (`dst`), after DNS resolution.
    pub dst: Dst<'a>,
    /// The destination host without port, IPv6 without brackets (`dstdomain`).
    pub host: &'a [u8],
    /// The destination port (`port`).
    pub port: u16,
    /// The request method as sent (`method`).
    pub method: &'a [u8],
    /// The whole absolute URL, `http://host[:port]/path?query`; for CONNECT `host:port`
    /// (`url_regex`).
    pub url: &'a [u8],
    /// Path and query (`urlpath_regex`); empty for CONNECT.
    pub path: &'a [u8],
    /// The header fields (`req_header`).
    /// `Sync` so that a caller may hold the facts across an await (a dst lookup).
    pub headers: &'a (dyn HeaderLookup + Sync),
    /// The authenticated user, if any (`proxy_auth`).
    pub user: Option<&'a str>,
    /// The current time (`time`).
    pub now: SystemTime,
    /// The zone `now` is read in for `time` ACLs.
    pub tz: &'a LocalZone,
}

/// The zone `time` ACLs read the clock in: `TZ` if set, else the system's
/// (`/etc/localtime`), looked up when a `time` ACL first needs it. Finding the system's zone
/// walks the whole zoneinfo database (jiff lists its names), 0.5 ms of a start that most
/// configurations, without `time` ACLs, never need (bench/RESULTS.md, "Issue 21, fifteenth
/// stop").
#[derive(Debug, Default)]
pub struct LocalZone(OnceLock<TimeZone>);

impl LocalZone {
    /// The system's zone, looked up on first use.
    pub fn system() -> LocalZone {
        LocalZone::default()
    }

    /// A zone given beforehand.
    pub fn fixed(tz: TimeZone) -> LocalZone {
        LocalZone(OnceLock::from(tz))
    }

    /// The zone, looked up now if this is its first use.
    pub fn get(&self) -> &TimeZone {
        self.0.get_or_init(TimeZone::system)
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("client", &self.client)
            .field("dst", &self.dst)
            .field("host", &String::from_utf8_lossy(self.host))
            .field("port", &self.port)
            .field("method", &String::from_utf8_lossy(self.method))
            .field("url", &String::from_utf8_lossy(self.url))
            .field("user", &self.user)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}
