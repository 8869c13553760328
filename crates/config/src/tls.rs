//! `[listen.tls]`: TLS termination on a listener. The model types, their raw (serde) form and
//! the checks that need more than one key live together here so the section is read in one
//! place. Only file names are checked here; the certificates and keys themselves are read and
//! matched by the proxy when it starts (and by `sepia check`), which names the file at fault.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::error::ConfigError;
use crate::model::Mode;
use crate::raw::Parsed;
use crate::values::{is_dns_name, ConfigValue, Timeout};

/// `[listen.tls]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerTls {
    /// `certificates`: one or more `{ cert, key, names }`. A client's SNI picks the certificate
    /// whose names match it exactly, then by wildcard (`*.example.com` matches one label);
    /// without SNI, or without a match, the first certificate is used.
    pub certificates: Vec<CertificateFiles>,
    /// `alpn`: the application protocols offered, in order of preference (default `["h2",
    /// "http/1.1"]`).
    pub alpn: Vec<AlpnProtocol>,
    /// `min_version`: `"1.2"` (default) or `"1.3"`. Nothing older is ever offered.
    pub min_version: TlsVersion,
    /// `session_tickets` (default true): stateless resumption tickets, encrypted with keys that
    /// rotate every six hours and are shared by every worker, so a client resumes wherever it
    /// lands.
    pub session_tickets: bool,
    /// `reload_check` (default `"10s"`): how often the certificate and key files are looked at;
    /// changed files are read again and used for new connections, open ones keep theirs.
    pub reload_check: Duration,
}

/// One `{ cert, key, names }` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CertificateFiles {
    /// `cert`: a PEM file, the server certificate first, then its chain.
    pub cert: PathBuf,
    /// `key`: a PEM file with the certificate's private key (PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
    /// `names`: the server names it serves (`example.com`, `*.example.com`), lowercase. Empty
    /// means the DNS names of the certificate's subjectAltName.
    pub names: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlpnProtocol {
    /// `"h2"`: HTTP/2 (RFC 9113 §3.2).
    H2,
    /// `"http/1.1"`.
    Http11,
}

impl AlpnProtocol {
    /// The protocol's ALPN identifier (RFC 7301 §6).
    pub fn id(self) -> &'static [u8] {
        match self {
            AlpnProtocol::H2 => b"h2",
            AlpnProtocol::Http11 => b"http/1.1",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub certificates: Spanned<Vec<RawCertificate>>,
    #[serde(default)]
    pub alpn: Option<Spanned<Vec<Parsed<AlpnProtocol>>>>,
    #[serde(default)]
    pub min_version: Option<Parsed<TlsVersion>>,
    #[serde(default)]
    pub session_tickets: Option<bool>,
    #[serde(default)]
    pub reload_check: Option<Parsed<Timeout>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCertificate {
    pub cert: Spanned<String>,
    pub key: Spanned<String>,
    #[serde(default)]
    pub names: Vec<Spanned<Parsed<ServerNamePattern>>>,
}

/// A server name or `*.` wildcard, as a certificate's names are written (RFC 6125 §6.4.3: the
/// wildcard is the whole leftmost label).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerNamePattern(pub String);

impl ConfigValue for ServerNamePattern {
    fn parse_value(text: &str) -> Result<Self, String> {
        let name = text.strip_prefix("*.").unwrap_or(text);
        if is_dns_name(name) && !name.bytes().any(|b| b.is_ascii_uppercase()) {
            Ok(ServerNamePattern(text.to_string()))
        } else {
            Err(format!(
                "invalid server name \"{text}\" (expected a lowercase DNS name such as \
                 example.com, or *.example.com)"
            ))
        }
    }
}

impl ConfigValue for AlpnProtocol {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text {
            "h2" => Ok(AlpnProtocol::H2),
            "http/1.1" => Ok(AlpnProtocol::Http11),
            _ => Err(format!(
                "unknown protocol \"{text}\" (expected \"h2\" or \"http/1.1\")"
            )),
        }
    }
}

impl ConfigValue for TlsVersion {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text {
            "1.2" => Ok(TlsVersion::V1_2),
            "1.3" => Ok(TlsVersion::V1_3),
            _ => Err(format!(
                "unsupported TLS version \"{text}\" (expected \"1.2\" or \"1.3\"; older \
                 versions are broken and never offered)"
            )),
        }
    }
}

/// The TLS of listener `index`, checked against its `mode`.
pub(crate) fn resolve_tls(
    raw: Option<&Spanned<RawTls>>,
    mode: Mode,
    index: usize,
    file: &str,
    text: &str,
) -> Result<Option<ListenerTls>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let fail = |span, key: &str, why: String| {
        ConfigError::at(
            file,
            text,
            Some(span),
            Some(format!("listen[{index}].tls{key}")),
            why,
        )
    };
    if mode.is_interception() {
        return Err(fail(
            raw.span(),
            "",
            "TLS on an interception listener would be TLS interception, which Sepia does not \
             do yet; use a forward or reverse listener"
                .into(),
        ));
    }
    let tls = raw.get_ref();
    let certificates = resolve_certificates(&tls.certificates)
        .map_err(|(span, key, why)| fail(span, &format!(".certificates{key}"), why))?;
    let alpn = match &tls.alpn {
        None => vec![AlpnProtocol::H2, AlpnProtocol::Http11],
        Some(list) => {
            let mut alpn: Vec<AlpnProtocol> = Vec::new();
            for p in list.get_ref() {
                if alpn.contains(&p.0) {
                    return Err(fail(
                        list.span(),
                        ".alpn",
                        "a protocol is listed twice".into(),
                    ));
                }
                alpn.push(p.0);
            }
            if alpn.is_empty() {
                return Err(fail(
                    list.span(),
                    ".alpn",
                    "offer at least one protocol".into(),
                ));
            }
            alpn
        }
    };
    Ok(Some(ListenerTls {
        certificates,
        alpn,
        min_version: tls.min_version.as_ref().map_or(TlsVersion::V1_2, |v| v.0),
        session_tickets: tls.session_tickets.unwrap_or(true),
        reload_check: tls
            .reload_check
            .as_ref()
            .map_or(Duration::from_secs(10), |t| t.0 .0),
    }))
}

type Failure = (std::ops::Range<usize>, String, String);

fn resolve_certificates(
    raw: &Spanned<Vec<RawCertificate>>,
) -> Result<Vec<CertificateFiles>, Failure> {
    if raw.get_ref().is_empty() {
        return Err((
            raw.span(),
            String::new(),
            "at least one { cert, key } is required".into(),
        ));
    }
    let mut out: Vec<CertificateFiles> = Vec::with_capacity(raw.get_ref().len());
    for (i, c) in raw.get_ref().iter().enumerate() {
        for (what, path) in [("cert", &c.cert), ("key", &c.key)] {
            if path.get_ref().is_empty() {
                return Err((
                    path.span(),
                    format!("[{i}].{what}"),
                    "a file path is required".into(),
                ));
            }
        }
        let mut names: Vec<String> = Vec::with_capacity(c.names.len());
        for name in &c.names {
            let name = &name.get_ref().0 .0;
            let earlier = out.iter().position(|o| o.names.contains(name));
            if names.contains(name) || earlier.is_some() {
                let span = c.names.first().map_or(0..0, |n| n.span());
                return Err((
                    span,
                    format!("[{i}].names"),
                    format!("\"{name}\" is listed twice"),
                ));
            }
            names.push(name.clone());
        }
        out.push(CertificateFiles {
            cert: PathBuf::from(c.cert.get_ref()),
            key: PathBuf::from(c.key.get_ref()),
            names,
        });
    }
    Ok(out)
}

impl ListenerTls {
    /// The `--tls-cert FILE --tls-key FILE` quick start: one certificate serving every name,
    /// every other key at its default.
    pub fn quick(cert: PathBuf, key: PathBuf) -> ListenerTls {
        ListenerTls {
            certificates: vec![CertificateFiles {
                cert,
                key,
                names: Vec::new(),
            }],
            alpn: vec![AlpnProtocol::H2, AlpnProtocol::Http11],
            min_version: TlsVersion::V1_2,
            session_tickets: true,
            reload_check: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    const ROUTE: &str = "[[route]]\nhost = \"*\"\norigins = [\"http://127.0.0.1:8080\"]\n";

    fn load(listener_tail: &str) -> Result<Config, String> {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8443\"\nmode = \"reverse\"\n{listener_tail}\n{ROUTE}"
        );
        Config::from_toml_str(&text, "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_tls_table() {
        let config = load(
            "[listen.tls]\ncertificates = [\n  { cert = \"/c/a.pem\", key = \"/c/a.key\" },\n  \
             { cert = \"/c/b.pem\", key = \"/c/b.key\", names = [\"*.example.org\", \"example.org\"] },\n]\n\
             alpn = [\"http/1.1\"]\nmin_version = \"1.3\"\nsession_tickets = false\nreload_check = \"2s\"\n",
        )
        .unwrap();
        let tls = config.listeners[0].tls.as_ref().unwrap();
        assert_eq!(tls.certificates.len(), 2);
        assert_eq!(tls.certificates[1].cert, PathBuf::from("/c/b.pem"));
        assert_eq!(tls.certificates[1].names, ["*.example.org", "example.org"]);
        assert!(tls.certificates[0].names.is_empty());
        assert_eq!(tls.alpn, [AlpnProtocol::Http11]);
        assert_eq!(tls.min_version, TlsVersion::V1_3);
        assert!(!tls.session_tickets);
        assert_eq!(tls.reload_check, Duration::from_secs(2));
    }

    #[test]
    fn defaults_offer_h2_and_http11_from_tls_1_2_with_tickets() {
        let config =
            load("[listen.tls]\ncertificates = [{ cert = \"/c/a.pem\", key = \"/c/a.key\" }]\n")
                .unwrap();
        let tls = config.listeners[0].tls.as_ref().unwrap();
        assert_eq!(
            tls,
            &ListenerTls::quick("/c/a.pem".into(), "/c/a.key".into())
        );
        assert!(config.listeners[0].tls.is_some());
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[listen.tls]\ncertificates = []\n", "listen[0].tls.certificates"),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\" }]\n",
                "listen[0].tls.certificates[0].key",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"\", key = \"/k\" }]\n",
                "listen[0].tls.certificates[0].cert",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\", names = [\"A.com\"] }]\n",
                "listen[0].tls.certificates[0].names[0]",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\", names = [\"a.com\"] }, \
                 { cert = \"/b\", key = \"/k\", names = [\"a.com\"] }]\n",
                "listen[0].tls.certificates[1].names",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\" }]\nmin_version = \"1.1\"\n",
                "listen[0].tls.min_version",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\" }]\nalpn = [\"h3\"]\n",
                "listen[0].tls.alpn[0]",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\" }]\nalpn = []\n",
                "listen[0].tls.alpn",
            ),
            (
                "[listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\" }]\nciphers = 1\n",
                "listen[0].tls.ciphers",
            ),
        ];
        for (tail, key) in cases {
            let err = load(tail).unwrap_err();
            assert!(err.contains(&format!("key '{key}'")), "{tail}: {err}");
        }
    }

    #[test]
    fn the_readme_example_is_valid() {
        let doc = include_str!("../../../README.md");
        let section = &doc[doc.find("### TLS\n").expect("a TLS section")..];
        let start = section.find("```toml\n").expect("a toml example") + 8;
        let len = section[start..].find("```").unwrap();
        let config = Config::from_toml_str(&section[start..start + len], "README.md").unwrap();
        let tls = config.listeners[0].tls.as_ref().unwrap();
        assert_eq!(tls.certificates.len(), 2);
        assert_eq!(tls.certificates[1].names, ["*.example.org", "example.org"]);
    }

    #[test]
    fn interception_listeners_refuse_tls() {
        let text = "[[listen]]\naddress = \"127.0.0.1:3129\"\nmode = \"intercept\"\n\
                    [listen.tls]\ncertificates = [{ cert = \"/a\", key = \"/k\" }]\n";
        let err = Config::from_toml_str(text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("TLS interception"), "{err}");
    }

    #[test]
    fn server_names_are_lowercase_dns_names_or_one_wildcard_label() {
        for good in ["example.com", "*.example.com", "a-b.c0", "localhost"] {
            assert!(ServerNamePattern::parse_value(good).is_ok(), "{good}");
        }
        for bad in [
            "Example.com",
            "*.*.example.com",
            "a*.example.com",
            "example..com",
            "-a.com",
            "",
            "*.",
            "exa mple.com",
        ] {
            assert!(ServerNamePattern::parse_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_tls_1_2_and_1_3() {
        assert_eq!(TlsVersion::parse_value("1.3"), Ok(TlsVersion::V1_3));
        assert!(TlsVersion::parse_value("1.1").is_err());
        assert!(TlsVersion::parse_value("1.0").is_err());
    }
}
