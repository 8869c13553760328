//! What the request path hands to the access log: a record of refcounted slices and plain
//! numbers. Building one formats nothing and copies no bytes; the writer task does the rest.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

/// How the request was satisfied, in Squid's vocabulary (`%Ss`), so existing log tooling
/// (calamaris, sarg, …) reads Sepia's logs unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultCode {
    /// Fetched from the origin; not served from cache.
    TcpMiss,
    /// Served from cache.
    TcpHit,
    /// Served from the memory cache.
    TcpMemHit,
    /// Served from a response still arriving for another client (collapsed forwarding):
    /// Squid 5 writes the `_CF` of `LogTags::c_str` into the tag.
    TcpCfHit,
    /// Stale entry revalidated; the origin sent a new response (RFC 9111 §4.3.3).
    TcpRefreshModified,
    /// Stale entry revalidated; the origin answered 304 and the stored one was served.
    TcpRefreshUnmodified,
    /// Revalidation failed and the stale entry was served (RFC 9111 §4.2.4, RFC 5861 §4).
    TcpRefreshFailOld,
    /// The client forced a reload (`no-cache`, RFC 9111 §5.2.1.4).
    TcpClientRefreshMiss,
    /// A cached error response was served.
    TcpNegativeHit,
    /// Refused by access control.
    TcpDenied,
    /// A CONNECT tunnel.
    TcpTunnel,
    /// A miss whose transfer to the client was aborted.
    TcpMissAborted,
    /// No result: e.g. the request could not be parsed. Squid 5 writes it `NONE_NONE`
    /// (Squid 4 wrote `TAG_NONE`); Squid 5.7 logs an unparsable request as
    /// `NONE_NONE/400 … NONE error:invalid-request`.
    TagNone,
}

impl ResultCode {
    /// Every code, in declaration order (`code as usize` is its index here).
    pub const ALL: [ResultCode; 13] = [
        ResultCode::TcpMiss,
        ResultCode::TcpHit,
        ResultCode::TcpMemHit,
        ResultCode::TcpCfHit,
        ResultCode::TcpRefreshModified,
        ResultCode::TcpRefreshUnmodified,
        ResultCode::TcpRefreshFailOld,
        ResultCode::TcpClientRefreshMiss,
        ResultCode::TcpNegativeHit,
        ResultCode::TcpDenied,
        ResultCode::TcpTunnel,
        ResultCode::TcpMissAborted,
        ResultCode::TagNone,
    ];

    /// Served from a stored response (memory, disk, another's fill, after a 304, stale on
    /// error, a stored error).
    pub fn is_hit(self) -> bool {
        matches!(
            self,
            ResultCode::TcpHit
                | ResultCode::TcpMemHit
                | ResultCode::TcpCfHit
                | ResultCode::TcpRefreshUnmodified
                | ResultCode::TcpRefreshFailOld
                | ResultCode::TcpNegativeHit
        )
    }

    /// The tag exactly as Squid writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultCode::TcpMiss => "TCP_MISS",
            ResultCode::TcpHit => "TCP_HIT",
            ResultCode::TcpMemHit => "TCP_MEM_HIT",
            ResultCode::TcpCfHit => "TCP_CF_HIT",
            ResultCode::TcpRefreshModified => "TCP_REFRESH_MODIFIED",
            ResultCode::TcpRefreshUnmodified => "TCP_REFRESH_UNMODIFIED",
            ResultCode::TcpRefreshFailOld => "TCP_REFRESH_FAIL_OLD",
            ResultCode::TcpClientRefreshMiss => "TCP_CLIENT_REFRESH_MISS",
            ResultCode::TcpNegativeHit => "TCP_NEGATIVE_HIT",
            ResultCode::TcpDenied => "TCP_DENIED",
            ResultCode::TcpTunnel => "TCP_TUNNEL",
            ResultCode::TcpMissAborted => "TCP_MISS_ABORTED",
            ResultCode::TagNone => "NONE_NONE",
        }
    }
}

/// Where the response came from (Squid's hierarchy code, `%Sh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// `HIER_NONE`: no upstream was contacted (hit, denied, error).
    None,
    /// `HIER_DIRECT`: straight to the origin server.
    Direct,
    /// `FIRSTUP_PARENT`: through the first configured parent (reverse-mode origin pool).
    FirstUpParent,
}

impl Hierarchy {
    /// The code exactly as Squid writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Hierarchy::None => "HIER_NONE",
            Hierarchy::Direct => "HIER_DIRECT",
            Hierarchy::FirstUpParent => "FIRSTUP_PARENT",
        }
    }
}

/// One finished request. The byte fields are slices of the connection's request buffer
/// (`Bytes` refcounts), so building a record copies nothing.
#[derive(Clone, Debug)]
pub struct AccessRecord {
    /// When the request head was received. Squid's `%ts` is the time the line is logged, i.e.
    /// `start + elapsed`; the combined format's `%t` is this (Apache: "time the request was
    /// received").
    pub start: SystemTime,
    /// From `start` until the last byte was sent.
    pub elapsed: Duration,
    /// The client's address (only the IP is logged).
    pub client: SocketAddr,
    /// How the request was satisfied.
    pub result: ResultCode,
    /// Status sent to the client; 0 if none was sent.
    pub status: u16,
    /// Bytes written to the client, head and body.
    pub bytes_sent: u64,
    /// The request method as received.
    pub method: Bytes,
    /// When `target` is origin-form (`/x`, RFC 9112 §3.2.1), the Host it was sent to; the URL
    /// is then logged as `http://` + host + target, like Squid does for accelerated requests.
    pub scheme_host: Option<Bytes>,
    /// The request came over TLS: an origin-form target is logged as `https://` + host + target.
    pub tls: bool,
    /// The request target as received (origin-, absolute- or authority-form).
    pub target: Bytes,
    /// The protocol version's major number: 1 for `HTTP/1.x`, 2 for HTTP/2 (logged as
    /// `HTTP/2.0`, as Squid and Apache write it).
    pub version_major: u8,
    /// The minor version: 0 or 1 for `HTTP/1.x`, 0 for HTTP/2 (combined format's `%rv`).
    pub version_minor: u8,
    /// Authenticated user name, if any (`%[un`; proxy authentication fills it).
    pub user: Option<Bytes>,
    /// Where the response came from.
    pub hierarchy: Hierarchy,
    /// The upstream server's address, if one was contacted.
    pub peer: Option<IpAddr>,
    /// Content-Type of the response sent, as received; the formats log its media type only
    /// (Squid's `%mt`).
    pub content_type: Option<Bytes>,
    /// The request's Referer.
    pub referer: Option<Bytes>,
    /// The request's User-Agent.
    pub user_agent: Option<Bytes>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_codes_are_spelled_like_squid() {
        let cases = [
            (ResultCode::TcpMiss, "TCP_MISS"),
            (ResultCode::TcpHit, "TCP_HIT"),
            (ResultCode::TcpMemHit, "TCP_MEM_HIT"),
            (ResultCode::TcpCfHit, "TCP_CF_HIT"),
            (ResultCode::TcpRefreshModified, "TCP_REFRESH_MODIFIED"),
            (ResultCode::TcpRefreshUnmodified, "TCP_REFRESH_UNMODIFIED"),
            (ResultCode::TcpRefreshFailOld, "TCP_REFRESH_FAIL_OLD"),
            (ResultCode::TcpClientRefreshMiss, "TCP_CLIENT_REFRESH_MISS"),
            (ResultCode::TcpNegativeHit, "TCP_NEGATIVE_HIT"),
            (ResultCode::TcpDenied, "TCP_DENIED"),
            (ResultCode::TcpTunnel, "TCP_TUNNEL"),
            (ResultCode::TcpMissAborted, "TCP_MISS_ABORTED"),
            (ResultCode::TagNone, "NONE_NONE"),
        ];
        for (code, want) in cases {
            assert_eq!(code.as_str(), want);
        }
        assert_eq!(Hierarchy::None.as_str(), "HIER_NONE");
        assert_eq!(Hierarchy::Direct.as_str(), "HIER_DIRECT");
        assert_eq!(Hierarchy::FirstUpParent.as_str(), "FIRSTUP_PARENT");
    }
}
