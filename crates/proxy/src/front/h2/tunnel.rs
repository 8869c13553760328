//! CONNECT over HTTP/2 (RFC 9113 §8.5): after the 2xx, the stream's DATA frames carry the
//! tunnel's bytes both ways until either side ends or nothing moves for the idle limit. The
//! client's END_STREAM half-closes the origin connection, the origin's end ends the stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::send::send;
use crate::pipeline::Tunneled;
use crate::transport::Conn;

const TUNNEL_READ: usize = 16 * 1024;

/// Carries bytes until both directions end or none moves for `idle`.
pub async fn pump(
    body: &mut RecvStream,
    stream: &mut SendStream<Bytes>,
    mut origin: Conn,
    idle: Duration,
) -> Tunneled {
    let base = Instant::now();
    let last = AtomicU64::new(0);
    let moved = || last.store(base.elapsed().as_millis() as u64, Ordering::Relaxed);
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let (mut from_origin, mut to_origin) = origin.split();
    let upward = async {
        while let Some(Ok(data)) = body.data().await {
            let n = data.len();
            if to_origin.write_all(&data).await.is_err() {
                break;
            }
            let _ = body.flow_control().release_capacity(n);
            up.fetch_add(n as u64, Ordering::Relaxed);
            moved();
        }
        let _ = to_origin.shutdown().await;
    };
    let downward = async {
        let mut buf = BytesMut::new();
        loop {
            buf.reserve(TUNNEL_READ);
            match from_origin.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if send(stream, buf.split().freeze(), false, idle)
                        .await
                        .is_err()
                    {
                        return;
                    }
                    down.fetch_add(n as u64, Ordering::Relaxed);
                    moved();
                }
            }
        }
        let _ = send(stream, Bytes::new(), true, idle).await;
    };
    let watchdog = async {
        loop {
            let at = base + Duration::from_millis(last.load(Ordering::Relaxed)) + idle;
            if Instant::now() >= at {
                return;
            }
            tokio::time::sleep_until(at).await;
        }
    };
    tokio::select! {
        _ = async { tokio::join!(upward, downward) } => {}
        () = watchdog => tracing::debug!("h2 tunnel idle timeout"),
    }
    Tunneled {
        up: up.load(Ordering::Relaxed),
        down: down.load(Ordering::Relaxed),
    }
}
