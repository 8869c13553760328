//! Test certificates, made at test time with the `openssl` command (no private key is ever
//! committed), and a TLS client that keeps its connection (Python's `ssl`), for what curl
//! cannot show: several requests on one TLS connection across a certificate reload,
//! pipelining, and which certificate a server name gets.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An ECDSA P-256 server certificate and its key, issued by a test CA kept in the same
/// directory (`ca.pem`, made on first use): clients trust `ca`, as they would a real CA.
pub struct TestCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl TestCert {
    /// Writes `<stem>.pem` and `<stem>.key` into `dir`: common name `cn`, `names` in its
    /// subjectAltName (DNS names, or IP addresses for names that parse as one).
    pub fn new(dir: &Path, stem: &str, cn: &str, names: &[&str]) -> TestCert {
        let ca = dir.join("ca.pem");
        let ca_key = dir.join("ca.key");
        if !ca.exists() {
            openssl(&[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=Sepia Test CA",
                "-keyout",
                path(&ca_key),
                "-out",
                path(&ca),
            ]);
        }
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}.key"));
        let csr = dir.join(format!("{stem}.csr"));
        let ext = dir.join(format!("{stem}.ext"));
        let san: Vec<String> = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        let mut extensions = String::from(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        );
        if !san.is_empty() {
            extensions.push_str(&format!("subjectAltName={}\n", san.join(",")));
        }
        std::fs::write(&ext, extensions).expect("write extensions");
        let subject = format!("/CN={cn}");
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &subject,
            "-keyout",
            path(&key),
            "-out",
            path(&csr),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            path(&csr),
            "-CA",
            path(&ca),
            "-CAkey",
            path(&ca_key),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            path(&ext),
            "-out",
            path(&cert),
        ]);
        TestCert { cert, key, ca }
    }

    pub fn cert_str(&self) -> &str {
        path(&self.cert)
    }

    pub fn key_str(&self) -> &str {
        path(&self.key)
    }

    /// The CA to trust (`curl --cacert`).
    pub fn ca_str(&self) -> &str {
        path(&self.ca)
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The subject of the certificate a TLS server at `addr` presents for server name `sni`
/// (`None`: no SNI sent), as `openssl s_client` reports it, e.g. `CN = default`.
pub fn served_subject(addr: &str, sni: Option<&str>) -> String {
    let mut args = vec!["s_client", "-connect", addr];
    match sni {
        Some(name) => args.extend(["-servername", name]),
        None => args.push("-noservername"),
    }
    let out = openssl_with_input(&args, b"");
    out.lines()
        .find_map(|l| l.strip_prefix("subject="))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| panic!("no subject in s_client output:\n{out}"))
}

/// Runs `openssl ARGS` with `input` on stdin; stdout and stderr together.
pub fn openssl_with_input(args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write to openssl");
    let out = child.wait_with_output().expect("openssl output");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

/// Runs a Python program (given as text) with `args`; panics with its output unless it exits 0.
/// Returns its stdout.
pub fn python(program: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(program)
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
