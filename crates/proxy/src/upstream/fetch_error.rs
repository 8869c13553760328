//! Why a request could not be forwarded, and the answer the client gets for it: 502 when the
//! origin could not be reached or answered wrongly, 504 when it did not answer in time (RFC
//! 9110 §15.6.3, §15.6.5), 400 for a request whose content was framed wrongly.

use std::io;

use sepia_observe::ResultCode;

use crate::model::Outcome;

#[derive(Debug)]
pub enum FetchError {
    /// No connection to an origin could be made (before anything was sent).
    Unreachable(io::ErrorKind),
    /// Every origin of the route is marked down: none was tried. Seconds until a retry.
    AllDown(u32),
    /// The origin closed or failed while the request was sent.
    OriginClosed,
    /// The origin closed the connection without answering.
    NoAnswer,
    /// The origin's response head was invalid (or a 101, which Sepia never forwards).
    Invalid,
    /// The origin's response is valid but cannot be passed on to this client; the text says
    /// why. Nothing was sent to the client, whose connection stays usable.
    Unrelayable(&'static str),
    /// The request cannot be expressed in HTTP/2 (RFC 9113 §8.3) for an origin spoken to in it.
    Untranslatable,
    /// The origin did not answer within `origin_first_byte`.
    TimedOut,
    /// The client's content was framed wrongly.
    ClientFraming,
    /// The client went away.
    ClientGone,
}

/// The error [`super::Upstreams::obtain`] reports when every origin of the route is down
/// (passive health): told apart from a failed connect by its payload. The route's `down_for`
/// in seconds, for Retry-After.
#[derive(Debug)]
pub struct AllDown(pub u32);

impl std::fmt::Display for AllDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("every origin of the route is down")
    }
}

impl std::error::Error for AllDown {}

impl AllDown {
    pub fn error(retry_after: std::time::Duration) -> io::Error {
        io::Error::other(AllDown(retry_after.as_secs().max(1) as u32))
    }
}

impl FetchError {
    /// The error for a failure to reach an origin.
    pub fn unreachable(e: io::Error) -> FetchError {
        if let Some(AllDown(secs)) = e.get_ref().and_then(|i| i.downcast_ref::<AllDown>()) {
            FetchError::AllDown(*secs)
        } else {
            FetchError::Unreachable(e.kind())
        }
    }

    /// The outcome to answer with. Only an unreachable origin and an unrelayable response
    /// leave the client connection usable: nothing of the exchange had begun, or the request
    /// was sent whole and nothing of the response was.
    pub fn outcome(self) -> Outcome {
        let (status, detail) = match self {
            FetchError::Unreachable(io::ErrorKind::TimedOut) => {
                return Outcome::local(504, "connecting to the origin server timed out")
                    .logged_as(ResultCode::TcpMiss)
            }
            FetchError::Unreachable(io::ErrorKind::NotFound) => {
                return Outcome::local(502, "the origin's host name could not be resolved")
                    .logged_as(ResultCode::TcpMiss)
            }
            // What a refused TLS handshake reports (the reason is in Sepia's log).
            FetchError::Unreachable(io::ErrorKind::InvalidData) => {
                return Outcome::local(
                    502,
                    "the TLS handshake with the origin server failed (its certificate was \
                     not accepted, or it does not speak TLS)",
                )
                .logged_as(ResultCode::TcpMiss)
            }
            FetchError::Unreachable(_) => {
                return Outcome::local(502, "could not connect to the origin server")
                    .logged_as(ResultCode::TcpMiss)
            }
            // RFC 9110 §15.6.4: 503, with Retry-After (§10.2.3) saying when the origins
            // will be tried again. Nothing was sent: the client connection stays usable.
            FetchError::AllDown(secs) => {
                return Outcome::local(503, "every origin server of this route is down")
                    .retrying_after(secs)
                    .logged_as(ResultCode::TcpMiss)
            }
            FetchError::Unrelayable(why) => {
                return Outcome::local(502, why).logged_as(ResultCode::TcpMiss)
            }
            FetchError::OriginClosed => (502, "the origin server closed the connection"),
            FetchError::NoAnswer => (
                502,
                "the origin server closed the connection without answering",
            ),
            FetchError::Invalid => (502, "the origin server sent an invalid response"),
            FetchError::Untranslatable => (
                502,
                "the request cannot be sent to the origin server over HTTP/2",
            ),
            FetchError::TimedOut => (504, "the origin server did not answer in time"),
            FetchError::ClientFraming => (400, "invalid chunked request body"),
            FetchError::ClientGone => return Outcome::client_gone(ResultCode::TcpMissAborted),
        };
        Outcome::local(status, detail)
            .logged_as(ResultCode::TcpMiss)
            .closing()
    }

    /// Whether an origin answered with an error of its own making (as opposed to the client
    /// going away): what a stale copy may stand in for (RFC 5861 §4).
    pub fn is_origin_failure(&self) -> bool {
        !matches!(self, FetchError::ClientGone | FetchError::ClientFraming)
    }
}
