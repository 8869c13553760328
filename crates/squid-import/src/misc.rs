//! `auth_param basic` → `[auth]`; `access_log` / `logformat` → `[access_log]`; `via`,
//! `forwarded_for`, `visible_hostname` → `[headers]`; `workers`, `shutdown_lifetime`, the
//! timeouts and `request_header_max_size`; `include`; and why the rest has no equivalent.

use crate::cx::Cx;
use crate::parse::Directive;
use crate::units::{on_off, sepia_duration, squid_bytes, squid_time_ms, toml_str, toml_strs};

/// Squid 5's native format, as `logformat squid` defines it.
const SQUID_FORMAT: &str = "%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt";
/// Squid's `combined`.
const COMBINED_FORMAT: &str =
    "%>a %[ui %[un [%tl] \"%rm %ru HTTP/%rv\" %>Hs %<st \"%{Referer}>h\" \"%{User-Agent}>h\" %Ss:%Sh";

#[derive(Default)]
pub(crate) struct Misc {
    auth: Vec<Directive>,
    logs: Vec<Directive>,
    formats: Vec<(String, String)>,
}

impl Misc {
    pub(crate) fn take(&mut self, cx: &mut Cx, d: &Directive) -> bool {
        let first = d.args.first().map(String::as_str);
        match d.name.as_str() {
            "auth_param" => self.auth.push(d.clone()),
            "access_log" | "cache_access_log" => self.logs.push(d.clone()),
            "logformat" => match first {
                Some(name) => self
                    .formats
                    .push((name.to_string(), d.rest_from(1).to_string())),
                None => cx.skip(d, "expected logformat NAME FORMAT"),
            },
            "include" => cx.skip(
                d,
                "included files are not read: translate each of them too (`sepia import-squid \
                 FILE`) and merge the results",
            ),
            "via" => flag(cx, d, "headers", "via"),
            "forwarded_for" => forwarded_for(cx, d),
            "visible_hostname" => visible_hostname(cx, d),
            "workers" => workers(cx, d),
            "shutdown_lifetime" => time(cx, d, "server", "shutdown_grace", false),
            "connect_timeout" | "peer_connect_timeout" => time(cx, d, "timeouts", "connect", true),
            "request_timeout" => time(cx, d, "timeouts", "request_head", true),
            "client_idle_pconn_timeout" | "persistent_request_timeout" => {
                time(cx, d, "timeouts", "client_idle", true)
            }
            "server_idle_pconn_timeout" | "pconn_timeout" => {
                time(cx, d, "timeouts", "origin_idle", true)
            }
            "read_timeout" => {
                time(cx, d, "timeouts", "origin_first_byte", true);
                cx.differs(
                    d,
                    "Squid's read_timeout bounds every wait for the origin; Sepia's \
                     origin_first_byte bounds the wait for the response to start",
                );
            }
            "request_header_max_size" => request_header_max_size(cx, d),
            "if" | "else" | "endif" => cx.skip(
                d,
                "Squid's conditionals are not evaluated: the directives of every branch were \
                 translated",
            ),
            _ => return false,
        }
        true
    }

    /// `auth_param basic casesensitive on`: user names compare with case (Squid's default
    /// is off).
    pub(crate) fn auth_case_sensitive(&self) -> bool {
        self.auth.iter().any(|d| {
            d.args.first().map(String::as_str) == Some("basic")
                && d.args.get(1).map(String::as_str) == Some("casesensitive")
                && d.args.get(2).and_then(|v| on_off(v)) == Some(true)
        })
    }

    pub(crate) fn finish(&self, cx: &mut Cx) {
        self.finish_auth(cx);
        self.finish_log(cx);
    }

    fn finish_auth(&self, cx: &mut Cx) {
        let mut program = None;
        let mut keys: Vec<(&str, String, String)> = Vec::new();
        for d in &self.auth {
            let scheme = d.args.first().map(String::as_str);
            if scheme != Some("basic") {
                cx.skip(d, "Sepia authenticates with the Basic scheme only");
                continue;
            }
            let value = d.args.get(2).map(String::as_str).unwrap_or_default();
            let src = cx.src(d);
            match d.args.get(1).map(String::as_str) {
                Some("program") => program = Some((d.args[2..].to_vec(), src)),
                Some("realm") => keys.push(("realm", toml_str(d.rest_from(2)), src)),
                Some("children") => children(cx, d, &mut keys),
                Some("credentialsttl") => {
                    match squid_time_ms(value, d.args.get(3).map(String::as_str), 1) {
                        Some(ms) => {
                            keys.push(("credentials_ttl", toml_str(&sepia_duration(ms)), src))
                        }
                        None => cx.skip(d, "expected a time such as `2 hours`"),
                    }
                }
                Some("casesensitive") => {} // applied to proxy_auth ACLs (ignore_case)
                _ => cx.skip(d, "this auth_param has no equivalent in Sepia's [auth]"),
            }
        }
        let Some((program, src)) = program.filter(|(p, _)| !p.is_empty()) else {
            return;
        };
        cx.out.set("auth", "helper", toml_strs(&program), src);
        let defaults = [
            ("realm", toml_str("Squid proxy-caching web server")),
            ("helper_children", "20".to_string()),
            ("credentials_ttl", toml_str("2h")),
        ];
        for (key, value) in defaults {
            cx.out.set("auth", key, value, "Squid's default".into());
        }
        for (key, value, src) in keys {
            cx.out.set("auth", key, value, src);
        }
    }

    fn finish_log(&self, cx: &mut Cx) {
        let mut logs = self.logs.iter();
        let Some(d) = logs.next() else {
            let why = "Squid's default (Debian's build): daemon:/var/log/squid/access.log squid";
            cx.out.set(
                "access_log",
                "path",
                toml_str("/var/log/squid/access.log"),
                why.into(),
            );
            return;
        };
        for extra in logs {
            cx.skip(
                extra,
                "Sepia writes one access log (the first access_log line)",
            );
        }
        let target = d.args.first().map(String::as_str).unwrap_or("none");
        let path = match target.split_once(':') {
            _ if target == "none" => "off".to_string(),
            Some(("stdio" | "daemon", path)) => path.to_string(),
            Some((module, _)) => {
                cx.skip(
                    d,
                    &format!("Sepia writes its log to a file or stdout, not to {module}:"),
                );
                return;
            }
            None => target.to_string(),
        };
        let src = cx.src(d);
        cx.out
            .set("access_log", "path", toml_str(&path), src.clone());
        if let Some(format) = d.args.get(1) {
            match self.format(format) {
                Some(f) => cx.out.set("access_log", "format", toml_str(f), src),
                None => cx.differs(
                    d,
                    &format!(
                        "logformat {format} is not one of Sepia's (squid, combined, json): the \
                         squid format is used"
                    ),
                ),
            }
        }
        if d.args.len() > 2 {
            cx.differs(
                d,
                "Sepia logs every request: the ACLs of this line are left out",
            );
        }
    }

    /// Sepia's name of the Squid log format `name`.
    fn format(&self, name: &str) -> Option<&'static str> {
        let defined = self.formats.iter().rev().find(|(n, _)| n == name);
        let spec = match defined {
            Some((_, spec)) => spec.split_whitespace().collect::<Vec<_>>().join(" "),
            None => {
                return [("squid", "squid"), ("combined", "combined")]
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, f)| *f)
            }
        };
        if spec == SQUID_FORMAT {
            Some("squid")
        } else if spec == COMBINED_FORMAT {
            Some("combined")
        } else {
            None
        }
    }
}

fn children(cx: &mut Cx, d: &Directive, keys: &mut Vec<(&str, String, String)>) {
    let src = cx.src(d);
    let Some(n) = d.args.get(2).and_then(|n| n.parse::<u64>().ok()) else {
        cx.skip(d, "expected children N");
        return;
    };
    if n > 256 {
        cx.differs(d, "Sepia runs at most 256 helper children");
    }
    keys.push(("helper_children", n.clamp(1, 256).to_string(), src.clone()));
    let mut ignored = Vec::new();
    for opt in &d.args[3..] {
        match opt.split_once('=') {
            Some(("concurrency", v)) if v.parse::<u16>().is_ok_and(|c| c <= 1024) => {
                keys.push(("helper_concurrency", v.to_string(), src.clone()));
            }
            _ => ignored.push(opt.as_str()),
        }
    }
    let why = "Sepia starts every child at once and keeps them running";
    cx.left_out(d, &ignored, why);
}

/// `via on|off` and similar on/off directives.
fn flag(cx: &mut Cx, d: &Directive, section: &str, key: &str) {
    match d.args.first().and_then(|v| on_off(v)) {
        Some(on) => {
            let src = cx.src(d);
            cx.out.set(section, key, on.to_string(), src);
        }
        None => cx.skip(d, "expected on or off"),
    }
}

fn forwarded_for(cx: &mut Cx, d: &Directive) {
    let (value, differs) = match d.args.first().map(String::as_str) {
        Some("on") => ("append", None),
        Some("transparent") => ("off", None),
        Some("truncate") => ("replace", None),
        Some("off") => (
            "off",
            Some("Squid appends `unknown` to X-Forwarded-For; Sepia leaves the header alone"),
        ),
        Some("delete") => (
            "off",
            Some("Squid removes X-Forwarded-For; Sepia cannot, and leaves it alone"),
        ),
        _ => {
            cx.skip(d, "expected on, off, transparent, delete or truncate");
            return;
        }
    };
    let src = cx.src(d);
    cx.out
        .set("headers", "x_forwarded_for", toml_str(value), src);
    if let Some(why) = differs {
        cx.differs(d, why);
    }
}

fn visible_hostname(cx: &mut Cx, d: &Directive) {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    match d.args.first().filter(|h| token(h)) {
        Some(host) => {
            let src = cx.src(d);
            cx.out.set("headers", "via_pseudonym", toml_str(host), src);
            cx.differs(
                d,
                "used as the name in Via only (Squid also shows it in error pages)",
            );
        }
        None => cx.skip(d, "not a host name Sepia can put in Via"),
    }
}

fn workers(cx: &mut Cx, d: &Directive) {
    match d
        .args
        .first()
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|n| *n <= 1024)
    {
        Some(n) => {
            let src = cx.src(d);
            cx.out.set("server", "workers", n.to_string(), src);
            cx.differs(
                d,
                "Squid's workers are processes with caches of their own; Sepia's are threads \
                 sharing one cache",
            );
        }
        None => cx.skip(d, "expected a number of workers up to 1024"),
    }
}

/// A Squid time (`30 seconds`) as a Sepia duration; `positive` for timeouts, which Sepia
/// wants greater than zero.
fn time(cx: &mut Cx, d: &Directive, section: &str, key: &str, positive: bool) {
    let unit = d.args.get(1).map(String::as_str);
    match d.args.first().and_then(|n| squid_time_ms(n, unit, 1)) {
        Some(0) if positive => cx.skip(d, "Sepia's timeouts must be greater than zero"),
        Some(ms) => {
            let src = cx.src(d);
            cx.out.set(section, key, toml_str(&sepia_duration(ms)), src);
        }
        None => cx.skip(d, "expected a time such as `30 seconds`"),
    }
}

fn request_header_max_size(cx: &mut Cx, d: &Directive) {
    let bytes = d
        .args
        .first()
        .and_then(|n| squid_bytes(n, d.args.get(1).map(String::as_str), 1));
    match bytes.filter(|b| (1..=1 << 20).contains(b)) {
        Some(b) => {
            let src = cx.src(d);
            cx.out.set("limits", "max_request_head", b.to_string(), src);
        }
        None => cx.skip(d, "Sepia takes 1 byte to 1 MiB"),
    }
}

/// Why a directive with no translation has none.
pub(crate) fn no_equivalent(name: &str) -> String {
    let why = match name {
        "coredump_dir" => "Sepia does not change directory for core dumps (set WorkingDirectory= in its service)",
        "pid_filename" => "Sepia writes no PID file (run it under systemd or another supervisor)",
        "cache_log" | "debug_options" => "Sepia's own log goes to stderr; SEPIA_LOG sets its level",
        "cache_effective_user" | "cache_effective_group" => "Sepia does not switch users: run it as that user (systemd User=)",
        "logfile_rotate" => "Sepia reopens its access log on SIGUSR1: rotate with logrotate (rename, then kill -USR1)",
        "cache_store_log" => "Sepia has no store log",
        "icp_port" | "htcp_port" | "icp_access" | "htcp_access" | "snmp_port" | "snmp_access" => "Sepia speaks neither ICP, HTCP nor SNMP",
        "dns_nameservers" | "dns_v4_first" | "hosts_file" | "dns_timeout" | "positive_dns_ttl" | "negative_dns_ttl" => "Sepia uses the system's resolver configuration (/etc/resolv.conf, /etc/hosts) and honours DNS TTLs",
        "cache_replacement_policy" | "memory_replacement_policy" => "Sepia's memory store evicts with S3-FIFO",
        "cache_swap_low" | "cache_swap_high" => "Sepia's disk tier reclaims its oldest segment when full",
        "collapsed_forwarding" => "Sepia always collapses concurrent misses for one URL into one origin fetch",
        "max_filedescriptors" => "Sepia raises its soft descriptor limit to the hard one at start",
        "pinger_enable" | "memory_pools" | "memory_pools_limit" => "Sepia has no such component",
        "http_reply_access" => "Sepia's rules are about requests only",
        "request_header_access" | "reply_header_access" | "request_header_replace" | "header_replace" | "request_header_add" | "reply_header_add" => "Sepia does not edit headers by rule (only Via, X-Forwarded-For and Forwarded)",
        "ssl_bump" | "sslcrtd_program" | "sslcrtd_children" | "sslproxy_cert_error" | "tls_outgoing_options" => "Sepia does not bump (decrypt) TLS: CONNECT stays a blind tunnel",
        "url_rewrite_program" | "url_rewrite_children" | "url_rewrite_access" | "store_id_program" | "store_id_children" => "Sepia runs no URL rewriter or store-ID helpers",
        "icap_enable" | "icap_service" | "adaptation_access" | "ecap_enable" | "ecap_service" => "Sepia has no content adaptation (ICAP/eCAP)",
        "always_direct" | "never_direct" | "prefer_direct" | "nonhierarchical_direct" => "Sepia does not relay through other proxies: it always goes to the origin",
        "tcp_outgoing_address" | "tcp_outgoing_tos" | "tcp_outgoing_mark" => "Sepia connects to origins from the system's chosen address",
        "follow_x_forwarded_for" => "Sepia's rules see the connecting client's address only",
        "error_directory" | "deny_info" | "err_html_text" | "error_default_language" => "Sepia answers errors with short text bodies of its own",
        "httpd_suppress_version_string" => "Sepia's responses name no version",
        "minimum_object_size" | "quick_abort_min" | "quick_abort_max" | "quick_abort_pct" | "range_offset_limit" => "Sepia has no such cache tuning",
        "delay_pools" | "delay_class" | "delay_parameters" | "delay_access" | "client_delay_pools" => "Sepia does not shape bandwidth",
        "strip_query_terms" => "Sepia logs URLs whole",
        "maximum_object_size_in_memory" => "Sepia has one object size limit (cache.max_object)",
        "miss_access" | "cache_peer_access" => "no equivalent in Sepia",
        _ => "Sepia has no equivalent of this directive",
    };
    why.to_string()
}
