//! CONNECT tunnels (RFC 9110 §9.3.6): after a 2xx, the connection becomes a blind byte pipe
//! to the requested authority until either side closes or no byte moves for `tunnel_idle`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sepia_http1::RequestHead;
use sepia_observe::ResultCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::client::ClientSide;
use crate::errors::CONNECT_ESTABLISHED;
use crate::exchange::Outcome;
use crate::io::write_parts_within;
use crate::shared::Shared;
use crate::target::split_authority;

const TUNNEL_BUF: usize = 16 * 1024;

pub async fn connect(shared: &Shared, cs: &mut ClientSide, req: &RequestHead) -> Outcome {
    let fail = |status, detail| Outcome {
        status,
        bytes_sent: 0,
        keep_client: false,
        result: if status == 403 {
            ResultCode::TcpDenied
        } else {
            ResultCode::TcpTunnel
        },
        peer: None,
        content_type: None,
        local: Some((status, detail)),
        body_complete: false,
    };
    // CONNECT's target is authority-form and must name a port (RFC 9112 §3.2.3).
    let Some(auth) = split_authority(req.target()) else {
        return fail(400, "CONNECT needs host:port");
    };
    let Some(port) = auth.port else {
        return fail(400, "CONNECT needs host:port");
    };
    if !shared.config.forward.connect_ports.contains(&port) {
        return fail(403, "CONNECT to this port is not allowed");
    }
    let Ok(host) = std::str::from_utf8(auth.host) else {
        return fail(400, "invalid CONNECT host");
    };
    let addrs = match shared.resolver.resolve(host, port).await {
        Ok(a) => a,
        Err(_) => return fail(502, "the host name could not be resolved"),
    };
    let mut origin = match shared.pool.connect(&addrs).await {
        Ok(c) => c,
        Err(_) => return fail(502, "could not connect to the requested host"),
    };
    let t = &shared.config.timeouts;
    if write_parts_within(&mut cs.stream, &[CONNECT_ESTABLISHED], t.client_idle)
        .await
        .is_err()
    {
        return Outcome {
            keep_client: false,
            local: None,
            body_complete: false,
            ..fail(200, "")
        };
    }
    // Bytes the client sent right after its CONNECT head belong to the tunnel.
    let early = cs.buf.split();
    let (up, down) = pipe(&mut cs.stream, &mut origin.stream, &early, t.tunnel_idle).await;
    tracing::debug!(up, down, "tunnel closed");
    Outcome {
        status: 200,
        bytes_sent: CONNECT_ESTABLISHED.len() as u64 + down,
        keep_client: false,
        result: ResultCode::TcpTunnel,
        peer: Some(origin.addr.ip()),
        content_type: None,
        local: None,
        body_complete: false,
    }
}

/// Copies both ways until both directions end or nothing moves for `idle`.
/// Returns (client→origin, origin→client) byte counts.
async fn pipe(
    client: &mut tokio::net::TcpStream,
    origin: &mut tokio::net::TcpStream,
    early: &[u8],
    idle: Duration,
) -> (u64, u64) {
    let base = Instant::now();
    let last = AtomicU64::new(0);
    let (mut cr, mut cw) = client.split();
    let (mut or, mut ow) = origin.split();
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    if !early.is_empty() {
        if ow.write_all(early).await.is_err() {
            return (0, 0);
        }
        up.fetch_add(early.len() as u64, Ordering::Relaxed);
    }
    let both = async {
        tokio::join!(
            pump(&mut cr, &mut ow, &last, &up, base),
            pump(&mut or, &mut cw, &last, &down, base)
        )
    };
    let watchdog = async {
        loop {
            let since = Duration::from_millis(last.load(Ordering::Relaxed));
            let deadline = base + since + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    tokio::select! {
        _ = both => {}
        _ = watchdog => tracing::debug!("tunnel idle timeout"),
    }
    (up.load(Ordering::Relaxed), down.load(Ordering::Relaxed))
}

/// One direction: read, write, note the activity; on EOF pass the half-close on.
async fn pump<R, W>(r: &mut R, w: &mut W, last: &AtomicU64, count: &AtomicU64, base: Instant)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; TUNNEL_BUF];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if w.write_all(&buf[..n]).await.is_err() {
            break;
        }
        count.fetch_add(n as u64, Ordering::Relaxed);
        last.store(base.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    let _ = w.shutdown().await;
}
