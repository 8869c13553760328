//! Known header names, classified once while parsing so the rest of the proxy compares a `u8`
//! instead of strings (Squid spent a measurable share of its time in `httpHeaderIdByName`).

/// The header fields the proxy reads. Field names are case-insensitive (RFC 9110 §5.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HeaderId {
    #[default]
    Other,
    Host,
    Connection,
    ContentLength,
    TransferEncoding,
    Te,
    Trailer,
    Upgrade,
    KeepAlive,
    ProxyConnection,
    ProxyAuthorization,
    ProxyAuthenticate,
    Expect,
    CacheControl,
    Pragma,
    Date,
    Age,
    Expires,
    LastModified,
    ETag,
    IfNoneMatch,
    IfModifiedSince,
    IfMatch,
    IfUnmodifiedSince,
    IfRange,
    Range,
    Vary,
    Authorization,
    Via,
    XForwardedFor,
    Forwarded,
    Location,
    ContentLocation,
    ContentType,
    ContentRange,
    Referer,
    UserAgent,
    Server,
    AcceptRanges,
    /// RFC 9213's targeted field for CDNs: read on every miss of a reverse listener.
    CdnCacheControl,
    /// The two request fields whose members the Vary secondary key normalises (RFC 9111
    /// §4.1): read on every miss of a response that varies on them.
    AcceptEncoding,
    AcceptLanguage,
}

/// Longest known name ("proxy-authorization", "if-unmodified-since").
const LONGEST_KNOWN: usize = 19;

/// Which `HeaderId`s a head carries, one bit each, recorded while its fields are collected.
/// Most lookups are for fields a head does not have (a miss asks its request and its response
/// for some twenty fields, most of them absent): with the set, such a lookup is one bit test
/// instead of a pass over every field line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IdSet(u64);

// Every id must have its bit.
const _: () = assert!((HeaderId::AcceptLanguage as u8) < 64);

impl IdSet {
    pub(crate) fn insert(&mut self, id: HeaderId) {
        self.0 |= 1 << id as u8;
    }

    pub(crate) fn remove(&mut self, id: HeaderId) {
        self.0 &= !(1 << id as u8);
    }

    pub(crate) fn contains(self, id: HeaderId) -> bool {
        self.0 & (1 << id as u8) != 0
    }
}

impl HeaderId {
    /// Classifies a field name, ASCII case-insensitively. Names longer than any known one are
    /// rejected on their length; others are lower-cased into a stack buffer and matched, which
    /// the compiler turns into a switch on the length and a few word compares (measured with
    /// callgrind: half the instructions of comparing candidates with `eq_ignore_ascii_case`).
    pub fn from_name(name: &[u8]) -> HeaderId {
        use HeaderId::*;
        if name.len() > LONGEST_KNOWN {
            return Other;
        }
        // Lower-casing the whole fixed-size buffer (not just `name.len()` bytes) lets the
        // compiler do it in a couple of SIMD instructions.
        let mut lower = [0u8; 32];
        lower[..name.len()].copy_from_slice(name);
        lower.make_ascii_lowercase();
        match &lower[..name.len()] {
            b"te" => Te,
            b"age" => Age,
            b"via" => Via,
            b"host" => Host,
            b"date" => Date,
            b"etag" => ETag,
            b"vary" => Vary,
            b"range" => Range,
            b"pragma" => Pragma,
            b"expect" => Expect,
            b"server" => Server,
            b"trailer" => Trailer,
            b"upgrade" => Upgrade,
            b"expires" => Expires,
            b"referer" => Referer,
            b"if-match" => IfMatch,
            b"if-range" => IfRange,
            b"location" => Location,
            b"forwarded" => Forwarded,
            b"connection" => Connection,
            b"keep-alive" => KeepAlive,
            b"user-agent" => UserAgent,
            b"content-type" => ContentType,
            b"cache-control" => CacheControl,
            b"if-none-match" => IfNoneMatch,
            b"last-modified" => LastModified,
            b"authorization" => Authorization,
            b"content-range" => ContentRange,
            b"accept-ranges" => AcceptRanges,
            b"content-length" => ContentLength,
            b"x-forwarded-for" => XForwardedFor,
            b"proxy-connection" => ProxyConnection,
            b"content-location" => ContentLocation,
            b"transfer-encoding" => TransferEncoding,
            b"if-modified-since" => IfModifiedSince,
            b"cdn-cache-control" => CdnCacheControl,
            b"accept-encoding" => AcceptEncoding,
            b"accept-language" => AcceptLanguage,
            b"proxy-authenticate" => ProxyAuthenticate,
            b"proxy-authorization" => ProxyAuthorization,
            b"if-unmodified-since" => IfUnmodifiedSince,
            _ => Other,
        }
    }

    /// The field's name in lower case (`b""` for `Other`): what a reader that did not
    /// classify names at parse time compares field names with.
    pub const fn name(self) -> &'static [u8] {
        use HeaderId::*;
        match self {
            Other => b"",
            Te => b"te",
            Age => b"age",
            Via => b"via",
            Host => b"host",
            Date => b"date",
            ETag => b"etag",
            Vary => b"vary",
            Range => b"range",
            Pragma => b"pragma",
            Expect => b"expect",
            Server => b"server",
            Trailer => b"trailer",
            Upgrade => b"upgrade",
            Expires => b"expires",
            Referer => b"referer",
            IfMatch => b"if-match",
            IfRange => b"if-range",
            Location => b"location",
            Forwarded => b"forwarded",
            Connection => b"connection",
            KeepAlive => b"keep-alive",
            UserAgent => b"user-agent",
            ContentType => b"content-type",
            CacheControl => b"cache-control",
            IfNoneMatch => b"if-none-match",
            LastModified => b"last-modified",
            Authorization => b"authorization",
            ContentRange => b"content-range",
            AcceptRanges => b"accept-ranges",
            ContentLength => b"content-length",
            XForwardedFor => b"x-forwarded-for",
            ProxyConnection => b"proxy-connection",
            ContentLocation => b"content-location",
            TransferEncoding => b"transfer-encoding",
            IfModifiedSince => b"if-modified-since",
            CdnCacheControl => b"cdn-cache-control",
            AcceptEncoding => b"accept-encoding",
            AcceptLanguage => b"accept-language",
            ProxyAuthenticate => b"proxy-authenticate",
            ProxyAuthorization => b"proxy-authorization",
            IfUnmodifiedSince => b"if-unmodified-since",
        }
    }

    /// The connection-specific fields a proxy must not forward (RFC 9110 §7.6.1): Connection and
    /// the fields it conventionally names (Keep-Alive, Proxy-Connection, TE, Transfer-Encoding,
    /// Upgrade, Trailer). Proxy-Authorization/Proxy-Authenticate are deliberately not included:
    /// whether to consume or forward them is the proxy's decision (RFC 9110 §11.7).
    /// Fields listed by name in a Connection header are hop-by-hop too; see
    /// `RequestHead::connection_lists`.
    pub fn is_hop_by_hop(self) -> bool {
        matches!(
            self,
            HeaderId::Connection
                | HeaderId::KeepAlive
                | HeaderId::ProxyConnection
                | HeaderId::Te
                | HeaderId::TransferEncoding
                | HeaderId::Upgrade
                | HeaderId::Trailer
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use HeaderId::*;

    const ALL: &[(&str, HeaderId)] = &[
        ("Host", Host),
        ("Connection", Connection),
        ("Content-Length", ContentLength),
        ("Transfer-Encoding", TransferEncoding),
        ("TE", Te),
        ("Trailer", Trailer),
        ("Upgrade", Upgrade),
        ("Keep-Alive", KeepAlive),
        ("Proxy-Connection", ProxyConnection),
        ("Proxy-Authorization", ProxyAuthorization),
        ("Proxy-Authenticate", ProxyAuthenticate),
        ("Expect", Expect),
        ("Cache-Control", CacheControl),
        ("Pragma", Pragma),
        ("Date", Date),
        ("Age", Age),
        ("Expires", Expires),
        ("Last-Modified", LastModified),
        ("ETag", ETag),
        ("If-None-Match", IfNoneMatch),
        ("If-Modified-Since", IfModifiedSince),
        ("If-Match", IfMatch),
        ("If-Unmodified-Since", IfUnmodifiedSince),
        ("If-Range", IfRange),
        ("Range", Range),
        ("Vary", Vary),
        ("Authorization", Authorization),
        ("Via", Via),
        ("X-Forwarded-For", XForwardedFor),
        ("Forwarded", Forwarded),
        ("Location", Location),
        ("Content-Location", ContentLocation),
        ("Content-Type", ContentType),
        ("Content-Range", ContentRange),
        ("Referer", Referer),
        ("User-Agent", UserAgent),
        ("Server", Server),
        ("Accept-Ranges", AcceptRanges),
        ("CDN-Cache-Control", CdnCacheControl),
        ("Accept-Encoding", AcceptEncoding),
        ("Accept-Language", AcceptLanguage),
    ];

    #[test]
    fn every_known_name_in_every_case() {
        for (name, id) in ALL {
            assert_eq!(HeaderId::from_name(name.as_bytes()), *id, "{name}");
            assert_eq!(
                HeaderId::from_name(name.to_ascii_lowercase().as_bytes()),
                *id,
                "{name}"
            );
            assert_eq!(
                HeaderId::from_name(name.to_ascii_uppercase().as_bytes()),
                *id,
                "{name}"
            );
        }
        // 41 known ids plus Other: a new variant must be added to this table too.
        assert_eq!(ALL.len(), AcceptLanguage as usize);
    }

    #[test]
    fn every_id_has_its_own_bit_in_a_set() {
        let ids: Vec<HeaderId> = std::iter::once(Other)
            .chain(ALL.iter().map(|&(_, id)| id))
            .collect();
        for &id in &ids {
            let mut set = IdSet::default();
            set.insert(id);
            for &other in &ids {
                assert_eq!(set.contains(other), other == id, "{id:?} / {other:?}");
            }
            set.remove(id);
            assert_eq!(set, IdSet::default(), "{id:?}");
        }
    }

    #[test]
    fn every_known_id_names_itself_in_lower_case() {
        for (name, id) in ALL {
            assert_eq!(id.name(), name.to_ascii_lowercase().as_bytes(), "{name}");
            assert_eq!(HeaderId::from_name(id.name()), *id, "{name}");
        }
        assert_eq!(Other.name(), b"");
    }

    #[test]
    fn near_misses_are_other() {
        let misses: &[&[u8]] = &[
            b"",
            b"T",
            b"Hosts",
            b"Hos",
            b"Content-Lengths",
            b"Content_Length",
            b"Content-Lengt\xe8",
            b"Xost",
            b"X-Forwarded-Fo",
            b"Transfer-Encodinh",
            b"Accept",
            b"Set-Cookie",
            b"\xc8ost",
        ];
        for m in misses {
            assert_eq!(
                HeaderId::from_name(m),
                Other,
                "{:?}",
                String::from_utf8_lossy(m)
            );
        }
    }

    #[test]
    fn hop_by_hop_set() {
        let hop = [
            Connection,
            KeepAlive,
            ProxyConnection,
            Te,
            TransferEncoding,
            Upgrade,
            Trailer,
        ];
        for (_, id) in ALL {
            assert_eq!(id.is_hop_by_hop(), hop.contains(id), "{id:?}");
        }
        assert!(!ProxyAuthorization.is_hop_by_hop());
        assert!(!ProxyAuthenticate.is_hop_by_hop());
        assert!(!Other.is_hop_by_hop());
    }
}
