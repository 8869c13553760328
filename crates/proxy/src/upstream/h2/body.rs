//! A response body arriving on a stream of a shared HTTP/2 connection (RFC 9113 §8.1), read
//! by the pipeline through [`Fetched::next_body`](crate::upstream::Fetched::next_body).

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use h2::RecvStream;

use super::conns::H2Stream;
use crate::h1::body::BodyReadError;
use crate::h1::fields::received_trailers;
use crate::model::BodyPiece;

/// A response body arriving on an HTTP/2 stream.
pub struct H2Body {
    pub(super) recv: RecvStream,
    /// The stream's claim on its connection, given back when the body is dropped.
    pub(super) stream: H2Stream,
    /// The longest wait for the next piece (`origin_first_byte`).
    pub(super) limit: Duration,
}

impl H2Body {
    pub fn origin_ip(&self) -> IpAddr {
        self.stream.conn.key.addr.ip()
    }

    /// The next piece of the body. A stream reset or a connection lost before END_STREAM is
    /// an error, never an end: a response cut short never reads as complete.
    pub async fn next(&mut self) -> Result<BodyPiece, BodyReadError> {
        let timed_out =
            || BodyReadError::Io(io::Error::new(io::ErrorKind::TimedOut, "origin body"));
        loop {
            let data = match tokio::time::timeout(self.limit, self.recv.data()).await {
                Err(_) => return Err(timed_out()),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(BodyReadError::Io(io::Error::other(e))),
                Ok(Some(Ok(data))) => data,
            };
            // The piece goes to the pipeline now: the origin may send as much again (§6.9).
            let _ = self.recv.flow_control().release_capacity(data.len());
            if !data.is_empty() {
                return Ok(BodyPiece::Data(data));
            }
        }
        match tokio::time::timeout(self.limit, self.recv.trailers()).await {
            Ok(Ok(map)) => Ok(BodyPiece::End(received_trailers(map))),
            Ok(Err(e)) => Err(BodyReadError::Io(io::Error::other(e))),
            Err(_) => Err(timed_out()),
        }
    }
}
