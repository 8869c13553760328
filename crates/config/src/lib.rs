//! Sepia's configuration: a TOML file turned into a validated, immutable [`Config`] snapshot.
//!
//! Loading is strict: unknown keys, wrong types and bad values are errors (never warnings or
//! silent defaults), and every error names the file, the line and the dotted key, e.g.
//! `sepia.toml:12: key 'timeouts.conect': unknown key (expected one of connect, …)`.
//! A reload is simply a new snapshot built the same way and swapped in whole.
//!
//! The file format, with every key, its type, default and meaning, is in the project README
//! (section Configuration); the doc comments of the [`model`] types say the same per field.

pub mod model;

mod access;
mod admin;
mod auth;
mod diff;
mod error;
mod health;
mod origin_tls;
mod raw;
mod resolve;
mod tls;
mod values;

use std::net::SocketAddr;
use std::path::Path;

use toml::Spanned;

pub use diff::Changes;
pub use error::ConfigError;
pub use model::{
    AccessLogConfig, ActiveCheck, AdminConfig, AuthBackend, AuthConfig, CacheConfig, Config,
    DiskAdmission, DiskConfig, DiskIo, EventLogFormat, EventLogLevel, Forward, HeaderPolicy,
    HelperConfig, HostHeader, HostMatch, Limits, Listener, ListenerTls, LogFormat, LogTarget, Mode,
    OriginAddr, OriginHealth, RefreshRule, Route, Server, StatusRange, Timeouts, XForwardedFor,
};
pub use model::{AlpnProtocol, CertificateFiles, OriginTls, TlsVersion};

use crate::values::ConfigValue;

/// The quick starts' cache flags (`sepia reverse|forward --cache-memory SIZE --cache-dir PATH
/// --cache-dir-size SIZE`), as given; [`Config::with_quick_cache`] validates them.
#[derive(Clone, Debug, Default)]
pub struct QuickCache {
    pub memory: Option<String>,
    pub dir: Option<std::path::PathBuf>,
    pub dir_size: Option<String>,
}

impl QuickCache {
    /// `--cache-dir` without `--cache-dir-size`.
    pub const DEFAULT_DIR_SIZE: u64 = 1 << 30;
}

/// The "file" named in errors about command-line values.
const COMMAND_LINE: &str = "command line";

/// Where the built-in default listens: Squid's customary forward-proxy port, loopback only.
const DEFAULT_LISTEN: &str = "127.0.0.1:3128";

impl Config {
    /// The built-in default: a forward proxy on 127.0.0.1:3128 with every default of
    /// the README.
    pub fn builtin_default() -> Config {
        Config::quick_forward(DEFAULT_LISTEN, None, None)
            .unwrap_or_else(|e| unreachable!("the built-in default is valid: {e}"))
    }

    /// Reads, parses and validates the file at `path`. Errors name the file as given.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&file, None, format!("cannot read the file: {e}")))?;
        Config::from_toml_str(&text, &file)
    }

    /// Parses and validates `text`; `file_name` is only used in error messages.
    pub fn from_toml_str(text: &str, file_name: &str) -> Result<Config, ConfigError> {
        let deserializer = toml::Deserializer::parse(text).map_err(|e| {
            let message = e.message().trim().replace('\n', "; ");
            ConfigError::at(
                file_name,
                text,
                e.span(),
                None,
                format!("invalid TOML: {message}"),
            )
        })?;
        let raw: raw::RawFile = serde_path_to_error::deserialize(deserializer)
            .map_err(|e| ConfigError::from_toml(file_name, text, e))?;
        resolve::resolve(raw, file_name, text)
    }

    /// `sepia reverse --listen ADDR --origin URL [--origin URL…] [--workers N]
    /// [--tls-cert FILE --tls-key FILE]`: one reverse listener (TLS with `tls`) and one `"*"`
    /// route over `origins`, everything else at its default.
    pub fn quick_reverse(
        listen: &str,
        origins: &[String],
        workers: Option<usize>,
        tls: Option<ListenerTls>,
    ) -> Result<Config, ConfigError> {
        if origins.is_empty() {
            return Err(ConfigError::new(
                COMMAND_LINE,
                Some("--origin"),
                "reverse mode needs at least one --origin http[s]://host[:port]",
            ));
        }
        let origins = origins
            .iter()
            .map(|url| OriginAddr::parse_value(url).map(raw::Parsed))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| ConfigError::new(COMMAND_LINE, Some("--origin"), message))?;
        let route = raw::RawRoute {
            host: Spanned::new(0..0, raw::Parsed(HostMatch::Any)),
            origins: Spanned::new(0..0, origins),
            host_header: raw::Parsed(HostHeader::Pass),
            tls_ca: None,
            tls_server_name: None,
            tls_insecure_skip_verify: None,
            http2: false,
            health: Default::default(),
        };
        Config::quick(listen, Mode::Reverse, workers, Some(route), tls)
    }

    /// `sepia forward --listen ADDR [--workers N] [--tls-cert FILE --tls-key FILE]`: one
    /// forward listener (TLS with `tls`: an HTTPS proxy), every default.
    pub fn quick_forward(
        listen: &str,
        workers: Option<usize>,
        tls: Option<ListenerTls>,
    ) -> Result<Config, ConfigError> {
        Config::quick(listen, Mode::Forward, workers, None, tls)
    }

    /// The quick starts' cache flags applied to a quick-start configuration: `--cache-memory`
    /// sets the memory budget (and lowers `max_object` to it when smaller), `--cache-dir` adds
    /// one disk of `--cache-dir-size` (default 1 GiB). Errors name the flag.
    pub fn with_quick_cache(mut self, quick: &QuickCache) -> Result<Config, ConfigError> {
        let size = |flag: &str, value: &str| {
            values::ByteSize::parse_value(value)
                .map(|b| b.0)
                .map_err(|message| ConfigError::new(COMMAND_LINE, Some(flag), message))
        };
        if let Some(memory) = &quick.memory {
            let bytes = size("--cache-memory", memory)?;
            self.cache.memory_bytes = bytes;
            self.cache.max_object_bytes = self.cache.max_object_bytes.min(bytes);
        }
        if let Some(dir) = &quick.dir {
            let path = std::path::absolute(dir)
                .map_err(|e| ConfigError::new(COMMAND_LINE, Some("--cache-dir"), e.to_string()))?;
            if let Some(why) = resolve::disk_path_problem(&path, std::iter::empty()) {
                return Err(ConfigError::new(COMMAND_LINE, Some("--cache-dir"), why));
            }
            let size_bytes = match &quick.dir_size {
                Some(s) => size("--cache-dir-size", s)?,
                None => QuickCache::DEFAULT_DIR_SIZE,
            };
            if size_bytes < resolve::MIN_DISK_BYTES {
                let why = format!("must be at least {} MiB", resolve::MIN_DISK_BYTES >> 20);
                return Err(ConfigError::new(
                    COMMAND_LINE,
                    Some("--cache-dir-size"),
                    why,
                ));
            }
            self.cache.disks.push(DiskConfig {
                path,
                size_bytes,
                write_budget_per_day: None,
                admission: DiskAdmission::default(),
            });
        }
        Ok(self)
    }

    /// The quick starts' `--admin ADDR`: the admin listener at `ADDR` with every default.
    /// Errors name the flag.
    pub fn with_quick_admin(mut self, listen: Option<&str>) -> Result<Config, ConfigError> {
        let Some(listen) = listen else {
            return Ok(self);
        };
        let flag = |message: String| ConfigError::new(COMMAND_LINE, Some("--admin"), message);
        let address = SocketAddr::parse_value(listen).map_err(flag)?;
        if self.listeners.iter().any(|l| l.address == address) {
            return Err(flag(format!(
                "address {address} is already used by --listen"
            )));
        }
        self.admin = Some(AdminConfig::at(address));
        Ok(self)
    }

    /// The defaults plus one listener (and route): built through the same `resolve` as a file
    /// so the two cannot drift apart.
    fn quick(
        listen: &str,
        mode: Mode,
        workers: Option<usize>,
        route: Option<raw::RawRoute>,
        tls: Option<ListenerTls>,
    ) -> Result<Config, ConfigError> {
        let address = SocketAddr::parse_value(listen)
            .map_err(|message| ConfigError::new(COMMAND_LINE, Some("--listen"), message))?;
        let workers = workers.unwrap_or(0) as u64;
        if workers > raw::MAX_WORKERS {
            return Err(ConfigError::new(
                COMMAND_LINE,
                Some("--workers"),
                format!(
                    "{workers} is out of range (expected 0 to {})",
                    raw::MAX_WORKERS
                ),
            ));
        }
        let mut raw = raw::RawFile::default();
        raw.server.workers = raw::Bounded(workers);
        raw.listen.push(raw::RawListener {
            address: Spanned::new(0..0, raw::Parsed(address)),
            mode: Spanned::new(0..0, raw::Parsed(mode)),
            spoof_client: None,
            targeted_cache_control: None,
            tls: None,
            h2c: false,
        });
        raw.route.extend(route);
        let mut config = resolve::resolve(raw, COMMAND_LINE, "")?;
        if let Some(listener) = config.listeners.first_mut() {
            listener.tls = tls;
        }
        Ok(config)
    }

    /// The route for a request's Host (without port, any case; one trailing dot of a fully
    /// qualified name is ignored): an exact name first, then the longest matching `*.suffix`,
    /// then `"*"`. `None` means no route serves this host (the proxy answers 404/421).
    /// Allocation-free: one pass over the routes.
    pub fn route_for_host(&self, host: &[u8]) -> Option<&Route> {
        let host = host.strip_suffix(b".").unwrap_or(host);
        let mut best_suffix: Option<(usize, &Route)> = None;
        let mut any = None;
        for route in &self.routes {
            match &route.host {
                HostMatch::Exact(_) => {
                    if route.host.matches(host) {
                        return Some(route);
                    }
                }
                HostMatch::Suffix(suffix) => {
                    let longer = best_suffix.is_none_or(|(len, _)| suffix.len() > len);
                    if longer && route.host.matches(host) {
                        best_suffix = Some((suffix.len(), route));
                    }
                }
                HostMatch::Any => {
                    any = any.or(Some(route));
                }
            }
        }
        best_suffix.map(|(_, route)| route).or(any)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_sections;
