//! What the proxy knows about the client of a connection, computed once when it is accepted.

use std::net::{IpAddr, SocketAddr};

/// The client's address and its forms in the fields Sepia adds toward origins.
#[derive(Debug)]
pub struct ClientInfo {
    pub peer: SocketAddr,
    /// The client's address as text, for X-Forwarded-For (an IPv4-mapped IPv6 address as IPv4).
    pub ip_text: String,
    /// The RFC 7239 `for=` value (IPv6 quoted and bracketed, §6).
    pub forwarded_for: String,
}

impl ClientInfo {
    pub fn new(peer: SocketAddr) -> ClientInfo {
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer.ip(), IpAddr::V4),
            v4 => v4,
        };
        let forwarded_for = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("\"[{v6}]\""),
        };
        ClientInfo {
            peer,
            ip_text: ip.to_string(),
            forwarded_for,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_forwarded_for_is_quoted_and_mapped_addresses_are_ipv4() {
        let c = ClientInfo::new("[2001:db8::1]:5".parse().unwrap());
        assert_eq!(c.forwarded_for, "\"[2001:db8::1]\"");
        let mapped = ClientInfo::new("[::ffff:192.0.2.1]:5".parse().unwrap());
        assert_eq!(mapped.ip_text, "192.0.2.1");
        assert_eq!(mapped.forwarded_for, "192.0.2.1");
    }
}
