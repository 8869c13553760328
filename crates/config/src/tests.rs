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
            active: None,
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
