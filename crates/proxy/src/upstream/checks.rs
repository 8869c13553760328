//! Active origin health checks (`[route.health] interval`): one task per origin of every route
//! that sets it, however many workers serve requests. Each check opens a connection of its
//! own with the origin connector the requests use (TLS for `https://` origins, verified the
//! route's way), sends `GET path` and waits for the response head, all within `timeout`; the
//! request pool and the requests themselves never wait on it. `fall` failed checks in a row
//! mark the origin down (`super::health`: no request goes to it, not even a passive trial),
//! `rise` good ones in a row mark it up again; both transitions are logged.
//!
//! A reload keeps the task of an origin whose route host, origin, TLS settings and check are
//! unchanged (its streak of results too), stops the others and starts what is new.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use sepia_config::{ActiveCheck, Config, HostMatch, OriginTls};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::h1::probe;
use super::health::{CheckResult, OriginStatus};
use super::origins::{OriginAddress, RouteOrigins};
use super::pool::open;
use super::tls::TlsTarget;
use crate::transport::dns::Resolver;

/// The check tasks running.
#[derive(Default)]
pub struct Checkers {
    running: Mutex<Vec<Checker>>,
}

/// One origin's check task; dropping it stops the task.
struct Checker {
    key: CheckKey,
    task: JoinHandle<()>,
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a check task was started for: a reload keeps the task while this is unchanged.
#[derive(PartialEq)]
struct CheckKey {
    route: String,
    origin: String,
    check: ActiveCheck,
    tls: OriginTls,
    http2: bool,
}

impl Checkers {
    /// Starts the checks of `routes` (configured by `config.routes`, same order), taking over
    /// from `previous` the tasks whose key is unchanged. The rest of `previous` stop. Origins
    /// of routes without checks lose any "down" verdict earlier checks left on them.
    pub fn start(
        &self,
        config: &Config,
        routes: &[RouteOrigins],
        resolver: &Resolver,
        previous: Option<&Checkers>,
    ) {
        let mut old = previous.map_or_else(Vec::new, Checkers::take);
        let mut running = Vec::new();
        for (route, origins) in config.routes.iter().zip(routes) {
            let Some(check) = &route.health.active else {
                for origin in &origins.origins {
                    origin.status.health.set_checks_down(false);
                }
                continue;
            };
            for origin in &origins.origins {
                let key = CheckKey {
                    route: origins.label.clone(),
                    origin: origin.name(),
                    check: check.clone(),
                    tls: route.tls.clone(),
                    http2: route.http2,
                };
                if let Some(i) = old.iter().position(|c| c.key == key) {
                    running.push(old.swap_remove(i));
                    continue;
                }
                let host = check_host(check, &route.host, origin);
                let probe = Probe {
                    request: probe::request(&check.path, &host),
                    tls: origin.tls.as_ref().map(http1_only),
                    origin: origin.clone(),
                    resolver: resolver.clone(),
                    check: check.clone(),
                };
                let task = tokio::spawn(probe.run(key.route.clone()));
                running.push(Checker { key, task });
            }
        }
        // `old` holds the tasks of what changed or went: dropped, they stop.
        drop(old);
        *self.lock() = running;
    }

    fn take(&self) -> Vec<Checker> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Checker>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The Host of the checks: `host` when set, else the route's host when it is one name, else
/// the origin's `host[:port]`.
fn check_host(check: &ActiveCheck, route: &HostMatch, origin: &OriginAddress) -> String {
    match (&check.host, route) {
        (Some(host), _) => host.clone(),
        (None, HostMatch::Exact(name)) => name.clone(),
        (None, _) => String::from_utf8_lossy(&origin.authority).into_owned(),
    }
}

/// `tls` offering only `http/1.1` in ALPN: an `http2` route's configuration offers `h2`
/// first, and the check speaks HTTP/1.1.
fn http1_only(tls: &TlsTarget) -> TlsTarget {
    let mut tls = tls.clone();
    if tls.config.alpn_protocols.iter().any(|p| p == b"h2") {
        let mut config = (*tls.config).clone();
        config.alpn_protocols.retain(|p| p != b"h2");
        tls.config = Arc::new(config);
    }
    tls
}

/// What one origin's task checks with.
struct Probe {
    origin: OriginAddress,
    tls: Option<TlsTarget>,
    request: Bytes,
    resolver: Resolver,
    check: ActiveCheck,
}

/// Consecutive results of one kind.
#[derive(Default)]
struct Streak {
    good: u32,
    bad: u32,
}

impl Probe {
    /// Checks every `interval` until the task is aborted.
    async fn run(self, route: String) {
        let status: &OriginStatus = &self.origin.status;
        let origin = self.origin.name();
        let mut tick = tokio::time::interval(self.check.interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut streak = Streak::default();
        loop {
            tick.tick().await;
            let (result, why) = self.once().await;
            status.count_check(result);
            let health = &status.health;
            if result == CheckResult::Ok {
                streak = Streak {
                    good: streak.good.saturating_add(1),
                    bad: 0,
                };
                if streak.good >= self.check.rise && health.set_checks_down(false) {
                    tracing::info!(
                        %route,
                        %origin,
                        "origin is up again: {} health checks in a row passed",
                        streak.good
                    );
                }
            } else {
                streak = Streak {
                    good: 0,
                    bad: streak.bad.saturating_add(1),
                };
                if streak.bad >= self.check.fall && health.set_checks_down(true) {
                    tracing::warn!(
                        %route,
                        %origin,
                        "origin marked down: {} health checks in a row failed, the last: {why}",
                        streak.bad
                    );
                }
            }
        }
    }

    /// One check: its result, and for a failure why (for the log).
    async fn once(&self) -> (CheckResult, String) {
        let limit = self.check.timeout;
        match tokio::time::timeout(limit, self.status()).await {
            Err(_) => (CheckResult::Timeout, format!("no answer within {limit:?}")),
            Ok(Err(e)) if e.kind() == io::ErrorKind::TimedOut => {
                (CheckResult::Timeout, e.to_string())
            }
            Ok(Err(e)) => (CheckResult::Error, e.to_string()),
            Ok(Ok(s)) if self.check.expect.contains(s) => (CheckResult::Ok, String::new()),
            Ok(Ok(s)) => (CheckResult::Status, format!("status {s}")),
        }
    }

    /// Connects to the first of the origin's addresses that accepts and asks.
    async fn status(&self) -> io::Result<u16> {
        let addrs = self.origin.addrs(&self.resolver).await?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
        for &addr in addrs.as_slice() {
            match open(addr, None, self.check.timeout, self.tls.as_ref()).await {
                Ok(mut conn) => return probe::status(&mut conn, &self.request).await,
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}
