//! CONNECT (RFC 9110 §9.3.6): the request names `host:port`; once allowed and connected, the
//! front end turns the exchange into a blind byte tunnel, and the connection ends with it.

use sepia_observe::ResultCode;

use super::context::Exchange;
use super::responder::Responder;
use crate::model::{split_authority, Outcome, RequestView};
use crate::upstream::Tally;

pub(super) async fn tunnel<C: Responder>(x: &mut Exchange<'_, C>) -> Outcome {
    let refuse = |status, detail| {
        let result = if status == 403 {
            ResultCode::TcpDenied
        } else {
            ResultCode::TcpTunnel
        };
        Outcome::local(status, detail).logged_as(result).closing()
    };
    // CONNECT's target is authority-form and must name a port (RFC 9112 §3.2.3).
    let Some(auth) = split_authority(x.cx.req.target()) else {
        return refuse(400, "CONNECT needs host:port");
    };
    let Some(port) = auth.port else {
        return refuse(400, "CONNECT needs host:port");
    };
    let config = &x.cx.state.config;
    if !config.forward.connect_ports.contains(&port) {
        return refuse(403, "CONNECT to this port is not allowed");
    }
    let Ok(host) = std::str::from_utf8(auth.host) else {
        return refuse(400, "invalid CONNECT host");
    };
    let ups = &x.cx.state.upstreams;
    let Ok(addrs) = ups.resolver.resolve(host, port).await else {
        return refuse(502, "the host name could not be resolved");
    };
    // A tunnel's connection is never pooled: it carries the client's own protocol.
    let Ok(origin) = ups.pool.connect(&addrs, None, None, Tally::Direct).await else {
        return refuse(502, "could not connect to the requested host");
    };
    let peer = origin.addr().ip();
    let outcome = Outcome::answered(200, ResultCode::TcpTunnel).closing();
    match x
        .client
        .tunnel(origin.conn, config.timeouts.tunnel_idle)
        .await
    {
        Ok(traffic) => {
            tracing::debug!(up = traffic.up, down = traffic.down, "tunnel closed");
            outcome.answered_by(peer)
        }
        Err(_) => outcome,
    }
}
