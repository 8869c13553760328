//! Name resolution for forward mode.
//!
//! hickory-resolver is asynchronous (no thread blocked in getaddrinfo) and keeps an LRU cache
//! whose entries expire with the records' TTLs, so a busy proxy asks its DNS server once per
//! TTL, not once per request. IP literals never reach the resolver, and `/etc/hosts` is read
//! before DNS, as users expect of a Unix program.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

use hickory_resolver::config::{ResolverConfig, ResolverOpts};
use hickory_resolver::TokioAsyncResolver;

#[derive(Clone)]
pub struct Resolver {
    /// Built at the first name to resolve, shared by clones (one cache): reading the system's
    /// configuration and building the resolver took 0.27 ms of every start, which a
    /// reverse proxy whose origins are IP literals never needs (bench/RESULTS.md, "Issue 21,
    /// fifteenth stop").
    inner: Arc<OnceLock<TokioAsyncResolver>>,
}

impl Resolver {
    /// The system's resolver configuration (`/etc/resolv.conf`), or hosts-file-only resolution
    /// when there is none, so a machine without DNS still starts and serves IP literals.
    /// Read when the first name is resolved.
    pub fn from_system() -> Resolver {
        Resolver {
            inner: Arc::default(),
        }
    }

    fn inner(&self) -> &TokioAsyncResolver {
        self.inner
            .get_or_init(|| match hickory_resolver::system_conf::read_system_conf() {
                Ok((config, mut opts)) => {
                    opts.cache_size = 4096;
                    TokioAsyncResolver::tokio(config, opts)
                }
                Err(e) => {
                    tracing::warn!(
                        "no system DNS configuration ({e}); resolving from /etc/hosts only"
                    );
                    TokioAsyncResolver::tokio(ResolverConfig::new(), ResolverOpts::default())
                }
            })
    }

    /// Addresses for `host` (a name, an IPv4 literal, or an IPv6 literal with or without
    /// brackets) on `port`.
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        // Boxed: the resolver's lookup state (about a kilobyte) would otherwise be part of
        // every request's future, held while the request waits on its origin, though most
        // routes' origins are address literals and never get here; a lookup allocates anyway.
        let lookup = Box::pin(self.inner().lookup_ip(host))
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.to_string()))?;
        let addrs: Vec<SocketAddr> = lookup.iter().map(|ip| SocketAddr::new(ip, port)).collect();
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no address for host",
            ));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn literals_skip_the_resolver() {
        let r = Resolver::from_system();
        assert_eq!(
            r.resolve("127.0.0.1", 80).await.unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        assert_eq!(
            r.resolve("[::1]", 8080).await.unwrap(),
            vec!["[::1]:8080".parse().unwrap()]
        );
    }

    #[tokio::test]
    async fn localhost_comes_from_the_hosts_file() {
        let r = Resolver::from_system();
        let addrs = r.resolve("localhost", 3128).await.unwrap();
        assert!(addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 3128));
    }
}
