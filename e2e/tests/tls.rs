//! TLS termination (issue 20): the quick start's `--tls-cert/--tls-key`, certificates chosen
//! by SNI, session resumption, certificate reload without restart, start-up errors, the
//! protocol versions offered, large and pipelined traffic over TLS, and a TLS forward proxy
//! with CONNECT inside it. Certificates are made at test time with `openssl`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use sepia_e2e::{
    curl, forward_config, free_addr, openssl_with_input, pattern, served_subject, sha256_hex,
    wait_until, Origin, Sepia, TestCert,
};
use tempfile::TempDir;

/// A reverse proxy over TLS with `certs` (the first is the default) in front of `origin`.
fn tls_reverse(origin: &Origin, certs: &[(&TestCert, &[&str])], tls_extra: &str) -> Sepia {
    let entries: Vec<String> = certs
        .iter()
        .map(|(c, names)| {
            let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
            format!(
                "{{ cert = \"{}\", key = \"{}\", names = [{}] }}",
                c.cert_str(),
                c.key_str(),
                names.join(", ")
            )
        })
        .collect();
    let config = format!(
        "[server]\nworkers = 2\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\
         [listen.tls]\ncertificates = [{}]\n{tls_extra}\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n\
         [headers]\nforwarded = true\n\n\
         [[route]]\nhost = \"*\"\norigins = [\"{}\"]\n",
        free_addr(),
        entries.join(", "),
        origin.url()
    );
    Sepia::start(&config)
}

/// A reverse proxy over TLS with one certificate for `localhost`, in front of an origin.
fn one_site() -> (TempDir, TestCert, Origin, Sepia) {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "site", "site", &["localhost"]);
    let origin = Origin::start();
    let sepia = tls_reverse(&origin, &[(&cert, &[])], "");
    (dir, cert, origin, sepia)
}

fn https(sepia: &Sepia, name: &str, path: &str) -> String {
    format!("https://{name}:{}{path}", sepia.addr().port())
}

fn resolve(sepia: &Sepia, name: &str) -> String {
    format!("{name}:{}:127.0.0.1", sepia.addr().port())
}

#[test]
fn the_quick_start_serves_https_and_caches() {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "site", "site", &["localhost"]);
    let origin = Origin::start();
    let listen = free_addr();
    let origin_url = origin.url();
    let sepia = Sepia::start_args(&[
        "reverse",
        "--listen",
        &listen,
        "--origin",
        &origin_url,
        "--tls-cert",
        cert.cert_str(),
        "--tls-key",
        cert.key_str(),
    ]);
    let url = https(&sepia, "localhost", "/cacheable/page");
    let first = curl(&["--cacert", cert.ca_str(), "--http1.1", &url]);
    first.assert_status(200);
    assert_eq!(first.text(), "/cacheable/page");
    let second = curl(&["--cacert", cert.ca_str(), "--http1.1", &url]);
    second.assert_status(200);
    let status = second.header("cache-status").unwrap_or_default();
    assert!(status.contains("hit"), "second request not a hit: {status}");
    assert_eq!(origin.request_count(), 1);
    let lines = sepia.wait_for_log_lines(2, Duration::from_secs(5));
    assert!(
        lines[0].contains(&format!(
            "GET https://localhost:{}/cacheable/page",
            sepia.addr().port()
        )),
        "{}",
        lines[0]
    );
}

#[test]
fn the_server_name_picks_the_certificate() {
    let dir = TempDir::new().unwrap();
    let default = TestCert::new(dir.path(), "default", "default", &["default.test"]);
    let wild = TestCert::new(dir.path(), "wild", "wild", &["*.example.test"]);
    let exact = TestCert::new(dir.path(), "exact", "exact", &["www.example.test"]);
    let origin = Origin::start();
    let sepia = tls_reverse(
        &origin,
        &[
            (&default, &[]),
            (&wild, &["*.example.test", "example.test"]),
            (&exact, &[]),
        ],
        "",
    );
    let addr = sepia.addr().to_string();
    let cases = [
        (Some("a.example.test"), "CN = wild"),
        (Some("example.test"), "CN = wild"),
        // An exact name wins over a wildcard that also matches.
        (Some("www.example.test"), "CN = exact"),
        (Some("WWW.Example.Test"), "CN = exact"),
        // A wildcard covers one label only (RFC 6125 §6.4.3).
        (Some("a.b.example.test"), "CN = default"),
        (Some("other.test"), "CN = default"),
        (None, "CN = default"),
    ];
    for (sni, subject) in cases {
        assert_eq!(served_subject(&addr, sni), subject, "server name {sni:?}");
    }
    // And a real client verifies the chosen certificate for the name it asked.
    let out = curl(&[
        "--cacert",
        wild.ca_str(),
        "--resolve",
        &resolve(&sepia, "shop.example.test"),
        &https(&sepia, "shop.example.test", "/x"),
    ]);
    out.assert_status(200);
}

#[test]
fn sessions_resume_with_tickets_whichever_worker_serves_them() {
    let (dir, _cert, _origin, sepia) = one_site();
    let addr = sepia.addr().to_string();
    for version in ["-tls1_2", "-tls1_3"] {
        let session = dir.path().join(format!("session{version}"));
        let session = session.to_str().unwrap();
        // The request makes s_client wait for the answer, by which time a TLS 1.3 ticket
        // has arrived too.
        let request = b"GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        let first = openssl_with_input(
            &[
                "s_client",
                "-connect",
                &addr,
                version,
                "-ign_eof",
                "-sess_out",
                session,
            ],
            request,
        );
        assert!(first.contains("New, TLS"), "{version}: {first}");
        // Two workers: ten reconnects land on both, and every one resumes.
        for _ in 0..10 {
            let again = openssl_with_input(
                &[
                    "s_client", "-connect", &addr, version, "-ign_eof", "-sess_in", session,
                ],
                request,
            );
            assert!(
                again.contains("Reused, TLS"),
                "{version} not resumed: {again}"
            );
            assert!(again.contains("HTTP/1.1 200 OK"), "{again}");
        }
    }
}

#[test]
fn only_tls_1_2_and_1_3_are_offered() {
    let (_dir, cert, origin, sepia) = one_site();
    let addr = sepia.addr().to_string();
    for old in ["-tls1", "-tls1_1"] {
        // OpenSSL refuses these itself at its default security level; lowering it makes
        // sure the refusal is the server's.
        let out = openssl_with_input(
            &[
                "s_client",
                "-connect",
                &addr,
                old,
                "-cipher",
                "DEFAULT@SECLEVEL=0",
            ],
            b"",
        );
        assert!(
            !out.contains("Cipher is ") || out.contains("Cipher is (NONE)"),
            "{old}: {out}"
        );
    }
    // No CBC, RC4, 3DES or non-forward-secret suite in TLS 1.2.
    for weak in [
        "AES128-SHA",
        "AES256-SHA256",
        "ECDHE-ECDSA-AES128-SHA",
        "DES-CBC3-SHA",
    ] {
        let out = openssl_with_input(
            &["s_client", "-connect", &addr, "-tls1_2", "-cipher", weak],
            b"",
        );
        assert!(
            !out.contains(&format!("Cipher is {weak}")),
            "{weak} accepted: {out}"
        );
    }
    let strong = openssl_with_input(&["s_client", "-connect", &addr, "-tls1_2"], b"");
    assert!(strong.contains("Cipher is ECDHE-ECDSA-"), "{strong}");
    let min13 = tls_reverse(&origin, &[(&cert, &[])], "min_version = \"1.3\"\n");
    let out = openssl_with_input(
        &["s_client", "-connect", &min13.addr().to_string(), "-tls1_2"],
        b"",
    );
    assert!(
        !out.contains("Cipher is ECDHE"),
        "TLS 1.2 with min_version 1.3: {out}"
    );
}

/// A Python client that keeps one TLS connection: it answers `GET PATH` lines on stdin with
/// `STATUS LENGTH SHA256` of each response read from that connection, and
/// `PIPELINE N PATH` with the same for N requests sent in one write.
const KEEP_ALIVE_CLIENT: &str = r#"
import hashlib, socket, ssl, sys
host, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
s = ctx.wrap_socket(socket.create_connection((host, port)), server_hostname="localhost")
buf = b""
def response():
    global buf
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk: raise SystemExit("closed")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = 0
    for l in lines[1:]:
        k, _, v = l.partition(":")
        if k.lower() == "content-length": length = int(v)
    while len(buf) < length:
        chunk = s.recv(65536)
        if not chunk: raise SystemExit("closed mid-body")
        buf += chunk
    body, buf = buf[:length], buf[length:]
    return lines[0].split()[1], length, hashlib.sha256(body).hexdigest()
def request(path):
    return ("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode()
for line in sys.stdin:
    words = line.split()
    if words[0] == "GET":
        s.sendall(request(words[1]))
        print(*response(), flush=True)
    elif words[0] == "PIPELINE":
        n = int(words[1])
        s.sendall(b"".join(request("%s?%d" % (words[2], i)) for i in range(n)))
        for _ in range(n):
            print(*response(), flush=True)
"#;

struct KeepAlive {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl KeepAlive {
    fn connect(sepia: &Sepia, cert: &TestCert) -> KeepAlive {
        let port = sepia.addr().port().to_string();
        let mut child = Command::new("python3")
            .args(["-c", KEEP_ALIVE_CLIENT, "127.0.0.1", &port, cert.ca_str()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3");
        let out = BufReader::new(child.stdout.take().unwrap());
        KeepAlive { child, out }
    }

    fn ask(&mut self, line: &str, answers: usize) -> Vec<String> {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        (0..answers)
            .map(|_| {
                let mut answer = String::new();
                self.out.read_line(&mut answer).unwrap();
                assert!(!answer.is_empty(), "the client ended after: {line}");
                answer.trim().to_string()
            })
            .collect()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_certificate_change_serves_new_connections_and_spares_open_ones() {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "site", "before", &["localhost"]);
    let origin = Origin::start();
    let sepia = tls_reverse(&origin, &[(&cert, &[])], "reload_check = \"100ms\"\n");
    let addr = sepia.addr().to_string();
    assert_eq!(served_subject(&addr, Some("localhost")), "CN = before");
    let mut open = KeepAlive::connect(&sepia, &cert);
    assert!(open.ask("GET /bytes/10", 1)[0].starts_with("200 10 "));

    // A broken replacement (a key that is not the certificate's) is refused: the running
    // certificate stays.
    let other = TestCert::new(dir.path(), "other", "other", &["localhost"]);
    std::fs::copy(&other.cert, &cert.cert).unwrap();
    assert!(wait_until(Duration::from_secs(5), || sepia
        .stderr()
        .contains("cannot be used")));
    assert_eq!(served_subject(&addr, Some("localhost")), "CN = before");

    // A whole new pair, renamed into place as deployment tools do.
    let next = TestCert::new(dir.path(), "next", "after", &["localhost"]);
    std::fs::rename(&next.key, &cert.key).unwrap();
    std::fs::rename(&next.cert, &cert.cert).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || served_subject(
            &addr,
            Some("localhost")
        ) == "CN = after"),
        "the new certificate was not picked up"
    );
    assert!(sepia.stderr().contains("TLS certificates reloaded"));
    // The connection opened before the change still works.
    assert!(open.ask("GET /bytes/20", 1)[0].starts_with("200 20 "));
}

#[test]
fn pipelined_requests_beyond_one_read_buffer_are_all_answered() {
    let (_dir, cert, _origin, sepia) = one_site();
    let mut client = KeepAlive::connect(&sepia, &cert);
    // 300 requests of ~50 bytes: 15 KB in one write, more than a read buffer holds, so
    // rustls keeps decrypted requests the socket's readiness knows nothing of.
    let answers = client.ask("PIPELINE 300 /bytes/100", 300);
    let expected = format!("200 100 {}", sha256_hex(&pattern(100)));
    assert!(answers.iter().all(|a| *a == expected), "{answers:?}");
}

#[test]
fn large_stored_bodies_are_served_whole_over_tls() {
    let (_dir, cert, origin, sepia) = one_site();
    let mut client = KeepAlive::connect(&sepia, &cert);
    let size = 3_000_000;
    let expected = format!("200 {size} {}", sha256_hex(&pattern(size)));
    // A miss, the first hit (the body moves to a file: no sendfile over TLS), a file hit.
    for _ in 0..3 {
        let line = format!("GET /slow-cacheable/{size}/0");
        assert_eq!(client.ask(&line, 1)[0], expected);
    }
    assert_eq!(origin.request_count(), 1);
    // The origin is asked in clear text and told the client's scheme (RFC 7239 §5.4).
    let forwarded = origin
        .single_request()
        .header("forwarded")
        .map(str::to_string);
    assert!(
        forwarded
            .as_deref()
            .unwrap_or_default()
            .ends_with(";proto=https"),
        "{forwarded:?}"
    );
    // A range of the stored file.
    let out = curl(&[
        "--cacert",
        cert.cert_str(),
        "-r",
        "1000000-1000099",
        // The cache key's authority, as the Python client sent it.
        "-H",
        "Host: localhost",
        &https(&sepia, "localhost", &format!("/slow-cacheable/{size}/0")),
    ]);
    out.assert_status(206);
    assert_eq!(out.body, pattern(size)[1_000_000..1_000_100]);
}

#[test]
fn start_up_names_the_file_at_fault() {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "site", "site", &["localhost"]);
    let other = TestCert::new(dir.path(), "other", "other", &["localhost"]);
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let not_pem = dir.path().join("garbage.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let not_pem = not_pem.to_str().unwrap();
    let cases = [
        (
            missing,
            cert.key_str(),
            "missing.pem: cannot read certificates",
        ),
        (
            not_pem,
            cert.key_str(),
            "garbage.pem: no PEM certificate in the file",
        ),
        (
            cert.cert_str(),
            missing,
            "missing.pem: cannot read a private key",
        ),
        (
            cert.cert_str(),
            other.key_str(),
            "does not belong to the certificate",
        ),
    ];
    for (cert_file, key_file, message) in cases {
        let out = Command::new(sepia_e2e::sepia_bin())
            .args([
                "reverse",
                "--listen",
                &free_addr(),
                "--origin",
                "http://127.0.0.1:9",
            ])
            .args(["--tls-cert", cert_file, "--tls-key", key_file])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(message),
            "expected {message:?} in: {stderr}"
        );
    }
    // `sepia check` reads them too.
    let config = dir.path().join("sepia.toml");
    std::fs::write(
        &config,
        format!(
            "[[listen]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n[listen.tls]\n\
             certificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
            cert.cert_str(),
            other.key_str()
        ),
    )
    .unwrap();
    let out = Command::new(sepia_e2e::sepia_bin())
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not belong"));
    // Only one of the two flags is a usage error.
    let out = Command::new(sepia_e2e::sepia_bin())
        .args([
            "forward",
            "--listen",
            &free_addr(),
            "--tls-cert",
            cert.cert_str(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}

#[test]
fn a_tls_forward_proxy_serves_requests_and_tunnels() {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "proxy", "proxy", &["localhost"]);
    let origin = Origin::start();
    let config = forward_config(&free_addr(), &["127.0.0.1"], &[origin.port()]).replace(
        "mode = \"forward\"\n",
        &format!(
            "mode = \"forward\"\n[listen.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
            cert.cert_str(),
            cert.key_str()
        ),
    );
    let sepia = Sepia::start(&config);
    let proxy = format!("https://localhost:{}", sepia.addr().port());
    let target = format!("{}/bytes/5000", origin.url());
    let plain = curl(&["--proxy", &proxy, "--proxy-cacert", cert.ca_str(), &target]);
    plain.assert_status(200);
    assert_eq!(plain.body, pattern(5000));
    // CONNECT inside the TLS connection to the proxy, then HTTP through the tunnel.
    let tunnelled = curl(&[
        "--proxy",
        &proxy,
        "--proxy-cacert",
        cert.ca_str(),
        "--proxytunnel",
        &format!("{}/bytes/70000", origin.url()),
    ]);
    tunnelled.assert_status(200);
    assert_eq!(tunnelled.body, pattern(70000));
}

/// What testssl.sh says of a short-lived certificate from a private CA, for `localhost`.
const OF_THE_TEST_CERTIFICATE: [&str; 5] = [
    "cert_chain_of_trust",
    "cert_expirationStatus",
    "cert_notAfter",
    "cert_revocation",
    "DNS_CAArecord",
];

/// testssl's resumption check runs `openssl s_client -sess_out … </dev/null` once: with TLS
/// 1.3 the ticket comes after the handshake, and s_client, its stdin at EOF, sometimes closes
/// before reading it, so the second connection has no session and testssl reports a
/// "connect problem". Plain s_client pairs did that 2 times in 60 against Sepia on an idle
/// machine, more often under load. That is a client-side race, not a finding about the TLS
/// configuration; resumption itself is checked by `sessions_resume_with_tickets_whichever_worker_serves_them`,
/// which must pass.
fn resumption_check_lost_its_race(finding: &serde_json::Value) -> bool {
    finding["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("sessionresumption"))
        && finding["finding"] == "check failed because of connect problem"
}

/// testssl.sh (Debian's `testssl`) over protocols, ciphers, forward secrecy, server defaults
/// and known vulnerabilities: nothing below OK but what comes from the test certificate itself
/// (self-signed, short-lived, no revocation information, no CAA record for localhost).
#[test]
fn testssl_finds_no_weak_protocol_cipher_or_vulnerability() {
    let (dir, _cert, _origin, sepia) = one_site();
    let report = dir.path().join("testssl.json");
    let status = Command::new("testssl")
        .args([
            "--quiet",
            "--color",
            "0",
            "--warnings",
            "off",
            "-p",
            "-s",
            "-f",
            "-S",
            "-U",
        ])
        .args(["--ip", "127.0.0.1", "--jsonfile", report.to_str().unwrap()])
        .arg(https(&sepia, "localhost", "/"))
        .stdout(Stdio::null())
        .status()
        .expect("run testssl (Debian package testssl.sh)");
    assert!(
        status.success() || report.exists(),
        "testssl failed: {status}"
    );
    let findings: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let finding = |id: &str| {
        findings
            .iter()
            .find(|f| f["id"] == id)
            .and_then(|f| f["finding"].as_str())
            .unwrap_or_else(|| panic!("no {id} in the report"))
            .to_string()
    };
    for old in ["SSLv2", "SSLv3", "TLS1", "TLS1_1"] {
        assert_eq!(finding(old), "not offered", "{old}");
    }
    assert_eq!(finding("TLS1_2"), "offered");
    assert!(finding("TLS1_3").starts_with("offered"));
    let bad: Vec<String> = findings
        .iter()
        .filter(|f| !matches!(f["severity"].as_str(), Some("OK" | "INFO")))
        .filter(|f| !OF_THE_TEST_CERTIFICATE.iter().any(|id| f["id"] == *id))
        .filter(|f| !resumption_check_lost_its_race(f))
        .map(|f| format!("{} {}: {}", f["id"], f["severity"], f["finding"]))
        .collect();
    assert!(bad.is_empty(), "testssl findings: {bad:#?}");
    assert!(findings.len() > 50, "a short report: {}", findings.len());
}

#[test]
fn alpn_h2_serves_http2_over_tls_from_the_same_cache() {
    let (_dir, cert, origin, sepia) = one_site();
    let url = https(&sepia, "localhost", "/cacheable/shared");
    // An HTTP/1.1 fill over TLS ...
    let h1 = curl(&["--cacert", cert.ca_str(), "--http1.1", &url]);
    h1.assert_status(200);
    // ... is a hit for HTTP/2 over TLS (ALPN h2), and the other way round.
    let h2 = curl(&["--cacert", cert.ca_str(), "--http2", &url]);
    h2.assert_status(200);
    assert!(h2
        .header("cache-status")
        .unwrap_or_default()
        .contains("hit"));
    let url2 = https(&sepia, "localhost", "/cacheable/other");
    curl(&["--cacert", cert.ca_str(), "--http2", &url2]).assert_status(200);
    let back = curl(&["--cacert", cert.ca_str(), "--http1.1", &url2]);
    assert!(back
        .header("cache-status")
        .unwrap_or_default()
        .contains("hit"));
    assert_eq!(origin.request_count(), 2);
    let lines = sepia.wait_for_log_lines(4, Duration::from_secs(5));
    let port = sepia.addr().port();
    assert!(
        lines.iter().any(
            |l| l.contains(&format!("GET https://localhost:{port}/cacheable/shared"))
                && l.contains("HIT")
        ),
        "{lines:#?}"
    );
    // Many streams on few connections, every one answered.
    let out = Command::new("h2load")
        .args(["-n", "2000", "-c", "4", "-m", "32"])
        .arg(https(&sepia, "localhost", "/cacheable/shared"))
        .output()
        .expect("run h2load (Debian nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2000 succeeded, 0 failed"), "{text}");
    assert!(text.contains("Application protocol: h2"), "{text}");
}
