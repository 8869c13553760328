//! A real HTTP/2 origin for the HTTP/2-to-origins tests (issue 20): nginx (Debian's, with
//! `http_v2_module`) in front of the usual test origin (`proxy_pass`), on three listeners:
//! TLS offering h2 in ALPN, TLS speaking only http/1.1, and h2c with prior knowledge. Its
//! access log records, per request, the listener, nginx's connection serial number and the
//! protocol, so that tests can count the origin connections Sepia used.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::config::free_addr;
use crate::tls::TestCert;
use crate::wait_until;

/// One line of nginx's access log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NginxEntry {
    /// The listener's port.
    pub port: u16,
    /// nginx's connection serial number (`$connection`).
    pub connection: u64,
    /// `HTTP/2.0` or `HTTP/1.1`.
    pub protocol: String,
    pub method: String,
    pub uri: String,
    pub status: u16,
}

/// nginx serving HTTP/2 (and HTTP/1.1) in front of a plain origin. Stopped when dropped.
pub struct NginxOrigin {
    child: Child,
    dir: TempDir,
    /// TLS, ALPN `h2, http/1.1`.
    pub h2: SocketAddr,
    /// TLS, ALPN `http/1.1` only.
    pub h1: SocketAddr,
    /// Plain, HTTP/2 with prior knowledge (h2c).
    pub h2c: SocketAddr,
}

const CONFIG: &str = r#"
daemon off;
master_process off;
worker_processes 1;
pid @DIR@/nginx.pid;
error_log @DIR@/error.log info;
events { worker_connections 256; }
http {
    log_format conn '$server_port $connection $server_protocol $request_method $uri $status';
    access_log @DIR@/access.log conn;
    client_body_temp_path @DIR@/body;
    proxy_temp_path @DIR@/proxy;
    fastcgi_temp_path @DIR@/fastcgi;
    uwsgi_temp_path @DIR@/uwsgi;
    scgi_temp_path @DIR@/scgi;
    client_max_body_size 100m;
    ssl_certificate @CERT@;
    ssl_certificate_key @KEY@;
    server {
        listen @H2@ ssl http2;
        location / { proxy_pass http://@UPSTREAM@; proxy_http_version 1.1; }
    }
    server {
        listen @H1@ ssl;
        location / { proxy_pass http://@UPSTREAM@; proxy_http_version 1.1; }
    }
    server {
        listen @H2C@ http2;
        location / { proxy_pass http://@UPSTREAM@; proxy_http_version 1.1; }
    }
}
"#;

impl NginxOrigin {
    /// Serves `cert` on the TLS listeners; every request goes on to `upstream`.
    pub fn start(cert: &TestCert, upstream: SocketAddr) -> NginxOrigin {
        let dir = TempDir::new().expect("temp dir");
        let path = dir.path().to_str().expect("utf-8 path").to_string();
        let (h2, h1, h2c) = (free_addr(), free_addr(), free_addr());
        let config = CONFIG
            .replace("@DIR@", &path)
            .replace("@CERT@", cert.cert_str())
            .replace("@KEY@", cert.key_str())
            .replace("@UPSTREAM@", &upstream.to_string())
            .replace("@H2C@", &h2c)
            .replace("@H2@", &h2)
            .replace("@H1@", &h1);
        let conf = dir.path().join("nginx.conf");
        fs::write(&conf, config).expect("write nginx.conf");
        // Debian puts nginx in /usr/sbin, which is not on every user's PATH.
        let nginx = if Path::new("/usr/sbin/nginx").exists() {
            "/usr/sbin/nginx"
        } else {
            "nginx"
        };
        let child = Command::new(nginx)
            .args(["-p", &path, "-e", &format!("{path}/error.log"), "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run nginx (Debian package nginx)");
        let parse = |a: &str| a.parse::<SocketAddr>().expect("address");
        let origin = NginxOrigin {
            child,
            dir,
            h2: parse(&h2),
            h1: parse(&h1),
            h2c: parse(&h2c),
        };
        let up = wait_until(Duration::from_secs(10), || {
            [origin.h2, origin.h1, origin.h2c]
                .iter()
                .all(|a| TcpStream::connect(a).is_ok())
        });
        assert!(up, "nginx did not start: {}", origin.error_log());
        origin
    }

    /// Every request logged so far.
    pub fn entries(&self) -> Vec<NginxEntry> {
        let text = fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines().filter_map(parse_entry).collect()
    }

    /// The log once it has at least `n` entries (or after 5 s).
    pub fn wait_for_entries(&self, n: usize) -> Vec<NginxEntry> {
        wait_until(Duration::from_secs(5), || self.entries().len() >= n);
        self.entries()
    }

    pub fn error_log(&self) -> String {
        fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

fn parse_entry(line: &str) -> Option<NginxEntry> {
    let mut parts = line.split(' ');
    Some(NginxEntry {
        port: parts.next()?.parse().ok()?,
        connection: parts.next()?.parse().ok()?,
        protocol: parts.next()?.to_string(),
        method: parts.next()?.to_string(),
        uri: parts.next()?.to_string(),
        status: parts.next()?.parse().ok()?,
    })
}

impl Drop for NginxOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
