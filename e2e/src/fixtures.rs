//! The usual pairings of origin and proxy, so each test states only what is particular to it.

use std::time::Duration;

use crate::{curl, forward_config, free_addr, reverse_config, wait_until, Origin, Sepia};

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

/// Sepia from `config` with an `[admin]` listener on a free address appended (after
/// `admin_extra`, more admin keys), started and answering; returns the admin base URL too.
pub fn with_admin(config: &str, admin_extra: &str) -> (Sepia, String) {
    let admin = free_addr();
    let config = format!("{config}[admin]\nlisten = \"{admin}\"\n{admin_extra}\n");
    let sepia = Sepia::start(&config);
    let base = format!("http://{admin}");
    let health = format!("{base}/health");
    assert!(
        wait_until(Duration::from_secs(10), || curl(&[&health]).status != 0),
        "the admin listener did not answer"
    );
    (sepia, base)
}
