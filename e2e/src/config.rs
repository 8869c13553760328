//! Configuration files for the tests. Each helper writes only the sections it must, so a test
//! can append its own `[timeouts]`, `[limits]` or `[headers]` table without duplicating one.

use std::net::TcpListener;

/// A free `127.0.0.1:PORT`: bind port 0, read the port the kernel chose, release it.
pub fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let addr = listener.local_addr().expect("local address");
    format!("127.0.0.1:{}", addr.port())
}

/// One worker and a short drain keep the suite light on a two-core machine and quick to stop.
const SERVER: &str = "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n";

const ACCESS_LOG: &str = "[access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n";

/// A reverse proxy on `listen` with one catch-all route to `origins` (round-robin).
pub fn reverse_config(listen: &str, origins: &[&str]) -> String {
    format!(
        "{SERVER}[[listen]]\naddress = \"{listen}\"\nmode = \"reverse\"\n\n{ACCESS_LOG}\
         [[route]]\nhost = \"*\"\norigins = {}\nhost_header = \"pass\"\n\n",
        toml_strings(origins)
    )
}

/// A forward proxy on `listen` serving clients in `allow`, tunnelling CONNECT to `connect_ports`.
pub fn forward_config(listen: &str, allow: &[&str], connect_ports: &[u16]) -> String {
    let ports: Vec<String> = connect_ports.iter().map(u16::to_string).collect();
    format!(
        "{SERVER}[[listen]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n{ACCESS_LOG}\
         [forward]\nallow = {}\nconnect_ports = [{}]\n\n",
        toml_strings(allow),
        ports.join(", ")
    )
}

fn toml_strings(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_config_lists_every_origin() {
        let c = reverse_config("127.0.0.1:1", &["http://127.0.0.1:2", "http://127.0.0.1:3"]);
        assert!(c.contains("address = \"127.0.0.1:1\""));
        assert!(c.contains("origins = [\"http://127.0.0.1:2\", \"http://127.0.0.1:3\"]"));
        assert!(c.contains("mode = \"reverse\""));
    }

    #[test]
    fn forward_config_lists_allow_and_ports() {
        let c = forward_config("127.0.0.1:1", &["10.0.0.0/8"], &[443, 8443]);
        assert!(c.contains("allow = [\"10.0.0.0/8\"]"));
        assert!(c.contains("connect_ports = [443, 8443]"));
    }

    #[test]
    fn free_addr_is_bindable() {
        let addr = free_addr();
        assert!(TcpListener::bind(&addr).is_ok(), "{addr}");
    }
}
