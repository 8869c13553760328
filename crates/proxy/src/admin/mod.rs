//! The admin listener (`[admin]`, `--admin ADDR`): `/metrics` (OpenMetrics text), `/stats`
//! (the same as JSON, with the top lists), `/health`, `/config` (the running configuration,
//! secrets redacted), `POST /purge` (by URL, URL prefix or tag) and `/`, the live dashboard.
//!
//! Clients outside `admin.allow` get 403; with `admin.token` every request but the
//! dashboard's page (which holds no figures) must carry `Authorization: Bearer <token>`.
//! Every request is logged (target `sepia::admin`), purges with what they removed.

mod http;
mod process;
mod render;
pub mod schema;
mod top;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sepia_config::AdminConfig;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use self::http::{Request, Response};
pub use self::render::ClientCounts;
use self::render::{Gathered, OriginFigures};
use self::top::Top;
use crate::cache::Ban;
use crate::state::State;

/// The dashboard: one page, no external assets.
const DASHBOARD: &str = include_str!("dashboard.html");

/// What the admin listener reads beside the state.
pub struct Admin {
    listener: TcpListener,
    config: AdminConfig,
    listeners: Vec<String>,
    started: Instant,
    top: Top,
    purges: [AtomicU64; 3],
    /// Client connections open and parked now (the server's counts).
    clients: Box<dyn Fn() -> ClientCounts + Send + Sync>,
}

impl Admin {
    /// Binds the admin listener. Must be called inside the tokio runtime.
    /// The admin listener on `passed` (the socket a replaced process listened on, already
    /// non-blocking), else on a socket bound now.
    pub fn bind(
        config: &AdminConfig,
        listeners: Vec<String>,
        clients: Box<dyn Fn() -> ClientCounts + Send + Sync>,
        passed: Option<std::net::TcpListener>,
    ) -> io::Result<Admin> {
        let std = match passed {
            Some(passed) => passed,
            None => {
                let std = std::net::TcpListener::bind(config.listen).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot listen on {} (admin): {e}", config.listen),
                    )
                })?;
                std.set_nonblocking(true)?;
                std
            }
        };
        sepia_observe::metrics::set_listeners(listeners.len());
        Ok(Admin {
            listener: TcpListener::from_std(std)?,
            config: config.clone(),
            listeners,
            started: Instant::now(),
            top: Top::default(),
            purges: Default::default(),
            clients,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address the configuration names (what a passed socket is matched by).
    pub fn configured(&self) -> SocketAddr {
        self.config.listen
    }

    /// A second descriptor of the listening socket (a binary upgrade passes it on).
    pub fn socket(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.listener.as_fd().try_clone_to_owned()
    }

    /// Serves until the task is dropped.
    pub async fn run(self: Arc<Self>, mut state: Arc<State>) {
        // Ends with this task (the server aborts it when it stops).
        let _collector = AbortOnDrop(tokio::spawn(collect_samples(self.clone())));
        loop {
            let Ok((stream, peer)) = self.listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            // After a reload: report on and purge through the newest configuration.
            if let Some(newer) = State::newest(&state) {
                state = newer;
            }
            let (admin, state) = (self.clone(), state.clone());
            tokio::spawn(async move { admin.serve(stream, peer, &state).await });
        }
    }

    async fn serve(&self, mut stream: TcpStream, peer: SocketAddr, state: &State) {
        if !self.config.allows(peer.ip()) {
            tracing::info!(target: "sepia::admin", %peer, "refused: not in admin.allow");
            return Response::text(403, "forbidden")
                .send(&mut stream, false)
                .await;
        }
        let Some(req) = http::read(&mut stream).await else {
            return Response::text(400, "bad request")
                .send(&mut stream, false)
                .await;
        };
        let response = self.answer(&req, state);
        tracing::info!(
            target: "sepia::admin",
            %peer,
            method = %req.method,
            path = %req.path,
            status = response.status,
            "admin request"
        );
        response.send(&mut stream, req.method == "HEAD").await;
    }

    fn answer(&self, req: &Request, state: &State) -> Response {
        let get = matches!(req.method.as_str(), "GET" | "HEAD");
        if req.path == "/" && get {
            return Response::new(200, "text/html; charset=utf-8", DASHBOARD);
        }
        if !self.authorized(req) {
            let mut r = Response::text(401, "unauthorized: Authorization: Bearer <admin.token>");
            r.extra = Some("WWW-Authenticate: Bearer realm=\"sepia-admin\"");
            return r;
        }
        match (req.path.as_str(), get, req.method.as_str()) {
            ("/health", true, _) => Response::json(
                200,
                &json!({"status": "ok", "uptime_seconds": self.started.elapsed().as_secs()}),
            ),
            ("/metrics", true, _) => Response::new(
                200,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                render::metrics_text(self.gather(state)),
            ),
            ("/stats", true, _) => {
                let (urls, clients) = self.top.lists(10);
                let bans = state.cache.as_ref().map_or(0, |c| c.bans.len());
                let stats = render::stats_json(&self.gather(state), &urls, &clients, bans);
                Response::json(200, &stats)
            }
            ("/config", true, _) => Response::text(200, &format!("{:#?}", state.config)),
            ("/purge", _, "POST") => self.purge(req, state),
            ("/" | "/health" | "/metrics" | "/stats" | "/config" | "/purge", _, _) => {
                Response::text(405, "method not allowed")
            }
            _ => Response::text(404, "not found"),
        }
    }

    /// Whether the request carries the token, when one is configured (compared in time
    /// independent of where it differs).
    fn authorized(&self, req: &Request) -> bool {
        let Some(token) = &self.config.token else {
            return true;
        };
        let given = req
            .authorization
            .as_deref()
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0
    }

    fn gather(&self, state: &State) -> Gathered {
        Gathered {
            requests: sepia_observe::metrics::snapshot(),
            store: state
                .cache
                .as_ref()
                .map(|c| c.store.stats())
                .unwrap_or_default(),
            listeners: self.listeners.clone(),
            clients: (self.clients)(),
            log_dropped: state.log.dropped(),
            purges: std::array::from_fn(|i| self.purges[i].load(Relaxed)),
            process: process::Process::read(),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            origins: self.origin_figures(state),
            route_latency: state.upstreams.route_latency(),
            auth_helper: state.auth.as_ref().and_then(|a| a.helper_stats()),
        }
    }

    fn origin_figures(&self, state: &State) -> Vec<OriginFigures> {
        let all = state.upstreams.origin_status().into_iter();
        let all = all.map(|(route, origin, status)| OriginFigures {
            up: status.health.is_up(),
            connections: status.connections(),
            checks: status.checks(),
            route,
            origin,
        });
        all.collect()
    }

    /// `POST /purge` with a JSON body naming one of `url`, `prefix` or `tag`.
    fn purge(&self, req: &Request, state: &State) -> Response {
        let Some(cache) = state.cache.as_ref() else {
            return Response::json(400, &json!({"error": "caching is off"}));
        };
        let body: serde_json::Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => return Response::json(400, &json!({"error": format!("invalid JSON: {e}")})),
        };
        let field = |name: &str| body.get(name).and_then(|v| v.as_str()).map(str::to_string);
        let mut key = Vec::new();
        let answer = if let Some(url) = field("url") {
            sepia_cache_policy::primary_key(b"", b"", url.as_bytes(), &mut key);
            let removed = cache.purge(&key);
            self.purges[0].fetch_add(1, Relaxed);
            let key = String::from_utf8_lossy(&key).into_owned();
            tracing::info!(target: "sepia::admin", %key, removed, "purge by URL");
            json!({"purged": "url", "key": key, "removed": removed})
        } else if let Some(prefix) = field("prefix") {
            if !prefix.contains("://") {
                return Response::json(
                    400,
                    &json!({"error": "prefix must start with scheme://host"}),
                );
            }
            sepia_cache_policy::primary_key(b"", b"", prefix.as_bytes(), &mut key);
            let ban = cache.bans.add(Ban::Prefix(key.clone()));
            self.purges[1].fetch_add(1, Relaxed);
            let key = String::from_utf8_lossy(&key).into_owned();
            tracing::info!(target: "sepia::admin", prefix = %key, ban, "purge by prefix");
            json!({"purged": "prefix", "prefix": key, "ban": ban})
        } else if let Some(tag) = field("tag") {
            if tag.is_empty() || tag.contains([' ', ',']) {
                return Response::json(400, &json!({"error": "one tag, without spaces or commas"}));
            }
            let ban = cache.bans.add(Ban::Tag(tag.clone().into_bytes()));
            self.purges[2].fetch_add(1, Relaxed);
            tracing::info!(target: "sepia::admin", %tag, ban, "purge by tag");
            json!({"purged": "tag", "tag": tag, "ban": ban})
        } else {
            return Response::json(
                400,
                &json!({"error": "expected {\"url\"|\"prefix\"|\"tag\": \"...\"}"}),
            );
        };
        Response::json(200, &answer)
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Collects the workers' samples once a second for the top lists.
async fn collect_samples(admin: Arc<Admin>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        admin.top.collect(now);
    }
}
