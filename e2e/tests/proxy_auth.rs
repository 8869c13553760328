//! Proxy authentication through the real binary (`[auth]` + a `proxy_auth` ACL): missing, bad
//! and good Basic credentials against an htpasswd file holding every format Apache's htpasswd
//! writes, and against a Squid basic-auth helper program, including one that crashes and is
//! restarted. Each case checks the status, whether the origin saw the request, and the user
//! name in the access log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sepia_e2e::{curl, free_addr, Origin, RawClient, Sepia};

/// The htpasswd fixture made by Apache's `htpasswd` (see crates/auth/tests/fixtures/README.md):
/// alice is apr1-MD5, bob bcrypt, carol {SHA}.
fn htpasswd_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/auth/tests/fixtures/htpasswd")
}

/// The test helper program of the auth crate (valid when the password is the user + "-pw").
fn fake_helper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/auth/tests/helpers/fake_helper.py")
}

/// A forward proxy without cache whose rules are: `auth_users` must authenticate, and only
/// alice, bob, carol or helper users named `staff*` are allowed; everyone else is denied.
fn proxy(auth: &str) -> Sepia {
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"forward\"\n\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n\
         [cache]\nenabled = false\n\n\
         {auth}\n\n\
         [[acl]]\nname = \"users\"\ntype = \"proxy_auth\"\n\
         values = [\"alice\", \"bob\", \"carol\", \"staff1\", \"staff2\"]\n\n\
         [[acl]]\nname = \"anyone\"\ntype = \"proxy_auth\"\nvalues = [\"REQUIRED\"]\n\n\
         [[http_access]]\naction = \"deny\"\nacl = [\"!anyone\"]\n\n\
         [[http_access]]\naction = \"allow\"\nacl = [\"users\"]\n",
        free_addr()
    );
    Sepia::start(&config)
}

/// GETs `path` on `origin` through `sepia` with `-U user:pass` when given; returns the status,
/// the Proxy-Authenticate header, and whether the origin saw a new request.
fn get(
    sepia: &Sepia,
    origin: &Origin,
    path: &str,
    creds: Option<&str>,
) -> (u16, Option<String>, bool) {
    let before = origin.request_count();
    let proxy = sepia.url();
    let url = format!("{}{path}", origin.url());
    let mut args = vec!["-x", proxy.as_str()];
    if let Some(c) = creds {
        args.extend(["--proxy-user", c]);
    }
    args.push(&url);
    let out = curl(&args);
    let challenge = out.header("proxy-authenticate");
    (out.status, challenge, origin.request_count() > before)
}

/// The user field (`%[un`, the 8th) of the log line for `path`.
fn logged_user(sepia: &Sepia, path: &str) -> String {
    assert!(
        sepia_e2e::wait_until(Duration::from_secs(5), || sepia
            .log_lines()
            .iter()
            .any(|l| l.contains(path))),
        "no log line for {path}:\n{}",
        sepia.stdout()
    );
    let line = sepia
        .log_lines()
        .into_iter()
        .find(|l| l.contains(path))
        .unwrap();
    line.split_whitespace().nth(7).unwrap().to_string()
}

#[test]
fn htpasswd_users_of_every_format_are_checked() {
    let origin = Origin::start();
    let file = htpasswd_fixture();
    let sepia = proxy(&format!(
        "[auth]\nrealm = \"Staff proxy\"\nhtpasswd = \"{}\"",
        file.display()
    ));

    // Missing credentials: 407 with the configured realm, nothing forwarded.
    let (status, challenge, reached) = get(&sepia, &origin, "/none", None);
    assert_eq!((status, reached), (407, false));
    assert_eq!(challenge.as_deref(), Some("Basic realm=\"Staff proxy\""));

    // Good credentials, one user per format: apr1-MD5, bcrypt, {SHA}.
    for (i, creds) in ["alice:wonder land", "bob:s3cr:et", "carol:pässword"]
        .iter()
        .enumerate()
    {
        let path = format!("/good/{i}");
        let (status, _, reached) = get(&sepia, &origin, &path, Some(creds));
        assert_eq!((status, reached), (200, true), "{creds}");
        let user = creds.split(':').next().unwrap();
        assert_eq!(logged_user(&sepia, &path), user);
    }
    // The proxy consumed the credentials: they are not passed on (RFC 9110 §11.7.4).
    assert!(origin
        .requests()
        .iter()
        .all(|r| r.header("proxy-authorization").is_none()));

    // Wrong password, unknown user: challenged again, nothing forwarded.
    for creds in ["alice:wrong", "mallory:wonder land", "bob:"] {
        let (status, challenge, reached) = get(&sepia, &origin, "/bad", Some(creds));
        assert_eq!((status, reached), (407, false), "{creds}");
        assert!(challenge.is_some(), "{creds}");
    }

    // Valid, but not in the `users` list: the allow rule does not match, default deny.
    let (status, _, reached) = get(
        &sepia,
        &origin,
        "/dan",
        Some("dan:long password that is longer than sixteen bytes"),
    );
    assert_eq!((status, reached), (403, false));

    // A repeated request with the same credentials is served (from the verified cache).
    let (status, _, reached) = get(&sepia, &origin, "/again", Some("bob:s3cr:et"));
    assert_eq!((status, reached), (200, true));
}

#[test]
fn a_407_keeps_the_connection_for_the_retry_with_credentials() {
    let origin = Origin::start();
    let file = htpasswd_fixture();
    let sepia = proxy(&format!("[auth]\nhtpasswd = \"{}\"", file.display()));
    let mut client = RawClient::connect(sepia.addr());
    let url = format!("{}/retry", origin.url());
    client.send(format!("GET {url} HTTP/1.1\r\nHost: {}\r\n\r\n", origin.addr()).as_bytes());
    let r = client.read_response();
    assert_eq!(r.status, 407);
    // alice:wonder land
    client.send(
        format!(
            "GET {url} HTTP/1.1\r\nHost: {}\r\nProxy-Authorization: Basic YWxpY2U6d29uZGVyIGxhbmQ=\r\n\r\n",
            origin.addr()
        )
        .as_bytes(),
    );
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(origin.request_count(), 1);
}

/// Whether python3 (which runs the test helper) is installed; says SKIPPED when not.
fn python3_present() -> bool {
    let present = std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok();
    if !present {
        eprintln!("SKIPPED: python3 (runs the test helper) is not installed");
    }
    present
}

fn helper_auth(mode: &str, starts: &Path, extra: &str) -> String {
    format!(
        "[auth]\nhelper = [\"{}\", \"{mode}\", \"{}\"{extra}]\nhelper_children = 1\n\
         helper_timeout = \"2s\"\ncredentials_ttl = \"1s\"\nnegative_ttl = \"1s\"",
        fake_helper().display(),
        starts.display()
    )
}

#[test]
fn a_squid_basic_auth_helper_decides() {
    if !python3_present() {
        return;
    }
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let sepia = proxy(&helper_auth("plain", &starts, ""));
    let (status, _, reached) = get(&sepia, &origin, "/h1", Some("staff1:staff1-pw"));
    assert_eq!((status, reached), (200, true));
    assert_eq!(logged_user(&sepia, "/h1"), "staff1");
    let (status, _, reached) = get(&sepia, &origin, "/h2", Some("staff1:nope"));
    assert_eq!((status, reached), (407, false));
}

#[test]
fn a_crashing_helper_is_restarted_and_requests_keep_working() {
    if !python3_present() {
        return;
    }
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    // The helper exits on its second request without answering: every other request finds
    // a dead helper that Sepia must restart (the lost request is retried on the new one).
    let sepia = proxy(&helper_auth("crash", &starts, ", \"1\""));
    for i in 0..4 {
        // Distinct users so the verified-credentials cache cannot answer.
        let user = if i % 2 == 0 { "staff1" } else { "staff2" };
        let creds = format!("{user}:{user}-pw{}", "");
        let path = format!("/crash/{i}");
        let (status, _, reached) = get(&sepia, &origin, &path, Some(&creds));
        assert_eq!(
            (status, reached),
            (200, true),
            "request {i}\n{}",
            sepia.stdout()
        );
        // Let the cached verdict expire so the next request asks a helper again.
        std::thread::sleep(Duration::from_millis(1100));
    }
    let started = std::fs::read_to_string(&starts).unwrap().lines().count();
    assert!(started >= 2, "the helper was started {started} times");
}
