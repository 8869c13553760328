//! Transparent interception: connections that iptables/nftables diverted to Sepia although the
//! client addressed them to an origin server.
//!
//! * `intercept` listeners receive connections rewritten by a NAT REDIRECT rule; the address the
//!   client connected to is asked from conntrack with `SO_ORIGINAL_DST` (`IP6T_SO_ORIGINAL_DST`
//!   for IPv6).
//! * `tproxy` listeners are `IP_TRANSPARENT` sockets fed by a TPROXY rule: nothing is rewritten,
//!   so the accepted socket's local address *is* the original destination. With
//!   `spoof_client`, origin connections leave from the client's address (Squid's default).
//!
//! The origin contacted is always that original destination, never a host chosen from the
//! request: the Host header is only checked against it (Squid's `host_verify_strict`), so a
//! client cannot use an intercepting proxy to reach, or poison the cache for, another host.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use sepia_config::Mode;
use sepia_http1::RequestHead;
use socket2::{Domain, SockRef, Socket, Type};
use tokio::net::{TcpSocket, TcpStream};

use crate::client::local_error;
use crate::exchange::Outcome;
use crate::shared::Shared;
use crate::target::{split_authority, AbsoluteTarget};

/// Where an accepted connection was going, decided once when it is accepted. Behind an `Arc`
/// so that connections of the other modes (and parked ones) stay small, and a parked
/// intercepted connection resumes its session without allocating a copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Divert {
    /// A forward or reverse listener: the client addressed Sepia itself.
    NotDiverted,
    /// An intercepted connection and where it goes.
    To(Arc<Diverted>),
    /// An interception listener that must not serve this connection: every request on it is
    /// answered 403 with the reason.
    Refused(Refusal),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The client connected to the interception port itself: forwarding its request to the
    /// "original destination", Sepia's own port, would loop.
    Direct,
    /// REDIRECT left no NAT record for the connection.
    NoOriginalDst,
}

impl Refusal {
    fn detail(self) -> &'static str {
        match self {
            Refusal::Direct => {
                "this port serves only intercepted connections; \
                 connecting to it directly would make a forwarding loop"
            }
            Refusal::NoOriginalDst => "this port serves only intercepted (REDIRECTed) connections",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Diverted {
    /// The address the client connected to: the only origin this connection may reach.
    pub dst: SocketAddr,
    /// The client's address, when origin connections must be opened from it (spoofing).
    pub spoof_from: Option<IpAddr>,
}

/// Finds the original destination of a connection accepted on a listener bound to `listen`.
pub fn divert(
    stream: &TcpStream,
    mode: Mode,
    listen: SocketAddr,
    spoof_client: bool,
    peer: SocketAddr,
) -> Divert {
    let dst = match mode {
        Mode::Forward | Mode::Reverse => return Divert::NotDiverted,
        Mode::Intercept => match nat_original_dst(stream) {
            // Without a NAT rewrite conntrack reports the local address itself: the client
            // connected to the intercept port directly.
            Ok(dst) if stream.local_addr().ok() == Some(dst) => {
                return Divert::Refused(Refusal::Direct);
            }
            Ok(dst) => dst,
            Err(e) => {
                tracing::warn!(%peer, "intercepted connection without an original destination: {e}");
                return Divert::Refused(Refusal::NoOriginalDst);
            }
        },
        Mode::Tproxy => match stream.local_addr() {
            Ok(dst) => dst,
            Err(_) => return Divert::Refused(Refusal::NoOriginalDst),
        },
    };
    if is_own_listener(dst, listen) {
        return Divert::Refused(Refusal::Direct);
    }
    Divert::To(Arc::new(Diverted {
        dst: unmapped(dst),
        spoof_from: spoof_client.then(|| peer.ip().to_canonical()),
    }))
}

fn nat_original_dst(stream: &TcpStream) -> io::Result<SocketAddr> {
    let sock = SockRef::from(stream);
    let addr = if stream.local_addr()?.is_ipv6() {
        sock.original_dst_ipv6()?
    } else {
        sock.original_dst()?
    };
    addr.as_socket()
        .ok_or_else(|| io::Error::other("the original destination is not an IP address"))
}

/// Whether `dst` is the listening socket itself: the listener's own address, or, for a
/// wildcard listener, its port on an address of this host.
fn is_own_listener(dst: SocketAddr, listen: SocketAddr) -> bool {
    if dst.port() != listen.port() {
        return false;
    }
    if listen.ip().is_unspecified() {
        // A non-transparent bind succeeds only on a local address. Costs two syscalls, and only
        // for destinations on the listener's port, which diverted traffic rarely has.
        return std::net::UdpSocket::bind((dst.ip(), 0)).is_ok();
    }
    unmapped(dst).ip() == listen.ip().to_canonical()
}

fn unmapped(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// An unconnected socket bound to the client's address `source` (not an address of this host;
/// `IP_TRANSPARENT` allows it and needs CAP_NET_ADMIN), ready to connect to `dst`. The origin's
/// replies come back to Sepia only when the router diverts them with a `-m socket` rule.
pub fn spoofed_socket(source: IpAddr, dst: SocketAddr) -> io::Result<TcpSocket> {
    if source.is_ipv4() != dst.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "client and origin addresses are of different IP versions",
        ));
    }
    let socket = Socket::new(Domain::for_address(dst), Type::STREAM, None)?;
    socket.set_ip_transparent(true)?;
    socket.bind(&SocketAddr::new(source, 0).into())?;
    socket.set_nonblocking(true)?;
    Ok(TcpSocket::from_std_stream(socket.into()))
}

/// Where a request that arrived on an interception listener goes: its Host (or absolute-form
/// authority), its origin-form target and its only origin, the original destination, once
/// the Host has been verified against that destination. `Err` is the answer instead.
///
/// The caller passes these to the cache itself, like the other modes: measured, that keeps
/// the connection's task smaller than any wrapper future does.
pub async fn route(
    shared: &Shared,
    divert: &Divert,
    req: &RequestHead,
    absolute: Option<AbsoluteTarget>,
    no_body_pending: bool,
) -> Result<(Bytes, Bytes, Diverted), Outcome> {
    let diverted = match divert {
        Divert::To(d) => **d,
        Divert::Refused(why) => return Err(local_error(403, why.detail(), false)),
        Divert::NotDiverted => {
            return Err(local_error(500, "not an intercepted connection", false))
        }
    };
    // Clients that believe they talk to the origin send origin-form; absolute-form is accepted
    // too (RFC 9112 §3.2.2) and its authority then stands for Host.
    let (host, origin_form): (Bytes, Bytes) = match absolute {
        Some(t) => (t.authority, t.origin_form),
        None => match req.host() {
            Some(h) => (req.raw().slice_ref(h), req.raw().slice_ref(req.target())),
            None => return Err(local_error(409, HOST_MISSING, no_body_pending)),
        },
    };
    if let Err(why) = verify_host(shared, &host, diverted.dst).await {
        // Squid answers 409 Conflict too: the request is neither routed elsewhere nor cached.
        return Err(local_error(409, why, no_body_pending));
    }
    Ok((host, origin_form, diverted))
}

const HOST_MISSING: &str = "an intercepted request needs a Host header";

/// Squid's `host_verify_strict`: the Host (or absolute-form authority) must name the address
/// the connection was really going to. An IP literal must be that IP; a name must resolve to
/// it. The port, given or http's default 80, must be the destination's.
async fn verify_host(
    shared: &Shared,
    host_value: &[u8],
    dst: SocketAddr,
) -> Result<(), &'static str> {
    match check_literal(host_value, dst)? {
        HostKind::Literal => Ok(()),
        HostKind::Name(name) => {
            // Boxed: the resolver's future is large and would enlarge every connection's task;
            // resolving allocates anyway.
            let addrs = Box::pin(shared.resolver.resolve(name, dst.port()))
                .await
                .map_err(|_| "the Host name could not be resolved to verify it")?;
            if addrs.iter().any(|a| a.ip().to_canonical() == dst.ip()) {
                Ok(())
            } else {
                Err("the Host name does not resolve to the address the connection was sent to")
            }
        }
    }
}

enum HostKind<'a> {
    /// An IP literal equal to the destination.
    Literal,
    /// A name still to be resolved.
    Name(&'a str),
}

/// Everything about a Host value that can be checked without DNS.
fn check_literal(host_value: &[u8], dst: SocketAddr) -> Result<HostKind<'_>, &'static str> {
    let auth = split_authority(host_value).ok_or("invalid Host header")?;
    if auth.port.unwrap_or(80) != dst.port() {
        return Err("the Host port is not the port the connection was sent to");
    }
    let host = std::str::from_utf8(auth.host).map_err(|_| "invalid Host header")?;
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.to_canonical() == dst.ip() => Ok(HostKind::Literal),
        Ok(_) => Err("the Host address is not the address the connection was sent to"),
        Err(_) => Ok(HostKind::Name(host)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_literals_must_match_the_destination() {
        let v4: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let v6: SocketAddr = "[fd00::2]:8080".parse().unwrap();
        let ok: &[(&str, SocketAddr)] = &[
            ("10.0.0.2", v4),
            ("10.0.0.2:80", v4),
            ("10.0.0.2:", v4),
            ("[fd00::2]:8080", v6),
            ("[FD00:0::2]:8080", v6),
        ];
        for (host, dst) in ok {
            assert!(
                matches!(check_literal(host.as_bytes(), *dst), Ok(HostKind::Literal)),
                "{host}"
            );
        }
        let bad: &[(&str, SocketAddr)] = &[
            ("10.0.0.3", v4),
            ("10.0.0.2:81", v4),
            ("[fd00::2]", v6),
            ("[fd00::3]:8080", v6),
            ("10.0.0.2:8080", v6),
            ("", v4),
            ("a b", v4),
        ];
        for (host, dst) in bad {
            assert!(check_literal(host.as_bytes(), *dst).is_err(), "{host}");
        }
    }

    #[test]
    fn host_names_are_left_to_resolution_but_ports_checked_first() {
        let dst: SocketAddr = "10.0.0.2:80".parse().unwrap();
        assert!(matches!(
            check_literal(b"Origin.Example", dst),
            Ok(HostKind::Name("Origin.Example"))
        ));
        assert!(matches!(
            check_literal(b"origin.example:80", dst),
            Ok(HostKind::Name("origin.example"))
        ));
        assert!(check_literal(b"origin.example:8080", dst).is_err());
    }

    #[test]
    fn own_listener_is_recognised() {
        let listen: SocketAddr = "127.0.0.1:3129".parse().unwrap();
        assert!(is_own_listener("127.0.0.1:3129".parse().unwrap(), listen));
        assert!(!is_own_listener("127.0.0.1:80".parse().unwrap(), listen));
        assert!(!is_own_listener("10.9.9.9:3129".parse().unwrap(), listen));
        let any: SocketAddr = "0.0.0.0:3129".parse().unwrap();
        assert!(is_own_listener("127.0.0.1:3129".parse().unwrap(), any));
        // 192.0.2.0/24 (TEST-NET-1) is nobody's local address.
        assert!(!is_own_listener("192.0.2.1:3129".parse().unwrap(), any));
        assert!(!is_own_listener("127.0.0.1:3130".parse().unwrap(), any));
    }

    #[tokio::test]
    async fn a_direct_connection_to_an_interception_port_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listen = listener.local_addr().unwrap();
        let _client = TcpStream::connect(listen).await.unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        // TPROXY: the local address is the destination, here the listener itself.
        assert_eq!(
            divert(&stream, Mode::Tproxy, listen, true, peer),
            Divert::Refused(Refusal::Direct)
        );
        // REDIRECT: no NAT entry (or one without rewrite) for a direct connection.
        assert!(matches!(
            divert(&stream, Mode::Intercept, listen, false, peer),
            Divert::Refused(_)
        ));
        assert_eq!(
            divert(&stream, Mode::Forward, listen, false, peer),
            Divert::NotDiverted
        );
    }

    #[test]
    fn spoofing_needs_matching_ip_versions() {
        let err = spoofed_socket("10.0.0.1".parse().unwrap(), "[::1]:80".parse().unwrap())
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
