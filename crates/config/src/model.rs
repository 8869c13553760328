//! The validated, immutable configuration snapshot handed to the proxy.
//!
//! Every value here has already been checked: addresses parse, durations are positive where
//! they must be, origins are `http://host[:port]` or `https://host[:port]`. The proxy never re-validates; a reload
//! builds a new [`Config`] and swaps it in whole.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub use crate::admin::AdminConfig;
pub use crate::auth::{AuthBackend, AuthConfig, HelperConfig};
pub use crate::origin_tls::OriginTls;
pub use crate::tls::{AlpnProtocol, CertificateFiles, ListenerTls, TlsVersion};

/// The whole configuration: one value per section of the TOML file (see the README, section Configuration).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[server]`: process-wide settings.
    pub server: Server,
    /// `[[listen]]`: one entry per listening socket; never empty.
    pub listeners: Vec<Listener>,
    /// `[limits]`: request size limits.
    pub limits: Limits,
    /// `[timeouts]`: every network wait has a deadline.
    pub timeouts: Timeouts,
    /// `[headers]`: what the proxy adds to forwarded messages.
    pub headers: HeaderPolicy,
    /// `[forward]`: who may use the forward proxy and where CONNECT may go.
    pub forward: Forward,
    /// `[[route]]`: reverse-proxy routing by Host, in file order.
    pub routes: Vec<Route>,
    /// `[access_log]`: where and how requests are logged.
    pub access_log: AccessLogConfig,
    /// `[cache]`: the HTTP cache (RFC 9111) in memory.
    pub cache: CacheConfig,
    /// `[[acl]]` and `[[http_access]]`: Squid-style access rules. `None` without any
    /// `[[http_access]]` (then `forward.allow` decides for forward listeners and reverse
    /// listeners are open); otherwise they decide every request on every listener.
    pub http_access: Option<sepia_access::AccessRules>,
    /// `[auth]`: proxy authentication; `None` when the file has no `[auth]` table.
    pub auth: Option<AuthConfig>,
    /// `[admin]`: the admin listener; `None` (off) when the file has no `[admin]` table.
    pub admin: Option<AdminConfig>,
}

/// `[cache]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheConfig {
    /// `enabled`: when false every request is passed through.
    pub enabled: bool,
    /// `memory`: byte budget of the memory store.
    pub memory_bytes: u64,
    /// `max_object`: larger responses are relayed but never stored.
    pub max_object_bytes: u64,
    /// `sendfile` and `sendfile_min`: stored bodies of at least this size move into files
    /// on their first hit and are sent with `sendfile(2)` from then on (no copy per hit);
    /// `None` when `sendfile = false`.
    pub sendfile_min_bytes: Option<u64>,
    /// `sendfile_dir`: the directory body files are made in (unnamed, `O_TMPFILE`); `None`
    /// means the default, /var/tmp, falling back to memory files where that does not work.
    pub sendfile_dir: Option<std::path::PathBuf>,
    /// `heuristic_percent`: heuristic freshness as a share of the Last-Modified age (RFC 9111 §4.2.2).
    pub heuristic_percent: u32,
    /// `heuristic_max`: cap on a heuristic lifetime.
    pub heuristic_max: Duration,
    /// `[[cache.refresh]]`: per-URL heuristic rules, first match wins.
    pub refresh: Vec<RefreshRule>,
    /// `purge_allow`: client networks allowed to send PURGE.
    pub purge_allow: Vec<ipnet::IpNet>,
    /// `[[cache.disk]]`: the persistent tiers under the memory store, in the order given.
    pub disks: Vec<DiskConfig>,
    /// `disk_read_threads`: threads reading disk records that are not in the page cache
    /// (blocking `pread`s), shared by all disks: the reads in flight at once.
    pub disk_read_threads: usize,
    /// `disk_io`: how records that are not in the page cache are read.
    pub disk_io: DiskIo,
    /// `disk_ring_depth`: with `disk_io = "io_uring"`, the reads the ring keeps at each
    /// disk's device at once (the rest wait in its queue).
    pub disk_ring_depth: usize,
}

/// `[cache] disk_io`: how disk records that are not in the page cache are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskIo {
    /// `"threads"`: blocking reads on `disk_read_threads` threads.
    Threads,
    /// `"io_uring"`: an io_uring driven by the workers' event loop, any number of reads in
    /// flight; the threads where the kernel refuses io_uring, and for the reads the ring
    /// does not make.
    IoUring,
}

/// One `[[cache.disk]]` table: a directory Sepia owns, holding at most `size_bytes`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskConfig {
    /// `path`: the directory (made if missing; its parent must exist).
    pub path: std::path::PathBuf,
    /// `size`: bytes on disk the cache may use, everything included.
    pub size_bytes: u64,
    /// `write_budget`: bytes per day the cache may write (flash endurance); `None`: no limit.
    pub write_budget_per_day: Option<u64>,
    /// `admission`: which objects leaving memory the disk takes.
    pub admission: DiskAdmission,
}

/// `[[cache.disk]] admission`: which objects leaving memory a disk takes. Objects that earned
/// a place (hit while in memory, or evicted unearned once before) are always written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DiskAdmission {
    /// `"fill"`: the others too while the disk has space it has never used (within half
    /// the day's `write_budget`); once it is full, earned objects only.
    #[default]
    Fill,
    /// `"earned"`: earned objects only, from the start (devices whose writes are scarcer
    /// than their space).
    Earned,
}

impl CacheConfig {
    /// Whether a client at `ip` may PURGE (IPv4-mapped IPv6 checked as IPv4).
    pub fn purge_allowed(&self, ip: IpAddr) -> bool {
        let canonical = ip.to_canonical();
        self.purge_allow.iter().any(|net| net.contains(&canonical))
    }
}

/// One `[[cache.refresh]]` rule (Squid's `refresh_pattern`: min, percent, max).
#[derive(Clone, Debug, PartialEq)]
pub struct RefreshRule {
    /// Regular expression matched against the cache key (the normalised URL).
    pub pattern: String,
    pub min: Duration,
    pub percent: u32,
    pub max: Duration,
}

/// `[server]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    /// `workers`: worker threads. The file's `0` ("one per CPU core") is already resolved here
    /// to `std::thread::available_parallelism()`, so this is always at least 1.
    pub workers: usize,
    /// `shutdown_grace`: on SIGTERM/SIGINT the proxy stops accepting and lets in-flight requests
    /// finish for up to this long before closing what is left.
    pub shutdown_grace: Duration,
    /// `pid_file`: where the process writes its id at start (and the configuration it runs,
    /// beside it as `<pid_file>.running.toml`), so that `sepia reload`, `sepia upgrade` and
    /// `sepia check` find it, as `nginx -s reload` does. `None`: not written.
    pub pid_file: Option<std::path::PathBuf>,
    /// `log_format`: how Sepia's own event log (stderr) is written.
    pub log_format: EventLogFormat,
    /// `log_level`: the least severe event logged (`SEPIA_LOG` overrides it).
    pub log_level: EventLogLevel,
}

/// `[server] log_format`: Sepia's own events (not the access log) on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventLogFormat {
    /// `"text"`: one human-readable line per event.
    Text,
    /// `"json"`: one JSON object per line (timestamp, level, target, message, fields), for
    /// journald's or a log shipper's parsers.
    Json,
}

/// `[server] log_level`: the least severe event written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventLogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl EventLogLevel {
    /// The level's name as the configuration spells it, which is also a `tracing` filter
    /// directive.
    pub fn as_str(self) -> &'static str {
        match self {
            EventLogLevel::Error => "error",
            EventLogLevel::Warn => "warn",
            EventLogLevel::Info => "info",
            EventLogLevel::Debug => "debug",
            EventLogLevel::Trace => "trace",
        }
    }
}

/// `[[listen]] mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `"forward"`: clients send absolute-form targets and CONNECT (RFC 9112 §3.2.2, §3.2.3).
    Forward,
    /// `"reverse"`: an accelerator in front of origins chosen by `[[route]]` (origin-form targets).
    Reverse,
    /// `"intercept"`: connections redirected here by iptables/nftables REDIRECT (NAT); the
    /// original destination comes from `SO_ORIGINAL_DST` and is the only origin contacted.
    Intercept,
    /// `"tproxy"`: an `IP_TRANSPARENT` listener fed by an iptables/nftables TPROXY rule; the
    /// original destination is the accepted socket's local address.
    Tproxy,
}

impl Mode {
    /// Whether connections on this listener were diverted from their destination (REDIRECT or
    /// TPROXY) rather than addressed to Sepia.
    pub fn is_interception(self) -> bool {
        matches!(self, Mode::Intercept | Mode::Tproxy)
    }
}

/// One `[[listen]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Listener {
    /// `address`: `"IPv4:port"` or `"[IPv6]:port"`; port 0 lets the OS choose.
    pub address: SocketAddr,
    /// `mode`: how requests on this socket are routed.
    pub mode: Mode,
    /// `spoof_client` (tproxy only, default true as in Squid): connect to the origin from the
    /// client's address, so the origin sees the client rather than the proxy. Always false on
    /// other modes.
    pub spoof_client: bool,
    /// `targeted_cache_control`: RFC 9213's target list, in priority order: the first of
    /// these response fields that is present and valid decides how this listener's requests
    /// store and reuse a response, instead of Cache-Control and Expires. Default
    /// `["CDN-Cache-Control"]` on reverse listeners (Sepia is the site's edge cache there),
    /// none elsewhere.
    pub targeted_cache_control: Vec<String>,
    /// `[listen.tls]`: TLS termination on this listener; `None` means plain TCP.
    pub tls: Option<ListenerTls>,
    /// `h2c` (default false): a connection that starts with the HTTP/2 connection preface is
    /// served in HTTP/2 ("prior knowledge", RFC 9113 §3.3) instead of being refused as an
    /// invalid HTTP/1.1 request.
    pub h2c: bool,
}

/// `[limits]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// `max_request_head`: bytes in a request line plus header fields; larger heads get 431
    /// (RFC 6585 §5). At most 1 MiB.
    pub max_request_head: usize,
    /// `max_headers`: header fields in one request; more get 431.
    pub max_headers: usize,
}

/// `[timeouts]`; every value is greater than zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeouts {
    /// `connect`: TCP connect to one origin; on expiry the next origin of the route is tried,
    /// and when all have failed the client gets 502.
    pub connect: Duration,
    /// `request_head`: a client must send a complete request head within this, else 408.
    pub request_head: Duration,
    /// `client_idle`: an idle keep-alive client connection is closed after this.
    pub client_idle: Duration,
    /// `origin_first_byte`: the origin must start its response within this, else 504.
    pub origin_first_byte: Duration,
    /// `origin_idle`: pooled idle origin connections are closed after this.
    pub origin_idle: Duration,
    /// `tunnel_idle`: a CONNECT tunnel with no traffic in either direction is closed after this.
    pub tunnel_idle: Duration,
}

/// `[headers] x_forwarded_for`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XForwardedFor {
    /// `"append"`: add the client address to any X-Forwarded-For the client sent.
    Append,
    /// `"replace"`: drop the client's X-Forwarded-For and send only the client address.
    Replace,
    /// `"off"`: pass the client's header through untouched and add nothing.
    Off,
}

/// `[headers]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderPolicy {
    /// `via`: add `Via: 1.1 <pseudonym>` to requests and responses (RFC 9110 §7.6.3).
    pub via: bool,
    /// `via_pseudonym`: the received-by name in Via; an RFC 9110 token (§5.6.2).
    pub via_pseudonym: String,
    /// `x_forwarded_for`: what to do with X-Forwarded-For.
    pub x_forwarded_for: XForwardedFor,
    /// `forwarded`: add an RFC 7239 `Forwarded: for=…;proto=http;by=…` element.
    pub forwarded: bool,
}

/// `[forward]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// `allow`: client networks allowed to use forward mode; others get 403.
    pub allow: Vec<ipnet::IpNet>,
    /// `connect_ports`: CONNECT is allowed only to these ports; others get 403.
    pub connect_ports: Vec<u16>,
}

impl Forward {
    /// Whether a client at `ip` may use the forward proxy.
    ///
    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports for an
    /// IPv4 peer) is checked as the IPv4 address it stands for, and also as itself so that an
    /// explicit `::ffff:0:0/96` entry still works. Allocation-free: a linear scan of a list that
    /// is short in practice.
    pub fn client_allowed(&self, ip: IpAddr) -> bool {
        sepia_access::in_networks(&self.allow, ip)
    }

    /// Whether CONNECT to `port` is allowed.
    pub fn connect_port_allowed(&self, port: u16) -> bool {
        self.connect_ports.contains(&port)
    }
}

/// `[[route]] host`, normalised to lowercase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostMatch {
    /// `"www.example.com"`: exactly this host.
    Exact(String),
    /// `"*.example.com"`, stored as `".example.com"`: any subdomain, not the bare domain.
    Suffix(String),
    /// `"*"`: the default route.
    Any,
}

impl HostMatch {
    /// Whether `host` (without port, any case) matches. Allocation-free.
    pub fn matches(&self, host: &[u8]) -> bool {
        match self {
            HostMatch::Exact(name) => name.as_bytes().eq_ignore_ascii_case(host),
            HostMatch::Suffix(suffix) => {
                host.len() > suffix.len()
                    && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
            }
            HostMatch::Any => true,
        }
    }
}

/// One origin server of a route, from `"http://host[:port]"` or `"https://host[:port]"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginAddr {
    /// Lowercased host name or IP literal; IPv6 without brackets.
    pub host: String,
    /// Port; the scheme's default (80, or 443 for https) when the URL gave none.
    pub port: u16,
    /// `https://`: reached over TLS and verified as the route's [`OriginTls`] says
    /// (RFC 9110 §4.2.2).
    pub tls: bool,
}

impl OriginAddr {
    /// The port an `http://` or `https://` URL without one means (RFC 9110 §4.2.1, §4.2.2).
    pub fn default_port(tls: bool) -> u16 {
        if tls {
            443
        } else {
            80
        }
    }

    /// `host:port` as sent in a Host header (RFC 9110 §7.2): the port is omitted when it is
    /// the scheme's default (RFC 9110 §4.2.1, §4.2.2), and an IPv6 literal is bracketed
    /// (RFC 3986 §3.2.2).
    pub fn authority(&self) -> String {
        let mut out = String::with_capacity(self.host.len() + 8);
        if self.host.contains(':') {
            out.push('[');
            out.push_str(&self.host);
            out.push(']');
        } else {
            out.push_str(&self.host);
        }
        if self.port != OriginAddr::default_port(self.tls) {
            out.push(':');
            out.push_str(&self.port.to_string());
        }
        out
    }
}

/// `[[route]] host_header`: the Host sent to the origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostHeader {
    /// `"pass"`: the client's Host, unchanged.
    Pass,
    /// `"origin"`: the chosen origin's [`OriginAddr::authority`].
    Origin,
    /// Any other string: sent literally.
    Fixed(String),
}

/// One `[[route]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// `host`: which request Hosts this route serves.
    pub host: HostMatch,
    /// `origins`: tried round-robin; on connect failure the next one is tried. Never empty.
    pub origins: Vec<OriginAddr>,
    /// `host_header`: the Host sent to the origin.
    pub host_header: HostHeader,
    /// `tls_ca`, `tls_server_name`, `tls_insecure_skip_verify`: how the route's `https://`
    /// origins are verified.
    pub tls: OriginTls,
    /// `http2`: speak HTTP/2 to the route's origins. An `https://` origin is offered ALPN
    /// `h2, http/1.1` and spoken to in the protocol it picks (RFC 9113 §3.2); an `http://`
    /// origin is spoken to in HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3).
    pub http2: bool,
    /// `[route.health]`: when the route's origins are marked down.
    pub health: OriginHealth,
}

/// `[route.health]`: passive health (`fail_after` consecutive failures to connect to an
/// origin mark it down; requests skip it for `down_for`, then one trial request decides) and,
/// when `interval` is set, active checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginHealth {
    /// `fail_after` (1 to 1000; default 3).
    pub fail_after: u32,
    /// `down_for` (default "10s"; at least one second).
    pub down_for: Duration,
    /// Active checks: `None` unless `interval` is set.
    pub active: Option<ActiveCheck>,
}

impl Default for OriginHealth {
    fn default() -> Self {
        OriginHealth {
            fail_after: 3,
            down_for: Duration::from_secs(10),
            active: None,
        }
    }
}

/// `[route.health]` `interval`, `path`, `expect`, `timeout`, `rise`, `fall`, `host`: a
/// request sent to each of the route's origins every `interval` on a connection of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveCheck {
    /// `interval`: from the start of one check to the start of the next (at least 100 ms).
    pub interval: Duration,
    /// `path` (default "/"): the request target of the check's GET.
    pub path: String,
    /// `expect` (default "2xx-3xx"): the statuses that count as a success.
    pub expect: StatusRange,
    /// `timeout` (default "2s"): connecting (and the TLS handshake), sending the request and
    /// receiving the response head must all end within it.
    pub timeout: Duration,
    /// `rise` (default 2): consecutive successes that mark a down origin up.
    pub rise: u32,
    /// `fall` (default 3): consecutive failures that mark an up origin down.
    pub fall: u32,
    /// `host`: the Host field of the check; `None`: the route's host when it is an exact
    /// name, else the origin's `host[:port]`.
    pub host: Option<String>,
}

/// An inclusive range of status codes (`expect = 200`, `"2xx"`, `"200-399"`, `"2xx-3xx"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusRange {
    pub min: u16,
    pub max: u16,
}

impl StatusRange {
    pub fn contains(&self, status: u16) -> bool {
        (self.min..=self.max).contains(&status)
    }
}

/// `[access_log] path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// `"stdout"`.
    Stdout,
    /// `"off"`: no access log.
    Off,
    /// Any other string: a file opened for appending (relative paths are relative to the
    /// process's working directory).
    File(PathBuf),
}

/// `[access_log] format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// `"squid"`: Squid's native `logformat squid`.
    Squid,
    /// `"combined"`: the Apache/NCSA combined format.
    Combined,
    /// `"json"`: one JSON object per line.
    Json,
}

/// `[access_log]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessLogConfig {
    /// `path`.
    pub target: LogTarget,
    /// `format`.
    pub format: LogFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_omits_default_port_and_brackets_ipv6() {
        let cases = [
            ("example.com", 80, "example.com"),
            ("example.com", 8080, "example.com:8080"),
            ("127.0.0.1", 81, "127.0.0.1:81"),
            ("::1", 80, "[::1]"),
            ("::1", 8080, "[::1]:8080"),
        ];
        for (host, port, want) in cases {
            let origin = OriginAddr {
                host: host.to_string(),
                port,
                tls: false,
            };
            assert_eq!(origin.authority(), want, "{host} {port}");
        }
    }

    #[test]
    fn host_match_suffix_needs_a_label_before_it() {
        let suffix = HostMatch::Suffix(".example.com".into());
        assert!(suffix.matches(b"a.example.com"));
        assert!(suffix.matches(b"A.B.EXAMPLE.COM"));
        assert!(!suffix.matches(b"example.com"));
        assert!(!suffix.matches(b".example.com"));
        assert!(!suffix.matches(b"badexample.com"));
        let exact = HostMatch::Exact("example.com".into());
        assert!(exact.matches(b"Example.COM"));
        assert!(!exact.matches(b"www.example.com"));
        assert!(HostMatch::Any.matches(b""));
    }

    fn forward(allow: &[&str]) -> Forward {
        Forward {
            allow: allow.iter().map(|s| s.parse().unwrap()).collect(),
            connect_ports: vec![443],
        }
    }

    #[test]
    fn client_allowed_v4_v6_and_mapped() {
        let fwd = forward(&["10.0.0.0/8", "::1/128", "fc00::/7"]);
        let cases = [
            ("10.1.2.3", true),
            ("11.0.0.1", false),
            ("::1", true),
            ("::2", false),
            ("fd00::5", true),
            ("fe80::1", false),
            ("::ffff:10.9.9.9", true),
            ("::ffff:11.9.9.9", false),
        ];
        for (ip, want) in cases {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(fwd.client_allowed(ip), want, "{ip}");
        }
        let mapped_rule = forward(&["::ffff:0:0/96"]);
        assert!(mapped_rule.client_allowed("::ffff:1.2.3.4".parse().unwrap()));
        assert!(!forward(&[]).client_allowed("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn connect_port_allowed_checks_the_list() {
        let fwd = forward(&[]);
        assert!(fwd.connect_port_allowed(443));
        assert!(!fwd.connect_port_allowed(25));
    }
}
