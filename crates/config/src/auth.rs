//! `[auth]`: proxy authentication (RFC 9110 §11.7.1 Proxy-Authenticate / §11.7.2
//! Proxy-Authorization, the Basic scheme of RFC 7617), checked against an htpasswd file or a
//! Squid-style external helper program. The model types, their raw (serde) form and the checks
//! that need more than one key live together here so the section is read in one place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::error::ConfigError;
use crate::raw::{Bounded, Parsed};
use crate::values::{ConfigValue, Timeout};

/// `[auth]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthConfig {
    /// `realm`: shown by browsers in the login prompt; sent as `Basic realm="…"`. Never contains
    /// `"`, `\` or control characters, so it can be quoted as is.
    pub realm: String,
    /// `htpasswd` or `helper`: where credentials are checked (exactly one of them).
    pub backend: AuthBackend,
    /// `credentials_ttl`: how long verified credentials are remembered without re-checking
    /// (Squid's `credentialsttl`); zero disables the cache.
    pub credentials_ttl: Duration,
    /// `negative_ttl`: how long rejected credentials are remembered, to blunt password guessing
    /// against a slow hash or helper; zero disables it.
    pub negative_ttl: Duration,
}

/// Where `[auth]` checks a user name and password.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthBackend {
    /// `htpasswd = "/path"`: a file written by Apache's `htpasswd` (bcrypt, apr1-MD5 or SHA1
    /// entries), re-read when it changes. Readable when the configuration was loaded.
    Htpasswd(PathBuf),
    /// `helper = ["/path/program", "arg", …]`: a Squid basic-auth helper.
    Helper(HelperConfig),
}

/// `helper` and its `helper_*` keys.
#[derive(Clone, Debug, PartialEq)]
pub struct HelperConfig {
    /// The program (an executable file when the configuration was loaded; PATH is not searched).
    pub program: PathBuf,
    /// The rest of the `helper` array, passed as arguments.
    pub args: Vec<String>,
    /// `helper_children`: how many copies of the program run at once (Squid's `children`).
    pub children: usize,
    /// `helper_concurrency`: requests in flight per child, each line prefixed with a channel id
    /// (Squid's `concurrency=`); `0` means the plain protocol, one request at a time.
    pub concurrency: usize,
    /// `helper_timeout`: the longest wait for an answer; a child that takes longer is presumed
    /// hung and restarted.
    pub timeout: Duration,
}

/// Most children accepted: each is a process; more is a typo, not a deployment.
const MAX_HELPER_CHILDREN: u64 = 256;
/// Most channels per child.
const MAX_HELPER_CONCURRENCY: u64 = 1024;

const DEFAULT_REALM: &str = "Sepia";
const DEFAULT_CHILDREN: usize = 5;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    #[serde(default = "default_realm")]
    pub realm: Parsed<Realm>,
    pub htpasswd: Option<Spanned<String>>,
    pub helper: Option<Spanned<Vec<String>>>,
    pub helper_children: Option<Spanned<Bounded<1, MAX_HELPER_CHILDREN>>>,
    pub helper_concurrency: Option<Spanned<Bounded<0, MAX_HELPER_CONCURRENCY>>>,
    pub helper_timeout: Option<Spanned<Parsed<Timeout>>>,
    #[serde(default = "default_credentials_ttl")]
    pub credentials_ttl: Parsed<Duration>,
    #[serde(default = "default_negative_ttl")]
    pub negative_ttl: Parsed<Duration>,
}

fn default_realm() -> Parsed<Realm> {
    Parsed(Realm(DEFAULT_REALM.to_string()))
}

fn default_credentials_ttl() -> Parsed<Duration> {
    Parsed(Duration::from_secs(3600))
}

fn default_negative_ttl() -> Parsed<Duration> {
    Parsed(Duration::from_secs(5))
}

/// The realm goes inside a quoted-string (RFC 9110 §5.6.4, §11.5); refusing `"` and `\`
/// spares every user of it the escaping, and control characters have no place in a header.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Realm(pub String);

impl ConfigValue for Realm {
    fn parse_value(text: &str) -> Result<Self, String> {
        let bad = |c: char| c.is_control() || c == '"' || c == '\\';
        if text.is_empty() || text.len() > 256 || text.chars().any(bad) {
            return Err(format!(
                "invalid realm \"{}\" (expected 1 to 256 characters without quotes, \
                 backslashes or control characters)",
                text.escape_debug()
            ));
        }
        Ok(Realm(text.to_string()))
    }
}

/// The `[auth]` checks that involve the file system or more than one key.
pub(crate) fn resolve_auth(
    raw: Option<&RawAuth>,
    file: &str,
    text: &str,
) -> Result<Option<AuthConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let err = |span: std::ops::Range<usize>, key: &str, message: String| {
        ConfigError::at(file, text, Some(span), Some(format!("auth.{key}")), message)
    };
    let backend = match (&raw.htpasswd, &raw.helper) {
        (Some(_), Some(helper)) => {
            return Err(err(
                helper.span(),
                "helper",
                "set either auth.htpasswd or auth.helper, not both".into(),
            ))
        }
        (None, None) => {
            return Err(ConfigError::new(
                file,
                Some("auth"),
                "[auth] needs either htpasswd = \"/path/to/file\" or \
                 helper = [\"/path/to/program\", \"argument\", …]",
            ))
        }
        (Some(path), None) => {
            if let Some((key, span)) = first_helper_only_key(raw) {
                return Err(err(span, key, "only applies with auth.helper".into()));
            }
            let path = PathBuf::from(path.get_ref());
            check_readable_file(&path).map_err(|why| {
                err(
                    raw.htpasswd.as_ref().map_or(0..0, Spanned::span),
                    "htpasswd",
                    why,
                )
            })?;
            AuthBackend::Htpasswd(path)
        }
        (None, Some(helper)) => {
            let span = helper.span();
            let (program, args) = helper.get_ref().split_first().ok_or_else(|| {
                err(
                    span.clone(),
                    "helper",
                    "needs at least the program's path".into(),
                )
            })?;
            check_program(Path::new(program)).map_err(|why| err(span, "helper", why))?;
            AuthBackend::Helper(HelperConfig {
                program: PathBuf::from(program),
                args: args.to_vec(),
                children: raw
                    .helper_children
                    .as_ref()
                    .map_or(DEFAULT_CHILDREN, |n| n.get_ref().as_usize()),
                concurrency: raw
                    .helper_concurrency
                    .as_ref()
                    .map_or(0, |n| n.get_ref().as_usize()),
                timeout: raw
                    .helper_timeout
                    .as_ref()
                    .map_or(DEFAULT_TIMEOUT, |t| t.get_ref().0 .0),
            })
        }
    };
    Ok(Some(AuthConfig {
        realm: raw.realm.0 .0.clone(),
        backend,
        credentials_ttl: raw.credentials_ttl.0,
        negative_ttl: raw.negative_ttl.0,
    }))
}

/// A `helper_*` key set although there is no helper (the first one, in declaration order).
fn first_helper_only_key(raw: &RawAuth) -> Option<(&'static str, std::ops::Range<usize>)> {
    let children = raw.helper_children.as_ref().map(Spanned::span);
    let concurrency = raw.helper_concurrency.as_ref().map(Spanned::span);
    let timeout = raw.helper_timeout.as_ref().map(Spanned::span);
    children
        .map(|span| ("helper_children", span))
        .or(concurrency.map(|span| ("helper_concurrency", span)))
        .or(timeout.map(|span| ("helper_timeout", span)))
}

/// Opening the file now turns a typo or a permission problem into a start-up error instead of
/// every user being refused later.
fn check_readable_file(path: &Path) -> Result<(), String> {
    if path.as_os_str().is_empty() {
        return Err("empty path (expected the htpasswd file's path)".into());
    }
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read \"{shown}\": {e}"))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read \"{shown}\": {e}"))?;
    if !metadata.is_file() {
        return Err(format!("\"{shown}\" is not a regular file"));
    }
    Ok(())
}

/// Squid requires a helper's full path; so do we, and PATH is not searched, so what runs is
/// exactly what the file names.
fn check_program(program: &Path) -> Result<(), String> {
    let shown = program.display();
    if !program.as_os_str().to_string_lossy().contains('/') {
        return Err(format!(
            "give the helper program's path, e.g. \"/usr/lib/squid/basic_ncsa_auth\" \
             (got \"{shown}\"; PATH is not searched)"
        ));
    }
    let metadata =
        std::fs::metadata(program).map_err(|e| format!("cannot run \"{shown}\": {e}"))?;
    if !metadata.is_file() {
        return Err(format!("\"{shown}\" is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o111 == 0 {
            return Err(format!("\"{shown}\" is not executable"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    const LISTENER: &str = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";

    fn load(auth: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(&format!("{LISTENER}[auth]\n{auth}"), "t.toml")
    }

    /// A scratch directory with an htpasswd file and an executable and a non-executable file.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            use std::os::unix::fs::PermissionsExt;
            let dir = std::env::temp_dir()
                .join(format!("sepia-config-auth-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("htpasswd"), "u:{SHA}x\n").unwrap();
            std::fs::write(dir.join("helper"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(dir.join("helper"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            std::fs::write(dir.join("plain"), "").unwrap();
            Scratch(dir)
        }
        fn path(&self, name: &str) -> String {
            self.0.join(name).display().to_string()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn no_auth_table_means_none() {
        assert_eq!(
            Config::from_toml_str(LISTENER, "t.toml").unwrap().auth,
            None
        );
    }

    #[test]
    fn htpasswd_with_defaults() {
        let s = Scratch::new("defaults");
        let config = load(&format!("htpasswd = \"{}\"\n", s.path("htpasswd"))).unwrap();
        assert_eq!(
            config.auth,
            Some(AuthConfig {
                realm: "Sepia".into(),
                backend: AuthBackend::Htpasswd(s.path("htpasswd").into()),
                credentials_ttl: Duration::from_secs(3600),
                negative_ttl: Duration::from_secs(5),
            })
        );
    }

    #[test]
    fn helper_with_every_key() {
        let s = Scratch::new("every");
        let text = format!(
            "realm = \"Staff only\"\nhelper = [\"{}\", \"/etc/squid/passwd\", \"-v\"]\n\
             helper_children = 3\nhelper_concurrency = 8\nhelper_timeout = \"2s\"\n\
             credentials_ttl = \"2h\"\nnegative_ttl = \"0s\"\n",
            s.path("helper")
        );
        let auth = load(&text).unwrap().auth.unwrap();
        assert_eq!(auth.realm, "Staff only");
        assert_eq!(auth.credentials_ttl, Duration::from_secs(7200));
        assert_eq!(auth.negative_ttl, Duration::ZERO);
        assert_eq!(
            auth.backend,
            AuthBackend::Helper(HelperConfig {
                program: s.path("helper").into(),
                args: vec!["/etc/squid/passwd".into(), "-v".into()],
                children: 3,
                concurrency: 8,
                timeout: Duration::from_secs(2),
            })
        );
        let auth = load(&format!("helper = [\"{}\"]\n", s.path("helper")))
            .unwrap()
            .auth
            .unwrap();
        let AuthBackend::Helper(helper) = auth.backend else {
            panic!("helper expected")
        };
        assert_eq!((helper.children, helper.concurrency), (5, 0));
        assert_eq!(helper.timeout, Duration::from_secs(10));
    }

    /// Each case: the `[auth]` body (after line 4), then the exact error text.
    #[test]
    fn errors_name_file_line_and_key() {
        let s = Scratch::new("errors");
        let (htpasswd, helper, plain) = (s.path("htpasswd"), s.path("helper"), s.path("plain"));
        let missing = s.path("missing");
        let cases = [
            (
                String::new(),
                "t.toml: key 'auth': [auth] needs either htpasswd = \"/path/to/file\" or \
                 helper = [\"/path/to/program\", \"argument\", …]"
                    .to_string(),
            ),
            (
                format!("htpasswd = \"{htpasswd}\"\nhelper = [\"{helper}\"]\n"),
                "t.toml:6: key 'auth.helper': set either auth.htpasswd or auth.helper, not both"
                    .to_string(),
            ),
            (
                format!("htpasswd = \"{missing}\"\n"),
                format!(
                    "t.toml:5: key 'auth.htpasswd': cannot read \"{missing}\": No such file or \
                     directory (os error 2)"
                ),
            ),
            (
                format!("htpasswd = \"{}\"\n", s.0.display()),
                format!(
                    "t.toml:5: key 'auth.htpasswd': \"{}\" is not a regular file",
                    s.0.display()
                ),
            ),
            (
                format!("htpasswd = \"{htpasswd}\"\n\nhelper_children = 2\n"),
                "t.toml:7: key 'auth.helper_children': only applies with auth.helper".into(),
            ),
            (
                "helper = []\n".into(),
                "t.toml:5: key 'auth.helper': needs at least the program's path".into(),
            ),
            (
                "helper = [\"basic_ncsa_auth\"]\n".into(),
                "t.toml:5: key 'auth.helper': give the helper program's path, e.g. \
                 \"/usr/lib/squid/basic_ncsa_auth\" (got \"basic_ncsa_auth\"; PATH is not \
                 searched)"
                    .into(),
            ),
            (
                format!("helper = [\"{plain}\"]\n"),
                format!("t.toml:5: key 'auth.helper': \"{plain}\" is not executable"),
            ),
            (
                format!("helper = [\"{helper}\"]\nhelper_children = 0\n"),
                "t.toml:6: key 'auth.helper_children': 0 is out of range (expected 1 to 256)"
                    .into(),
            ),
            (
                format!("helper = [\"{helper}\"]\nhelper_timeout = \"0s\"\n"),
                "t.toml:6: key 'auth.helper_timeout': timeout \"0s\" must be greater than zero"
                    .into(),
            ),
            (
                format!("htpasswd = \"{htpasswd}\"\nrealm = \"a \\\"b\\\"\"\n"),
                "t.toml:6: key 'auth.realm': invalid realm \"a \\\"b\\\"\" (expected 1 to 256 \
                 characters without quotes, backslashes or control characters)"
                    .into(),
            ),
            (
                format!("htpasswd = \"{htpasswd}\"\ncredentials_tl = \"1h\"\n"),
                "t.toml:6: key 'auth.credentials_tl': unknown key (expected one of realm, \
                 htpasswd, helper, helper_children, helper_concurrency, helper_timeout, \
                 credentials_ttl, negative_ttl)"
                    .into(),
            ),
        ];
        for (body, want) in cases {
            let err = load(&body).unwrap_err();
            assert_eq!(err.to_string(), want, "[auth]\n{body}");
        }
    }

    #[test]
    fn realms() {
        assert_eq!(
            Realm::parse_value("Proxy, please").unwrap().0,
            "Proxy, please"
        );
        for bad in ["", "a\"b", "a\\b", "a\nb", "a\u{7f}"] {
            assert!(Realm::parse_value(bad).is_err(), "{bad:?}");
        }
        assert!(Realm::parse_value(&"x".repeat(257)).is_err());
    }
}
