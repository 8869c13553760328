//! The line protocol of Squid's basic-authentication helpers (Squid's `auth_param basic
//! program`, documented in Squid's "Helper protocol" and the helpers' man pages):
//!
//! - request: `[channel-ID SP] user SP password LF`, user and password URL-escaped the way Squid
//!   does it (`rfc1738_escape`: the RFC 1738 "unsafe" characters, `%`, controls and non-ASCII
//!   bytes become `%XX`), so a space or newline in a password cannot break the line;
//! - reply: `[channel-ID SP] result [SP key=value …] LF` where result is `OK` (valid), `ERR`
//!   (invalid) or `BH` ("broken helper": it could not decide). Helpers older than Squid 3.4
//!   answer `ERR some free text`, which parses the same way.

/// A helper's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `OK`: the credentials are valid.
    Ok,
    /// `ERR`: they are not.
    Err,
    /// `BH`: the helper failed; neither valid nor invalid.
    BrokenHelper,
}

/// RFC 1738 §2.2 "unsafe" characters (Squid's `rfc1738_unsafe_chars`, plus `%` and space which
/// Squid escapes in code).
pub(crate) const UNSAFE: &[u8] = b"<>\"#%{}|\\^~[]`' ";

/// Appends `bytes` to `out` escaped as Squid's `rfc1738_escape` does.
pub(crate) fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b <= 0x1f || b >= 0x7f || UNSAFE.contains(&b) {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        } else {
            out.push(b);
        }
    }
}

/// The request for one user and password, without channel-ID and line end: `user SP password`.
pub(crate) fn request(user: &str, password: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(user.len() + password.len() + 8);
    escape_into(&mut line, user.as_bytes());
    line.push(b' ');
    escape_into(&mut line, password);
    line
}

/// A parsed reply line (without its LF): the channel-ID when `concurrent`, and the answer.
/// `Err` describes a line that does not follow the protocol.
pub(crate) fn parse_reply(line: &[u8], concurrent: bool) -> Result<(usize, Answer), String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let channel = if concurrent {
        let word = words.next().unwrap_or_default();
        std::str::from_utf8(word)
            .ok()
            .filter(|w| w.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|w| w.parse::<usize>().ok())
            .ok_or_else(|| {
                format!(
                    "expected a channel-ID at the start of the reply, got \"{}\"",
                    String::from_utf8_lossy(line).escape_debug()
                )
            })?
    } else {
        0
    };
    let answer = match words.next().unwrap_or_default() {
        b"OK" => Answer::Ok,
        b"ERR" => Answer::Err,
        b"BH" => Answer::BrokenHelper,
        _ => {
            return Err(format!(
                "expected OK, ERR or BH, got \"{}\"",
                String::from_utf8_lossy(line).escape_debug()
            ))
        }
    };
    Ok((channel, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_escape_like_squid() {
        assert_eq!(request("alice", b"secret"), b"alice secret");
        assert_eq!(request("a b", b"p w"), b"a%20b p%20w");
        assert_eq!(request("x", b"100%"), b"x 100%25");
        assert_eq!(
            request("bob", b"<>\"#{}|\\^~[]`'"),
            b"bob %3C%3E%22%23%7B%7D%7C%5C%5E%7E%5B%5D%60%27".as_slice()
        );
        assert_eq!(request("j\u{f6}rg", b"\n\t\x7f"), b"j%C3%B6rg %0A%09%7F");
        // Reserved characters are passed as they are, as Squid does.
        assert_eq!(request("d", b";/?:@=&+$,"), b"d ;/?:@=&+$,");
        assert_eq!(request("e", b""), b"e ");
    }

    #[test]
    fn replies_plain_and_concurrent() {
        let cases: [(&[u8], bool, (usize, Answer)); 9] = [
            (b"OK", false, (0, Answer::Ok)),
            (b"ERR", false, (0, Answer::Err)),
            (b"BH message=\"db down\"", false, (0, Answer::BrokenHelper)),
            (b"ERR message=\"Wrong password\"", false, (0, Answer::Err)),
            (b"ERR Wrong password", false, (0, Answer::Err)),
            (b"OK\r", false, (0, Answer::Ok)),
            (b"0 OK", true, (0, Answer::Ok)),
            (b"17 ERR message=x", true, (17, Answer::Err)),
            (b"3 OK user=alice", true, (3, Answer::Ok)),
        ];
        for (line, concurrent, want) in cases {
            assert_eq!(
                parse_reply(line, concurrent),
                Ok(want),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn malformed_replies() {
        let cases: [(&[u8], bool); 7] = [
            (b"", false),
            (b"ok", false),
            (b"YES", false),
            (b"0 OK", false),
            (b"OK", true),
            (b"-1 OK", true),
            (b"1", true),
        ];
        for (line, concurrent) in cases {
            assert!(
                parse_reply(line, concurrent).is_err(),
                "{} concurrent={concurrent}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
