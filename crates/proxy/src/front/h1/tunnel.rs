//! A CONNECT tunnel's byte pipe (RFC 9110 §9.3.6): after the 2xx, the client connection carries
//! bytes both ways to the origin until either side closes or no byte moves for `tunnel_idle`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

const TUNNEL_BUF: usize = 16 * 1024;

/// One connection's two directions.
pub struct Ends<R, W> {
    pub read: R,
    pub write: W,
}

/// Copies both ways until both directions end or nothing moves for `idle`; `early` (bytes the
/// client sent right after its CONNECT head) goes to the origin first, under the same idle
/// limit as everything else, so an origin that never reads cannot hold the tunnel open.
/// Returns (client→origin, origin→client) byte counts.
pub async fn pipe<CR, CW, OR, OW>(
    client: Ends<CR, CW>,
    origin: Ends<OR, OW>,
    early: &[u8],
    idle: Duration,
) -> (u64, u64)
where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    OR: AsyncRead + Unpin,
    OW: AsyncWrite + Unpin,
{
    let activity = Activity {
        base: Instant::now(),
        last: AtomicU64::new(0),
    };
    let (mut cr, mut cw) = (client.read, client.write);
    let (mut or, mut ow) = (origin.read, origin.write);
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let both = async {
        tokio::join!(
            pump(&mut cr, &mut ow, early, &activity, &up),
            pump(&mut or, &mut cw, &[], &activity, &down)
        )
    };
    let watchdog = async {
        loop {
            let deadline = activity.last_at() + idle;
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

/// When bytes last moved either way.
struct Activity {
    base: Instant,
    /// Milliseconds after `base`.
    last: AtomicU64,
}

impl Activity {
    fn moved(&self) {
        let since = self.base.elapsed().as_millis() as u64;
        self.last.store(since, Ordering::Relaxed);
    }

    fn last_at(&self) -> Instant {
        self.base + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

/// One direction: `first`, then read, write, note the activity; on EOF or a failed write pass
/// the half-close on.
async fn pump<R, W>(r: &mut R, w: &mut W, first: &[u8], activity: &Activity, count: &AtomicU64)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    if first.is_empty() || forward(w, first, activity, count).await {
        let mut buf = vec![0u8; TUNNEL_BUF];
        loop {
            let n = match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !forward(w, &buf[..n], activity, count).await {
                break;
            }
        }
    }
    let _ = w.shutdown().await;
}

/// Writes `bytes` whole, counting them and noting the activity; false when the write failed.
async fn forward<W: AsyncWrite + Unpin>(
    w: &mut W,
    bytes: &[u8],
    activity: &Activity,
    count: &AtomicU64,
) -> bool {
    // Flushed: TLS may hold written bytes back until asked (plain TCP flushes nothing).
    if w.write_all(bytes).await.is_err() || w.flush().await.is_err() {
        return false;
    }
    count.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    activity.moved();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends of an in-memory connection whose peer is `peer`.
    fn ends(
        capacity: usize,
    ) -> (
        Ends<
            tokio::io::ReadHalf<tokio::io::DuplexStream>,
            tokio::io::WriteHalf<tokio::io::DuplexStream>,
        >,
        tokio::io::DuplexStream,
    ) {
        let (near, peer) = tokio::io::duplex(capacity);
        let (read, write) = tokio::io::split(near);
        (Ends { read, write }, peer)
    }

    #[tokio::test(start_paused = true)]
    async fn early_bytes_to_an_origin_that_never_reads_end_with_the_idle_limit() {
        let (client, _client_peer) = ends(1024);
        // The origin's side holds 64 bytes and is never read.
        let (origin, _origin_peer) = ends(64);
        let early = vec![b'x'; 10_000];
        let idle = Duration::from_secs(5);
        let started = Instant::now();
        let piped =
            tokio::time::timeout(Duration::from_secs(60), pipe(client, origin, &early, idle));
        let (up, down) = piped.await.expect("the tunnel closed at its idle limit");
        assert!(started.elapsed() <= idle + Duration::from_secs(1));
        assert!(
            up < early.len() as u64,
            "the origin never took the early bytes"
        );
        assert_eq!(down, 0);
    }

    #[tokio::test]
    async fn bytes_flow_both_ways_early_ones_first() {
        let (client, mut client_peer) = ends(1024);
        let (origin, mut origin_peer) = ends(1024);
        let piping =
            tokio::spawn(
                async move { pipe(client, origin, b"early|", Duration::from_secs(5)).await },
            );
        client_peer.write_all(b"later").await.unwrap();
        client_peer.shutdown().await.unwrap();
        let mut got = Vec::new();
        origin_peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"early|later");
        origin_peer.write_all(b"reply").await.unwrap();
        drop(origin_peer);
        let mut back = Vec::new();
        client_peer.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"reply");
        assert_eq!(piping.await.unwrap(), (11, 5));
    }
}
