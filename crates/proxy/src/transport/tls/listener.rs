//! TLS termination on a listener: the rustls configuration built from `[listen.tls]`, the
//! handshake of each accepted connection, and the certificate files watched for changes.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::server::ServerSessionMemoryCache;
use rustls::version::{TLS12, TLS13};
use rustls::ServerConfig;
use sepia_config::{CertificateFiles, ListenerTls, TlsVersion};
use tokio::net::TcpStream;

use super::certs::{CertSet, Certificates};
use super::stream::TlsConn;

/// TLS 1.2 sessions remembered for resumption by clients that send no ticket extension; a few
/// hundred bytes each.
const SESSION_CACHE: usize = 4096;

/// A listener's TLS: what its handshakes use and where its certificates come from.
pub struct TlsListener {
    acceptor: tokio_rustls::TlsAcceptor,
    certs: Arc<Certificates>,
    files: Vec<CertificateFiles>,
    reload_check: Duration,
}

impl TlsListener {
    /// Reads the certificates and builds the configuration: TLS 1.3 and (unless
    /// `min_version` says 1.3) 1.2 with rustls' default aws-lc-rs suites (AEAD only, forward
    /// secrecy only), ALPN as configured, no 0-RTT (replayable requests).
    pub fn new(tls: &ListenerTls) -> io::Result<TlsListener> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let certs = Arc::new(Certificates::new(CertSet::load(
            &tls.certificates,
            &provider,
        )?));
        let versions: &[&rustls::SupportedProtocolVersion] = match tls.min_version {
            TlsVersion::V1_2 => &[&TLS13, &TLS12],
            TlsVersion::V1_3 => &[&TLS13],
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_cert_resolver(certs.clone());
        config.alpn_protocols = tls.alpn.iter().map(|p| p.id().to_vec()).collect();
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        if tls.session_tickets {
            // Keys rotate every six hours; one ticketer per listener, shared by every worker
            // thread through the one configuration, so any worker resumes any ticket.
            config.ticketer =
                rustls::crypto::aws_lc_rs::Ticketer::new().map_err(io::Error::other)?;
        } else {
            config.send_tls13_tickets = 0;
        }
        config.max_early_data_size = 0;
        Ok(TlsListener {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            certs,
            files: tls.certificates.clone(),
            reload_check: tls.reload_check,
        })
    }

    /// Runs the server side of the handshake on an accepted connection, within `limit`.
    pub async fn handshake(&self, stream: TcpStream, limit: Duration) -> io::Result<TlsConn> {
        match tokio::time::timeout(limit, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Ok(TlsConn::new(tls)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }

    /// Looks at the certificate and key files every `reload_check` and, when one changed,
    /// reads them all again: a valid new set serves new connections, an invalid one is
    /// logged (once per change) and the running set stays. Runs until dropped.
    pub async fn watch_files(self: Arc<Self>, listener: std::net::SocketAddr) {
        let mut seen = self.stamps();
        loop {
            tokio::time::sleep(self.reload_check).await;
            let now = self.stamps();
            if now == seen {
                continue;
            }
            seen = now;
            let provider = rustls::crypto::aws_lc_rs::default_provider();
            match CertSet::load(&self.files, &provider) {
                Ok(set) => {
                    self.certs.replace(set);
                    tracing::info!(%listener, "TLS certificates reloaded");
                }
                Err(e) => tracing::warn!(
                    %listener,
                    "TLS certificate files changed but cannot be used ({e}); \
                     keeping the certificates in use"
                ),
            }
        }
    }

    /// What identifies each file's content without reading it: modification time, size and
    /// inode (a renamed-into-place file has a new inode even with the same time).
    fn stamps(&self) -> Vec<Option<(SystemTime, u64, u64)>> {
        use std::os::unix::fs::MetadataExt;
        let paths = self
            .files
            .iter()
            .flat_map(|f| [&f.cert, &f.key])
            .map(PathBuf::as_path);
        paths
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len(), m.ino()))
            })
            .collect()
    }
}
