//! TLS toward origins (RFC 9110 §4.2.2: an `https` origin is reached over TLS, and its
//! certificate must be valid for the origin's name, §4.3.4): rustls client configurations,
//! each built once at start and shared by every worker (so the session cache inside one
//! resumes sessions whichever worker opens the next connection), and the client handshake.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::stream::TlsConn;
use crate::transport::Conn;

/// Whom a client configuration believes about an origin's certificate.
pub enum Trust<'a> {
    /// The system's CA certificates (`rustls-native-certs`: `SSL_CERT_FILE` / `SSL_CERT_DIR`
    /// when set, else the platform's store), loaded once by the caller.
    System(&'a RootCertStore),
    /// Only the CA certificates in this PEM file.
    CaFile(&'a Path),
    /// Anyone: the certificate is not checked at all (signatures of the handshake still are).
    Anything,
}

/// The system's CA certificates. Unreadable entries are skipped (one bad file in
/// `/etc/ssl/certs` must not stop the rest from being trusted); an empty store is the
/// caller's to judge.
pub fn system_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!("system CA certificates: {e}");
    }
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    roots
}

/// A client configuration: TLS 1.3 and 1.2 with the aws-lc-rs provider's default suites,
/// ALPN `http/1.1` only, or `h2, http/1.1` when `offer_h2` (the origin picks, RFC 9113
/// §3.2), rustls' in-memory session cache (tickets and TLS 1.2 session ids, 256 server
/// names), no client certificate.
pub fn client_config(trust: Trust<'_>, offer_h2: bool) -> io::Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?;
    let mut config = match trust {
        Trust::System(roots) => builder
            .with_root_certificates(roots.clone())
            .with_no_client_auth(),
        Trust::CaFile(path) => builder
            .with_root_certificates(read_ca_file(path)?)
            .with_no_client_auth(),
        Trust::Anything => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth(),
    };
    config.alpn_protocols = if offer_h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// The CA certificates of a `tls_ca` file; errors name the file.
fn read_ca_file(path: &Path) -> io::Result<RootCertStore> {
    let named = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| match e {
            rustls_pki_types::pem::Error::Io(e) => io::Error::new(
                e.kind(),
                format!("{}: cannot read the CA certificates: {e}", path.display()),
            ),
            e => named(format!("{}: invalid PEM: {e:?}", path.display())),
        })?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(named(format!(
            "{}: no usable CA certificate in the file",
            path.display()
        )));
    }
    Ok(roots)
}

/// The name a TLS connection asks for (SNI, RFC 6066 §3) and checks the certificate against:
/// a DNS name, or an IP address (then no SNI is sent, as RFC 6066 §3 forbids literal
/// addresses in it, and the certificate must name the address).
pub fn server_name(name: &str) -> io::Result<ServerName<'static>> {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(name.to_ascii_lowercase()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid TLS server name \"{name}\": {e}"),
        )
    })
}

/// Opens a TCP connection to `addr` (from `source` when spoofing) and runs the client
/// handshake for `name`, both within `limit`. A refused certificate is logged with its reason
/// (the client only learns that the origin could not be reached safely).
pub async fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    limit: Duration,
    config: &Arc<ClientConfig>,
    name: &ServerName<'static>,
) -> io::Result<Conn> {
    let connecting = async {
        let tcp = match Conn::connect(addr, source, limit).await? {
            Conn::Tcp(tcp) => tcp,
            Conn::Tls(_) => return Err(io::Error::other("a new connection is plain TCP")),
        };
        let connector = tokio_rustls::TlsConnector::from(config.clone());
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .inspect_err(|e| {
                tracing::warn!(
                    origin = %addr,
                    server_name = name.to_str().as_ref(),
                    "TLS handshake with the origin failed: {e}"
                );
            })?;
        Ok(Conn::Tls(Box::new(TlsConn::new(tls))))
    };
    match tokio::time::timeout(limit, connecting).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "connect and TLS handshake timed out",
        )),
    }
}

/// `tls_insecure_skip_verify`: every certificate is accepted, whoever it names and whoever
/// signed it. The handshake's own signatures are still verified, so that the connection is
/// at least with the holder of the key of the certificate it showed.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rustls::HandshakeKind;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::transport::tls::test_certs::TestPki;

    const LIMIT: Duration = Duration::from_secs(5);

    /// A TLS server that echoes what it reads, sends close_notify on "close", and answers
    /// "later" with unsolicited data a little later; counts resumed handshakes.
    async fn echo_server(pki: &TestPki) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config());
        let resumed = Arc::new(AtomicUsize::new(0));
        let count = resumed.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    continue;
                };
                if tls.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed) {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n @ 1..) = tls.read(&mut buf).await {
                        match &buf[..n] {
                            b"close" => return drop(tls.shutdown().await),
                            b"later" => {
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                let _ = tls.write_all(b"surprise").await;
                            }
                            echo => {
                                let _ = tls.write_all(echo).await;
                            }
                        }
                    }
                });
            }
        });
        (addr, resumed)
    }

    fn ca_config(pki: &TestPki) -> Arc<ClientConfig> {
        client_config(Trust::CaFile(&pki.path("ca.pem")), false).unwrap()
    }

    async fn echo(conn: &mut Conn, text: &[u8]) -> Vec<u8> {
        conn.write_all(text).await.unwrap();
        let mut back = vec![0; text.len()];
        conn.read_exact(&mut back).await.unwrap();
        back
    }

    /// Bytes the socket holds that nobody has read.
    fn pending_on_socket(conn: &Conn) -> bool {
        let Conn::Tls(tls) = conn else { return false };
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit()];
        matches!(socket2::SockRef::from(tls.tcp()).peek(&mut probe), Ok(1..))
    }

    #[tokio::test]
    async fn a_certificate_is_checked_against_the_trusted_ca_and_the_name() {
        let pki = TestPki::new(&["origin.test", "127.0.0.1"]);
        let (addr, _) = echo_server(&pki).await;
        let trusted = ca_config(&pki);
        for name in ["origin.test", "ORIGIN.test", "127.0.0.1"] {
            let mut conn = connect(addr, None, LIMIT, &trusted, &server_name(name).unwrap())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(echo(&mut conn, b"hello").await, b"hello");
        }
        let other_name = server_name("other.test").unwrap();
        let refused = connect(addr, None, LIMIT, &trusted, &other_name).await;
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::InvalidData);
        let other_ca = TestPki::new(&["origin.test"]);
        let untrusted = ca_config(&other_ca);
        let name = server_name("origin.test").unwrap();
        let refused = connect(addr, None, LIMIT, &untrusted, &name).await;
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::InvalidData);
        let no_roots = client_config(Trust::System(&RootCertStore::empty()), false).unwrap();
        assert!(connect(addr, None, LIMIT, &no_roots, &name).await.is_err());
        // Skipping verification accepts any name and any issuer.
        let anything = client_config(Trust::Anything, false).unwrap();
        let mut conn = connect(addr, None, LIMIT, &anything, &other_name)
            .await
            .unwrap();
        assert_eq!(echo(&mut conn, b"x").await, b"x");
    }

    #[tokio::test]
    async fn a_ca_file_that_cannot_be_used_is_named() {
        let pki = TestPki::new(&["origin.test"]);
        let missing = pki.path("missing.pem");
        let err = client_config(Trust::CaFile(&missing), false).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let key_only = pki.path("server.key");
        let err = client_config(Trust::CaFile(&key_only), false).unwrap_err();
        assert!(err.to_string().contains("server.key"), "{err}");
    }

    #[tokio::test]
    async fn a_session_ticket_received_while_idle_leaves_the_connection_usable() {
        let pki = TestPki::new(&["origin.test"]);
        let (addr, resumed) = echo_server(&pki).await;
        let config = ca_config(&pki);
        let name = server_name("origin.test").unwrap();
        let mut conn = connect(addr, None, LIMIT, &config, &name).await.unwrap();
        // The TLS 1.3 tickets arrive after the client's handshake is complete.
        for _ in 0..100 {
            if pending_on_socket(&conn) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(pending_on_socket(&conn), "the tickets did not arrive");
        assert!(conn.looks_open(), "tickets are not data: still usable");
        assert!(!pending_on_socket(&conn), "the tickets were processed");
        assert_eq!(echo(&mut conn, b"after").await, b"after");
        // The ticket kept in the configuration's cache resumes the next connection.
        assert_eq!(resumed.load(Ordering::SeqCst), 0);
        let mut again = connect(addr, None, LIMIT, &config, &name).await.unwrap();
        assert_eq!(echo(&mut again, b"resumed").await, b"resumed");
        assert_eq!(resumed.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn close_notify_or_data_received_while_idle_make_a_connection_unusable() {
        let pki = TestPki::new(&["origin.test"]);
        let (addr, _) = echo_server(&pki).await;
        let config = ca_config(&pki);
        let name = server_name("origin.test").unwrap();
        for (ask, what) in [(&b"close"[..], "close_notify"), (b"later", "data")] {
            let mut conn = connect(addr, None, LIMIT, &config, &name).await.unwrap();
            assert_eq!(echo(&mut conn, b"warm").await, b"warm");
            assert!(conn.looks_open());
            conn.write_all(ask).await.unwrap();
            let mut gone = false;
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if !conn.looks_open() {
                    gone = true;
                    break;
                }
            }
            assert!(gone, "{what} while idle: the connection must not be reused");
        }
    }
}
