//! Which TLS an origin connection uses: one rustls client configuration per distinct trust
//! setting (the system's roots, a route's `tls_ca`, or `tls_insecure_skip_verify`), built once
//! at start and shared by every worker, so each one's session cache lets any worker resume a
//! session another one began (fewer full handshakes toward origins).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::ServerName;
use sepia_config::{Config, Mode, OriginAddr, Route};

use crate::transport::tls::client::{self, Trust};

/// How to reach one origin over TLS (RFC 9110 §4.2.2).
#[derive(Clone, Debug)]
pub struct TlsTarget {
    pub config: Arc<ClientConfig>,
    /// Which of [`TlsClients`]' configurations `config` is: pooled connections are only
    /// shared between origins verified the same way.
    pub client: u16,
    /// Sent in SNI (none for an IP address, RFC 6066 §3) and checked in the certificate.
    pub name: ServerName<'static>,
    /// The same name, as the pool key holds it.
    pub key_name: Arc<str>,
}

/// What a trust setting is, to tell distinct ones apart.
#[derive(PartialEq)]
enum Setting {
    System,
    CaFile(PathBuf),
    Anything,
}

/// A configuration is built per trust setting and per ALPN offer: a route with `http2`
/// offers `h2, http/1.1`, the others `http/1.1` only.
type Offer = (Setting, bool);

/// Every client configuration the origin side uses.
pub struct TlsClients {
    configs: Vec<Arc<ClientConfig>>,
    /// The system roots' configuration, for forward-proxy `https://` requests: built when
    /// there is a forward listener.
    system: Option<u16>,
    /// Per route, in `config.routes` order: its configuration when it has https origins.
    routes: Vec<Option<u16>>,
}

impl TlsClients {
    /// Reads the CA files and builds the configurations; errors name the route and the file.
    /// Logs a warning for each route that verifies nothing.
    pub fn from_config(config: &Config) -> io::Result<TlsClients> {
        let mut built = Built::default();
        let mut routes = Vec::with_capacity(config.routes.len());
        for (i, route) in config.routes.iter().enumerate() {
            if !route.origins.iter().any(|o| o.tls) {
                routes.push(None);
                continue;
            }
            let setting = match (&route.tls.ca, route.tls.insecure_skip_verify) {
                (Some(ca), _) => Setting::CaFile(ca.clone()),
                (None, true) => {
                    tracing::warn!(
                        "route[{i}]: tls_insecure_skip_verify = true: the certificates of its \
                         https origins are NOT verified; anyone on the path can read and change \
                         that traffic"
                    );
                    Setting::Anything
                }
                (None, false) => Setting::System,
            };
            let id = built
                .get((setting, route.http2))
                .map_err(|e| io::Error::new(e.kind(), format!("route[{i}]: {e}")))?;
            routes.push(Some(id));
        }
        let system = if config.listeners.iter().any(|l| l.mode == Mode::Forward) {
            Some(
                built
                    .get((Setting::System, false))
                    .or_else(|_| built.empty_system())?,
            )
        } else {
            None
        };
        Ok(TlsClients {
            configs: built.configs.into_iter().map(|(_, c)| c).collect(),
            system,
            routes,
        })
    }

    /// The target of route `index`'s `origin`, when it is an https one.
    pub fn for_route_origin(
        &self,
        index: usize,
        route: &Route,
        origin: &OriginAddr,
    ) -> io::Result<Option<TlsTarget>> {
        let Some(client) = self.routes.get(index).copied().flatten() else {
            return Ok(None);
        };
        if !origin.tls {
            return Ok(None);
        }
        let name = route.tls.server_name.as_deref().unwrap_or(&origin.host);
        self.target(client, name).map(Some)
    }

    /// The target of a forward-proxy `https://` request to `host`, verified against the
    /// system's roots.
    pub fn for_host(&self, host: &str) -> io::Result<TlsTarget> {
        let client = self
            .system
            .ok_or_else(|| io::Error::other("no TLS client for requested hosts"))?;
        self.target(client, host)
    }

    /// Configuration `client` toward `name`: to open a new connection like a pooled one.
    pub fn target(&self, client: u16, name: &str) -> io::Result<TlsTarget> {
        let config = self
            .configs
            .get(usize::from(client))
            .ok_or_else(|| io::Error::other("unknown TLS client"))?;
        let name = client::server_name(name)?;
        Ok(TlsTarget {
            config: config.clone(),
            client,
            key_name: Arc::from(name.to_str().as_ref()),
            name,
        })
    }
}

/// The configurations built so far, and the system's roots once loaded.
#[derive(Default)]
struct Built {
    configs: Vec<(Offer, Arc<ClientConfig>)>,
    system_roots: Option<RootCertStore>,
}

impl Built {
    /// The index of `setting`'s configuration, built on first use.
    fn get(&mut self, offer: Offer) -> io::Result<u16> {
        if let Some(i) = self.configs.iter().position(|(o, _)| *o == offer) {
            return Ok(index(i));
        }
        let (setting, offer_h2) = &offer;
        let config = match setting {
            Setting::System => {
                let roots = self.system_roots.get_or_insert_with(client::system_roots);
                if roots.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "no system CA certificates could be loaded (install ca-certificates, \
                         set SSL_CERT_FILE, or give the route a tls_ca)",
                    ));
                }
                client::client_config(Trust::System(roots), *offer_h2)?
            }
            Setting::CaFile(path) => client::client_config(Trust::CaFile(path), *offer_h2)?,
            Setting::Anything => client::client_config(Trust::Anything, *offer_h2)?,
        };
        self.configs.push((offer, config));
        Ok(index(self.configs.len() - 1))
    }

    /// A forward proxy still serves `http://` without system roots: its `https://` requests
    /// then fail verification (502), which the warning explains.
    fn empty_system(&mut self) -> io::Result<u16> {
        tracing::warn!(
            "no system CA certificates could be loaded: https:// requests through the forward \
             proxy will fail verification (install ca-certificates or set SSL_CERT_FILE)"
        );
        let config = client::client_config(Trust::System(&RootCertStore::empty()), false)?;
        self.configs.push(((Setting::System, false), config));
        Ok(index(self.configs.len() - 1))
    }
}

/// Configurations are one per distinct setting, at most one per route plus one.
fn index(i: usize) -> u16 {
    u16::try_from(i).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::tls::test_certs::TestPki;

    fn routes_config(ca: &str) -> Config {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\n\
             [[route]]\nhost = \"a\"\norigins = [\"https://a.test\", \"http://10.0.0.1\"]\n\
             tls_ca = \"{ca}\"\n\n\
             [[route]]\nhost = \"b\"\norigins = [\"https://10.0.0.2:8443\"]\ntls_ca = \"{ca}\"\n\
             tls_server_name = \"B.test\"\n\n\
             [[route]]\nhost = \"c\"\norigins = [\"https://a.test\"]\n\
             tls_insecure_skip_verify = true\n\n\
             [[route]]\nhost = \"d\"\norigins = [\"http://a.test\"]\n"
        );
        Config::from_toml_str(&text, "t.toml").unwrap()
    }

    #[test]
    fn one_configuration_per_distinct_trust_setting() {
        let pki = TestPki::new(&["a.test"]);
        let config = routes_config(pki.path("ca.pem").to_str().unwrap());
        let clients = TlsClients::from_config(&config).unwrap();
        assert_eq!(
            clients.configs.len(),
            2,
            "the CA file once, no verification once"
        );
        assert_eq!(clients.routes, [Some(0), Some(0), Some(1), None]);
        assert_eq!(clients.system, None, "no forward listener");
        let target = |route: usize, origin: usize| {
            let r = &config.routes[route];
            clients
                .for_route_origin(route, r, &r.origins[origin])
                .unwrap()
        };
        let a = target(0, 0).unwrap();
        assert_eq!((&*a.key_name, a.client), ("a.test", 0));
        assert!(target(0, 1).is_none(), "an http origin of the same route");
        let b = target(1, 0).unwrap();
        // The same configuration (and so the same session cache) for both CA-file routes.
        assert!(Arc::ptr_eq(&a.config, &b.config));
        assert_eq!(
            &*b.key_name, "b.test",
            "tls_server_name, not the IP address"
        );
        let c = target(2, 0).unwrap();
        assert_eq!((&*c.key_name, c.client), ("a.test", 1));
        assert!(target(3, 0).is_none());
    }

    #[test]
    fn an_http2_route_offers_h2_in_its_own_configuration() {
        let pki = TestPki::new(&["a.test"]);
        let ca = pki.path("ca.pem");
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\n\
             [[route]]\nhost = \"a\"\norigins = [\"https://a.test\"]\ntls_ca = \"{ca}\"\n\n\
             [[route]]\nhost = \"b\"\norigins = [\"https://a.test\"]\ntls_ca = \"{ca}\"\n\
             http2 = true\n",
            ca = ca.display()
        );
        let config = Config::from_toml_str(&text, "t.toml").unwrap();
        let clients = TlsClients::from_config(&config).unwrap();
        assert_eq!(clients.routes, [Some(0), Some(1)]);
        let alpn = |i: usize| clients.configs[i].alpn_protocols.clone();
        assert_eq!(alpn(0), [b"http/1.1".to_vec()]);
        assert_eq!(alpn(1), [b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn ip_literals_are_names_without_sni() {
        let pki = TestPki::new(&["a.test"]);
        let config = routes_config(pki.path("ca.pem").to_str().unwrap());
        let clients = TlsClients::from_config(&config).unwrap();
        let target = clients.target(0, "[2001:db8::1]").unwrap();
        assert!(matches!(target.name, ServerName::IpAddress(_)));
        assert_eq!(&*target.key_name, "2001:db8::1");
        assert!(clients.for_host("a.test").is_err(), "no forward listener");
    }

    #[test]
    fn an_unusable_ca_file_names_the_route_and_the_file() {
        let config = routes_config("/nonexistent/ca.pem");
        let err = TlsClients::from_config(&config).err().unwrap().to_string();
        assert!(err.starts_with("route[0]: /nonexistent/ca.pem"), "{err}");
    }
}
