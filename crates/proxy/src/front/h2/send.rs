//! Content sent on a stream within HTTP/2 flow control (RFC 9113 §5.2): a piece goes out only
//! as the client's windows open, so a client that reads slowly (or never opens its window)
//! holds at most the connection's send buffer, not the whole response, and gives up its stream
//! when no window opens within the write limit.

use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;

use crate::model::Gone;

/// Sends `data` (then END_STREAM when `end`), waiting for window as needed, each wait at
/// most `limit`.
pub async fn send(
    stream: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    limit: Duration,
) -> Result<(), Gone> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = tokio::time::timeout(limit, poll_fn(|cx| stream.poll_capacity(cx))).await;
        let n = match granted {
            Ok(Some(Ok(n))) => n,
            // The stream was reset, the connection failed, or the window stayed shut.
            Ok(Some(Err(_)) | None) | Err(_) => return Err(Gone),
        };
        if n == 0 {
            continue;
        }
        let piece = data.split_to(n.min(data.len()));
        let last = end && data.is_empty();
        stream.send_data(piece, last).map_err(|_| Gone)?;
        if last {
            return Ok(());
        }
    }
    stream.reserve_capacity(0);
    if end {
        stream.send_data(Bytes::new(), true).map_err(|_| Gone)?;
    }
    Ok(())
}
