//! `sepia import-squid` with the real binary: Debian's shipped squid.conf, a classic
//! accelerator and a forward proxy with ACLs and Basic authentication. Every translation must
//! pass `sepia check`; the accelerator and the forward proxy then run twice, as Squid (5.7 from
//! Debian) with the squid.conf and as Sepia with its translation, each in front of its own
//! test origin, and the same requests must get the same answers: status codes, allowed and
//! denied, 407 without credentials, and a cache hit (the origin asked once) on a second GET.
//!
//! The comparisons need Squid (`scripts/test.sh` installs Debian's `squid`); without it they
//! print `SKIPPED: <reason>` after checking the translation.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use sepia_e2e::{curl, free_addr, sepia_bin, Origin, RawClient, Sepia, Squid};

/// Squid's Basic helper for htpasswd-style files (Debian's `squid` package).
const NCSA_AUTH: &str = "/usr/lib/squid/basic_ncsa_auth";

/// `sepia ARGS...`, its stdin empty.
fn sepia(args: &[&str]) -> Output {
    Command::new(sepia_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run sepia")
}

/// `sepia import-squid CONF` to stdout; panics unless it exits 0. Returns the TOML.
fn import(conf: &Path) -> String {
    let out = sepia(&["import-squid", &conf.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "import-squid failed: {stderr}");
    assert!(stderr.contains("sepia: translated"), "{stderr}");
    String::from_utf8(out.stdout).expect("UTF-8 TOML")
}

/// `sepia import-squid` of `squid_conf` (written to a file) with `-o`, then `sepia check`.
fn import_and_check(squid_conf: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("squid.conf");
    std::fs::write(&conf, squid_conf).unwrap();
    let toml_path = dir.path().join("sepia.toml");
    let out = sepia(&[
        "import-squid",
        &conf.display().to_string(),
        "-o",
        &toml_path.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "-o writes nothing to stdout");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    check(&toml);
    toml
}

/// `sepia check --config FILE` must accept `toml`.
fn check(toml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sepia.toml");
    std::fs::write(&path, toml).unwrap();
    let out = sepia(&["check", "--config", &path.display().to_string()]);
    assert!(
        out.status.success(),
        "sepia check refused the translation: {}\n{toml}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The translation as Sepia is run with it in the tests: the access log on stdout (where the
/// harness reads it) instead of Squid's default file.
fn runnable(toml: &str) -> String {
    toml.replace("path = \"/var/log/squid/access.log\"", "path = \"stdout\"")
}

fn squid_or_skip() -> Option<PathBuf> {
    let bin = Squid::binary();
    if bin.is_none() {
        println!("SKIPPED: squid is not installed (scripts/test.sh installs Debian's squid)");
    }
    bin
}

#[test]
fn debians_squid_conf_translates_and_passes_check() {
    let installed = Path::new("/etc/squid/squid.conf");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/debian-squid.conf");
    let conf = if installed.is_file() {
        installed.to_path_buf()
    } else {
        fixture
    };
    let toml = import(&conf);
    check(&toml);
    for expected in [
        "# Not translated (2):",
        "include /etc/squid/conf.d/*.conf",
        "coredump_dir /var/spool/squid",
        "address = \"0.0.0.0:3128\"\nmode = \"forward\"",
        "address = \"[::]:3128\"",
        "connect_ports = [443]",
        "acl = [\"!Safe_ports\"]",
        "acl = [\"CONNECT\", \"!SSL_ports\"]",
        "acl = [\"localhost\", \"manager\"]",
        "name = \"manager\"\ntype = \"url_regex\"",
        "pattern = \"(?i)(/cgi-bin/|\\\\?)\"",
        "[[http_access]]\naction = \"deny\"\nacl = [\"all\"]",
    ] {
        assert!(toml.contains(expected), "{expected:?} missing from\n{toml}");
    }
}

#[test]
fn unreadable_input_is_exit_status_2() {
    let out = sepia(&["import-squid", "/nonexistent/squid.conf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

/// What one request got: status, and the `Proxy-Authenticate` challenge if any.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    challenge: Option<String>,
}

/// The classic accelerator of the Squid wiki, for www.example.com in front of one origin.
fn accelerator(listen: SocketAddr, origin: &Origin) -> String {
    format!(
        "http_port {listen} accel defaultsite=www.example.com vhost\n\
         cache_peer 127.0.0.1 parent {} 0 no-query originserver name=web\n\
         acl our_sites dstdomain www.example.com\n\
         http_access allow our_sites\n\
         cache_peer_access web allow our_sites\n\
         cache_peer_access web deny all\n\
         http_access deny all\n",
        origin.port()
    )
}

/// The requests of the accelerator comparison, sent to `proxy`.
fn accelerator_requests(proxy: SocketAddr, _: &Origin) -> Vec<Seen> {
    let url = |path: &str| format!("http://{proxy}{path}");
    let get = |host: &str, path: &str| {
        let out = curl(&["-H", &format!("Host: {host}"), &url(path)]);
        Seen {
            status: out.status,
            challenge: None,
        }
    };
    let post = curl(&[
        "-H",
        "Host: www.example.com",
        "--data-binary",
        "hello",
        &url("/echo"),
    ]);
    vec![
        get("www.example.com", "/cc/max-age=60/page"),
        get("www.example.com", "/cc/max-age=60/page"),
        get("www.example.com", "/status/404"),
        get("other.example", "/cc/max-age=60/page"),
        Seen {
            status: post.status,
            challenge: None,
        },
    ]
}

#[test]
fn a_classic_accelerator_behaves_like_squid() {
    let probe = Origin::start();
    let toml = import_and_check(&accelerator(free_addr().parse().unwrap(), &probe));
    for expected in [
        "mode = \"reverse\"",
        &format!(
            "host = \"www.example.com\"\norigins = [\"http://127.0.0.1:{}\"]",
            probe.port()
        ),
        "name = \"our_sites\"\ntype = \"dstdomain\"\nvalues = [\"www.example.com\"]",
    ] {
        assert!(toml.contains(expected), "{expected:?} missing from\n{toml}");
    }
    let page = "/cc/max-age=60/page";
    let Some(by_sepia) = side_by_side(accelerator, accelerator_requests, page) else {
        return;
    };
    let statuses: Vec<u16> = by_sepia.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [200, 200, 404, 403, 200]);
}

/// A forward proxy for loopback clients who log in with Basic credentials (checked by Squid's
/// basic_ncsa_auth against `passwd`), with a blocked domain and CONNECT only to 443.
fn forward(listen: SocketAddr, passwd: &Path) -> String {
    format!(
        "http_port {listen}\n\
         auth_param basic program {NCSA_AUTH} {}\n\
         auth_param basic children 2\n\
         auth_param basic realm Test proxy\n\
         auth_param basic credentialsttl 1 minute\n\
         acl localnet src 127.0.0.0/8\n\
         acl SSL_ports port 443\n\
         acl blocked dstdomain .blocked.example\n\
         acl users proxy_auth REQUIRED\n\
         http_access deny CONNECT !SSL_ports\n\
         http_access deny blocked\n\
         http_access allow localnet users\n\
         http_access deny all\n\
         cache_mem 16 MB\n",
        passwd.display()
    )
}

/// The requests of the forward-proxy comparison, through `proxy` to `origin`.
fn forward_requests(proxy: SocketAddr, origin: &Origin) -> Vec<Seen> {
    let proxy_url = format!("http://{proxy}");
    let get = |url: &str, user: Option<&str>| {
        let mut args = vec!["-x", proxy_url.as_str()];
        if let Some(user) = user {
            args.extend(["--proxy-user", user]);
        }
        args.push(url);
        let out = curl(&args);
        Seen {
            status: out.status,
            challenge: out.header("Proxy-Authenticate"),
        }
    };
    let page = format!("{}/cc/max-age=60/forward", origin.url());
    let mut connect = RawClient::connect(proxy);
    connect.send(
        b"CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\
          Proxy-Authorization: Basic YWxpY2U6c2VjcmV0\r\n\r\n",
    );
    let connect = connect.read_response().status;
    vec![
        get(&page, None),
        get(&page, Some("alice:wrong")),
        get(&page, Some("alice:secret")),
        get(&page, Some("alice:secret")),
        get("http://www.blocked.example/", Some("alice:secret")),
        get(
            &format!("{}/status/404", origin.url()),
            Some("alice:secret"),
        ),
        Seen {
            status: connect,
            challenge: None,
        },
    ]
}

#[test]
fn a_forward_proxy_with_acls_and_basic_auth_behaves_like_squid() {
    if !Path::new(NCSA_AUTH).is_file() {
        println!("SKIPPED: {NCSA_AUTH} is not installed (Debian package squid)");
        return;
    }
    // Squid runs its helpers as the `proxy` user: the password file must be readable by all.
    let dir = tempfile::tempdir().unwrap();
    let _ = Command::new("chmod").arg("0755").arg(dir.path()).status();
    let passwd = dir.path().join("passwd");
    let hash = Command::new("openssl")
        .args(["passwd", "-apr1", "secret"])
        .output()
        .expect("openssl passwd");
    let hash = String::from_utf8(hash.stdout).unwrap();
    std::fs::write(&passwd, format!("alice:{}\n", hash.trim())).unwrap();
    let _ = Command::new("chmod").arg("0644").arg(&passwd).status();

    let toml = import_and_check(&forward(free_addr().parse().unwrap(), &passwd));
    for expected in [
        &format!("helper = [\"{NCSA_AUTH}\", \"{}\"]", passwd.display()),
        "realm = \"Test proxy\"",
        "helper_children = 2",
        "credentials_ttl = \"1m\"",
        "name = \"CONNECT\"\ntype = \"method\"",
        "connect_ports = [443]",
        "acl = [\"localnet\", \"users\"]",
    ] {
        assert!(toml.contains(expected), "{expected:?} missing from\n{toml}");
    }
    let site = |addr: SocketAddr, _: &Origin| forward(addr, &passwd);
    let page = "/cc/max-age=60/forward";
    let Some(by_sepia) = side_by_side(site, forward_requests, page) else {
        return;
    };
    let statuses: Vec<u16> = by_sepia.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [407, 407, 200, 200, 403, 404, 403]);
    assert_eq!(
        by_sepia[0].challenge.as_deref(),
        Some("Basic realm=\"Test proxy\"")
    );
}

/// Runs `site` as Squid and its translation as Sepia, each on a free address in front of an
/// origin of its own, sends each the `requests`, and asserts that both saw the same answers
/// and that their origins were asked for `cached` once (the repeated GET was a hit).
/// Returns Sepia's answers; `None` (after printing why) when Squid cannot run here.
fn side_by_side(
    site: impl Fn(SocketAddr, &Origin) -> String,
    requests: impl Fn(SocketAddr, &Origin) -> Vec<Seen>,
    cached: &str,
) -> Option<Vec<Seen>> {
    let bin = squid_or_skip()?;
    let (squid_origin, sepia_origin) = (Origin::start(), Origin::start());
    let squid_addr: SocketAddr = free_addr().parse().unwrap();
    let squid = match Squid::start(&bin, squid_addr, &site(squid_addr, &squid_origin)) {
        Ok(s) => s,
        Err(why) => {
            println!("SKIPPED: {why}");
            return None;
        }
    };
    let sepia_addr: SocketAddr = free_addr().parse().unwrap();
    let toml = import_and_check(&site(sepia_addr, &sepia_origin));
    let sepia = Sepia::start(&runnable(&toml));
    let by_squid = requests(squid.addr(), &squid_origin);
    let by_sepia = requests(sepia.addr(), &sepia_origin);
    assert_eq!(
        by_squid,
        by_sepia,
        "squid log:\n{}\nsepia log:\n{}",
        squid.read("access.log"),
        sepia.stdout()
    );
    for origin in [&squid_origin, &sepia_origin] {
        let asked = origin
            .requests()
            .iter()
            .filter(|r| r.path() == cached)
            .count();
        assert_eq!(asked, 1, "{:#?}", origin.requests());
    }
    Some(by_sepia)
}
