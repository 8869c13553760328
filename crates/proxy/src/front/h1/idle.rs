//! A client connection waiting for its next request: parked after `IDLE_RELEASE` without one;
//! when the server shuts down (or hands over to a new binary), given `LAST_REQUEST_WAIT` for
//! a request already on its way, then closed.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

use crate::state::shutdown::Shutdown;
use crate::transport::Conn;

/// How long an idle keep-alive connection keeps its buffers and task (one to two of these, see
/// `IdleWait`). A busy client sends its next request well within this; after it, the
/// connection is parked (see `server::parked::Parked`): a socket and a small task, a few hundred bytes
/// instead of several KiB.
pub const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// How long a connection that was between requests when shutdown began still waits for one.
/// Closing it at once races the client's next request: sent before our FIN reached it, the
/// request is lost and the client sees the connection closed under it (it may retry, RFC
/// 9112 §9.3.1, but need not). A busy client sends within a round trip, and is then answered
/// with `Connection: close`; one silent this long was idle, and is closed.
const LAST_REQUEST_WAIT: Duration = Duration::from_millis(500);

pin_project_lite::pin_project! {
    /// The timer and shutdown waiter of a connection's waits for its next request, made once
    /// per connection rather than once per request: arming a timer for every wait (a clock
    /// read, an insertion into the timer wheel and a removal) and registering a shutdown
    /// waiter every time were a tenth of the user time of a keep-alive hit (perf, c=100).
    ///
    /// The timer is set `IDLE_RELEASE` ahead when armed. When it fires during a wait after
    /// requests were served since, it is set again from then: a connection is parked after
    /// one to two `IDLE_RELEASE`s without a request, which is all parking needs.
    pub(super) struct IdleWait {
        #[pin]
        timer: tokio::time::Sleep,
        #[pin]
        stop: OwnedNotified,
    }
}

pub(super) enum Waited {
    Readable,
    Idle,
    Closed,
    /// Shutdown began: see [`last_request`].
    Stopping,
}

/// After shutdown began: whether the client sends (or closes) within `LAST_REQUEST_WAIT`.
pub(super) async fn last_request(conn: &mut Conn) -> bool {
    let readable = std::future::poll_fn(|cx| conn.poll_read_ready(cx));
    matches!(
        tokio::time::timeout(LAST_REQUEST_WAIT, readable).await,
        Ok(Ok(()))
    )
}

/// Waits until the client sends its next request, the connection has been idle long enough to
/// be parked (or closed, when `client_idle` is shorter than `IDLE_RELEASE`), or the server
/// shuts down.
pub(super) async fn wait_for_request(
    conn: &mut Conn,
    shutdown: &Shutdown,
    active: &mut bool,
    client_idle: Duration,
    mut idle: Pin<&mut Option<IdleWait>>,
) -> Waited {
    let wait = IDLE_RELEASE.min(client_idle);
    // Below IDLE_RELEASE, `client_idle` closes the connection: that limit is kept exactly,
    // from the start of each wait (a clock read per request, in this rare configuration only).
    let parks = wait < client_idle;
    if let (false, Some(armed)) = (parks, idle.as_mut().as_pin_mut()) {
        armed.project().timer.reset(Instant::now() + wait);
    }
    std::future::poll_fn(|cx| {
        match conn.poll_read_ready(cx) {
            Poll::Ready(Ok(())) => return Poll::Ready(Waited::Readable),
            Poll::Ready(Err(_)) => return Poll::Ready(Waited::Closed),
            Poll::Pending => {}
        }
        if idle.is_none() {
            idle.set(Some(IdleWait {
                timer: tokio::time::sleep(wait),
                stop: shutdown.waiter(),
            }));
            // Read after the waiter exists: a shutdown that began before is seen here, one
            // that begins after wakes the waiter.
            if shutdown.has_begun() {
                return Poll::Ready(Waited::Stopping);
            }
        }
        let Some(armed) = idle.as_mut().as_pin_mut() else {
            return Poll::Ready(Waited::Closed);
        };
        let mut armed = armed.project();
        if armed.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Waited::Stopping);
        }
        while armed.timer.as_mut().poll(cx).is_ready() {
            if !parks || !*active {
                return Poll::Ready(if parks { Waited::Idle } else { Waited::Closed });
            }
            *active = false;
            armed.timer.as_mut().reset(Instant::now() + wait);
        }
        Poll::Pending
    })
    .await
}
