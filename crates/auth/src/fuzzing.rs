//! Entry point for the fuzz target `auth_inputs` (in `fuzz/`): every parser here that sees
//! bytes from outside, with the invariants each must keep. Not part of the API.

use crate::basic;
use crate::helper::protocol;
use crate::htpasswd::{self, PasswordHash};

/// Panics when a parser panics or breaks an invariant on `data`.
pub fn check_untrusted_inputs(data: &[u8]) {
    // A client's Proxy-Authorization value.
    if let Some(token) = basic::token(data) {
        assert!(!token.is_empty() && token.len() <= basic::MAX_TOKEN);
        check_credentials(token);
    }
    check_credentials(data);

    // An htpasswd file (the operator's, but an editor can leave anything in it). bcrypt entries
    // are not run: their cost is the file's choice and can be made to take hours.
    if let Ok(table) = htpasswd::parse_file(data, "fuzz") {
        for hash in table.values() {
            if !matches!(**hash, PasswordHash::Bcrypt(_)) {
                let _ = hash.verify(data);
            }
        }
    }

    // A helper's reply line, and the escaping of what is sent to it.
    for concurrent in [false, true] {
        let _ = protocol::parse_reply(data, concurrent);
    }
    let mut escaped = Vec::new();
    protocol::escape_into(&mut escaped, data);
    assert!(
        escaped
            .iter()
            .all(|&b| b.is_ascii_graphic() && (b == b'%' || !protocol::UNSAFE.contains(&b))),
        "an escaped request word stays one printable word"
    );
    assert_eq!(unescape(&escaped), data, "escaping loses nothing");
}

fn check_credentials(token: &[u8]) {
    if let Some(credentials) = basic::decode(token) {
        assert!(!credentials.user.is_empty());
        assert!(!credentials.user.contains(':'));
        assert!(!credentials.user.chars().any(char::is_control));
        assert!(!credentials.password.iter().any(|&b| b < 0x20 || b == 0x7f));
    }
}

fn unescape(escaped: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            let (Some(high), Some(low)) = (hex(escaped[i + 1]), hex(escaped[i + 2])) else {
                panic!("a % is always followed by two hex digits");
            };
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(escaped[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fuzz_entry_point_accepts_typical_inputs() {
        let inputs: [&[u8]; 6] = [
            b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"alice:$apr1$rfj1moPM$e/G4jTFwNDKybfNOdE9jv/\n",
            b"carol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=",
            b"12 OK message=\"x y\"",
            b"%\x00\xff j\xc3\xb6rg",
            b"",
        ];
        for input in inputs {
            super::check_untrusted_inputs(input);
        }
    }
}
