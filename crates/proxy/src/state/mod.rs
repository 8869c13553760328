//! What every connection shares: the configuration snapshot and what was built from it once
//! (the cache, the origin side, access rules' time zone, the authenticator, the log), plus
//! the shutdown signal (`shutdown`).

pub mod shutdown;

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::Config;
use sepia_observe::AccessLog;

use crate::cache::Cache;
use crate::upstream::Upstreams;

/// The Proxy-Authenticate value of a 407 when no `[auth]` section names a realm. A 407 "MUST"
/// carry a challenge (RFC 9110 §15.5.8, §11.7.1); Basic is the scheme Sepia verifies (RFC 7617).
const DEFAULT_CHALLENGE: &[u8] = b"Basic realm=\"Sepia\"";

pub struct State {
    pub config: Arc<Config>,
    pub upstreams: Upstreams,
    pub log: AccessLog,
    /// The HTTP cache; `None` when `cache.enabled = false`.
    pub cache: Option<Cache>,
    /// The zone `time` ACLs read the clock in: `TZ` if set, else the system's
    /// (`/etc/localtime`), read once here.
    pub tz: sepia_access::TimeZone,
    /// Proxy authentication (`[auth]`), consulted when a rule reaches a `proxy_auth` ACL.
    pub auth: Option<sepia_auth::Authenticator>,
    /// Requests are counted and timed for the admin listener (`[admin]` is configured).
    pub metrics: bool,
}

impl State {
    /// Must run inside the tokio runtime (the pool starts its sweeper task).
    pub fn new(config: Arc<Config>, log: AccessLog) -> io::Result<State> {
        let via = Bytes::from(format!("1.1 {}", config.headers.via_pseudonym));
        let tag_fields = config.admin.as_ref().map(|a| a.tag_fields.clone());
        let cache = Cache::from_config(
            &config.cache,
            &config.listeners,
            tag_fields.unwrap_or_default(),
        );
        let cache = cache.map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cache configuration: {e}"),
            )
        })?;
        let auth = config
            .auth
            .as_ref()
            .map(sepia_auth::Authenticator::from_config)
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("[auth]: {e}")))?;
        Ok(State {
            auth,
            cache,
            upstreams: Upstreams::new(config.clone(), via)?,
            log,
            tz: sepia_access::TimeZone::system(),
            metrics: config.admin.is_some(),
            config,
        })
    }

    /// A value only the access log reads, computed only when the log is on: a `Bytes` clone
    /// is two atomic operations that a hit would otherwise pay for nothing.
    pub fn for_log<T>(&self, value: impl FnOnce() -> Option<T>) -> Option<T> {
        self.log.is_enabled().then(value).flatten()
    }

    /// The Proxy-Authenticate value a 407 carries: `Basic realm="<auth.realm>"`.
    pub fn challenge(&self) -> &[u8] {
        self.auth
            .as_ref()
            .map_or(DEFAULT_CHALLENGE, |a| a.challenge())
    }

    /// The Via value, when configured to send one.
    pub fn via(&self) -> Option<&[u8]> {
        self.config.headers.via.then_some(&self.upstreams.via[..])
    }
}
