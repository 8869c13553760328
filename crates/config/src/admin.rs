//! `[admin]`: the admin listener (metrics, stats, health, the running configuration, purges
//! and the live dashboard). Off unless configured; loopback clients only unless `allow` says
//! otherwise; an optional bearer token. The model type, its raw (serde) form and the checks
//! that need more than one key live together here.

use std::net::SocketAddr;

use serde::Deserialize;
use toml::Spanned;

use crate::error::ConfigError;
use crate::raw::Parsed;
use crate::values::is_token;

/// `[admin]`.
#[derive(Clone, PartialEq)]
pub struct AdminConfig {
    /// `listen`: where the admin listener is bound.
    pub listen: SocketAddr,
    /// `allow`: clients that may use it; others get 403 (loopback by default).
    pub allow: Vec<ipnet::IpNet>,
    /// `token`: when set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// `tag_fields`: response fields whose values name the tags `POST /purge` can remove
    /// objects by (Fastly's `Surrogate-Key`, Cloudflare's `Cache-Tag`), space- or
    /// comma-separated.
    pub tag_fields: Vec<String>,
}

impl std::fmt::Debug for AdminConfig {
    /// The token is a secret: never printed (`GET /config`, `{:?}` in logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig")
            .field("listen", &self.listen)
            .field("allow", &self.allow)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tag_fields", &self.tag_fields)
            .finish()
    }
}

/// Who may reach the admin listener by default: this host only.
pub(crate) const DEFAULT_ADMIN_ALLOW: [&str; 2] = ["127.0.0.0/8", "::1/128"];

/// The tag fields by default.
const DEFAULT_TAG_FIELDS: [&str; 2] = ["Surrogate-Key", "Cache-Tag"];

/// Shortest token accepted: a guessable one protects nothing.
const MIN_TOKEN_LEN: usize = 16;

impl AdminConfig {
    /// The admin listener at `listen` with every default (the quick starts' `--admin ADDR`).
    pub fn at(listen: SocketAddr) -> AdminConfig {
        AdminConfig {
            listen,
            allow: default_allow(),
            token: None,
            tag_fields: DEFAULT_TAG_FIELDS.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Whether `client` may use the admin listener (IPv4-mapped IPv6 checked as IPv4).
    pub fn allows(&self, client: std::net::IpAddr) -> bool {
        let client = match client {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(client, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|net| net.contains(&client))
    }
}

fn default_allow() -> Vec<ipnet::IpNet> {
    DEFAULT_ADMIN_ALLOW
        .iter()
        .filter_map(|net| net.parse().ok())
        .collect()
}

/// `[admin]` as serde sees it.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdmin {
    pub listen: Spanned<Parsed<SocketAddr>>,
    #[serde(default)]
    pub allow: Option<Vec<Parsed<ipnet::IpNet>>>,
    #[serde(default)]
    pub token: Option<Spanned<String>>,
    #[serde(default)]
    pub tag_fields: Option<Spanned<Vec<String>>>,
}

/// The checks of `[admin]` that need more than one value: a token long enough and printable,
/// field names that are tokens, an address no `[[listen]]` uses.
pub(crate) fn resolve_admin(
    raw: Option<&RawAdmin>,
    listeners: &[SocketAddr],
    file: &str,
    text: &str,
) -> Result<Option<AdminConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let at = |span: std::ops::Range<usize>, key: &str, message: String| {
        ConfigError::at(
            file,
            text,
            Some(span),
            Some(format!("admin.{key}")),
            message,
        )
    };
    let listen = raw.listen.get_ref().0;
    if let Some(index) = listeners.iter().position(|a| *a == listen) {
        let why = format!("address {listen} is already used by listen[{index}]");
        return Err(at(raw.listen.span(), "listen", why));
    }
    let mut admin = AdminConfig::at(listen);
    if let Some(allow) = &raw.allow {
        admin.allow = allow.iter().map(|net| net.0).collect();
    }
    if let Some(token) = &raw.token {
        admin.token =
            Some(check_token(token.get_ref()).map_err(|why| at(token.span(), "token", why))?);
    }
    if let Some(fields) = &raw.tag_fields {
        for name in fields.get_ref() {
            if !is_token(name) {
                let why = format!(
                    "invalid field name \"{name}\" (expected an HTTP field name: letters, \
                     digits and !#$%&'*+-.^_`|~)"
                );
                return Err(at(fields.span(), "tag_fields", why));
            }
        }
        admin.tag_fields = fields.get_ref().clone();
    }
    Ok(Some(admin))
}

/// A bearer token (RFC 6750 §2.1's `b64token` characters) of at least 16 of them.
pub(crate) fn check_token(token: &str) -> Result<String, String> {
    let valid = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
    if !token.bytes().all(valid) {
        return Err("invalid token (expected letters, digits and -._~+/=)".into());
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "token too short ({} characters; at least {MIN_TOKEN_LEN})",
            token.len()
        ));
    }
    Ok(token.to_string())
}
