//! Proxy authentication for Sepia: the Basic scheme (RFC 7617) carried in Proxy-Authorization
//! and challenged with Proxy-Authenticate (RFC 9110 §11.7), checked against an htpasswd file or
//! a Squid basic-auth helper program, with a cache of verified credentials.
//!
//! # Use from the proxy
//!
//! ```no_run
//! # async fn demo(config: &sepia_config::AuthConfig, header: &[u8]) -> Result<(), sepia_auth::Error> {
//! use sepia_auth::{Authenticator, Verdict};
//! // Once, inside the tokio runtime (it starts helper processes and a file watcher):
//! let auth = Authenticator::from_config(config)?;
//! // Per request, with the raw Proxy-Authorization value ("Basic dXNlcjpwYXNz"):
//! match auth.verify(header).await {
//!     Verdict::Valid(user) => { /* ACLs and the access log get `user` */ }
//!     Verdict::Invalid => { /* 407 with Proxy-Authenticate: auth.challenge() */ }
//!     Verdict::Unavailable => { /* no answer could be had: refuse, without blaming the credentials */ }
//! }
//! # Ok(()) }
//! ```
//!
//! A request without Proxy-Authorization never reaches [`Authenticator::verify`]: the proxy
//! answers 407 with [`Authenticator::challenge`] straight away.
//!
//! # Costs
//! [`Authenticator`] is an `Arc` inside: clone it freely. A cache hit (the same token verified
//! within `credentials_ttl`, or rejected within `negative_ttl`) takes one short mutex-guarded
//! map lookup keyed by the raw token bytes: no decoding, hashing of the password, or allocation;
//! the user name is an `Arc<str>` clone. A miss decodes the token and checks it: SHA-1 inline,
//! bcrypt and MD5-crypt on tokio's blocking pool, a helper over its pipes.
//!
//! # Backends
//! - htpasswd ([`htpasswd`] module docs for the formats): re-read when it changes on disk
//!   (checked once a second); a new version takes effect at once, cached verdicts included.
//! - helper: Squid's protocol, with `concurrency` channel-IDs, a pool of children restarted when
//!   they die, and a timeout per request (see the `helper` module).

mod basic;
mod cache;
mod file;
#[doc(hidden)]
pub mod fuzzing;
mod helper;
pub mod htpasswd;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use sepia_config::{AuthBackend, AuthConfig};

use crate::cache::{Cached, CredentialsCache};
use crate::file::HtpasswdFile;
pub use crate::helper::HelperStats;
use crate::helper::{Answer, HelperPool};

/// The outcome of checking one Proxy-Authorization value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The credentials are valid for this user name (cheap to clone).
    Valid(Arc<str>),
    /// Malformed, another scheme, unknown user or wrong password.
    Invalid,
    /// No answer could be had (the helper failed, hung or is restarting): neither valid nor
    /// invalid, and not cached.
    Unavailable,
}

/// An [`Authenticator`] that could not be built: the htpasswd file cannot be read or has an
/// entry Sepia refuses (`path:line: …`), or the helper cannot be started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Checks Basic credentials as `[auth]` says. Built once; clones share everything.
#[derive(Clone, Debug)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    challenge: Box<[u8]>,
    cache: CredentialsCache,
    backend: Backend,
}

#[derive(Debug)]
enum Backend {
    File(Arc<HtpasswdFile>),
    Helper(HelperPool),
}

impl Authenticator {
    /// Loads the htpasswd file or starts the helper children. Must run inside a tokio runtime:
    /// the file watcher and the helpers' supervisors are tasks, stopped when the last clone of
    /// the `Authenticator` is dropped.
    pub fn from_config(config: &AuthConfig) -> Result<Authenticator, Error> {
        let backend = match &config.backend {
            AuthBackend::Htpasswd(path) => Backend::File(HtpasswdFile::open(path).map_err(Error)?),
            AuthBackend::Helper(helper) => {
                Backend::Helper(HelperPool::start(helper).map_err(Error)?)
            }
        };
        // The realm was checked when the configuration was loaded: no `"`, `\` or controls.
        let challenge = format!("Basic realm=\"{}\"", config.realm);
        Ok(Authenticator {
            inner: Arc::new(Inner {
                challenge: challenge.into_bytes().into_boxed_slice(),
                cache: CredentialsCache::new(config.credentials_ttl, config.negative_ttl),
                backend,
            }),
        })
    }

    /// The helper pool's queue and answers, when `[auth]` uses a helper.
    pub fn helper_stats(&self) -> Option<HelperStats> {
        match &self.inner.backend {
            Backend::Helper(pool) => Some(pool.stats()),
            Backend::File(_) => None,
        }
    }

    /// The Proxy-Authenticate value for a 407: `Basic realm="…"` (RFC 7617 §2).
    pub fn challenge(&self) -> &[u8] {
        &self.inner.challenge
    }

    /// Checks a raw Proxy-Authorization value (`Basic dXNlcjpwYXNz`). Returns at once, without
    /// allocating, when the token is in the credentials cache.
    pub async fn verify(&self, header_value: &[u8]) -> Verdict {
        let Some(token) = basic::token(header_value) else {
            return Verdict::Invalid;
        };
        let inner = &*self.inner;
        let generation = inner.generation();
        match inner.cache.get(token, Instant::now(), generation) {
            Cached::Valid(user) => return Verdict::Valid(user),
            Cached::Rejected => return Verdict::Invalid,
            Cached::Miss => {}
        }
        // Malformed tokens are not cached: rejecting them again is as cheap as a lookup.
        let Some(credentials) = basic::decode(token) else {
            return Verdict::Invalid;
        };
        let verdict = inner.check(credentials).await;
        match &verdict {
            Verdict::Valid(user) => {
                let user = Arc::clone(user);
                inner
                    .cache
                    .insert_valid(token, user, Instant::now(), generation);
            }
            Verdict::Invalid => inner
                .cache
                .insert_rejected(token, Instant::now(), generation),
            Verdict::Unavailable => {}
        }
        verdict
    }
}

impl Inner {
    /// Cached verdicts made under another generation of the user list are void.
    fn generation(&self) -> u64 {
        match &self.backend {
            Backend::File(file) => file.generation(),
            Backend::Helper(_) => 0,
        }
    }

    async fn check(&self, credentials: basic::Credentials) -> Verdict {
        let basic::Credentials { user, password } = credentials;
        let valid = match &self.backend {
            Backend::File(file) => {
                let Some(hash) = file.lookup(&user) else {
                    return Verdict::Invalid;
                };
                if hash.is_slow() {
                    let check = move || hash.verify(&password);
                    match tokio::task::spawn_blocking(check).await {
                        Ok(valid) => valid,
                        Err(_) => return Verdict::Unavailable,
                    }
                } else {
                    hash.verify(&password)
                }
            }
            Backend::Helper(pool) => match pool.check(&user, &password).await {
                Some(Answer::Ok) => true,
                Some(Answer::Err) => false,
                Some(Answer::BrokenHelper) | None => return Verdict::Unavailable,
            },
        };
        if valid {
            Verdict::Valid(user.into())
        } else {
            Verdict::Invalid
        }
    }
}
