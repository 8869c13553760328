//! The one seam the pipeline fetches through ([`fetch`], [`fetch_prepared`]): where the
//! request goes ([`reach`]: an HTTP/1.1 connection, or for a route with `http2` a stream of a
//! shared HTTP/2 connection where the origin speaks h2), then the exchange of that protocol.

use std::io;

use bytes::Bytes;
use sepia_observe::metrics::{self, Stamp};

use super::fetch_error::{AllDown, FetchError};
use super::h1::exchange::{self, Fetched, OriginRequest, Scratch, Sending};
use super::h2;
use super::h2::conns::Reached;
use super::health::Tally;
use super::origins::{OriginAddress, Origins, RouteOrigins};
use super::upstreams::{observed, Upstreams};
use crate::model::{BodyLength, Downstream, Method, RequestView, Version};

/// Sends the request (its content pulled from `client`) and reads the final response head.
pub async fn fetch<'s, R: RequestView, D: Downstream>(
    ups: &'s Upstreams,
    request: OriginRequest<'_, R>,
    client: &mut D,
    scratch: &'s mut Scratch,
) -> Result<Fetched<'s>, FetchError> {
    let up = request.upstream;
    let (reached, picked) = reach(ups, &up.origins)
        .await
        .map_err(FetchError::unreachable)?;
    scratch.head.clear();
    let authority = picked.map(|o| &o.authority[..]);
    let host = up.host.or(authority).unwrap_or_default();
    exchange::build_head(&mut scratch.head, ups, &request, host);
    let sending = Sending {
        method: request.req.method(),
        body: request.req.body(),
        // RFC 9112 §6.1: "A server MUST NOT send a response containing Transfer-Encoding
        // unless the corresponding request indicates HTTP/1.1 (or later minor revisions)."
        coded_ok: request.req.version() == Version::Http11,
        tally: tally_of(picked),
    };
    let timer = Timer::start(ups, &up.origins);
    let fetched = match reached {
        Reached::H1(origin) => exchange::exchange(ups, origin, sending, client, scratch).await,
        // Boxed: the h2 exchange's state stays out of every HTTP/1.1 request's future.
        Reached::H2(stream) => {
            Box::pin(h2::exchange::fetch(ups, stream, sending, client, scratch)).await
        }
    };
    timer.stop(&fetched);
    fetched
}

fn tally_of(picked: Option<&OriginAddress>) -> Tally<'_> {
    picked.map_or(Tally::Direct, |o| Tally::Origin(&o.status))
}

/// Times an exchange for `sepia_origin_latency_seconds`, when the admin listener counts: from
/// the request's sending to its response head (an upload of request content included).
struct Timer<'a> {
    started: Option<(Stamp, Option<&'a RouteOrigins>)>,
}

impl<'a> Timer<'a> {
    fn start(ups: &Upstreams, origins: &Origins<'a>) -> Timer<'a> {
        let route = match origins {
            Origins::Route(r) => Some(*r),
            _ => None,
        };
        let counting = ups.config.admin.is_some();
        Timer {
            started: counting.then(|| (Stamp::now(), route)),
        }
    }

    /// Counts an exchange that got a response head.
    fn stop<T>(self, fetched: &Result<T, FetchError>) {
        let (Some((start, route)), Ok(_)) = (self.started, fetched) else {
            return;
        };
        let micros = Stamp::now().micros_since(start);
        match route {
            Some(r) => r.latency.observe(micros),
            None => metrics::origin_latency(micros),
        }
    }
}

/// Sends a prepared GET (no content) to `origins` and reads the final response head.
pub async fn fetch_prepared<'s>(
    ups: &'s Upstreams,
    origins: &Origins<'_>,
    head: &Bytes,
    client: &mut impl Downstream,
    scratch: &'s mut Scratch,
) -> Result<Fetched<'s>, FetchError> {
    let (reached, picked) = reach(ups, origins).await.map_err(FetchError::unreachable)?;
    scratch.head.clear();
    scratch.head.extend_from_slice(head);
    let sending = Sending {
        method: Method::Get,
        body: BodyLength::None,
        // Nobody receives it: a background revalidation only stores, which a transfer-coded
        // body never is (`end_is_certain`).
        coded_ok: true,
        tally: tally_of(picked),
    };
    let timer = Timer::start(ups, origins);
    let fetched = match reached {
        Reached::H1(origin) => exchange::exchange(ups, origin, sending, client, scratch).await,
        Reached::H2(stream) => {
            Box::pin(h2::exchange::fetch(ups, stream, sending, client, scratch)).await
        }
    };
    timer.stop(&fetched);
    fetched
}

/// Where a request goes: a connection from [`Upstreams::obtain`], or for a route with
/// `http2` a stream of a shared HTTP/2 connection where the origin speaks h2; with the
/// route's origin reached.
pub async fn reach<'o>(
    ups: &Upstreams,
    origins: &Origins<'o>,
) -> io::Result<(Reached, Option<&'o OriginAddress>)> {
    match origins {
        // Boxed: the h2 connection set's state stays out of HTTP/1.1 requests' futures.
        Origins::Route(route) if route.http2 => Box::pin(reach_http2(ups, route)).await,
        _ => {
            let (conn, picked) = ups.obtain(origins).await?;
            Ok((Reached::H1(conn), picked))
        }
    }
}

/// [`Upstreams::obtain`] for an `http2` route: the same failover, through the h2 set.
async fn reach_http2<'o>(
    ups: &Upstreams,
    route: &'o RouteOrigins,
) -> io::Result<(Reached, Option<&'o OriginAddress>)> {
    let n = route.origins.len();
    let start = route.start();
    let mut last = None;
    for i in 0..n {
        let origin = &route.origins[(start + i) % n];
        if !origin.status.health.usable(route.health.down_for) {
            continue;
        }
        let reached = match origin.addrs(&ups.resolver).await {
            Ok(addrs) => {
                let tally = Tally::Origin(&origin.status);
                let tls = origin.tls.as_ref();
                ups.h2.reach(&ups.pool, addrs.as_slice(), tls, tally).await
            }
            Err(e) => Err(e),
        };
        match observed(route, origin, reached) {
            Ok(r) => return Ok((r, Some(origin))),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| AllDown::error(route.health.down_for)))
}
