//! htpasswd files as Apache's `htpasswd` writes them, and the password hashes in them.
//!
//! One `user:hash` per line; blank lines and lines starting with `#` are skipped, and a field
//! after a second colon is ignored (as Apache's mod_authn_file and Squid's basic_ncsa_auth do).
//! Accepted hashes:
//! - `$2y$`/`$2a$`/`$2b$` bcrypt (`htpasswd -B`);
//! - `$apr1$` Apache MD5 (`htpasswd -m`, the default), and `$1$` MD5-crypt, the same algorithm
//!   with another magic string (`openssl passwd -1`);
//! - `{SHA}` base64 of an unsalted SHA-1 (`htpasswd -s`).
//!
//! Refused when the file is loaded, naming the line: crypt(3) DES (`htpasswd -d`) and plaintext
//! (`htpasswd -p`) entries, which cannot be told apart reliably (Apache itself guesses by
//! platform) and are both too weak to keep; SHA-256/512-crypt (`htpasswd -2`/`-5`); malformed
//! hashes; duplicate users (Apache silently takes the first, which hides mistakes).

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use md5::{Digest as _, Md5};
use sha1::Sha1;
use subtle::ConstantTimeEq as _;

/// One user's stored password hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PasswordHash {
    /// The whole `$2y$cost$salthash` string, checked by the `bcrypt` crate.
    Bcrypt(String),
    /// `$apr1$salt$hash` or `$1$salt$hash`.
    Md5Crypt {
        magic: &'static str,
        salt: String,
        hash: String,
    },
    /// `{SHA}` + base64 of the 20-byte digest.
    Sha1([u8; 20]),
}

impl PasswordHash {
    /// Parses the hash field of an htpasswd line; the error says why and what to do.
    pub(crate) fn parse(field: &str) -> Result<PasswordHash, String> {
        if let Some(rest) = field.strip_prefix("{SHA}") {
            let digest = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .ok()
                .and_then(|bytes| <[u8; 20]>::try_from(bytes).ok())
                .ok_or("malformed {SHA} entry (expected base64 of a 20-byte SHA-1 digest)")?;
            return Ok(PasswordHash::Sha1(digest));
        }
        for magic in [APR1_MAGIC, MD5_CRYPT_MAGIC] {
            if let Some(rest) = field.strip_prefix(magic) {
                return parse_md5_crypt(magic, rest);
            }
        }
        if ["$2y$", "$2a$", "$2b$"]
            .iter()
            .any(|p| field.starts_with(p))
        {
            return match field.parse::<bcrypt::HashParts>() {
                Ok(_) => Ok(PasswordHash::Bcrypt(field.to_string())),
                Err(e) => Err(format!("malformed bcrypt entry ({e})")),
            };
        }
        if field.starts_with("$5$") || field.starts_with("$6$") {
            return Err(
                "SHA-256/SHA-512-crypt entries (htpasswd -2/-5) are not supported; \
                        re-create the entry with htpasswd -B (bcrypt)"
                    .into(),
            );
        }
        Err(
            "crypt(3) DES and plaintext entries are not supported; re-create the entry \
             with htpasswd -B (bcrypt) or htpasswd -m (MD5)"
                .into(),
        )
    }

    /// bcrypt is deliberately slow (milliseconds at htpasswd's default cost 5, far more at
    /// higher costs) and MD5-crypt runs 1000 rounds: both belong on a blocking thread.
    pub(crate) fn is_slow(&self) -> bool {
        !matches!(self, PasswordHash::Sha1(_))
    }

    /// Whether `password` matches. Comparisons of the computed hash are constant-time.
    pub(crate) fn verify(&self, password: &[u8]) -> bool {
        match self {
            // bcrypt compares in constant time itself; it truncates passwords at 72 bytes,
            // exactly as Apache's htpasswd did when it wrote the entry.
            PasswordHash::Bcrypt(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            PasswordHash::Md5Crypt { magic, salt, hash } => {
                let computed = md5_crypt(magic, password, salt.as_bytes());
                computed.as_bytes().ct_eq(hash.as_bytes()).into()
            }
            PasswordHash::Sha1(digest) => {
                let computed: [u8; 20] = Sha1::digest(password).into();
                computed.ct_eq(digest).into()
            }
        }
    }
}

/// Users and their hashes, as read from one version of the file.
pub(crate) type Table = HashMap<Box<str>, Arc<PasswordHash>>;

/// Parses a whole file. `file` names it in errors: `path:line: user "x": why`.
pub(crate) fn parse_file(text: &[u8], file: &str) -> Result<Table, String> {
    let mut table = Table::new();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = std::str::from_utf8(line)
            .map_err(|_| format!("{file}:{number}: the line is not valid UTF-8"))?
            .trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, rest)) = line.split_once(':') else {
            return Err(format!(
                "{file}:{number}: expected user:hash (no colon on the line)"
            ));
        };
        if user.is_empty() {
            return Err(format!("{file}:{number}: empty user name"));
        }
        let field = rest.split(':').next().unwrap_or_default();
        let hash = PasswordHash::parse(field)
            .map_err(|why| format!("{file}:{number}: user \"{user}\": {why}"))?;
        if table.insert(user.into(), Arc::new(hash)).is_some() {
            return Err(format!(
                "{file}:{number}: user \"{user}\" appears more than once"
            ));
        }
    }
    Ok(table)
}

const APR1_MAGIC: &str = "$apr1$";
const MD5_CRYPT_MAGIC: &str = "$1$";
/// The alphabet of crypt(3)'s base64 variant.
const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn parse_md5_crypt(magic: &'static str, rest: &str) -> Result<PasswordHash, String> {
    let malformed = || format!("malformed {magic} entry (expected {magic}salt$hash)");
    let (salt, hash) = rest.split_once('$').ok_or_else(malformed)?;
    let valid = |s: &str| s.bytes().all(|b| ITOA64.contains(&b));
    if salt.is_empty() || salt.len() > 8 || hash.len() != 22 || !valid(salt) || !valid(hash) {
        return Err(malformed());
    }
    Ok(PasswordHash::Md5Crypt {
        magic,
        salt: salt.to_string(),
        hash: hash.to_string(),
    })
}

/// Poul-Henning Kamp's MD5-crypt (FreeBSD 1994), which Apache adopted with the magic `$apr1$`
/// (APR's `apr_md5_encode` in apr-util `crypto/apr_md5.c`). Returns the 22-character hash part.
/// The algorithm, step by step as published:
/// 1. `alt = MD5(password + salt + password)`;
/// 2. `ctx = MD5(password + magic + salt + alt repeated to the password's length + for each
///    bit of the length from the lowest: a NUL byte if it is 1, else the password's first
///    byte)`;
/// 3. 1000 rounds: `ctx = MD5((i odd ? password : ctx) + (i % 3 ? salt : "") +
///    (i % 7 ? password : "") + (i odd ? ctx : password))`;
/// 4. the 16 bytes, permuted, in crypt(3)'s base64.
fn md5_crypt(magic: &str, password: &[u8], salt: &[u8]) -> String {
    let alt = Md5::new()
        .chain_update(password)
        .chain_update(salt)
        .chain_update(password)
        .finalize();
    let mut ctx = Md5::new()
        .chain_update(password)
        .chain_update(magic.as_bytes())
        .chain_update(salt);
    for chunk_start in (0..password.len()).step_by(16) {
        let take = (password.len() - chunk_start).min(16);
        ctx.update(&alt[..take]);
    }
    let mut bits = password.len();
    while bits > 0 {
        if bits & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        bits >>= 1;
    }
    let mut digest = ctx.finalize();
    for round in 0..1000 {
        let mut round_ctx = Md5::new();
        if round & 1 == 1 {
            round_ctx.update(password);
        } else {
            round_ctx.update(digest);
        }
        if round % 3 != 0 {
            round_ctx.update(salt);
        }
        if round % 7 != 0 {
            round_ctx.update(password);
        }
        if round & 1 == 1 {
            round_ctx.update(digest);
        } else {
            round_ctx.update(password);
        }
        digest = round_ctx.finalize();
    }
    let d = digest;
    let mut out = String::with_capacity(22);
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        let value = (u32::from(d[a]) << 16) | (u32::from(d[b]) << 8) | u32::from(d[c]);
        push_itoa64(&mut out, value, 4);
    }
    push_itoa64(&mut out, u32::from(d[11]), 2);
    out
}

/// Appends the low `count` sextets of `value`, least significant first.
fn push_itoa64(out: &mut String, mut value: u32, count: usize) {
    for _ in 0..count {
        out.push(char::from(ITOA64[(value & 0x3f) as usize]));
        value >>= 6;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by Debian's `htpasswd` (apache2-utils 2.4) and `openssl passwd -1`; see
    /// tests/fixtures/README.md for the commands.
    const FIXTURE: &str = include_str!("../tests/fixtures/htpasswd");

    #[test]
    fn every_fixture_entry_verifies_with_its_password_only() {
        let table = parse_file(FIXTURE.as_bytes(), "fixture").unwrap();
        let cases: [(&str, &str); 7] = [
            ("alice", "wonder land"),
            ("bob", "s3cr:et"),
            ("carol", "pässword"),
            ("dan", "long password that is longer than sixteen bytes"),
            ("erin", "x"),
            ("frank", "bcrypt cost seven"),
            ("md5crypt", "openssl"),
        ];
        assert_eq!(table.len(), cases.len());
        for (user, password) in cases {
            let hash = &table[user];
            assert!(hash.verify(password.as_bytes()), "{user} with its password");
            assert!(!hash.verify(b"wrong"), "{user} with a wrong password");
            assert!(!hash.verify(b""), "{user} with an empty password");
            let mut almost = password.as_bytes().to_vec();
            almost.push(b'!');
            assert!(!hash.verify(&almost), "{user} with a longer password");
        }
        assert!(matches!(*table["bob"], PasswordHash::Bcrypt(_)));
        assert!(matches!(*table["carol"], PasswordHash::Sha1(_)));
    }

    /// apr1 vector published with the htpasswd-verify crate's docs and checked with
    /// `openssl passwd -apr1 -salt RandSalt password`.
    #[test]
    fn apr1_known_vector() {
        assert_eq!(
            md5_crypt(APR1_MAGIC, b"password", b"RandSalt"),
            "PgCXHRrkpSt4cbyC2C6bm/"
        );
    }

    /// When Apache's htpasswd is installed, hash fresh random-salted entries with it in every
    /// format and verify them; this is what keeps the fixture honest.
    #[test]
    fn entries_made_now_by_the_real_htpasswd_verify() {
        let Ok(output) = std::process::Command::new("htpasswd").arg("-h").output() else {
            println!("SKIPPED: htpasswd (Debian package apache2-utils) is not installed");
            return;
        };
        assert!(!output.stderr.is_empty() || !output.stdout.is_empty());
        for (flag, password) in [
            ("-m", "m p@ss"),
            ("-B", "b:pass"),
            ("-s", "s-pass"),
            ("-m", "x"),
            ("-m", "exactly sixteen!"),
            ("-m", "seventeen bytes!!"),
        ] {
            let out = std::process::Command::new("htpasswd")
                .args(["-nb", flag, "someone", password])
                .output()
                .unwrap();
            assert!(out.status.success(), "htpasswd {flag}");
            let table = parse_file(&out.stdout, "htpasswd-output").unwrap();
            let hash = &table["someone"];
            assert!(hash.verify(password.as_bytes()), "{flag} {password}");
            assert!(!hash.verify(b"other"), "{flag} {password}");
        }
        for flag in ["-d", "-p", "-2", "-5"] {
            let out = std::process::Command::new("htpasswd")
                .args(["-nb", flag, "someone", "pw"])
                .output()
                .unwrap();
            let err = parse_file(&out.stdout, "f").unwrap_err();
            assert!(err.starts_with("f:1: user \"someone\": "), "{flag}: {err}");
            assert!(err.contains("not supported"), "{flag}: {err}");
        }
    }

    #[test]
    fn file_errors_name_the_line() {
        let cases: [(&[u8], &str); 8] = [
            (
                b"# c\n\nnocolon\n",
                "f:3: expected user:hash (no colon on the line)",
            ),
            (b":{SHA}x\n", "f:1: empty user name"),
            (
                b"a:hXMRJUGz2K4jA\n",
                "f:1: user \"a\": crypt(3) DES and plaintext entries are not supported; \
                 re-create the entry with htpasswd -B (bcrypt) or htpasswd -m (MD5)",
            ),
            (
                b"a:{SHA}abc\n",
                "f:1: user \"a\": malformed {SHA} entry (expected base64 of a 20-byte SHA-1 \
                 digest)",
            ),
            (
                b"a:$apr1$salt$short\n",
                "f:1: user \"a\": malformed $apr1$ entry (expected $apr1$salt$hash)",
            ),
            (
                b"a:$2y$05$tooshort\n",
                "f:1: user \"a\": malformed bcrypt entry",
            ),
            (
                b"a:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\na:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\n",
                "f:2: user \"a\" appears more than once",
            ),
            (b"\xff:x\n", "f:1: the line is not valid UTF-8"),
        ];
        for (text, want) in cases {
            let err = parse_file(text, "f").unwrap_err();
            assert!(err.starts_with(want), "{err}\nwanted {want}");
        }
    }

    #[test]
    fn comments_blank_lines_crlf_and_extra_fields() {
        let text = b"# users\r\n\r\n  carol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=:extra\r\n";
        let table = parse_file(text, "f").unwrap();
        assert!(table["carol"].verify("pässword".as_bytes()));
        assert!(parse_file(b"", "f").unwrap().is_empty());
    }
}
