//! What every connection shares: the configuration snapshot and what was built from it once
//! (the cache, the origin side, access rules' time zone, the authenticator, the log), plus
//! the shutdown signal (`shutdown`).
//!
//! A reload builds a new `State` from the new configuration (sharing the cache's store) and
//! links it from the old one (`replaced_by`). Nothing is swapped under a running request: a
//! request reads the state its session holds, and a session follows the link once per
//! request (one atomic load), so in-flight requests finish on the snapshot they began with.

pub mod shutdown;

use std::io;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use sepia_config::Config;
use sepia_observe::AccessLog;
use sepia_store::LockWait;

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
    /// The zone `time` ACLs read the clock in (looked up on first use, once per process:
    /// a reload keeps it).
    pub tz: Arc<sepia_access::LocalZone>,
    /// Proxy authentication (`[auth]`), consulted when a rule reaches a `proxy_auth` ACL.
    pub auth: Option<sepia_auth::Authenticator>,
    /// Requests are counted and timed for the admin listener (`[admin]` is configured).
    pub metrics: bool,
    /// The state a reload replaced this one with: sessions move to it before their next
    /// request, accept loops before their next connection.
    replaced_by: OnceLock<Arc<State>>,
}

impl State {
    /// Must run inside the tokio runtime (the pool starts its sweeper task).
    #[cfg(test)]
    pub fn new(config: Arc<Config>, log: AccessLog) -> io::Result<State> {
        State::with_disks(config, log, LockWait::Fail)
    }

    /// The state of `config`, saying what a disk another process holds does: refused (a
    /// start), or waited for (a binary upgrade's new process). Must run inside the tokio
    /// runtime (the pool starts its sweeper task).
    pub fn with_disks(config: Arc<Config>, log: AccessLog, disks: LockWait) -> io::Result<State> {
        let tag_fields = config.admin.as_ref().map(|a| a.tag_fields.clone());
        let cache = Cache::from_config(
            &config.cache,
            &config.listeners,
            tag_fields.unwrap_or_default(),
            disks,
        );
        let tz = Arc::new(sepia_access::LocalZone::system());
        State::assemble(config, cache, log, tz, None)
    }

    /// The state of a reloaded configuration, `config` (already reduced to what a reload may
    /// change, see `Config::reloaded_with`): a new origin side (with the health and counts of
    /// the origins it keeps), authenticator and log, the same cache store resized. Must run
    /// inside the tokio runtime.
    pub fn reloaded(&self, config: Arc<Config>, log: AccessLog) -> io::Result<State> {
        let cache = self.cache.as_ref();
        let cache = cache.map(|c| c.reconfigured(&config.cache, &config.listeners));
        let tz = self.tz.clone();
        State::assemble(config, cache.transpose(), log, tz, Some(&self.upstreams))
    }

    /// What `new` and `reloaded` share: the origin side and authenticator of `config`.
    fn assemble(
        config: Arc<Config>,
        cache: Result<Option<Cache>, String>,
        log: AccessLog,
        tz: Arc<sepia_access::LocalZone>,
        previous: Option<&Upstreams>,
    ) -> io::Result<State> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let cache = cache.map_err(|e| invalid(format!("cache configuration: {e}")))?;
        let auth = config
            .auth
            .as_ref()
            .map(sepia_auth::Authenticator::from_config)
            .transpose()
            .map_err(|e| invalid(format!("[auth]: {e}")))?;
        let via = Bytes::from(format!("1.1 {}", config.headers.via_pseudonym));
        Ok(State {
            auth,
            cache,
            upstreams: Upstreams::new(config.clone(), via, previous)?,
            log,
            tz,
            metrics: config.admin.is_some(),
            config,
            replaced_by: OnceLock::new(),
        })
    }

    /// Makes `next` the state that follows this one. A state is replaced once; the newest
    /// is found by following the links ([`State::newest`]).
    pub fn replace_with(&self, next: Arc<State>) {
        if self.replaced_by.set(next).is_err() {
            tracing::error!("a configuration state was replaced twice; keeping the first");
        }
    }

    /// The newest state, when a reload replaced `state`: one atomic load when none did (the
    /// keep-alive hit path pays only that).
    #[inline]
    pub fn newest(state: &Arc<State>) -> Option<Arc<State>> {
        let mut next = state.replaced_by.get()?;
        while let Some(newer) = next.replaced_by.get() {
            next = newer;
        }
        Some(next.clone())
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
