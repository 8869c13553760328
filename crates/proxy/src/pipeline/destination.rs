//! Where a request goes, by the kind of listener it arrived on: the URL it names (what the
//! cache key is made of) and how it is sent upstream. Forward requests name their origin in an
//! absolute URL; reverse requests are routed by Host to a `[[route]]`'s origins; intercepted
//! ones go to their connection's original destination (`intercepted.rs`).

use sepia_config::HostHeader;

use crate::model::{split_authority, AbsoluteTarget, Outcome, RequestView, Scheme};
use crate::state::State;
use crate::upstream::{Origins, Upstream};

/// A request's URL (scheme, authority, origin-form: the cache key, RFC 9111 §2) and how it is
/// sent upstream. Borrowed from the request head or its parsed absolute target, so that a
/// cache hit takes no reference count for them.
pub struct Destination<'a> {
    pub scheme: Scheme,
    pub authority: &'a [u8],
    pub target: &'a [u8],
    pub upstream: Upstream<'a>,
}

/// A forward-mode request: the absolute URL's authority is the origin, and replaces any Host
/// received (RFC 9112 §3.2.2); an `https://` URL's origin is reached over TLS and verified
/// for its host (RFC 9110 §4.2.2).
pub fn forward(absolute: Option<&AbsoluteTarget>) -> Result<Destination<'_>, Outcome> {
    let Some(target) = absolute else {
        return Err(Outcome::local(
            400,
            "a proxy request needs an absolute http:// or https:// URL",
        ));
    };
    let invalid = || Outcome::local(400, "invalid host in the request URL").closing();
    let auth = split_authority(&target.authority).ok_or_else(invalid)?;
    let host = std::str::from_utf8(auth.host).map_err(|_| invalid())?;
    Ok(Destination {
        scheme: target.scheme,
        authority: &target.authority,
        target: &target.origin_form,
        upstream: Upstream {
            target: &target.origin_form,
            host: Some(&target.authority),
            origins: Origins::Host {
                host,
                port: auth.port.unwrap_or(target.scheme.default_port()),
                tls: target.scheme == Scheme::Https,
            },
        },
    })
}

/// A reverse-mode request: its Host (or absolute-form authority) picks the route.
pub fn reverse<'a>(
    state: &'a State,
    req: &'a impl RequestView,
    absolute: Option<&'a AbsoluteTarget>,
    listener_scheme: Scheme,
) -> Result<Destination<'a>, Outcome> {
    let (scheme, host_value, origin_form): (Scheme, &[u8], &[u8]) = match absolute {
        Some(t) => (t.scheme, &t.authority, &t.origin_form),
        None => match req.host() {
            Some(h) => (listener_scheme, h, req.target()),
            None => return Err(Outcome::local(400, "missing Host").closing()),
        },
    };
    let Some(auth) = split_authority(host_value) else {
        return Err(Outcome::local(400, "invalid Host").closing());
    };
    let config = &state.config;
    let Some(route) = config.route_for_host(auth.host) else {
        return Err(Outcome::local(404, "no route for this host"));
    };
    let Some(i) = config.routes.iter().position(|r| std::ptr::eq(r, route)) else {
        return Err(Outcome::local(404, "no route for this host"));
    };
    let host = match &route.host_header {
        HostHeader::Pass => Some(host_value),
        HostHeader::Origin => None,
        HostHeader::Fixed(v) => Some(v.as_bytes()),
    };
    Ok(Destination {
        scheme,
        authority: host_value,
        target: origin_form,
        upstream: Upstream {
            target: origin_form,
            host,
            origins: Origins::Route(&state.upstreams.routes[i]),
        },
    })
}
