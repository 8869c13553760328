//! From the deserialised file to the snapshot: the checks that involve more than one value
//! (at least one listener, routes for reverse listeners, unique route hosts) and the
//! resolution of `workers = 0`.

use std::collections::HashMap;

use crate::error::ConfigError;
use crate::model::{
    AccessLogConfig, CacheConfig, Config, DiskConfig, Forward, HeaderPolicy, Limits, Listener,
    Mode, RefreshRule, Route, Server, Timeouts,
};
use crate::raw::{RawCache, RawFile};

/// `file` and `text` only serve to place errors.
pub(crate) fn resolve(raw: RawFile, file: &str, text: &str) -> Result<Config, ConfigError> {
    let listeners = resolve_listeners(&raw, file, text)?;
    let cache = resolve_cache(&raw, file, text)?;
    let auth = crate::auth::resolve_auth(raw.auth.as_ref(), file, text)?;
    let routes = resolve_routes(raw.route, file, text)?;
    let http_access = crate::access::resolve(&raw.acl, &raw.http_access, &raw.forward, file, text)?;
    let addresses: Vec<_> = listeners.iter().map(|l| l.address).collect();
    let admin = crate::admin::resolve_admin(raw.admin.as_ref(), &addresses, file, text)?;
    Ok(Config {
        server: Server {
            workers: resolve_workers(raw.server.workers.as_usize()),
            shutdown_grace: raw.server.shutdown_grace.0,
            pid_file: raw.server.pid_file,
            log_format: raw.server.log_format.0,
            log_level: raw.server.log_level.0,
        },
        listeners,
        limits: Limits {
            max_request_head: raw.limits.max_request_head.as_usize(),
            max_headers: raw.limits.max_headers.as_usize(),
        },
        timeouts: Timeouts {
            connect: raw.timeouts.connect.0 .0,
            request_head: raw.timeouts.request_head.0 .0,
            client_idle: raw.timeouts.client_idle.0 .0,
            origin_first_byte: raw.timeouts.origin_first_byte.0 .0,
            origin_idle: raw.timeouts.origin_idle.0 .0,
            tunnel_idle: raw.timeouts.tunnel_idle.0 .0,
        },
        headers: HeaderPolicy {
            via: raw.headers.via,
            via_pseudonym: raw.headers.via_pseudonym.0 .0,
            x_forwarded_for: raw.headers.x_forwarded_for.0,
            forwarded: raw.headers.forwarded,
        },
        forward: Forward {
            allow: raw
                .forward
                .allow
                .into_inner()
                .into_iter()
                .map(|net| net.0)
                .collect(),
            connect_ports: raw
                .forward
                .connect_ports
                .into_iter()
                .filter_map(|port| u16::try_from(port.0).ok())
                .collect(),
        },
        routes,
        access_log: AccessLogConfig {
            target: raw.access_log.path.0,
            format: raw.access_log.format.0,
        },
        cache,
        http_access,
        auth,
        admin,
    })
}

fn resolve_cache(raw: &RawFile, file: &str, text: &str) -> Result<CacheConfig, ConfigError> {
    let c = &raw.cache;
    let memory_bytes = c.memory.get_ref().0 .0;
    let max_object_bytes = c.max_object.get_ref().0 .0;
    if max_object_bytes > memory_bytes {
        return Err(ConfigError::at(
            file,
            text,
            Some(c.max_object.span()),
            Some("cache.max_object".to_string()),
            "must not be larger than cache.memory",
        ));
    }
    let sendfile_dir = match &c.sendfile_dir {
        None => None,
        Some(dir) => {
            let path = std::path::PathBuf::from(dir.get_ref());
            if !path.is_dir() {
                return Err(ConfigError::at(
                    file,
                    text,
                    Some(dir.span()),
                    Some("cache.sendfile_dir".to_string()),
                    format!("\"{}\" is not a directory", path.display()),
                ));
            }
            Some(path)
        }
    };
    Ok(CacheConfig {
        enabled: c.enabled,
        sendfile_dir,
        memory_bytes,
        max_object_bytes,
        sendfile_min_bytes: c.sendfile.then_some(c.sendfile_min.0 .0),
        heuristic_percent: c.heuristic_percent.0 as u32,
        heuristic_max: c.heuristic_max.0,
        refresh: c
            .refresh
            .iter()
            .map(|r| RefreshRule {
                pattern: r.pattern.0 .0.clone(),
                min: r.min.0,
                percent: r.percent.0 as u32,
                max: r.max.0,
            })
            .collect(),
        purge_allow: c.purge_allow.iter().map(|net| net.0).collect(),
        disks: resolve_disks(c, file, text)?,
        disk_read_threads: c.disk_read_threads.0 as usize,
        disk_io: c.disk_io.0,
        disk_ring_depth: c.disk_ring_depth.0 as usize,
    })
}

/// The smallest `[[cache.disk]]` size: a few segments of the log-structured store.
pub const MIN_DISK_BYTES: u64 = 64 << 20;

fn resolve_disks(c: &RawCache, file: &str, text: &str) -> Result<Vec<DiskConfig>, ConfigError> {
    let mut disks: Vec<DiskConfig> = Vec::new();
    for (i, d) in c.disk.iter().enumerate() {
        let at = |span, key: &str, why: String| {
            ConfigError::at(
                file,
                text,
                Some(span),
                Some(format!("cache.disk[{i}].{key}")),
                why,
            )
        };
        let path = std::path::PathBuf::from(d.path.get_ref());
        let why = disk_path_problem(&path, disks.iter().map(|d| d.path.as_path()));
        if let Some(why) = why {
            return Err(at(d.path.span(), "path", why));
        }
        let size_bytes = d.size.get_ref().0 .0;
        if size_bytes < MIN_DISK_BYTES {
            return Err(at(
                d.size.span(),
                "size",
                format!("must be at least {} MiB", MIN_DISK_BYTES >> 20),
            ));
        }
        disks.push(DiskConfig {
            path,
            size_bytes,
            write_budget_per_day: d.write_budget.as_ref().map(|b| b.0 .0),
            admission: d.admission.as_ref().map_or_else(Default::default, |a| a.0),
        });
    }
    Ok(disks)
}

/// Why `path` cannot be a cache directory: not absolute, not a directory, no parent to make it
/// in, or inside (or around) a directory another disk already has.
pub(crate) fn disk_path_problem<'a>(
    path: &std::path::Path,
    others: impl Iterator<Item = &'a std::path::Path>,
) -> Option<String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Some(format!("\"{shown}\" is not an absolute path"));
    }
    for other in others {
        if path.starts_with(other) || other.starts_with(path) {
            return Some(format!(
                "\"{shown}\" overlaps another disk's \"{}\"",
                other.display()
            ));
        }
    }
    if path.exists() && !path.is_dir() {
        return Some(format!("\"{shown}\" is not a directory"));
    }
    if !path.exists() && !path.parent().is_some_and(|p| p.is_dir()) {
        return Some(format!(
            "\"{shown}\" does not exist and neither does its parent"
        ));
    }
    None
}

/// `0` means one worker per CPU the process may use.
pub(crate) fn resolve_workers(workers: usize) -> usize {
    if workers > 0 {
        return workers;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn resolve_listeners(raw: &RawFile, file: &str, text: &str) -> Result<Vec<Listener>, ConfigError> {
    if raw.listen.is_empty() {
        return Err(ConfigError::new(
            file,
            Some("listen"),
            "at least one [[listen]] table is required",
        ));
    }
    let mut seen = HashMap::new();
    let mut listeners = Vec::with_capacity(raw.listen.len());
    for (index, listen) in raw.listen.iter().enumerate() {
        let address = listen.address.get_ref().0;
        let mode = listen.mode.get_ref().0;
        if let Some(first) = seen.insert(address, index) {
            return Err(ConfigError::at(
                file,
                text,
                Some(listen.address.span()),
                Some(format!("listen[{index}].address")),
                format!("address {address} is already used by listen[{first}]"),
            ));
        }
        if mode == Mode::Reverse && raw.route.is_empty() {
            return Err(ConfigError::at(
                file,
                text,
                Some(listen.mode.span()),
                Some(format!("listen[{index}].mode")),
                "a reverse listener needs at least one [[route]] table",
            ));
        }
        let spoof_client = match &listen.spoof_client {
            None => mode == Mode::Tproxy,
            Some(spoof) if mode == Mode::Tproxy => *spoof.get_ref(),
            Some(spoof) => {
                return Err(ConfigError::at(
                    file,
                    text,
                    Some(spoof.span()),
                    Some(format!("listen[{index}].spoof_client")),
                    "spoof_client applies only to a listener with mode = \"tproxy\"",
                ))
            }
        };
        let targeted_cache_control = targeted_list(listen, mode).map_err(|(span, why)| {
            ConfigError::at(
                file,
                text,
                Some(span),
                Some(format!("listen[{index}].targeted_cache_control")),
                why,
            )
        })?;
        let tls = crate::tls::resolve_tls(listen.tls.as_ref(), mode, index, file, text)?;
        listeners.push(Listener {
            address,
            mode,
            spoof_client,
            targeted_cache_control,
            tls,
            h2c: listen.h2c,
        });
    }
    Ok(listeners)
}

/// A listener's target list (RFC 9213 §2.2): as given, each name once, or the mode's default.
fn targeted_list(
    listen: &crate::raw::RawListener,
    mode: Mode,
) -> Result<Vec<String>, (std::ops::Range<usize>, String)> {
    let Some(given) = &listen.targeted_cache_control else {
        let default = if mode == Mode::Reverse {
            vec![DEFAULT_TARGETED_FIELD.to_string()]
        } else {
            Vec::new()
        };
        return Ok(default);
    };
    let mut names: Vec<String> = Vec::with_capacity(given.get_ref().len());
    for name in given.get_ref() {
        let name = &name.0 .0;
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Err((given.span(), format!("\"{name}\" is listed twice")));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// The targeted field of CDN caches (RFC 9213 §3): a reverse listener's default target list.
const DEFAULT_TARGETED_FIELD: &str = "CDN-Cache-Control";

fn resolve_routes(
    raw_routes: Vec<crate::raw::RawRoute>,
    file: &str,
    text: &str,
) -> Result<Vec<Route>, ConfigError> {
    let mut seen = HashMap::new();
    let mut routes = Vec::with_capacity(raw_routes.len());
    for (index, raw) in raw_routes.into_iter().enumerate() {
        let tls = crate::origin_tls::resolve_origin_tls(&raw, index, file, text)?;
        let host_span = raw.host.span();
        let host = raw.host.into_inner().0;
        if let Some(first) = seen.insert(host.clone(), index) {
            return Err(ConfigError::at(
                file,
                text,
                Some(host_span),
                Some(format!("route[{index}].host")),
                format!("duplicate route host (route[{first}] has the same host)"),
            ));
        }
        let origins_span = raw.origins.span();
        let origins: Vec<_> = raw.origins.into_inner().into_iter().map(|o| o.0).collect();
        if origins.is_empty() {
            return Err(ConfigError::at(
                file,
                text,
                Some(origins_span),
                Some(format!("route[{index}].origins")),
                "a route needs at least one origin",
            ));
        }
        let health = crate::health::resolve_health(raw.health, index, file, text)?;
        routes.push(Route {
            host,
            origins,
            host_header: raw.host_header.0,
            tls,
            http2: raw.http2,
            health,
        });
    }
    Ok(routes)
}
