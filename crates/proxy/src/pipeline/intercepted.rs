//! Where a request that arrived on an interception listener goes: its connection's original
//! destination and nothing else. The Host header is only checked against it (Squid's
//! `host_verify_strict`), so a client cannot use an intercepting proxy to reach, or poison the
//! cache for, another host.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;

use super::destination::Destination;
use crate::model::{split_authority, AbsoluteTarget, Outcome, RequestView, Scheme};
use crate::state::State;
use crate::transport::intercept::{Divert, Diverted, Interception};
use crate::upstream::{Origins, Upstream};

/// An intercepted request once its Host has been verified against the original destination:
/// its Host (or absolute-form authority), its origin-form target and its only origin.
pub struct Intercepted {
    scheme: Scheme,
    host: Bytes,
    target: Bytes,
    diverted: Diverted,
}

impl Intercepted {
    /// Verifies the request against the connection's original destination; `Err` is the
    /// answer instead.
    pub async fn find(
        state: &State,
        divert: &Divert,
        req: &impl RequestView,
        absolute: Option<AbsoluteTarget>,
        listener_scheme: Scheme,
    ) -> Result<Intercepted, Outcome> {
        let diverted = match divert {
            Divert::Intercepted(i) => match **i {
                Interception::To(d) => d,
                Interception::Refused(why) => {
                    return Err(Outcome::local(403, why.detail()).closing())
                }
            },
            Divert::NotDiverted => {
                return Err(Outcome::local(500, "not an intercepted connection").closing())
            }
        };
        // Clients that believe they talk to the origin send origin-form; absolute-form is
        // accepted too (RFC 9112 §3.2.2) and its authority then stands for Host.
        let (scheme, host, target) = match absolute {
            // The original destination is reached in clear text: an https URL sent there
            // would leave unprotected (RFC 9110 §4.2.2).
            Some(t) if t.scheme == Scheme::Https => {
                return Err(Outcome::local(
                    501,
                    "https:// URLs are not forwarded from interception listeners",
                ))
            }
            Some(t) => (t.scheme, t.authority, t.origin_form),
            None => match req.host() {
                Some(h) => (listener_scheme, req.share(h), req.share(req.target())),
                None => return Err(Outcome::local(409, HOST_MISSING)),
            },
        };
        if let Err(why) = verify_host(state, &host, scheme, diverted.dst).await {
            // Squid answers 409 Conflict too: the request is neither routed elsewhere nor cached.
            return Err(Outcome::local(409, why));
        }
        Ok(Intercepted {
            scheme,
            host,
            target,
            diverted,
        })
    }

    pub fn destination(&self) -> Destination<'_> {
        Destination {
            scheme: self.scheme,
            authority: &self.host,
            target: &self.target,
            upstream: Upstream {
                target: &self.target,
                host: Some(&self.host),
                origins: Origins::Diverted(&self.diverted),
            },
        }
    }
}

const HOST_MISSING: &str = "an intercepted request needs a Host header";

/// Squid's `host_verify_strict`: the Host (or absolute-form authority) must name the address
/// the connection was really going to. An IP literal must be that IP; a name must resolve to
/// it. The port, given or the scheme's default, must be the destination's.
async fn verify_host(
    state: &State,
    host_value: &[u8],
    scheme: Scheme,
    dst: SocketAddr,
) -> Result<(), &'static str> {
    match check_literal(host_value, scheme, dst)? {
        HostKind::Literal => Ok(()),
        HostKind::Name(name) => {
            // `resolve` boxes the resolver's large lookup itself.
            let addrs = state
                .upstreams
                .resolver
                .resolve(name, dst.port())
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
fn check_literal(
    host_value: &[u8],
    scheme: Scheme,
    dst: SocketAddr,
) -> Result<HostKind<'_>, &'static str> {
    let auth = split_authority(host_value).ok_or("invalid Host header")?;
    if auth.port.unwrap_or(scheme.default_port()) != dst.port() {
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
                matches!(
                    check_literal(host.as_bytes(), Scheme::Http, *dst),
                    Ok(HostKind::Literal)
                ),
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
            assert!(
                check_literal(host.as_bytes(), Scheme::Http, *dst).is_err(),
                "{host}"
            );
        }
    }

    #[test]
    fn host_names_are_left_to_resolution_but_ports_checked_first() {
        let dst: SocketAddr = "10.0.0.2:80".parse().unwrap();
        assert!(matches!(
            check_literal(b"Origin.Example", Scheme::Http, dst),
            Ok(HostKind::Name("Origin.Example"))
        ));
        assert!(matches!(
            check_literal(b"origin.example:80", Scheme::Http, dst),
            Ok(HostKind::Name("origin.example"))
        ));
        assert!(check_literal(b"origin.example:8080", Scheme::Http, dst).is_err());
    }
}
