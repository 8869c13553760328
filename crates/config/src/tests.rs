//! Whole-file tests: defaults, a full valid file, and every kind of error with its line and key.

use std::time::Duration;

use super::*;

const FULL: &str = r#"
[server]
workers = 4
shutdown_grace = "10s"
log_format = "json"
log_level = "debug"

[[listen]]
address = "127.0.0.1:3128"
mode = "forward"

[[listen]]
address = "[::1]:8080"
mode = "reverse"

[limits]
max_request_head = 32768
max_headers = 50

[timeouts]
connect = "500ms"
request_head = "10s"
client_idle = "2m"
origin_first_byte = "30s"
origin_idle = "90s"
tunnel_idle = "1h"

[headers]
via = false
via_pseudonym = "edge-1"
x_forwarded_for = "replace"
forwarded = true

[forward]
allow = ["10.0.0.0/8", "::1", "fe80::/10"]
connect_ports = [443, 8443]

[[route]]
host = "WWW.example.com"
origins = ["http://127.0.0.1:8080", "http://[::1]:8081/"]
host_header = "origin"

[[route]]
host = "*.example.com"
origins = ["http://backend.internal"]
host_header = "static.example.com"

[[route]]
host = "*"
origins = ["http://127.0.0.1:9000"]

[route.health]
fail_after = 5
down_for = "30s"

[access_log]
path = "/var/log/sepia/access.log"
format = "combined"
"#;

#[test]
fn builtin_default_matches_the_documented_defaults() {
    let config = Config::builtin_default();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(config.server.workers, cpus);
    assert_eq!(config.server.shutdown_grace, Duration::from_secs(30));
    assert_eq!(config.server.log_format, EventLogFormat::Text);
    assert_eq!(config.server.log_level, EventLogLevel::Info);
    assert_eq!(
        config.listeners,
        vec![Listener {
            address: "127.0.0.1:3128".parse().unwrap(),
            mode: Mode::Forward,
            spoof_client: false,
            h2c: false,
            targeted_cache_control: vec![],
            tls: None,
        }]
    );
    assert_eq!(
        config.limits,
        Limits {
            max_request_head: 65536,
            max_headers: 100
        }
    );
    let secs = Duration::from_secs;
    assert_eq!(
        config.timeouts,
        Timeouts {
            connect: secs(5),
            request_head: secs(30),
            client_idle: secs(60),
            origin_first_byte: secs(60),
            origin_idle: secs(60),
            tunnel_idle: secs(300),
        }
    );
    assert_eq!(
        config.headers,
        HeaderPolicy {
            via: true,
            via_pseudonym: "sepia".into(),
            x_forwarded_for: XForwardedFor::Append,
            forwarded: false,
        }
    );
    let allow: Vec<String> = config.forward.allow.iter().map(|n| n.to_string()).collect();
    assert_eq!(
        allow,
        [
            "127.0.0.0/8",
            "::1/128",
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "fc00::/7",
            "fe80::/10"
        ]
    );
    assert_eq!(config.forward.connect_ports, vec![443]);
    assert!(config.routes.is_empty());
    assert_eq!(
        config.access_log,
        AccessLogConfig {
            target: LogTarget::Stdout,
            format: LogFormat::Squid
        }
    );
}

#[test]
fn a_file_with_only_a_listener_equals_the_builtin_default() {
    let text = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let config = Config::from_toml_str(text, "min.toml").unwrap();
    assert_eq!(config, Config::builtin_default());
}

#[test]
fn full_file_sets_every_key() {
    let config = Config::from_toml_str(FULL, "sepia.toml").unwrap();
    assert_eq!(config.server.workers, 4);
    assert_eq!(config.server.shutdown_grace, Duration::from_secs(10));
    assert_eq!(config.server.log_format, EventLogFormat::Json);
    assert_eq!(config.server.log_level, EventLogLevel::Debug);
    assert_eq!(config.listeners.len(), 2);
    assert_eq!(config.listeners[1].address, "[::1]:8080".parse().unwrap());
    assert_eq!(config.listeners[1].mode, Mode::Reverse);
    assert_eq!(config.limits.max_request_head, 32768);
    assert_eq!(config.limits.max_headers, 50);
    assert_eq!(config.timeouts.connect, Duration::from_millis(500));
    assert_eq!(config.timeouts.request_head, Duration::from_secs(10));
    assert_eq!(config.timeouts.client_idle, Duration::from_secs(120));
    assert_eq!(config.timeouts.origin_first_byte, Duration::from_secs(30));
    assert_eq!(config.timeouts.origin_idle, Duration::from_secs(90));
    assert_eq!(config.timeouts.tunnel_idle, Duration::from_secs(3600));
    assert!(!config.headers.via);
    assert_eq!(config.headers.via_pseudonym, "edge-1");
    assert_eq!(config.headers.x_forwarded_for, XForwardedFor::Replace);
    assert!(config.headers.forwarded);
    assert_eq!(config.forward.allow.len(), 3);
    assert_eq!(config.forward.allow[1].to_string(), "::1/128");
    assert_eq!(config.forward.connect_ports, vec![443, 8443]);
    assert_eq!(config.routes[0].health, OriginHealth::default());
    assert_eq!(
        config.routes[2].health,
        OriginHealth {
            fail_after: 5,
            down_for: Duration::from_secs(30),
        }
    );
    assert_eq!(
        config.routes[0],
        Route {
            host: HostMatch::Exact("www.example.com".into()),
            origins: vec![
                OriginAddr {
                    host: "127.0.0.1".into(),
                    port: 8080,
                    tls: false,
                },
                OriginAddr {
                    host: "::1".into(),
                    port: 8081,
                    tls: false,
                },
            ],
            host_header: HostHeader::Origin,
            tls: Default::default(),
            http2: false,
            health: Default::default(),
        }
    );
    assert_eq!(
        config.routes[1].host,
        HostMatch::Suffix(".example.com".into())
    );
    assert_eq!(
        config.routes[1].host_header,
        HostHeader::Fixed("static.example.com".into())
    );
    assert_eq!(config.routes[1].origins[0].authority(), "backend.internal");
    assert_eq!(config.routes[2].host, HostMatch::Any);
    assert_eq!(config.routes[2].host_header, HostHeader::Pass);
    assert_eq!(
        config.access_log.target,
        LogTarget::File("/var/log/sepia/access.log".into())
    );
    assert_eq!(config.access_log.format, LogFormat::Combined);
}

const LISTENER: &str = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";

/// Each case: the file, then the exact error text.
#[test]
fn errors_name_file_line_and_key() {
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{LISTENER}[serverr]\nworkers = 1\n"),
            "t.toml:4: key 'serverr': unknown key (expected one of server, listen, limits, \
             timeouts, headers, forward, route, access_log, cache, acl, http_access, auth, admin)",
        ),
        (
            format!("{LISTENER}[timeouts]\nconnect = \"1s\"\nconect = \"5s\"\n"),
            "t.toml:6: key 'timeouts.conect': unknown key (expected one of connect, \
             request_head, client_idle, origin_first_byte, origin_idle, tunnel_idle)",
        ),
        (
            format!("{LISTENER}cache_size = 5\n"),
            "t.toml:4: key 'listen[0].cache_size': unknown key (expected one of address, mode, spoof_client, targeted_cache_control, tls, h2c)",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"revers\"\n".to_string(),
            "t.toml:3: key 'listen[0].mode': invalid value \"revers\" (expected \"forward\", \
             \"reverse\", \"intercept\" or \"tproxy\")",
        ),
        (
            format!("[[timeouts]]\nconnect = \"1s\"\n{LISTENER}"),
            "t.toml:1: key 'timeouts': invalid type: sequence, expected a table",
        ),
        (
            "\n[[listen]]\naddress = \"127.0.0.1:3128\"\n".to_string(),
            "t.toml:2: key 'listen[0].mode': required key is missing",
        ),
        (
            format!("{LISTENER}[server]\nworkers = \"four\"\n"),
            "t.toml:5: key 'server.workers': invalid type: string \"four\", expected i64",
        ),
        (
            format!("{LISTENER}[server]\nlog_format = \"JSON\"\n"),
            "t.toml:5: key 'server.log_format': invalid value \"JSON\" (expected \"text\" or \
             \"json\")",
        ),
        (
            format!("{LISTENER}[server]\nlog_level = \"verbose\"\n"),
            "t.toml:5: key 'server.log_level': invalid value \"verbose\" (expected \"error\", \
             \"warn\", \"info\", \"debug\" or \"trace\")",
        ),
        (
            format!("{LISTENER}[server]\nlog_level = 3\n"),
            "t.toml:5: key 'server.log_level': invalid type: integer `3`, expected a string",
        ),
        (
            format!("{LISTENER}[headers]\nvia = \"yes\"\n"),
            "t.toml:5: key 'headers.via': invalid type: string \"yes\", expected a boolean",
        ),
        (
            format!("{LISTENER}[timeouts]\nconnect = 5\n"),
            "t.toml:5: key 'timeouts.connect': invalid type: integer `5`, expected a duration \
             string such as \"5s\"",
        ),
        (
            format!("{LISTENER}[timeouts]\n\nclient_idle = \"1.5s\"\n"),
            "t.toml:6: key 'timeouts.client_idle': invalid duration \"1.5s\" (expected a whole \
             number and a unit: \"500ms\", \"5s\", \"2m\" or \"1h\")",
        ),
        (
            format!("{LISTENER}[timeouts]\norigin_idle = \"0s\"\n"),
            "t.toml:5: key 'timeouts.origin_idle': timeout \"0s\" must be greater than zero",
        ),
        (
            "[[listen]]\naddress = \"localhost:3128\"\nmode = \"forward\"\n".to_string(),
            "t.toml:2: key 'listen[0].address': invalid address \"localhost:3128\" (expected \
             IPv4:port or [IPv6]:port, e.g. \"127.0.0.1:3128\" or \"[::1]:3128\")",
        ),
        (
            format!("{LISTENER}[forward]\nallow = [\n  \"10.0.0.0/8\",\n  \"10.0.0.0/33\",\n]\n"),
            "t.toml:7: key 'forward.allow[1]': invalid network \"10.0.0.0/33\" (expected CIDR \
             like \"10.0.0.0/8\" or \"fc00::/7\", or a single address)",
        ),
        (
            format!("{LISTENER}[forward]\nconnect_ports = [443, 0]\n"),
            "t.toml:5: key 'forward.connect_ports[1]': 0 is out of range (expected 1 to 65535)",
        ),
        (
            format!("{LISTENER}[[route]]\nhost = \"a\"\norigins = [\"http://a/b\"]\n"),
            "t.toml:6: key 'route[0].origins[0]': invalid origin \"http://a/b\": an origin has \
             no path, query or fragment (got \"/b\"); expected http://host[:port] or \
             https://host[:port]",
        ),
        (
            format!("{LISTENER}[[route]]\nhost = \"a\"\norigins = [\"http://a\"]\ntls_ca = \"/c\"\n"),
            "t.toml:7: key 'route[0].tls_ca': only for routes with https:// origins (this \
             route has none)",
        ),
        (
            format!("{LISTENER}[[route]]\nhost = \"a\"\norigins = []\n"),
            "t.toml:6: key 'route[0].origins': a route needs at least one origin",
        ),
        (
            format!(
                "{LISTENER}[[route]]\nhost = \"a\"\norigins = [\"http://a\"]\n\
                 [route.health]\ndown_for = \"0s\"\n"
            ),
            "t.toml:8: key 'route[0].health.down_for': must be at least 1s",
        ),
        (
            format!(
                "{LISTENER}[[route]]\nhost = \"a\"\norigins = [\"http://a\"]\n\
                 [route.health]\nfail_after = 0\n"
            ),
            "t.toml:8: key 'route[0].health.fail_after': 0 is out of range (expected 1 to 1000)",
        ),
        (
            format!("{LISTENER}[[route]]\norigins = [\"http://a\"]\n"),
            "t.toml:4: key 'route[0].host': required key is missing",
        ),
        (
            format!("{LISTENER}[[route]]\nhost = \"a.*\"\norigins = [\"http://a\"]\n"),
            "t.toml:5: key 'route[0].host': invalid route host \"a.*\" (expected a host name, \
             \"*.suffix\" or \"*\")",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nmode = \"reverse\"\n".to_string(),
            "t.toml:3: key 'listen[0].mode': a reverse listener needs at least one [[route]] \
             table",
        ),
        (
            format!(
                "{LISTENER}[[route]]\nhost = \"A.example\"\norigins = [\"http://a\"]\n\
                 [[route]]\nhost = \"a.EXAMPLE\"\norigins = [\"http://b\"]\n"
            ),
            "t.toml:8: key 'route[1].host': duplicate route host (route[0] has the same host)",
        ),
        (
            format!("{LISTENER}\nspoof_client = false\n"),
            "t.toml:5: key 'listen[0].spoof_client': spoof_client applies only to a listener \
             with mode = \"tproxy\"",
        ),
        (
            format!("{LISTENER}[[route]]\nhost = \"a\"\norigins = [\"https://a\"]\nhttp2 = \"yes\"\n"),
            "t.toml:7: key 'route[0].http2': invalid type: string \"yes\", expected a boolean",
        ),
        (
            format!("{LISTENER}\nh2c = \"yes\"\n"),
            "t.toml:5: key 'listen[0].h2c': invalid type: string \"yes\", expected a boolean",
        ),
        (
            "[[listen]]\naddress = \"0.0.0.0:3129\"\nmode = \"tproxy\"\nspoof_client = 1\n"
                .to_string(),
            "t.toml:4: key 'listen[0].spoof_client': invalid type: integer `1`, expected a \
             boolean",
        ),
        (
            format!("{LISTENER}{LISTENER}"),
            "t.toml:5: key 'listen[1].address': address 127.0.0.1:3128 is already used by \
             listen[0]",
        ),
        (
            "[server]\nworkers = 2\n".to_string(),
            "t.toml: key 'listen': at least one [[listen]] table is required",
        ),
        (
            format!("{LISTENER}[server]\nworkers = 1025\n"),
            "t.toml:5: key 'server.workers': 1025 is out of range (expected 0 to 1024)",
        ),
        (
            format!("{LISTENER}[limits]\nmax_request_head = 2000000\n"),
            "t.toml:5: key 'limits.max_request_head': 2000000 is out of range (expected 1 to \
             1048576)",
        ),
        (
            format!("{LISTENER}[limits]\nmax_headers = 0\n"),
            "t.toml:5: key 'limits.max_headers': 0 is out of range (expected 1 to 65536)",
        ),
        (
            format!("{LISTENER}[headers]\nx_forwarded_for = \"add\"\n"),
            "t.toml:5: key 'headers.x_forwarded_for': invalid value \"add\" (expected \
             \"append\", \"replace\" or \"off\")",
        ),
        (
            format!("{LISTENER}[access_log]\nformat = \"jsonl\"\n"),
            "t.toml:5: key 'access_log.format': invalid value \"jsonl\" (expected \"squid\", \
             \"combined\" or \"json\")",
        ),
    ];
    for (text, want) in cases {
        let err = Config::from_toml_str(&text, "t.toml").unwrap_err();
        assert_eq!(err.to_string(), want, "file:\n{text}");
    }
}

#[test]
fn toml_syntax_errors_have_a_line() {
    let err = Config::from_toml_str("[server\nworkers = 1\n", "t.toml").unwrap_err();
    assert_eq!(err.line(), Some(1), "{err}");
    assert_eq!(err.key(), None);
    assert!(err.message().starts_with("invalid TOML"), "{err}");
    let err = Config::from_toml_str(&format!("{LISTENER}\n\nx = = 1\n"), "t.toml").unwrap_err();
    assert_eq!(err.line(), Some(6), "{err}");
}

#[test]
fn from_file_reads_and_names_the_file() {
    let dir = std::env::temp_dir().join(format!("sepia-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sepia.toml");
    std::fs::write(&path, FULL).unwrap();
    assert_eq!(
        Config::from_file(&path).unwrap(),
        Config::from_toml_str(FULL, "x").unwrap()
    );
    std::fs::write(&path, "[[listen]]\naddress = 1\n").unwrap();
    let err = Config::from_file(&path).unwrap_err();
    assert_eq!(err.file(), path.display().to_string());
    assert_eq!(err.line(), Some(2));
    let missing = dir.join("missing.toml");
    let err = Config::from_file(&missing).unwrap_err();
    assert!(err.message().starts_with("cannot read the file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quick_constructors() {
    let origins = vec![
        "http://127.0.0.1:8080".to_string(),
        "http://b:81".to_string(),
    ];
    let config = Config::quick_reverse("0.0.0.0:80", &origins, Some(2), None).unwrap();
    assert_eq!(config.server.workers, 2);
    assert_eq!(config.listeners[0].mode, Mode::Reverse);
    assert_eq!(config.routes.len(), 1);
    assert_eq!(config.routes[0].host, HostMatch::Any);
    assert_eq!(config.routes[0].origins[1].authority(), "b:81");
    let default = Config::builtin_default();
    assert_eq!(config.timeouts, default.timeouts);

    let forward = Config::quick_forward("[::]:3128", None, None).unwrap();
    assert_eq!(forward.listeners[0].address, "[::]:3128".parse().unwrap());
    assert_eq!(forward.server.workers, default.server.workers);

    let err = Config::quick_reverse("0.0.0.0:80", &[], None, None).unwrap_err();
    assert_eq!(err.key(), Some("--origin"));
    let https = vec!["https://x".to_string()];
    let config = Config::quick_reverse("0.0.0.0:80", &https, None, None).unwrap();
    assert!(config.routes[0].origins[0].tls);
    assert_eq!(config.routes[0].origins[0].port, 443);
    let bad = vec!["ftp://x".to_string()];
    let err = Config::quick_reverse("0.0.0.0:80", &bad, None, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "command line: key '--origin': invalid origin \"ftp://x\": unsupported scheme \"ftp\" \
         (expected http://host[:port] or https://host[:port])"
    );
    let err = Config::quick_forward("nowhere", None, None).unwrap_err();
    assert_eq!(err.key(), Some("--listen"));
    let err = Config::quick_forward("127.0.0.1:1", Some(5000), None).unwrap_err();
    assert_eq!(err.key(), Some("--workers"));
}

fn routes_config() -> Config {
    let text = format!(
        "{LISTENER}\
         [[route]]\nhost = \"*\"\norigins = [\"http://any\"]\n\
         [[route]]\nhost = \"*.example.com\"\norigins = [\"http://suffix\"]\n\
         [[route]]\nhost = \"*.deep.example.com\"\norigins = [\"http://deep\"]\n\
         [[route]]\nhost = \"www.deep.example.com\"\norigins = [\"http://exact\"]\n"
    );
    Config::from_toml_str(&text, "routes.toml").unwrap()
}

#[test]
fn route_for_host_prefers_exact_then_longest_suffix_then_any() {
    let config = routes_config();
    let cases: [(&[u8], &str); 8] = [
        (b"www.deep.example.com", "exact"),
        (b"WWW.Deep.Example.COM", "exact"),
        (b"www.deep.example.com.", "exact"),
        (b"x.deep.example.com", "deep"),
        (b"deep.example.com", "suffix"),
        (b"a.b.example.com", "suffix"),
        (b"example.com", "any"),
        (b"other.org", "any"),
    ];
    for (host, want) in cases {
        let route = config.route_for_host(host).unwrap();
        assert_eq!(
            route.origins[0].host,
            want,
            "{}",
            String::from_utf8_lossy(host)
        );
    }
}

#[test]
fn route_for_host_without_default_route() {
    let text =
        format!("{LISTENER}[[route]]\nhost = \"*.example.com\"\norigins = [\"http://suffix\"]\n");
    let config = Config::from_toml_str(&text, "t.toml").unwrap();
    assert!(config.route_for_host(b"example.com").is_none());
    assert!(config.route_for_host(b"").is_none());
    assert!(config.route_for_host(b"a.example.com").is_some());
}

#[test]
fn client_allowed_through_a_loaded_config() {
    let config = Config::builtin_default();
    let cases = [
        ("127.0.0.1", true),
        ("192.168.1.1", true),
        ("8.8.8.8", false),
        ("::1", true),
        ("2001:db8::1", false),
        ("::ffff:127.0.0.1", true),
        ("::ffff:8.8.8.8", false),
    ];
    for (ip, want) in cases {
        assert_eq!(
            config.forward.client_allowed(ip.parse().unwrap()),
            want,
            "{ip}"
        );
    }
}

#[test]
fn the_example_in_the_readme_is_valid() {
    let doc = include_str!("../../../README.md");
    let start = doc
        .find("```toml\n")
        .expect("the README has a toml example")
        + 8;
    let len = doc[start..].find("```").unwrap();
    let config = Config::from_toml_str(&doc[start..start + len], "README.md").unwrap();
    assert_eq!(config.listeners.len(), 2);
    assert_eq!(config.routes.len(), 2);
    assert_eq!(config.routes[1].host_header, HostHeader::Origin);
    assert_eq!(config.cache.memory_bytes, 256 << 20);
    assert_eq!(config.cache.refresh.len(), 1);
    assert_eq!(
        config.cache.refresh[0].max,
        std::time::Duration::from_secs(3 * 86_400)
    );
}

#[test]
fn cache_section_is_validated() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let err = |extra: &str| {
        Config::from_toml_str(&format!("{base}{extra}"), "t.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err("[cache]\nmemory = \"1MiB\"\nmax_object = \"2MiB\"\n");
    assert!(e.starts_with("t.toml:6: key 'cache.max_object'"), "{e}");
    let e = err("[cache]\nmemory = \"256MB\"\n");
    assert!(e.contains("t.toml:5") && e.contains("invalid size"), "{e}");
    let e = err("[[cache.refresh]]\npattern = \"(\"\nmin = \"0s\"\npercent = 10\nmax = \"1h\"\n");
    assert!(
        e.contains("cache.refresh[0].pattern") && e.contains("regular expression"),
        "{e}"
    );
    let e = err("[cache]\nmemmory = \"1MiB\"\n");
    assert!(e.contains("unknown key"), "{e}");
    let ok = Config::from_toml_str(
        &format!("{base}[cache]\nenabled = false\npurge_allow = [\"10.0.0.0/8\"]\n"),
        "t.toml",
    )
    .unwrap();
    assert!(!ok.cache.enabled);
    assert!(ok.cache.purge_allowed("10.1.2.3".parse().unwrap()));
    assert!(!ok.cache.purge_allowed("127.0.0.1".parse().unwrap()));
}

#[test]
fn sendfile_defaults_on_and_can_be_tuned_or_turned_off() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    assert_eq!(parse("").unwrap().cache.sendfile_min_bytes, Some(64 << 10));
    let c = parse("[cache]\nsendfile_min = \"1MiB\"\n").unwrap();
    assert_eq!(c.cache.sendfile_min_bytes, Some(1 << 20));
    let c = parse("[cache]\nsendfile = false\nsendfile_min = \"1MiB\"\n").unwrap();
    assert_eq!(c.cache.sendfile_min_bytes, None);
    let e = parse("[cache]\nsendfile_min = \"lots\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.toml:5") && e.contains("sendfile_min"), "{e}");
    let e = parse("[cache]\nsendfile = \"yes\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.toml:5") && e.contains("cache.sendfile"),
        "{e}"
    );
    assert_eq!(parse("").unwrap().cache.sendfile_dir, None);
    let dir = std::env::temp_dir();
    let c = parse(&format!("[cache]\nsendfile_dir = \"{}\"\n", dir.display())).unwrap();
    assert_eq!(c.cache.sendfile_dir, Some(dir));
    let e = parse("[cache]\nsendfile_dir = \"/nonexistent/dir\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.toml:5")
            && e.contains("cache.sendfile_dir")
            && e.contains("is not a directory"),
        "{e}"
    );
}

#[test]
fn interception_listeners_and_spoof_client_defaults() {
    let text = "[[listen]]\naddress = \"0.0.0.0:3129\"\nmode = \"intercept\"\n\
                [[listen]]\naddress = \"0.0.0.0:3130\"\nmode = \"tproxy\"\n\
                [[listen]]\naddress = \"[::]:3130\"\nmode = \"tproxy\"\nspoof_client = false\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let got: Vec<(Mode, bool)> = config
        .listeners
        .iter()
        .map(|l| (l.mode, l.spoof_client))
        .collect();
    assert_eq!(
        got,
        [
            (Mode::Intercept, false),
            (Mode::Tproxy, true),
            (Mode::Tproxy, false)
        ]
    );
    assert!(Mode::Intercept.is_interception() && Mode::Tproxy.is_interception());
    assert!(!Mode::Forward.is_interception() && !Mode::Reverse.is_interception());
}

#[test]
fn targeted_cache_control_defaults_by_mode_and_is_checked() {
    let text = "[[route]]\nhost = \"*\"\norigins = [\"http://127.0.0.1:8080\"]\n\
                [[listen]]\naddress = \"0.0.0.0:80\"\nmode = \"reverse\"\n\
                [[listen]]\naddress = \"0.0.0.0:81\"\nmode = \"forward\"\n\
                [[listen]]\naddress = \"0.0.0.0:82\"\nmode = \"reverse\"\n\
                targeted_cache_control = [\"Sepia-Cache-Control\", \"CDN-Cache-Control\"]\n\
                [[listen]]\naddress = \"0.0.0.0:83\"\nmode = \"reverse\"\n\
                targeted_cache_control = []\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let lists: Vec<Vec<String>> = config
        .listeners
        .iter()
        .map(|l| l.targeted_cache_control.clone())
        .collect();
    assert_eq!(
        lists,
        [
            vec!["CDN-Cache-Control".to_string()],
            vec![],
            vec!["Sepia-Cache-Control".into(), "CDN-Cache-Control".into()],
            vec![],
        ]
    );
    let listener = "[[listen]]\naddress = \"0.0.0.0:81\"\nmode = \"forward\"\n";
    for (list, error) in [
        (
            "[\"Cache-Control\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control[0]': \"Cache-Control\" cannot be a \
             targeted field",
        ),
        (
            "[\"a b\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control[0]': invalid field name \"a b\"",
        ),
        (
            "[\"X-CC\", \"x-cc\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control': \"x-cc\" is listed twice",
        ),
    ] {
        let text = format!("{listener}targeted_cache_control = {list}\n");
        let e = Config::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(error), "{e}");
    }
}

#[test]
fn h2c_is_off_unless_a_listener_asks_for_it() {
    let text = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n\
                [[listen]]\naddress = \"127.0.0.1:3129\"\nmode = \"forward\"\nh2c = true\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let got: Vec<bool> = config.listeners.iter().map(|l| l.h2c).collect();
    assert_eq!(got, [false, true]);
}

#[test]
fn cache_disks_are_validated_with_their_key() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    let err = |extra: &str| parse(extra).unwrap_err().to_string();
    assert!(parse("").unwrap().cache.disks.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let two = format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\nwrite_budget = \"100GiB\"\n\
         [[cache.disk]]\npath = \"{}\"\nsize = \"64MiB\"\n",
        a.display(),
        b.display()
    );
    let c = parse(&two).unwrap();
    assert_eq!(c.cache.disks.len(), 2);
    assert_eq!(c.cache.disks[0].path, a);
    assert_eq!(c.cache.disks[0].size_bytes, 1 << 30);
    assert_eq!(c.cache.disks[0].write_budget_per_day, Some(100 << 30));
    assert_eq!(c.cache.disks[1].write_budget_per_day, None);

    let e = err("[[cache.disk]]\npath = \"relative\"\nsize = \"1GiB\"\n");
    assert!(
        e.starts_with("t.toml:5: key 'cache.disk[0].path'") && e.contains("absolute"),
        "{e}"
    );
    let e = err("[[cache.disk]]\npath = \"/nonexistent/x/y\"\nsize = \"1GiB\"\n");
    assert!(
        e.contains("cache.disk[0].path") && e.contains("parent"),
        "{e}"
    );
    let e = err(&format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1MiB\"\n",
        a.display()
    ));
    assert!(
        e.starts_with("t.toml:6: key 'cache.disk[0].size'") && e.contains("64 MiB"),
        "{e}"
    );
    let e = err(&format!("[[cache.disk]]\npath = \"{}\"\n", a.display()));
    assert!(e.contains("size"), "{e}");
    let nested = format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\n[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\n",
        a.display(),
        a.join("inner").display()
    );
    let e = err(&nested);
    assert!(
        e.contains("cache.disk[1].path") && e.contains("overlaps"),
        "{e}"
    );
    let e = err(&format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\nspeed = 1\n",
        a.display()
    ));
    assert!(e.contains("speed"), "{e}");
}

#[test]
fn quick_cache_flags_set_memory_and_one_disk() {
    let origins = vec!["http://127.0.0.1:8080".to_string()];
    let base = || Config::quick_reverse("127.0.0.1:80", &origins, None, None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let quick = QuickCache {
        memory: Some("8MiB".into()),
        dir: Some(tmp.path().join("cache")),
        dir_size: Some("2GiB".into()),
    };
    let c = base().with_quick_cache(&quick).unwrap();
    assert_eq!(c.cache.memory_bytes, 8 << 20);
    assert_eq!(
        c.cache.max_object_bytes,
        8 << 20,
        "max_object lowered to the memory"
    );
    assert_eq!(c.cache.disks[0].size_bytes, 2 << 30);
    assert_eq!(c.cache.disks[0].path, tmp.path().join("cache"));
    let default_size = QuickCache {
        dir_size: None,
        ..quick.clone()
    };
    let c = base().with_quick_cache(&default_size).unwrap();
    assert_eq!(c.cache.disks[0].size_bytes, QuickCache::DEFAULT_DIR_SIZE);
    let untouched = base().with_quick_cache(&QuickCache::default()).unwrap();
    assert_eq!(untouched.cache, base().cache);
    for (bad, flag) in [
        (
            QuickCache {
                memory: Some("lots".into()),
                ..QuickCache::default()
            },
            "--cache-memory",
        ),
        (
            QuickCache {
                dir_size: Some("1MiB".into()),
                ..quick.clone()
            },
            "--cache-dir-size",
        ),
        (
            QuickCache {
                dir: Some("/nonexistent/a/b".into()),
                ..quick.clone()
            },
            "--cache-dir",
        ),
    ] {
        let e = base().with_quick_cache(&bad).unwrap_err();
        assert_eq!(e.key(), Some(flag), "{e}");
    }
}

#[test]
fn admin_is_off_unless_configured_and_validated_with_its_key() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    let err = |extra: &str| parse(extra).unwrap_err().to_string();
    assert_eq!(parse("").unwrap().admin, None);
    let a = parse("[admin]\nlisten = \"127.0.0.1:9090\"\n")
        .unwrap()
        .admin
        .unwrap();
    assert_eq!(a.listen, "127.0.0.1:9090".parse().unwrap());
    assert!(a.allows("127.0.0.1".parse().unwrap()));
    assert!(a.allows("::ffff:127.0.0.2".parse().unwrap()));
    assert!(!a.allows("10.0.0.1".parse().unwrap()));
    assert_eq!(a.token, None);
    assert_eq!(a.tag_fields, ["Surrogate-Key", "Cache-Tag"]);
    let a = parse(
        "[admin]\nlisten = \"[::1]:9090\"\nallow = [\"10.0.0.0/8\"]\n\
         token = \"s3cret-s3cret-s3cret\"\ntag_fields = [\"Cache-Tag\"]\n",
    )
    .unwrap()
    .admin
    .unwrap();
    assert!(a.allows("10.1.1.1".parse().unwrap()));
    assert!(!a.allows("127.0.0.1".parse().unwrap()));
    assert_eq!(a.token.as_deref(), Some("s3cret-s3cret-s3cret"));
    assert!(
        !format!("{a:?}").contains("s3cret"),
        "the token leaks: {a:?}"
    );
    assert_eq!(a.tag_fields, ["Cache-Tag"]);

    let e = err("[admin]\nlisten = \"127.0.0.1:3128\"\n");
    assert!(
        e.starts_with("t.toml:5: key 'admin.listen'") && e.contains("listen[0]"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken = \"short\"\n");
    assert!(
        e.starts_with("t.toml:6: key 'admin.token'") && e.contains("too short"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken = \"has a space in it, long\"\n");
    assert!(
        e.contains("admin.token") && e.contains("invalid token"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntag_fields = [\"bad field\"]\n");
    assert!(e.starts_with("t.toml:6: key 'admin.tag_fields'"), "{e}");
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\nallow = [\"10.0.0.1/8\"]\n");
    assert!(e.contains("admin.allow"), "{e}");
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\nport = 1\n");
    assert!(
        e.contains("'admin.port'") && e.contains("unknown key"),
        "{e}"
    );
    let e = err("[admin]\nallow = []\n");
    assert!(e.contains("admin.listen"), "{e}");

    let quick = Config::quick_forward("127.0.0.1:3128", None, None).unwrap();
    let q = quick
        .clone()
        .with_quick_admin(Some("127.0.0.1:9091"))
        .unwrap();
    assert_eq!(q.admin.unwrap().listen, "127.0.0.1:9091".parse().unwrap());
    let e = quick.clone().with_quick_admin(Some("nope")).unwrap_err();
    assert!(e.to_string().contains("--admin"), "{e}");
    let e = quick.with_quick_admin(Some("127.0.0.1:3128")).unwrap_err();
    assert!(e.to_string().contains("already used"), "{e}");
}
