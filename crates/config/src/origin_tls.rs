//! A route's TLS toward its `https://` origins: `tls_ca`, `tls_server_name` and
//! `tls_insecure_skip_verify`. Only the keys are checked here; the CA file is read by the
//! proxy when it starts (and by `sepia check`), which names the file at fault.

use std::net::IpAddr;
use std::path::PathBuf;

use toml::Spanned;

use crate::error::ConfigError;
use crate::raw::RawRoute;
use crate::values::{is_dns_name, ConfigValue};

/// How a route's `https://` origins are verified (RFC 9110 §4.2.2, §4.3.4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginTls {
    /// `tls_ca`: a PEM file of CA certificates trusted **instead of** the system's roots for
    /// this route (a private CA should not also let every public CA vouch for the origin).
    /// `None`: the system's roots.
    pub ca: Option<PathBuf>,
    /// `tls_server_name`: the name sent in SNI (RFC 6066 §3) and that the certificate must be
    /// valid for. `None`: each origin's own host (an IP literal sends no SNI and is checked
    /// against the certificate's IP addresses).
    pub server_name: Option<String>,
    /// `tls_insecure_skip_verify`: accept any certificate. For labs only: anyone on the path
    /// can then read and change the traffic.
    pub insecure_skip_verify: bool,
}

/// A `tls_server_name` value: a DNS name (stored lowercase) or an IP literal.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TlsServerName(pub String);

impl ConfigValue for TlsServerName {
    fn parse_value(text: &str) -> Result<Self, String> {
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<IpAddr>().is_ok() {
            return Ok(TlsServerName(bare.to_string()));
        }
        if is_dns_name(text) {
            Ok(TlsServerName(text.to_ascii_lowercase()))
        } else {
            Err(format!(
                "invalid server name \"{text}\" (expected a DNS name such as \
                 origin.example.com, or an IP address)"
            ))
        }
    }
}

/// The TLS settings of route `index`. The keys are errors on a route without `https://`
/// origins (they would do nothing), and `tls_ca` contradicts `tls_insecure_skip_verify = true`.
pub(crate) fn resolve_origin_tls(
    raw: &RawRoute,
    index: usize,
    file: &str,
    text: &str,
) -> Result<OriginTls, ConfigError> {
    let fail = |span, key: &str, why: &str| {
        ConfigError::at(
            file,
            text,
            Some(span),
            Some(format!("route[{index}].{key}")),
            why,
        )
    };
    let has_https = raw.origins.get_ref().iter().any(|o| o.0.tls);
    let spans = [
        ("tls_ca", raw.tls_ca.as_ref().map(Spanned::span)),
        (
            "tls_server_name",
            raw.tls_server_name.as_ref().map(Spanned::span),
        ),
        (
            "tls_insecure_skip_verify",
            raw.tls_insecure_skip_verify.as_ref().map(Spanned::span),
        ),
    ];
    for (key, span) in spans {
        if let (Some(span), false) = (span, has_https) {
            return Err(fail(
                span,
                key,
                "only for routes with https:// origins (this route has none)",
            ));
        }
    }
    let insecure = raw
        .tls_insecure_skip_verify
        .as_ref()
        .is_some_and(|b| *b.get_ref());
    let ca = match &raw.tls_ca {
        Some(path) if path.get_ref().is_empty() => {
            return Err(fail(path.span(), "tls_ca", "a file path is required"))
        }
        Some(path) if insecure => {
            return Err(fail(
                path.span(),
                "tls_ca",
                "tls_ca and tls_insecure_skip_verify = true contradict each other (nothing \
                 would be verified against the CA)",
            ))
        }
        Some(path) => Some(PathBuf::from(path.get_ref())),
        None => None,
    };
    Ok(OriginTls {
        ca,
        server_name: raw
            .tls_server_name
            .as_ref()
            .map(|name| name.get_ref().0 .0.clone()),
        insecure_skip_verify: insecure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn load(route_tail: &str, origins: &str) -> Result<Config, String> {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\n\
             [[route]]\nhost = \"*\"\norigins = [{origins}]\n{route_tail}"
        );
        Config::from_toml_str(&text, "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn https_origins_default_to_port_443_and_the_system_roots() {
        let config = load("", "\"https://Origin.example\", \"https://[::1]:8443\"").unwrap();
        let route = &config.routes[0];
        assert_eq!(
            (route.origins[0].host.as_str(), route.origins[0].port),
            ("origin.example", 443)
        );
        assert!(route.origins[0].tls && route.origins[1].tls);
        assert_eq!(route.origins[0].authority(), "origin.example");
        assert_eq!(route.origins[1].authority(), "[::1]:8443");
        assert_eq!(route.tls, OriginTls::default());
    }

    #[test]
    fn http2_is_off_unless_the_route_asks() {
        let config = load("", "\"https://a\"").unwrap();
        assert!(!config.routes[0].http2);
        let config = load("http2 = true\n", "\"https://a\", \"http://b\"").unwrap();
        assert!(config.routes[0].http2);
    }

    #[test]
    fn every_key() {
        let config = load(
            "tls_ca = \"/etc/sepia/ca.pem\"\ntls_server_name = \"Internal.Example\"\n",
            "\"https://10.0.0.1\"",
        )
        .unwrap();
        let tls = &config.routes[0].tls;
        assert_eq!(tls.ca, Some(PathBuf::from("/etc/sepia/ca.pem")));
        assert_eq!(tls.server_name.as_deref(), Some("internal.example"));
        assert!(!tls.insecure_skip_verify);
        let config = load("tls_insecure_skip_verify = true\n", "\"https://10.0.0.1\"").unwrap();
        assert!(config.routes[0].tls.insecure_skip_verify);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "tls_ca = \"/ca.pem\"\n",
                "\"http://a\"",
                "route[0].tls_ca",
                "none",
            ),
            (
                "tls_insecure_skip_verify = true\n",
                "\"http://a\"",
                "route[0].tls_insecure_skip_verify",
                "https",
            ),
            (
                "tls_ca = \"\"\n",
                "\"https://a\"",
                "route[0].tls_ca",
                "path",
            ),
            (
                "tls_ca = \"/ca.pem\"\ntls_insecure_skip_verify = true\n",
                "\"https://a\"",
                "route[0].tls_ca",
                "contradict",
            ),
            (
                "tls_server_name = \"a b\"\n",
                "\"https://a\"",
                "route[0].tls_server_name",
                "invalid server name",
            ),
            (
                "tls_insecure_skip_verify = \"yes\"\n",
                "\"https://a\"",
                "route[0].tls_insecure_skip_verify",
                "",
            ),
            (
                "tls_verify = false\n",
                "\"https://a\"",
                "route[0].tls_verify",
                "unknown key",
            ),
        ];
        for (tail, origins, key, why) in cases {
            let err = load(tail, origins).unwrap_err();
            assert!(err.contains(&format!("key '{key}'")), "{tail}: {err}");
            assert!(err.contains(why), "{tail}: {err}");
            assert!(err.starts_with("t.toml:"), "{err}");
        }
    }

    #[test]
    fn server_names_are_dns_names_or_ip_literals() {
        for (good, stored) in [
            ("example.com", "example.com"),
            ("A-1.Example", "a-1.example"),
            ("localhost", "localhost"),
            ("192.0.2.7", "192.0.2.7"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("2001:db8::1", "2001:db8::1"),
        ] {
            assert_eq!(
                TlsServerName::parse_value(good),
                Ok(TlsServerName(stored.into()))
            );
        }
        for bad in [
            "",
            "a..b",
            "-a.b",
            "a_b.c",
            "*.example.com",
            "a/b",
            "é.example",
        ] {
            assert!(TlsServerName::parse_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_readme_example_is_valid() {
        let doc = include_str!("../../../README.md");
        let section = &doc[doc.find("#### Origins over TLS\n").expect("the section")..];
        let start = section.find("```toml\n").expect("a toml example") + 8;
        let len = section[start..].find("```").unwrap();
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\n{}",
            &section[start..start + len]
        );
        let config = Config::from_toml_str(&text, "README.md").unwrap();
        let route = &config.routes[0];
        assert_eq!(route.origins[1].port, 8443);
        assert_eq!(
            route.tls.server_name.as_deref(),
            Some("www.internal.example")
        );
        assert_eq!(
            route.tls.ca,
            Some(PathBuf::from("/etc/sepia/internal-ca.pem"))
        );
    }
}
