//! The file as serde sees it: one struct per table, `deny_unknown_fields` everywhere, and every
//! string or number checked while it is deserialised so that toml can attach the value's span
//! (and `serde_path_to_error` its key path) to the error. The `Default` impls here are the one
//! place where the defaults documented in the README live.

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::time::Duration;

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use toml::Spanned;

use crate::model::{
    DiskAdmission, DiskIo, EventLogFormat, EventLogLevel, HostHeader, HostMatch, LogFormat,
    LogTarget, Mode, OriginAddr, XForwardedFor,
};
use crate::values::{ByteSize, ConfigValue, Pseudonym, TargetedFieldName, Timeout, UrlPattern};

/// A TOML string parsed by `T`'s strict [`ConfigValue`] parser.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Parsed<T>(pub T);

impl<'de, T: ConfigValue> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor<T>(PhantomData<T>);
        impl<T: ConfigValue> serde::de::Visitor<'_> for StrVisitor<T> {
            type Value = Parsed<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::EXPECTING)
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Parsed<T>, E> {
                T::parse_value(text).map(Parsed).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(StrVisitor(PhantomData))
    }
}

/// Deserialises `T` only from a TOML table. serde's derived structs also accept a sequence of
/// their fields in order, which would let `[[timeouts]]` or `server = [4, "30s"]` through (or
/// fail with a baffling message); a config key means the same thing only when it is named.
fn table<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct TableVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for TableVisitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    deserializer.deserialize_map(TableVisitor(PhantomData))
}

/// An array of tables (`[[listen]]`), each element held to [`table`]'s rule.
fn tables<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Element<T>(T);
    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Element<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            table(deserializer).map(Element)
        }
    }
    let elements = Vec::<Element<T>>::deserialize(deserializer)?;
    Ok(elements.into_iter().map(|element| element.0).collect())
}

/// An optional table (`[auth]`): absent means `None`, present is held to [`table`]'s rule.
fn optional_table<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    table(deserializer).map(Some)
}

/// A TOML integer in `MIN..=MAX`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = i64::deserialize(deserializer)?;
        match u64::try_from(value) {
            Ok(value) if (MIN..=MAX).contains(&value) => Ok(Bounded(value)),
            _ => Err(D::Error::custom(format!(
                "{value} is out of range (expected {MIN} to {MAX})"
            ))),
        }
    }
}

impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    pub(crate) fn as_usize(self) -> usize {
        // MAX values used in this crate all fit in a 32-bit usize.
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// Most worker threads accepted; more is a typo, not a machine.
pub(crate) const MAX_WORKERS: u64 = 1024;
/// Largest `max_request_head`: 1 MiB. A bigger head is an attack, not a request.
pub(crate) const MAX_REQUEST_HEAD: u64 = 1024 * 1024;
/// Largest `max_headers`: a 1 MiB head cannot hold many more than this useful fields.
pub(crate) const MAX_HEADERS: u64 = 65_536;

#[derive(Deserialize, Debug, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawFile {
    #[serde(deserialize_with = "table")]
    pub server: RawServer,
    #[serde(deserialize_with = "tables")]
    pub listen: Vec<RawListener>,
    #[serde(deserialize_with = "table")]
    pub limits: RawLimits,
    #[serde(deserialize_with = "table")]
    pub timeouts: RawTimeouts,
    #[serde(deserialize_with = "table")]
    pub headers: RawHeaders,
    #[serde(deserialize_with = "table")]
    pub forward: RawForward,
    #[serde(deserialize_with = "tables")]
    pub route: Vec<RawRoute>,
    #[serde(deserialize_with = "table")]
    pub access_log: RawAccessLog,
    #[serde(deserialize_with = "table")]
    pub cache: RawCache,
    #[serde(deserialize_with = "tables")]
    pub acl: Vec<RawAcl>,
    #[serde(deserialize_with = "tables")]
    pub http_access: Vec<RawHttpAccess>,
    #[serde(deserialize_with = "optional_table")]
    pub auth: Option<crate::auth::RawAuth>,
    #[serde(deserialize_with = "optional_table")]
    pub admin: Option<crate::admin::RawAdmin>,
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawCache {
    pub enabled: bool,
    pub memory: Spanned<Parsed<ByteSize>>,
    pub max_object: Spanned<Parsed<ByteSize>>,
    pub sendfile: bool,
    pub sendfile_min: Parsed<ByteSize>,
    pub sendfile_dir: Option<Spanned<String>>,
    pub heuristic_percent: Bounded<0, 100>,
    pub heuristic_max: Parsed<Duration>,
    #[serde(deserialize_with = "tables")]
    pub refresh: Vec<RawRefresh>,
    pub purge_allow: Vec<Parsed<ipnet::IpNet>>,
    #[serde(deserialize_with = "tables")]
    pub disk: Vec<RawDisk>,
    pub disk_read_threads: Bounded<1, 1024>,
    pub disk_io: Parsed<DiskIo>,
    pub disk_ring_depth: Bounded<1, 1024>,
}

impl Default for RawCache {
    fn default() -> Self {
        RawCache {
            enabled: true,
            memory: Spanned::new(0..0, Parsed(ByteSize(256 << 20))),
            max_object: Spanned::new(0..0, Parsed(ByteSize(16 << 20))),
            sendfile: true,
            sendfile_min: Parsed(ByteSize(64 << 10)),
            sendfile_dir: None,
            heuristic_percent: Bounded(10),
            heuristic_max: Parsed(Duration::from_secs(86_400)),
            refresh: Vec::new(),
            purge_allow: ["127.0.0.0/8", "::1/128"]
                .iter()
                .filter_map(|net| net.parse().ok())
                .map(Parsed)
                .collect(),
            disk: Vec::new(),
            disk_read_threads: Bounded(16),
            disk_io: Parsed(DiskIo::IoUring),
            disk_ring_depth: Bounded(24),
        }
    }
}

/// `[[cache.disk]]`: a persistent cache directory.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDisk {
    pub path: Spanned<String>,
    pub size: Spanned<Parsed<ByteSize>>,
    pub write_budget: Option<Parsed<ByteSize>>,
    pub admission: Option<Parsed<DiskAdmission>>,
}

/// `[[cache.refresh]]`: a Squid `refresh_pattern`-like heuristic rule.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRefresh {
    pub pattern: Parsed<UrlPattern>,
    pub min: Parsed<Duration>,
    pub percent: Bounded<0, 1000>,
    pub max: Parsed<Duration>,
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawServer {
    pub workers: Bounded<0, MAX_WORKERS>,
    pub shutdown_grace: Parsed<Duration>,
    pub pid_file: Option<std::path::PathBuf>,
    pub log_format: Parsed<EventLogFormat>,
    pub log_level: Parsed<EventLogLevel>,
}

impl Default for RawServer {
    fn default() -> Self {
        RawServer {
            workers: Bounded(0),
            shutdown_grace: Parsed(Duration::from_secs(30)),
            pid_file: None,
            log_format: Parsed(EventLogFormat::Text),
            log_level: Parsed(EventLogLevel::Info),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawListener {
    pub address: Spanned<Parsed<SocketAddr>>,
    pub mode: Spanned<Parsed<Mode>>,
    /// Only meaningful on a tproxy listener; `None` means the default (true there).
    #[serde(default)]
    pub spoof_client: Option<Spanned<bool>>,
    /// RFC 9213's target list; `None` means the mode's default.
    #[serde(default)]
    pub targeted_cache_control: Option<Spanned<Vec<Parsed<TargetedFieldName>>>>,
    /// `[listen.tls]`: TLS termination; `None` means plain TCP.
    #[serde(default)]
    pub tls: Option<Spanned<crate::tls::RawTls>>,
    /// Prior-knowledge HTTP/2 over cleartext (RFC 9113 §3.3); off by default.
    #[serde(default)]
    pub h2c: bool,
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub max_request_head: Bounded<1, MAX_REQUEST_HEAD>,
    pub max_headers: Bounded<1, MAX_HEADERS>,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            max_request_head: Bounded(65_536),
            max_headers: Bounded(100),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub connect: Parsed<Timeout>,
    pub request_head: Parsed<Timeout>,
    pub client_idle: Parsed<Timeout>,
    pub origin_first_byte: Parsed<Timeout>,
    pub origin_idle: Parsed<Timeout>,
    pub tunnel_idle: Parsed<Timeout>,
}

impl Default for RawTimeouts {
    fn default() -> Self {
        let secs = |n| Parsed(Timeout(Duration::from_secs(n)));
        RawTimeouts {
            connect: secs(5),
            request_head: secs(30),
            client_idle: secs(60),
            origin_first_byte: secs(60),
            origin_idle: secs(60),
            tunnel_idle: secs(300),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawHeaders {
    pub via: bool,
    pub via_pseudonym: Parsed<Pseudonym>,
    pub x_forwarded_for: Parsed<XForwardedFor>,
    pub forwarded: bool,
}

impl Default for RawHeaders {
    fn default() -> Self {
        RawHeaders {
            via: true,
            via_pseudonym: Parsed(Pseudonym("sepia".into())),
            x_forwarded_for: Parsed(XForwardedFor::Append),
            forwarded: false,
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawForward {
    /// Spanned so that an explicit `allow` (span not `0..0`) can be told from the default.
    pub allow: Spanned<Vec<Parsed<ipnet::IpNet>>>,
    pub connect_ports: Vec<Bounded<1, 65535>>,
}

/// Loopback and the private ranges (RFC 1918, RFC 4193 unique-local, link-local): an open
/// forward proxy on the Internet is abused within hours, so the default serves only these.
pub(crate) const DEFAULT_ALLOW: [&str; 7] = [
    "127.0.0.0/8",
    "::1/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "fc00::/7",
    "fe80::/10",
];

impl Default for RawForward {
    fn default() -> Self {
        RawForward {
            allow: Spanned::new(
                0..0,
                DEFAULT_ALLOW
                    .iter()
                    .filter_map(|net| net.parse().ok())
                    .map(Parsed)
                    .collect(),
            ),
            connect_ports: vec![Bounded(443)],
        }
    }
}

fn default_host_header() -> Parsed<HostHeader> {
    Parsed(HostHeader::Pass)
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub host: Spanned<Parsed<HostMatch>>,
    pub origins: Spanned<Vec<Parsed<OriginAddr>>>,
    #[serde(default = "default_host_header")]
    pub host_header: Parsed<HostHeader>,
    /// The route's TLS toward its https origins (`crate::origin_tls`).
    #[serde(default)]
    pub tls_ca: Option<Spanned<String>>,
    #[serde(default)]
    pub tls_server_name: Option<Spanned<Parsed<crate::origin_tls::TlsServerName>>>,
    #[serde(default)]
    pub tls_insecure_skip_verify: Option<Spanned<bool>>,
    /// Speak HTTP/2 to the route's origins where they can (`Route::http2`).
    #[serde(default)]
    pub http2: bool,
    /// `[route.health]`: passive health of the route's origins (`Route::health`).
    #[serde(default)]
    pub health: RawHealth,
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawHealth {
    pub fail_after: Bounded<1, 1000>,
    pub down_for: Spanned<Parsed<Duration>>,
    /// Active checks (`crate::health`): on when `interval` is set; the other keys are
    /// errors without it.
    pub interval: Option<Spanned<Parsed<Duration>>>,
    pub path: Option<Spanned<String>>,
    pub expect: Option<Spanned<crate::health::ExpectValue>>,
    pub timeout: Option<Spanned<Parsed<Duration>>>,
    pub rise: Option<Spanned<Bounded<1, 100>>>,
    pub fall: Option<Spanned<Bounded<1, 100>>>,
    pub host: Option<Spanned<String>>,
}

impl Default for RawHealth {
    fn default() -> Self {
        let health = crate::model::OriginHealth::default();
        RawHealth {
            fail_after: Bounded(u64::from(health.fail_after)),
            down_for: Spanned::new(0..0, Parsed(health.down_for)),
            interval: None,
            path: None,
            expect: None,
            timeout: None,
            rise: None,
            fall: None,
            host: None,
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawAccessLog {
    pub path: Parsed<LogTarget>,
    pub format: Parsed<LogFormat>,
}

impl Default for RawAccessLog {
    fn default() -> Self {
        RawAccessLog {
            path: Parsed(LogTarget::Stdout),
            format: Parsed(LogFormat::Squid),
        }
    }
}

/// `[[acl]]`: a named Squid-style ACL (see `crate::access`).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAcl {
    pub name: Spanned<String>,
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    pub values: Spanned<Vec<Spanned<AclValue>>>,
    #[serde(default)]
    pub header: Option<Spanned<String>>,
    #[serde(default)]
    pub ignore_case: Option<Spanned<bool>>,
}

/// One ACL value: a string, or an integer for ports (`values = [80, "8000-8080"]`).
#[derive(Debug)]
pub(crate) struct AclValue(pub String);

impl<'de> Deserialize<'de> for AclValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        text_or_integer(deserializer, "a string (or an integer port)").map(AclValue)
    }
}

/// A value written as a string or an integer, kept as text (an integer in its decimal form);
/// `expecting` names what the key takes, for the error.
pub(crate) fn text_or_integer<'de, D: Deserializer<'de>>(
    deserializer: D,
    expecting: &'static str,
) -> Result<String, D::Error> {
    struct ValueVisitor(&'static str);
    impl serde::de::Visitor<'_> for ValueVisitor {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<String, E> {
            Ok(text.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<String, E> {
            Ok(n.to_string())
        }
    }
    deserializer.deserialize_any(ValueVisitor(expecting))
}

/// `[[http_access]]`: one ordered allow/deny rule over ACL names (`"!name"` negates).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttpAccess {
    pub action: Parsed<sepia_access::Action>,
    pub acl: Spanned<Vec<Spanned<String>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_allow_list_parses_completely() {
        assert_eq!(
            RawForward::default().allow.get_ref().len(),
            DEFAULT_ALLOW.len()
        );
    }
}
