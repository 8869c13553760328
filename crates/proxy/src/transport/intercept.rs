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
//! request: the pipeline only checks the Host header against it (`pipeline/intercepted.rs`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use sepia_config::Mode;
use socket2::{Domain, SockRef, Socket, Type};
use tokio::net::{TcpSocket, TcpStream};

/// Where an accepted connection was going, decided once when it is accepted. Behind an `Arc`
/// so that connections of the other modes (and parked ones) stay small, and a parked
/// intercepted connection resumes its session without allocating a copy. One word: with a
/// second one a parked connection's task grew from 256 to 384 bytes (`server::parked`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Divert {
    /// A forward or reverse listener: the client addressed Sepia itself.
    NotDiverted,
    /// A connection accepted by an interception listener.
    Intercepted(Arc<Interception>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interception {
    /// Where the intercepted connection goes.
    To(Diverted),
    /// The connection must not be served: every request on it is answered 403 with the reason.
    Refused(Refusal),
}

impl Divert {
    fn to(diverted: Diverted) -> Divert {
        Divert::Intercepted(Arc::new(Interception::To(diverted)))
    }

    fn refused(why: Refusal) -> Divert {
        Divert::Intercepted(Arc::new(Interception::Refused(why)))
    }
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
    pub fn detail(self) -> &'static str {
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
                return Divert::refused(Refusal::Direct);
            }
            Ok(dst) => dst,
            Err(e) => {
                tracing::warn!(%peer, "intercepted connection without an original destination: {e}");
                return Divert::refused(Refusal::NoOriginalDst);
            }
        },
        Mode::Tproxy => match stream.local_addr() {
            Ok(dst) => dst,
            Err(_) => return Divert::refused(Refusal::NoOriginalDst),
        },
    };
    if is_own_listener(dst, listen) {
        return Divert::refused(Refusal::Direct);
    }
    Divert::to(Diverted {
        dst: unmapped(dst),
        spoof_from: spoof_client.then(|| peer.ip().to_canonical()),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
            Divert::refused(Refusal::Direct)
        );
        // REDIRECT: no NAT entry (or one without rewrite) for a direct connection.
        assert!(matches!(
            divert(&stream, Mode::Intercept, listen, false, peer),
            Divert::Intercepted(i) if matches!(*i, Interception::Refused(_))
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
