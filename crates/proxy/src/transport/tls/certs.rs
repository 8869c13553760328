//! Certificates and keys of a TLS listener: read from PEM files, checked against each other,
//! and chosen per handshake by the client's server name (SNI, RFC 6066 §3).

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sepia_config::CertificateFiles;

/// Reads one `{ cert, key }` pair and checks that the key belongs to the certificate. Errors
/// name the file at fault, for start-up and `sepia check`.
pub fn load_pair(files: &CertificateFiles, provider: &CryptoProvider) -> io::Result<CertifiedKey> {
    let chain = read_chain(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| pem_error(&files.key, "a private key", e))?;
    let key = provider.key_provider.load_private_key(key).map_err(|e| {
        invalid(format!(
            "{}: unusable private key: {e}",
            files.key.display()
        ))
    })?;
    let pair = CertifiedKey::new(chain, key);
    pair.keys_match().map_err(|e| {
        invalid(format!(
            "{} does not belong to the certificate in {}: {e}",
            files.key.display(),
            files.cert.display()
        ))
    })?;
    Ok(pair)
}

fn read_chain(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, "certificates", e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, "certificates", e))?;
    if chain.is_empty() {
        return Err(invalid(format!(
            "{}: no PEM certificate in the file",
            path.display()
        )));
    }
    webpki::EndEntityCert::try_from(&chain[0]).map_err(|e| {
        invalid(format!(
            "{}: the first certificate cannot be parsed: {e}",
            path.display()
        ))
    })?;
    Ok(chain)
}

fn pem_error(path: &Path, what: &str, e: rustls_pki_types::pem::Error) -> io::Error {
    match e {
        rustls_pki_types::pem::Error::Io(e) => io::Error::new(
            e.kind(),
            format!("{}: cannot read {what}: {e}", path.display()),
        ),
        rustls_pki_types::pem::Error::NoItemsFound => {
            invalid(format!("{}: no PEM {what} in the file", path.display()))
        }
        e => invalid(format!("{}: invalid PEM ({what}): {e:?}", path.display())),
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The names a pair serves: the configured ones, or the DNS names of its subjectAltName.
fn names_of(files: &CertificateFiles, pair: &CertifiedKey) -> Vec<String> {
    if !files.names.is_empty() {
        return files.names.clone();
    }
    let Some(end) = pair.cert.first() else {
        return Vec::new();
    };
    match webpki::EndEntityCert::try_from(end) {
        Ok(cert) => cert
            .valid_dns_names()
            .map(str::to_ascii_lowercase)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A listener's certificates by server name.
#[derive(Debug)]
pub struct CertSet {
    exact: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// By the part after `*.`: `*.example.com` is under `example.com`.
    wildcard: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// The first configured pair: for clients without SNI or without a matching name.
    default: Arc<CertifiedKey>,
}

impl CertSet {
    /// Reads every pair of a listener; the first is the default.
    pub fn load(all: &[CertificateFiles], provider: &CryptoProvider) -> io::Result<CertSet> {
        let mut exact: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        let mut wildcard: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        let mut default = None;
        for files in all {
            let pair = Arc::new(load_pair(files, provider)?);
            for name in names_of(files, &pair) {
                let (map, key) = match name.strip_prefix("*.") {
                    Some(suffix) => (&mut wildcard, suffix.to_string()),
                    None => (&mut exact, name),
                };
                map.entry(key).or_default().push(pair.clone());
            }
            default.get_or_insert(pair);
        }
        let default = default.ok_or_else(|| invalid("no certificate configured".into()))?;
        Ok(CertSet {
            exact,
            wildcard,
            default,
        })
    }

    /// The pair for `hello`: by exact name, then wildcard (one label), then the default.
    /// Among pairs for one name (an ECDSA and an RSA certificate, say) the first whose key
    /// can sign with a scheme the client offers.
    fn choose(&self, hello: &ClientHello<'_>) -> Arc<CertifiedKey> {
        let Some(name) = hello.server_name() else {
            return self.default.clone();
        };
        let name = name.to_ascii_lowercase();
        let candidates = self.exact.get(&name).or_else(|| {
            let (_, parent) = name.split_once('.')?;
            self.wildcard.get(parent)
        });
        let Some(candidates) = candidates else {
            return self.default.clone();
        };
        let schemes = hello.signature_schemes();
        candidates
            .iter()
            .find(|pair| pair.key.choose_scheme(schemes).is_some())
            .unwrap_or(&candidates[0])
            .clone()
    }
}

/// The certificate resolver handshakes ask: a [`CertSet`] that a reload replaces whole.
/// Connections that started before keep the pair they were given.
#[derive(Debug)]
pub struct Certificates {
    current: RwLock<Arc<CertSet>>,
}

impl Certificates {
    pub fn new(set: CertSet) -> Certificates {
        Certificates {
            current: RwLock::new(Arc::new(set)),
        }
    }

    pub fn replace(&self, set: CertSet) {
        let set = Arc::new(set);
        match self.current.write() {
            Ok(mut current) => *current = set,
            Err(poisoned) => *poisoned.into_inner() = set,
        }
    }

    fn snapshot(&self) -> Arc<CertSet> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.snapshot().choose(&hello))
    }
}
