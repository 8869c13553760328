//! Black-box test harness for Sepia: starts the **real** `sepia` binary, a **real** origin
//! server written with std threads, and talks to both with real clients (curl through
//! `std::process::Command`, raw TCP for malformed input and pipelining).
//!
//! Nothing here links the proxy crates: the tests see Sepia exactly as a user does, through its
//! command line, its configuration file, its sockets and its access log.
//!
//! * [`Sepia`]: the binary under test (config file or quick-start CLI), killed on drop.
//! * [`Origin`]: an HTTP/1.1 origin whose behaviour is chosen by path (`/echo`, `/bytes/N`,
//!   `/chunked/N`, `/close/N`, `/hang`, `/die-mid-body`, ...) and which records what it saw.
//! * [`EchoServer`]: a raw TCP echo server, the far end of CONNECT tunnels.
//! * [`RawClient`] / [`Response`]: a byte-exact client that can send anything.
//! * [`SquidLine`]: a Squid native access-log line, split and checked field by field.
//! * [`Squid`]: a real Squid (Debian's package) in a temporary directory, for comparisons.
//! * [`curl`]: runs `/usr/bin/curl` and collects status, headers and body.
//! * [`fixtures`]: the usual origin + proxy pairs (`reverse()`, `forward()`, `..._with(extra)`).
//! * [`netns`]: client, router and origin network namespaces for the interception tests.
//! * [`TestCert`]: certificates made at test time with `openssl`; [`served_subject`] asks which
//!   one a server name gets; [`python`] runs scripted clients (Python's `ssl`).
//! * [`TlsOrigin`]: an https origin (Python's `ssl` in front of an [`Origin`]) that reports its
//!   connections and resumed sessions.
//!
//! The tests live in `tests/` by area: `reverse`, `forward`, `headers`, `malformed`,
//! `timeouts`, `streaming`, `cli`, `access_log`, `log_result_codes`, `squid_log`, `cache`,
//! `access` (ACLs and http_access), `import_squid` (`sepia import-squid`, beside a real Squid), `auth_config`, `proxy_auth`, `intercept`, `ipv6`, `tls`,
//! `origin_tls`, `packaging` (`--version`, man pages, completions, the systemd unit, sd_notify,
//! JSON event log), `h2` (the HTTP/2 front end, with `scripts/h2_attacks.py` for hand-framed
//! attacks).
//! `$SEPIA_BIN` overrides the binary under test.

mod binary;
mod config;
mod curl;
mod echo;
pub mod fixtures;
mod h2_origin;
mod message;
pub mod netns;
mod origin;
mod origin_cache_routes;
mod origin_range_routes;
mod origin_routes;
mod pattern;
mod raw_client;
mod squid;
mod squid_line;
mod tls;
mod tls_origin;

pub use binary::{sepia_bin, Sepia};
pub use config::{forward_config, free_addr, reverse_config};
pub use curl::{curl, curl_in_netns, CurlOutput};
pub use echo::EchoServer;
pub use h2_origin::{NginxEntry, NginxOrigin};
pub use message::{Header, Response};
pub use origin::{Origin, RecordedRequest};
pub use origin_cache_routes::{just_after_a_second_starts, REVALIDATE_BODY};
pub use pattern::{fill_pattern, keyed_body, pattern, sha256_hex};
pub use raw_client::RawClient;
pub use squid::Squid;
pub use squid_line::SquidLine;
pub use tls::{openssl_with_input, python, served_subject, TestCert};
pub use tls_origin::{FrontSeen, TlsOrigin};

use std::time::{Duration, Instant};

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
///
/// Tests wait with this instead of fixed sleeps so that they are fast on an idle machine and
/// still pass on a loaded two-core one.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_reports_success_and_timeout() {
        let mut calls = 0;
        assert!(wait_until(Duration::from_secs(1), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        let start = Instant::now();
        assert!(!wait_until(Duration::from_millis(50), || false));
        assert!(start.elapsed() >= Duration::from_millis(50));
    }
}
