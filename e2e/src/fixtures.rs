//! The usual pairings of origin and proxy, so each test states only what is particular to it.

use crate::{forward_config, free_addr, reverse_config, Origin, Sepia};

/// A test origin and a reverse proxy in front of it; `extra_toml` is appended to the config
/// (e.g. a `[timeouts]` table).
pub fn reverse_with(extra_toml: &str) -> (Origin, Sepia) {
    let origin = Origin::start();
    let url = origin.url();
    let config = reverse_config(&free_addr(), &[&url]) + extra_toml;
    let sepia = Sepia::start(&config);
    (origin, sepia)
}

/// A test origin and a reverse proxy with the default settings.
pub fn reverse() -> (Origin, Sepia) {
    reverse_with("")
}

/// A test origin and a forward proxy allowing loopback clients and CONNECT to `connect_ports`.
pub fn forward_with(connect_ports: &[u16], extra_toml: &str) -> (Origin, Sepia) {
    let origin = Origin::start();
    let config =
        forward_config(&free_addr(), &["127.0.0.0/8", "::1/128"], connect_ports) + extra_toml;
    let sepia = Sepia::start(&config);
    (origin, sepia)
}

/// A test origin and a forward proxy with the default settings (CONNECT to 443 only).
pub fn forward() -> (Origin, Sepia) {
    forward_with(&[443], "")
}
