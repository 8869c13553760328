//! What a reload changes: the difference between the running configuration and a new one,
//! split into what takes effect live and what keeps its running value until a restart.
//! `sepia check` prints it; the running process logs it on SIGHUP.

use std::fmt::Debug;

use crate::model::{Config, Listener};

/// The differences between two configurations, one line each.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// Applied by a reload (for new requests and connections).
    pub live: Vec<String>,
    /// Kept at their running value by a reload: they need a restart (or a binary upgrade).
    pub restart: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.restart.is_empty()
    }
}

impl Config {
    /// What replacing `self` (running) by `new` would change.
    pub fn changes_to(&self, new: &Config) -> Changes {
        let mut c = Changes::default();
        listeners(&self.listeners, &new.listeners, &mut c.live);
        routes(self, new, &mut c.live);
        let mut live = |name: &str, old: &dyn Debug, new: &dyn Debug| {
            let (old, new) = (format!("{old:?}"), format!("{new:?}"));
            if old != new {
                c.live.push(format!("{name}: {old} -> {new}"));
            }
        };
        live(
            "cache.memory",
            &self.cache.memory_bytes,
            &new.cache.memory_bytes,
        );
        live(
            "cache.heuristic_percent",
            &self.cache.heuristic_percent,
            &new.cache.heuristic_percent,
        );
        live(
            "cache.heuristic_max",
            &self.cache.heuristic_max,
            &new.cache.heuristic_max,
        );
        live("cache.refresh", &self.cache.refresh, &new.cache.refresh);
        live(
            "cache.purge_allow",
            &self.cache.purge_allow,
            &new.cache.purge_allow,
        );
        live("forward", &self.forward, &new.forward);
        live("http_access", &self.http_access, &new.http_access);
        live("auth", &self.auth, &new.auth);
        live("access_log", &self.access_log, &new.access_log);
        live("headers", &self.headers, &new.headers);
        live("limits", &self.limits, &new.limits);
        live("timeouts", &self.timeouts, &new.timeouts);
        live(
            "server.shutdown_grace",
            &self.server.shutdown_grace,
            &new.server.shutdown_grace,
        );
        let mut restart = |name: &str, old: &dyn Debug, new: &dyn Debug| {
            let (old, new) = (format!("{old:?}"), format!("{new:?}"));
            if old != new {
                c.restart.push(format!(
                    "{name}: {old} -> {new} (needs a restart; keeps {old})"
                ));
            }
        };
        for ((name, old), (_, new)) in self.restart_only().into_iter().zip(new.restart_only()) {
            restart(name, old, new);
        }
        c
    }

    /// `new` as a reload applies it: what only a restart can change keeps `self`'s value.
    pub fn reloaded_with(&self, new: Config) -> Config {
        let mut out = new;
        out.server.workers = self.server.workers;
        out.server.pid_file = self.server.pid_file.clone();
        out.admin = self.admin.clone();
        out.cache.enabled = self.cache.enabled;
        out.cache.disks = self.cache.disks.clone();
        out.cache.disk_read_threads = self.cache.disk_read_threads;
        out.cache.disk_io = self.cache.disk_io;
        out.cache.disk_ring_depth = self.cache.disk_ring_depth;
        out.cache.max_object_bytes = self.cache.max_object_bytes;
        out.cache.sendfile_min_bytes = self.cache.sendfile_min_bytes;
        out.cache.sendfile_dir = self.cache.sendfile_dir.clone();
        out
    }

    /// The settings [`Config::reloaded_with`] keeps: the runtime's threads, the disk tier's
    /// files (which one process at a time may hold), the store's size limits, the admin
    /// listener and the pid file.
    fn restart_only(&self) -> [(&'static str, &dyn Debug); 11] {
        [
            ("server.workers", &self.server.workers),
            ("server.pid_file", &self.server.pid_file),
            ("admin", &self.admin),
            ("cache.enabled", &self.cache.enabled),
            ("cache.disk", &self.cache.disks),
            ("cache.disk_read_threads", &self.cache.disk_read_threads),
            ("cache.disk_io", &self.cache.disk_io),
            ("cache.disk_ring_depth", &self.cache.disk_ring_depth),
            ("cache.max_object", &self.cache.max_object_bytes),
            ("cache.sendfile_min", &self.cache.sendfile_min_bytes),
            ("cache.sendfile_dir", &self.cache.sendfile_dir),
        ]
    }
}

/// Listeners are known by address: one added, removed, or changed in place.
fn listeners(old: &[Listener], new: &[Listener], out: &mut Vec<String>) {
    for l in new {
        match old.iter().find(|o| o.address == l.address) {
            None => out.push(format!("listener {} added ({:?})", l.address, l.mode)),
            Some(o) if o != l => out.push(format!("listener {} changed", l.address)),
            Some(_) => {}
        }
    }
    for o in old
        .iter()
        .filter(|o| !new.iter().any(|l| l.address == o.address))
    {
        out.push(format!("listener {} removed", o.address));
    }
}

/// Routes are known by their host pattern; a changed route lists its origins.
fn routes(old: &Config, new: &Config, out: &mut Vec<String>) {
    let origins = |r: &crate::model::Route| {
        let list: Vec<String> = r
            .origins
            .iter()
            .map(|o| format!("{}:{}", o.host, o.port))
            .collect();
        list.join(", ")
    };
    for r in &new.routes {
        match old.routes.iter().find(|o| o.host == r.host) {
            None => out.push(format!("route {:?} added (origins {})", r.host, origins(r))),
            Some(o) if o.origins != r.origins => out.push(format!(
                "route {:?} origins: {} -> {}",
                r.host,
                origins(o),
                origins(r)
            )),
            Some(o) if o != r => out.push(format!("route {:?} changed", r.host)),
            Some(_) => {}
        }
    }
    for o in old
        .routes
        .iter()
        .filter(|o| !new.routes.iter().any(|r| r.host == o.host))
    {
        out.push(format!("route {:?} removed", o.host));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "[server]\nworkers = 2\n\n[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\n{extra}"
        );
        Config::from_toml_str(&text, "t.toml").unwrap()
    }

    const ROUTE_A: &str = "[[route]]\nhost = \"*\"\norigins = [\"http://10.0.0.1:80\"]\n";
    const ROUTE_B: &str = "[[route]]\nhost = \"*\"\norigins = [\"http://10.0.0.2:81\"]\n";

    #[test]
    fn the_same_file_changes_nothing() {
        assert!(config(ROUTE_A).changes_to(&config(ROUTE_A)).is_empty());
    }

    #[test]
    fn listeners_routes_and_restart_only_settings_are_listed() {
        let old = config(ROUTE_A);
        let new_text = format!(
            "{ROUTE_B}\n[[listen]]\naddress = \"127.0.0.1:9090\"\nmode = \"forward\"\n\n[cache]\nmemory = \"1MiB\"\nmax_object = \"64KiB\"\n"
        );
        let new = config(&new_text);
        let c = old.changes_to(&new);
        let live = c.live.join("\n");
        assert!(live.contains("listener 127.0.0.1:9090 added"), "{live}");
        assert!(
            live.contains("origins: 10.0.0.1:80 -> 10.0.0.2:81"),
            "{live}"
        );
        assert!(live.contains("cache.memory"), "{live}");
        assert_eq!(c.restart.len(), 1, "{:?}", c.restart);
        assert!(c.restart[0].starts_with("cache.max_object"));
        let applied = old.reloaded_with(new.clone());
        assert_eq!(applied.cache.max_object_bytes, old.cache.max_object_bytes);
        assert_eq!(applied.cache.memory_bytes, new.cache.memory_bytes);
        assert_eq!(applied.routes, new.routes);
        let removed = new.changes_to(&old).live.join("\n");
        assert!(
            removed.contains("listener 127.0.0.1:9090 removed"),
            "{removed}"
        );
    }
}
