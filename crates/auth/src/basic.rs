//! The Basic authentication scheme (RFC 7617) as a proxy sees it in Proxy-Authorization
//! (RFC 9110 §11.7.2): `Basic <token68>` where the token is base64 (RFC 4648 §4) of
//! `user-id ":" password`.

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;

/// Longest token accepted (bytes of base64): far beyond any real user name and password, short
/// enough that a hostile header cannot make the cache or the decoder work hard.
pub(crate) const MAX_TOKEN: usize = 4096;

/// Standard alphabet; padding optional, because some clients drop it and nothing is ambiguous
/// without it.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The token68 of a `Basic` credentials value, or `None` for another scheme or a malformed
/// value. The scheme name is case-insensitive (RFC 9110 §11.1) and separated from the token by
/// one or more spaces (§11.4); surrounding whitespace is ignored (§5.5). No allocation: the
/// token is what the credentials cache is keyed by.
pub(crate) fn token(header_value: &[u8]) -> Option<&[u8]> {
    let value = header_value.trim_ascii();
    let scheme = value.get(..5)?;
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let rest = &value[5..];
    let token = rest.trim_ascii_start();
    if token.len() == rest.len() || token.is_empty() || token.len() > MAX_TOKEN {
        return None;
    }
    // token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" (RFC 9110 §11.2);
    // base64 uses only part of that, and anything else (a space, a comma of auth-params) means
    // this is not one token.
    token
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
        .then_some(token)
}

/// A user-id and password taken from a token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub user: String,
    pub password: Vec<u8>,
}

/// Decodes a token from [`token`]. The user-id ends at the first colon (RFC 7617 §2: a user-id
/// containing a colon cannot be expressed); the password is the rest, colons included. `None`
/// when the base64 is invalid, there is no colon, the user-id is empty or not UTF-8 (names are
/// shown in logs and compared as text; RFC 7617 §2.1 makes UTF-8 the only defined charset), or
/// either part contains a control character (RFC 7617 §2 forbids them; they could also break a
/// helper's line protocol).
pub(crate) fn decode(token: &[u8]) -> Option<Credentials> {
    let decoded = BASE64.decode(token).ok()?;
    let colon = memchr::memchr(b':', &decoded)?;
    if decoded.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return None;
    }
    let user = std::str::from_utf8(&decoded[..colon]).ok()?;
    if user.is_empty() || user.chars().any(char::is_control) {
        return None;
    }
    Some(Credentials {
        user: user.to_string(),
        password: decoded[colon + 1..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(user: &str, password: &[u8]) -> Option<Credentials> {
        Some(Credentials {
            user: user.into(),
            password: password.into(),
        })
    }

    #[test]
    fn token_accepts_any_case_and_spacing() {
        // RFC 7617 §2 example: Aladdin / open sesame.
        let good: [&[u8]; 5] = [
            b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"BASIC   QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"  Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== \t",
            b"Basic\tQWxhZGRpbjpvcGVuIHNlc2FtZQ==",
        ];
        for value in good {
            assert_eq!(
                token(value),
                Some(&b"QWxhZGRpbjpvcGVuIHNlc2FtZQ=="[..]),
                "{}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn token_rejects_other_schemes_and_shapes() {
        let long = format!("Basic {}", "A".repeat(MAX_TOKEN + 1));
        let bad: [&[u8]; 9] = [
            b"",
            b"Basic",
            b"Basic ",
            b"BasicQWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"Digest username=\"a\"",
            b"Basic QWxh ZGRp",
            b"Basic realm=\"x\", a=b",
            long.as_bytes(),
        ];
        for value in bad {
            assert_eq!(token(value), None, "{}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn decode_splits_at_the_first_colon() {
        assert_eq!(
            decode(b"QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
            creds("Aladdin", b"open sesame")
        );
        // "user:pa:ss" — the password keeps its colon; padding may be left out.
        assert_eq!(decode(b"dXNlcjpwYTpzcw"), creds("user", b"pa:ss"));
        assert_eq!(decode(b"dXNlcjpwYTpzcw=="), creds("user", b"pa:ss"));
        // "user:" — an empty password is the backend's business.
        assert_eq!(decode(b"dXNlcjo="), creds("user", b""));
        // UTF-8 user name and password (RFC 7617 §2.1 example "test:123£").
        assert_eq!(
            decode(b"dGVzdDoxMjPCow=="),
            creds("test", "123£".as_bytes())
        );
    }

    #[test]
    fn decode_rejects_malformed_credentials() {
        let bad: [&[u8]; 7] = [
            b"dXNlcnBhc3M=",     // "userpass": no colon
            b"OnBhc3M=",         // ":pass": empty user-id
            b"dXNlcjpwYQpzcw==", // "user:pa\nss": control character
            b"dQB4OnA=",         // "u\0x:p": NUL in the user-id
            b"/w==",             // 0xff: no colon, not UTF-8
            b"/zpw",             // "\xff:p": user-id not UTF-8
            b"dXNlcjpw!",        // not base64
        ];
        for token in bad {
            assert_eq!(decode(token), None, "{}", String::from_utf8_lossy(token));
        }
    }
}
