//! The `Cache-Status` response field (RFC 9211) and small integer
//! formatting without `fmt` on the hot path.

/// Why the cache forwarded the request (RFC 9211 §2.2 `fwd` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forward {
    /// Bypassed by configuration.
    Bypass,
    /// The method is not cacheable.
    Method,
    /// No stored response for the URI.
    UriMiss,
    /// A stored response for the URI, but no variant matched `Vary`.
    VaryMiss,
    /// The cache cannot tell URI miss from vary miss.
    Miss,
    /// The request asked for it (e.g. `no-cache`, `max-age=0`).
    Request,
    /// The stored response was stale.
    Stale,
    /// The stored response was partial.
    Partial,
}

impl Forward {
    /// The RFC 9211 token.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Bypass => "bypass",
            Forward::Method => "method",
            Forward::UriMiss => "uri-miss",
            Forward::VaryMiss => "vary-miss",
            Forward::Miss => "miss",
            Forward::Request => "request",
            Forward::Stale => "stale",
            Forward::Partial => "partial",
        }
    }
}

/// One `Cache-Status` list member for this cache (RFC 9211 §2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStatus<'a> {
    /// Served from cache without contacting the origin (§2.1).
    pub hit: bool,
    /// Forwarded, and why (§2.2).
    pub fwd: Option<Forward>,
    /// Status of the origin's response to the forwarded request (§2.3).
    pub fwd_status: Option<u16>,
    /// Remaining freshness in seconds, negative when stale (§2.4).
    pub ttl: Option<i64>,
    /// The response was stored (§2.5).
    pub stored: bool,
    /// The request was collapsed with another (§2.6).
    pub collapsed: bool,
    /// Cache key, for debugging (§2.7).
    pub key: Option<&'a [u8]>,
    /// Free-form detail, e.g. a [`crate::NotStorableReason`] token (§2.8).
    pub detail: Option<&'a str>,
}

impl<'a> CacheStatus<'a> {
    /// A hit with `ttl` seconds of freshness left.
    pub fn hit(ttl: i64) -> Self {
        Self {
            hit: true,
            ttl: Some(ttl),
            ..Self::default()
        }
    }

    /// A forwarded request.
    pub fn forward(reason: Forward) -> Self {
        Self {
            fwd: Some(reason),
            ..Self::default()
        }
    }

    /// Sets `fwd-status`.
    pub fn with_fwd_status(mut self, status: u16) -> Self {
        self.fwd_status = Some(status);
        self
    }

    /// Sets `ttl`.
    pub fn with_ttl(mut self, ttl: i64) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Marks the response as stored.
    pub fn with_stored(mut self) -> Self {
        self.stored = true;
        self
    }

    /// Marks the request as collapsed.
    pub fn with_collapsed(mut self) -> Self {
        self.collapsed = true;
        self
    }

    /// Sets `key`.
    pub fn with_key(mut self, key: &'a [u8]) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets `detail`.
    pub fn with_detail(mut self, detail: &'a str) -> Self {
        self.detail = Some(detail);
        self
    }

    /// Appends this member, e.g. `sepia; fwd=stale; fwd-status=304; ttl=60`,
    /// to `out` as a Structured Field item (RFC 8941): the cache name as a
    /// token when it is one, else as a string.
    pub fn write(&self, cache_name: &str, out: &mut Vec<u8>) {
        write_token_or_string(cache_name.as_bytes(), out);
        if self.hit {
            out.extend_from_slice(b"; hit");
        }
        if let Some(fwd) = self.fwd {
            out.extend_from_slice(b"; fwd=");
            out.extend_from_slice(fwd.as_str().as_bytes());
        }
        if let Some(status) = self.fwd_status {
            out.extend_from_slice(b"; fwd-status=");
            write_decimal(u64::from(status), out);
        }
        if self.stored {
            out.extend_from_slice(b"; stored");
        }
        if self.collapsed {
            out.extend_from_slice(b"; collapsed");
        }
        if let Some(ttl) = self.ttl {
            out.extend_from_slice(b"; ttl=");
            if ttl < 0 {
                out.push(b'-');
            }
            write_decimal(ttl.unsigned_abs(), out);
        }
        if let Some(key) = self.key {
            out.extend_from_slice(b"; key=");
            write_sf_string(key, out);
        }
        if let Some(detail) = self.detail {
            out.extend_from_slice(b"; detail=");
            write_token_or_string(detail.as_bytes(), out);
        }
    }
}

/// Appends `value` in decimal.
pub fn write_decimal(mut value: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// `sf-token` of RFC 8941 §3.3.4.
fn is_sf_token(value: &[u8]) -> bool {
    match value.split_first() {
        Some((&first, rest)) => {
            (first.is_ascii_alphabetic() || first == b'*')
                && rest
                    .iter()
                    .all(|&b| crate::fields::is_tchar(b) || b == b':' || b == b'/')
        }
        None => false,
    }
}

fn write_token_or_string(value: &[u8], out: &mut Vec<u8>) {
    if is_sf_token(value) {
        out.extend_from_slice(value);
    } else {
        write_sf_string(value, out);
    }
}

/// `sf-string` (RFC 8941 §3.3.3): printable ASCII, `"` and `\` escaped;
/// other bytes cannot be represented and become `?`.
fn write_sf_string(value: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in value {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            0x20..=0x7e => out.push(b),
            _ => out.push(b'?'),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(status: CacheStatus<'_>, name: &str) -> String {
        let mut out = Vec::new();
        status.write(name, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn members() {
        let cases: &[(CacheStatus<'_>, &str, &str)] = &[
            (CacheStatus::hit(376), "sepia", "sepia; hit; ttl=376"),
            (
                CacheStatus::forward(Forward::Miss).with_stored(),
                "sepia",
                "sepia; fwd=miss; stored",
            ),
            (
                CacheStatus::forward(Forward::UriMiss),
                "sepia",
                "sepia; fwd=uri-miss",
            ),
            (
                CacheStatus::forward(Forward::VaryMiss),
                "sepia",
                "sepia; fwd=vary-miss",
            ),
            (
                CacheStatus::forward(Forward::Request),
                "sepia",
                "sepia; fwd=request",
            ),
            (
                CacheStatus::forward(Forward::Stale)
                    .with_fwd_status(304)
                    .with_ttl(-5)
                    .with_stored(),
                "sepia",
                "sepia; fwd=stale; fwd-status=304; stored; ttl=-5",
            ),
            (
                CacheStatus::forward(Forward::Miss)
                    .with_collapsed()
                    .with_detail("no-store"),
                "sepia",
                "sepia; fwd=miss; collapsed; detail=no-store",
            ),
            (
                CacheStatus::forward(Forward::Method).with_detail("two words"),
                "sepia",
                "sepia; fwd=method; detail=\"two words\"",
            ),
            (
                CacheStatus::hit(0).with_key(b"http://h/\"a\\\x01"),
                "sepia",
                "sepia; hit; ttl=0; key=\"http://h/\\\"a\\\\?\"",
            ),
            (
                CacheStatus::forward(Forward::Bypass),
                "my cache",
                "\"my cache\"; fwd=bypass",
            ),
            (
                CacheStatus::forward(Forward::Partial),
                "edge-1",
                "edge-1; fwd=partial",
            ),
        ];
        for (status, name, expected) in cases {
            assert_eq!(render(*status, name), *expected);
        }
    }

    #[test]
    fn decimals() {
        for value in [0u64, 7, 10, 1234567890, u64::MAX] {
            let mut out = Vec::new();
            write_decimal(value, &mut out);
            assert_eq!(out, value.to_string().as_bytes());
        }
        assert_eq!(
            render(CacheStatus::hit(i64::MIN), "c"),
            format!("c; hit; ttl={}", i64::MIN)
        );
    }

    #[test]
    fn sf_tokens() {
        assert!(is_sf_token(b"sepia"));
        assert!(is_sf_token(b"*x/y:z"));
        assert!(!is_sf_token(b"1abc"));
        assert!(!is_sf_token(b""));
        assert!(!is_sf_token(b"a b"));
    }
}
