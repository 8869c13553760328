//! How an exchange ended: what the access log records and what the front end needs to decide
//! whether the client connection may carry another request.
//!
//! An outcome is built by the step that knows how the request was answered, with the
//! constructors and builder methods below (the pipeline's last step adds what only the front
//! end knows: the bytes it wrote); no code assigns its fields one by one.

use std::net::IpAddr;

use bytes::Bytes;
use sepia_observe::metrics::Stamp;
use sepia_observe::{Hierarchy, ResultCode};

/// How one request was answered.
#[derive(Debug)]
pub struct Outcome {
    /// The status sent (0 when the client went away before any).
    pub status: u16,
    /// Squid's result code (`TCP_HIT`, `TCP_MISS`, ...).
    pub result: ResultCode,
    /// The origin that answered, when one did (`HIER_DIRECT`).
    pub peer: Option<IpAddr>,
    /// Bytes written to the client, head included.
    pub bytes_sent: u64,
    /// The response's Content-Type, for the access log (`None` when the log is off).
    pub content_type: Option<Bytes>,
    /// The client connection must not carry another request: what it sent or received can no
    /// longer be trusted to be framed right (an invalid request, a response cut short).
    pub close: bool,
    /// An answer Sepia makes itself (an error, a PURGE result) for the front end to send.
    pub local: Option<LocalAnswer>,
    /// When the response head was handed to the client's connection, for a response that
    /// streams after it (relayed, or read from a fill), when metrics are kept: the time to
    /// first byte. `None` for one sent in one piece (a hit), whose first byte is its last.
    pub first_byte: Option<Stamp>,
}

/// The media type of the answers Sepia makes itself: a status line and a sentence as plain
/// text, in every protocol (the access log's `%mt` for them).
pub const LOCAL_ANSWER_TYPE: &[u8] = b"text/plain; charset=utf-8";

/// A response Sepia generates: the status and a sentence saying why, for the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalAnswer {
    pub status: u16,
    pub detail: &'static str,
    /// Seconds for a Retry-After field (RFC 9110 §10.2.3); 0 for none.
    pub retry_after: u32,
}

impl Outcome {
    /// A response Sepia answers itself. Logged `TCP_DENIED` for a 403 (Squid's tag for a
    /// refusal), else `TAG_NONE` (nothing was looked up); [`Outcome::logged_as`] says otherwise.
    pub fn local(status: u16, detail: &'static str) -> Outcome {
        let result = if status == 403 {
            ResultCode::TcpDenied
        } else {
            ResultCode::TagNone
        };
        Outcome {
            local: Some(LocalAnswer {
                status,
                detail,
                retry_after: 0,
            }),
            ..Outcome::answered(status, result)
        }
    }

    /// A response that was (or is being) sent with `status`, logged as `result`.
    pub fn answered(status: u16, result: ResultCode) -> Outcome {
        Outcome {
            status,
            result,
            peer: None,
            bytes_sent: 0,
            content_type: None,
            close: false,
            local: None,
            first_byte: None,
        }
    }

    /// The client went away before the response could be sent.
    pub fn client_gone(result: ResultCode) -> Outcome {
        Outcome::answered(0, result).closing()
    }

    /// The client connection closes after this response.
    pub fn closing(mut self) -> Outcome {
        self.close = true;
        self
    }

    /// A local answer that tells the client to retry after `secs` seconds (Retry-After).
    pub fn retrying_after(mut self, secs: u32) -> Outcome {
        if let Some(local) = &mut self.local {
            local.retry_after = secs;
        }
        self
    }

    /// Logged with another result code.
    pub fn logged_as(mut self, result: ResultCode) -> Outcome {
        self.result = result;
        self
    }

    /// The origin at `peer` answered.
    pub fn answered_by(mut self, peer: IpAddr) -> Outcome {
        self.peer = Some(peer);
        self
    }

    /// With the count of bytes written to the client.
    pub fn with_bytes_sent(mut self, bytes_sent: u64) -> Outcome {
        self.bytes_sent = bytes_sent;
        self
    }

    /// With the response's Content-Type for the access log.
    pub fn with_content_type(mut self, content_type: Option<Bytes>) -> Outcome {
        self.content_type = content_type;
        self
    }

    /// Notes now as the time of the first byte, when `timed`.
    pub fn first_byte_now(mut self, timed: bool) -> Outcome {
        if timed {
            self.first_byte = Some(Stamp::now());
        }
        self
    }

    /// The hierarchy code of the access log: `HIER_DIRECT` when an origin answered.
    pub fn hierarchy(&self) -> Hierarchy {
        if self.peer.is_some() {
            Hierarchy::Direct
        } else {
            Hierarchy::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_answers_are_denials_only_for_403() {
        let denied = Outcome::local(403, "no");
        assert_eq!(denied.result, ResultCode::TcpDenied);
        assert_eq!(denied.local.map(|l| l.status), Some(403));
        assert!(!denied.close);
        let other = Outcome::local(502, "down").closing();
        assert_eq!(other.result, ResultCode::TagNone);
        assert!(other.close);
        let purged = Outcome::local(200, "purged").logged_as(ResultCode::TcpMiss);
        assert_eq!(purged.result, ResultCode::TcpMiss);
        assert_eq!(purged.hierarchy(), Hierarchy::None);
    }

    #[test]
    fn an_origin_answer_is_direct() {
        let o = Outcome::answered(200, ResultCode::TcpMiss).answered_by([127, 0, 0, 1].into());
        assert_eq!(o.hierarchy(), Hierarchy::Direct);
        assert!(Outcome::client_gone(ResultCode::TcpMissAborted).close);
    }
}
