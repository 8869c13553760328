//! Certificates for the TLS unit tests, made with the `openssl` command in a temporary
//! directory (no private key is committed): a CA, and a server certificate it issued.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA (`ca.pem`) and a server certificate (`server.pem`, `server.key`) for `names` (DNS
/// names and IP addresses in its subjectAltName).
pub struct TestPki {
    pub dir: tempfile::TempDir,
}

impl TestPki {
    pub fn new(names: &[&str]) -> TestPki {
        let dir = tempfile::tempdir().expect("temporary directory");
        let p = |name: &str| dir.path().join(name);
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"],
                &ec[..],
                &["-days", "2", "-subj", "/CN=Test CA"],
            ]
            .concat(),
            &[("-keyout", p("ca.key")), ("-out", p("ca.pem"))],
        );
        openssl(
            &[&["req"], &ec[..], &["-subj", "/CN=server"]].concat(),
            &[("-keyout", p("server.key")), ("-out", p("server.csr"))],
        );
        let san: Vec<String> = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        std::fs::write(
            p("server.ext"),
            format!("subjectAltName={}\n", san.join(",")),
        )
        .expect("write extensions");
        openssl(
            &["x509", "-req", "-days", "2", "-CAcreateserial"],
            &[
                ("-in", p("server.csr")),
                ("-CA", p("ca.pem")),
                ("-CAkey", p("ca.key")),
                ("-extfile", p("server.ext")),
                ("-out", p("server.pem")),
            ],
        );
        TestPki { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A rustls server configuration presenting the server certificate.
    pub fn server_config(&self) -> std::sync::Arc<rustls::ServerConfig> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(self.path("server.pem"))
            .and_then(Iterator::collect)
            .expect("server certificate");
        let key = PrivateKeyDer::from_pem_file(self.path("server.key")).expect("server key");
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .expect("server configuration");
        std::sync::Arc::new(config)
    }
}

fn openssl(args: &[&str], paths: &[(&str, PathBuf)]) {
    let mut cmd = Command::new("openssl");
    cmd.args(args);
    for (flag, path) in paths {
        cmd.arg(flag).arg(Path::new(path));
    }
    let out = cmd.output().expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
