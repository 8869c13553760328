//! Errors of the head parser and of the chunked body decoder.

use std::fmt;

/// Why a head was refused. For requests, [`ParseError::status`] is the status to answer with
/// (then close: RFC 9112 §6.3 and §11.2 say a connection with faulty framing cannot be reused).
/// For responses every variant means the origin's message is invalid and the proxy answers 502
/// (RFC 9112 §6.3: "the proxy MUST close the connection to the server, discard the received
/// response, and send a 502").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The head exceeds `Limits::max_head_bytes` (431, RFC 6585 §5).
    HeadTooLarge,
    /// More field lines than `Limits::max_headers` (431).
    TooManyHeaders,
    /// Syntax the grammar of RFC 9112 does not allow (400); the text says what.
    Malformed(&'static str),
    /// Content-Length / Transfer-Encoding that make the body length ambiguous (400, RFC 9112 §6).
    BadFraming(&'static str),
    /// A request with a transfer coding other than chunked before chunked (501, RFC 9112 §6.1:
    /// "A server that receives a request message with a transfer coding it does not
    /// understand SHOULD respond with 501"): Sepia implements only chunked. Responses never
    /// get it: their other codings are passed on (`ResponseHead::transfer_coded`).
    UnsupportedTransferCoding,
}

impl ParseError {
    /// The status code to answer a request that failed with this error.
    pub fn status(&self) -> u16 {
        match self {
            ParseError::HeadTooLarge | ParseError::TooManyHeaders => 431,
            ParseError::Malformed(_) | ParseError::BadFraming(_) => 400,
            ParseError::UnsupportedTransferCoding => 501,
        }
    }

    /// A short human-readable explanation (for an error body or a log line, not the reason
    /// phrase of the status line: use `reason_phrase(status)` for that).
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::HeadTooLarge => "header section too large",
            ParseError::TooManyHeaders => "too many header fields",
            ParseError::Malformed(why) | ParseError::BadFraming(why) => why,
            ParseError::UnsupportedTransferCoding => "unsupported transfer coding",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason(), self.status())
    }
}

impl std::error::Error for ParseError {}

/// Why a chunked body was refused (RFC 9112 §7.1). Any of these leaves the connection unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// The chunk-size is not 1*HEXDIG (empty, junk before or after it, a bad extension byte).
    BadSize,
    /// The chunk-size does not fit in 64 bits.
    SizeOverflow,
    /// A line did not end in CRLF, or chunk data was not followed by CRLF.
    BadLineEnding,
    /// The chunk extensions of one chunk-size line are longer than we are willing to skip.
    ExtensionTooLong,
    /// The trailer section is larger than we are willing to buffer.
    TrailersTooLarge,
    /// A trailer line is not a valid field line (RFC 9112 §7.1.2, §5): forwarded trailer fields
    /// keep their bytes, so anything else could inject into the downstream message.
    BadTrailer,
}

impl ChunkError {
    /// A short human-readable explanation.
    pub fn reason(&self) -> &'static str {
        match self {
            ChunkError::BadSize => "invalid chunk size",
            ChunkError::SizeOverflow => "chunk size overflows 64 bits",
            ChunkError::BadLineEnding => "chunked body line not ended by CRLF",
            ChunkError::ExtensionTooLong => "chunk extension too long",
            ChunkError::TrailersTooLarge => "trailer section too large",
            ChunkError::BadTrailer => "invalid trailer field line",
        }
    }
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for ChunkError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_reasons() {
        let cases = [
            (ParseError::HeadTooLarge, 431, "header section too large"),
            (ParseError::TooManyHeaders, 431, "too many header fields"),
            (
                ParseError::Malformed("bad request-line"),
                400,
                "bad request-line",
            ),
            (ParseError::BadFraming("CL and TE"), 400, "CL and TE"),
            (
                ParseError::UnsupportedTransferCoding,
                501,
                "unsupported transfer coding",
            ),
        ];
        for (err, status, reason) in cases {
            assert_eq!(err.status(), status, "{err:?}");
            assert_eq!(err.reason(), reason);
            assert_eq!(err.to_string(), format!("{reason} ({status})"));
        }
    }

    #[test]
    fn chunk_errors_display() {
        assert_eq!(
            ChunkError::SizeOverflow.to_string(),
            "chunk size overflows 64 bits"
        );
        assert_eq!(
            ChunkError::BadTrailer.reason(),
            "invalid trailer field line"
        );
    }
}
