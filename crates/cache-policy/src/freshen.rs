//! Which fields are stored (RFC 9111 §3.1) and how a 304 (or a `HEAD`
//! response) updates a stored response (RFC 9111 §3.2, §4.3.3–§4.3.5).

use bytes::Bytes;

use crate::cache_control::{qualified_field_names, ResponseCacheControl};
use crate::etag::EntityTag;
use crate::fields::{list_members, FieldList, Fields};
use crate::stored::StoredMeta;
use sepia_http1::HeaderId;

/// Fields a cache never stores or forwards from a stored response: the
/// hop-by-hop fields of RFC 9110 §7.6.1 (§3.1 "MUST NOT store"), and the
/// proxy authentication fields, which concern one hop's proxy, not the
/// resource (§3.1: "fields that are specific to the proxy").
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    const HOP_BY_HOP: [&[u8]; 9] = [
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authentication-info",
        b"proxy-authorization",
    ];
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// [`is_hop_by_hop`] for a line whose name's [`HeaderId`] is `id`: a match on
/// the id, and one name compare for the one such field the codec does not know.
fn is_hop_by_hop_line(id: HeaderId, name: &[u8]) -> bool {
    use HeaderId::*;
    match id {
        Connection | ProxyConnection | KeepAlive | Te | TransferEncoding | Upgrade
        | ProxyAuthenticate | ProxyAuthorization => true,
        Other => name.eq_ignore_ascii_case(b"proxy-authentication-info"),
        _ => false,
    }
}

/// Fields a 304 or `HEAD` response never overwrites in a stored response.
///
/// §3.2: "caches MUST NOT update Content-Length". The others describe the
/// stored content itself (its coding, digest, range, validators): §3.2 lets a
/// cache keep fields needed for the integrity of the stored response, and
/// replacing them would pair old content with new metadata. A 304 says the
/// stored representation is current, so its validators stay as they are:
/// the http-cache-tests `304-etag-update-response-*` family expects the
/// stored `ETag` kept, and keeping `Last-Modified` lets a client's
/// `If-Modified-Since` of the stored date still match after a revalidation
/// whose 304 carried a regenerated date (`conditional-lm-stale`).
pub fn is_never_updated(name: &[u8]) -> bool {
    const KEPT: [&[u8]; 6] = [
        b"content-length",
        b"content-encoding",
        b"content-md5",
        b"content-range",
        b"etag",
        b"last-modified",
    ];
    KEPT.iter().any(|k| name.eq_ignore_ascii_case(k))
}

/// Whether `name` is listed in any `Connection` line of `fields`.
fn connection_listed<F: Fields>(fields: &F, name: &[u8]) -> bool {
    fields
        .known(HeaderId::Connection)
        .flat_map(list_members)
        .any(|listed| listed.eq_ignore_ascii_case(name))
}

/// Decides which response fields go into the cache (§3.1), borrowing the
/// response so no list is built.
///
/// Drops hop-by-hop fields, fields named in `Connection`, and fields named by
/// qualified `no-cache="..."` (our choice for §5.2.2.4: the listed fields
/// are simply not stored, the rest is reused without revalidation) and, in a
/// shared cache, qualified `private="..."` (§5.2.2.7).
///
/// Every miss stores a response, so this runs once per field of every miss:
/// the `Connection` members are parsed once here (into a fixed array, no
/// allocation) instead of once per field, which callgrind showed was a fifth
/// of a miss's instructions.
pub struct StoredFieldFilter<'a, F: Fields> {
    response: &'a F,
    shared: bool,
    /// The first [`CONNECTION_MEMBERS`] `Connection` members.
    listed: [&'a [u8]; CONNECTION_MEMBERS],
    listed_len: usize,
    /// More members than fit: fall back to scanning `Connection` per field.
    listed_overflow: bool,
    has_qualifiers: bool,
}

/// `Connection` members remembered by [`StoredFieldFilter`]; real responses
/// send one or two (`keep-alive`, `close`).
const CONNECTION_MEMBERS: usize = 8;

impl<'a, F: Fields> StoredFieldFilter<'a, F> {
    /// Prepares the filter for one response.
    pub fn new(response: &'a F, shared: bool) -> Self {
        Self::knowing(response, shared, None)
    }

    /// [`StoredFieldFilter::new`] for a response whose `Cache-Control` field
    /// was parsed already (`cache_control`, as [`StoredMeta`] holds it when
    /// that field governs): without a qualified `no-cache` (or, in a shared
    /// cache, `private`) in it, no line can name a field to drop, and the field
    /// is not parsed again (every stored miss built this filter).
    pub fn knowing(
        response: &'a F,
        shared: bool,
        cache_control: Option<&ResponseCacheControl>,
    ) -> Self {
        let mut listed: [&'a [u8]; CONNECTION_MEMBERS] = [&[]; CONNECTION_MEMBERS];
        let mut listed_len = 0;
        let mut listed_overflow = false;
        for member in response.known(HeaderId::Connection).flat_map(list_members) {
            if listed_len == CONNECTION_MEMBERS {
                listed_overflow = true;
                break;
            }
            listed[listed_len] = member;
            listed_len += 1;
        }
        Self {
            response,
            shared,
            listed,
            listed_len,
            listed_overflow,
            has_qualifiers: cache_control
                .is_none_or(|cc| cc.no_cache_fields() || (shared && cc.private_fields()))
                && qualified_field_names(response, shared).next().is_some(),
        }
    }

    /// Whether the field `name` is stored.
    pub fn keep(&self, name: &[u8]) -> bool {
        self.keep_line(HeaderId::from_name(name), name)
    }

    /// [`StoredFieldFilter::keep`] for a line whose name's id is known.
    fn keep_line(&self, id: HeaderId, name: &[u8]) -> bool {
        if is_hop_by_hop_line(id, name) {
            return false;
        }
        let listed = if self.listed_overflow {
            connection_listed(self.response, name)
        } else {
            self.listed[..self.listed_len]
                .iter()
                .any(|m| m.eq_ignore_ascii_case(name))
        };
        if listed {
            return false;
        }
        !(self.has_qualifiers
            && qualified_field_names(self.response, self.shared)
                .any(|n| n.eq_ignore_ascii_case(name)))
    }

    /// The stored lines. Each line is judged once, here; the verdicts of the first 128
    /// lines (the codec's cap on header lines) are remembered, so a caller can walk the kept
    /// lines twice (to size, then to write, one allocation) without judging them again.
    pub fn kept(&self) -> KeptLines<'_, 'a, F> {
        let mut mask = 0u128;
        for (i, (id, name, _)) in self.response.lines_with_ids().enumerate().take(128) {
            if self.keep_line(id, name) {
                mask |= 1 << i;
            }
        }
        KeptLines { filter: self, mask }
    }

    /// The stored fields as an owned list. Every kept name and value is copied into one
    /// block, which the list's lines slice: one allocation for the fields, not two per line,
    /// and nothing held of the buffer they were received in.
    pub fn stored_fields(&self) -> FieldList {
        let kept = self.kept();
        let (mut lines, mut bytes) = (0, 0);
        for (name, value) in kept.iter() {
            lines += 1;
            bytes += name.len() + value.len();
        }
        let mut block = bytes::BytesMut::with_capacity(bytes);
        for (name, value) in kept.iter() {
            block.extend_from_slice(name);
            block.extend_from_slice(value);
        }
        let block = block.freeze();
        let mut list = FieldList::with_capacity(lines);
        let mut at = 0;
        for (name, value) in kept.iter() {
            let name_end = at + name.len();
            let value_end = name_end + value.len();
            list.push(block.slice(at..name_end), block.slice(name_end..value_end));
            at = value_end;
        }
        list
    }
}

/// The lines a [`StoredFieldFilter`] keeps, judged once (see [`StoredFieldFilter::kept`]).
pub struct KeptLines<'f, 'a, F: Fields> {
    filter: &'f StoredFieldFilter<'a, F>,
    /// Bit `i` set: line `i` (of the first 128) is kept.
    mask: u128,
}

impl<'a, F: Fields> KeptLines<'_, 'a, F> {
    /// The kept lines as `(name, value)`, in received order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.iter_with_ids().map(|(_, name, value)| (name, value))
    }

    /// The kept lines as `(id, name, value)`, in received order.
    pub fn iter_with_ids(&self) -> impl Iterator<Item = (HeaderId, &'a [u8], &'a [u8])> + '_ {
        self.filter
            .response
            .lines_with_ids()
            .enumerate()
            .filter(move |&(i, (id, name, _))| {
                if i < 128 {
                    self.mask & (1 << i) != 0
                } else {
                    self.filter.keep_line(id, name)
                }
            })
            .map(|(_, line)| line)
    }
}

/// Merges the fields of a 304 (or of a `HEAD` response, §4.3.5) into a
/// stored response's fields (§3.2, §4.3.4).
///
/// Every field of `update` replaces all stored lines of the same name,
/// except hop-by-hop fields, fields named in the update's `Connection`, and
/// [`is_never_updated`] fields. `Date` and `Age` always come from the update,
/// even when it lacks them: they describe the response just received, and a
/// stored `Age` or old `Date` kept next to a new receipt time would make the
/// refreshed response look older than it is. Stored lines keep their order;
/// new fields follow.
///
/// Rebuild [`StoredMeta`] from the result with the revalidation's request and
/// response times.
pub fn freshen_headers<S: Fields, U: Fields>(stored: &S, update: &U) -> FieldList {
    let takes = |name: &[u8]| {
        !is_hop_by_hop(name) && !is_never_updated(name) && !connection_listed(update, name)
    };
    let replaced = |name: &[u8]| {
        name.eq_ignore_ascii_case(b"date")
            || name.eq_ignore_ascii_case(b"age")
            || (takes(name) && update.first_named(name).is_some())
    };
    let mut merged = FieldList::new();
    for (name, value) in stored.lines().filter(|(n, _)| !replaced(n)) {
        merged.push(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value));
    }
    for (name, value) in update.lines().filter(|(n, _)| takes(n)) {
        merged.push(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value));
    }
    merged
}

/// Which stored responses a 304 updates (§4.3.4), as indexes into
/// `candidates` (the stored variants of the request's primary key).
///
/// 1. A strong entity-tag in the 304 selects every candidate with the same
///    strong entity-tag.
/// 2. A weak entity-tag selects the most recent candidate that weakly
///    matches.
/// 3. A `Last-Modified` (without entity-tag) selects candidates with the
///    same `Last-Modified`.
/// 4. Otherwise, or when nothing matched: a single candidate is selected.
///    The 304 answers the conditional request the cache sent for that very
///    response, so the origin has said that representation is current; this
///    also covers origins that send a different validator in the 304 (the
///    http-cache-tests `304-etag-update-response-ETag` case).
pub fn select_for_update<U: Fields>(candidates: &[&StoredMeta], update: &U) -> Vec<usize> {
    let etag = update.first(HeaderId::ETag).and_then(EntityTag::parse);
    fn stored_tag(candidate: &StoredMeta) -> Option<EntityTag<'_>> {
        candidate.etag.as_deref().and_then(EntityTag::parse)
    }
    let mut selected: Vec<usize> = match etag {
        Some(tag) if !tag.weak => (0..candidates.len())
            .filter(|&i| stored_tag(candidates[i]).is_some_and(|s| s.strong_eq(&tag)))
            .collect(),
        Some(tag) => (0..candidates.len())
            .filter(|&i| stored_tag(candidates[i]).is_some_and(|s| s.weak_eq(&tag)))
            .max_by_key(|&i| candidates[i].response_time)
            .into_iter()
            .collect(),
        None => match update.first(HeaderId::LastModified).and_then(|lm| {
            // The candidates' latest receipt time stands in for the clock (RFC 850 years).
            let reference = candidates.iter().map(|c| c.response_time).max();
            crate::dates::parse_http_date(lm, reference.unwrap_or(0))
        }) {
            Some(lm) => (0..candidates.len())
                .filter(|&i| candidates[i].last_modified == Some(lm))
                .collect(),
            None => Vec::new(),
        },
    };
    if selected.is_empty() && candidates.len() == 1 {
        selected.push(0);
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;

    fn pairs(list: &FieldList) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| {
                (
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    fn owned(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fields_named_in_a_long_connection_list_or_past_line_128_are_not_stored() {
        // More Connection members than the filter remembers: the ninth still counts.
        let members = "a, b, c, d, e, f, g, h, X-Ninth";
        let mut lines = vec![("Connection", members), ("X-Ninth", "1"), ("X-Kept", "2")];
        let response = FieldList::from_pairs(&lines);
        assert_eq!(
            pairs(&StoredFieldFilter::new(&response, true).stored_fields()),
            owned(&[("X-Kept", "2")])
        );
        // Lines past the 128 whose verdicts are remembered are judged again, correctly.
        let filler: Vec<String> = (0..130).map(|i| format!("X-F{i}")).collect();
        lines = filler.iter().map(|n| (n.as_str(), "v")).collect();
        lines.push(("Connection", "X-Late"));
        lines.push(("X-Late", "dropped"));
        lines.push(("X-After", "kept"));
        let response = FieldList::from_pairs(&lines);
        let stored = pairs(&StoredFieldFilter::new(&response, true).stored_fields());
        assert_eq!(stored.len(), 131);
        assert_eq!(
            stored.last().unwrap(),
            &("X-After".to_string(), "kept".to_string())
        );
        assert!(stored
            .iter()
            .all(|(n, _)| n != "X-Late" && n != "Connection"));
    }

    #[test]
    fn hop_by_hop_and_kept_fields() {
        for name in [
            "Connection",
            "keep-alive",
            "TE",
            "Transfer-Encoding",
            "Upgrade",
            "Proxy-Connection",
            "Proxy-Authenticate",
            "Proxy-Authentication-Info",
            "Proxy-Authorization",
        ] {
            assert!(is_hop_by_hop(name.as_bytes()), "{name}");
            let id = HeaderId::from_name(name.as_bytes());
            assert!(is_hop_by_hop_line(id, name.as_bytes()), "{name} by id");
        }
        for name in [
            "Set-Cookie",
            "Content-Range",
            "Trailer",
            "Cache-Control",
            "Content-Length",
            "Proxy-Authentication",
        ] {
            assert!(!is_hop_by_hop(name.as_bytes()), "{name}");
            let id = HeaderId::from_name(name.as_bytes());
            assert!(!is_hop_by_hop_line(id, name.as_bytes()), "{name} by id");
        }
        for name in [
            "Content-Length",
            "content-encoding",
            "Content-MD5",
            "Content-Range",
            "ETag",
        ] {
            assert!(is_never_updated(name.as_bytes()), "{name}");
        }
        for name in [
            "Content-Type",
            "Content-Location",
            "Expires",
            "Cache-Control",
            "Set-Cookie",
            "X-Frame-Options",
        ] {
            assert!(!is_never_updated(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn stored_field_filter_table() {
        let response = FieldList::from_pairs(&[
            ("Connection", "a, B"),
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("Cache-Control", "no-cache=\"d, E\", private=f"),
            ("d", "4"),
            ("e", "5"),
            ("f", "6"),
            ("Keep-Alive", "timeout=5"),
            ("Set-Cookie", "a=b"),
            ("Cache-Control", "max-age=3600"),
        ]);
        let shared = StoredFieldFilter::new(&response, true);
        assert_eq!(
            pairs(&shared.stored_fields()),
            owned(&[
                ("c", "3"),
                ("Cache-Control", "no-cache=\"d, E\", private=f"),
                ("Set-Cookie", "a=b"),
                ("Cache-Control", "max-age=3600"),
            ])
        );
        // Knowing the parsed Cache-Control gives the same verdicts; one without qualifiers
        // lets the field go unparsed.
        let cc = ResponseCacheControl::parse(&response);
        let knowing = StoredFieldFilter::knowing(&response, true, Some(&cc));
        assert_eq!(knowing.stored_fields(), shared.stored_fields());
        let unqualified = ResponseCacheControl::parse(&FieldList::from_pairs(&[(
            "Cache-Control",
            "max-age=1, no-cache, private",
        )]));
        let trusting = StoredFieldFilter::knowing(&response, true, Some(&unqualified));
        assert!(trusting.keep(b"d") && trusting.keep(b"f") && !trusting.keep(b"a"));
        let private_only =
            ResponseCacheControl::parse(&FieldList::from_pairs(&[("Cache-Control", "private=f")]));
        let private_cache = StoredFieldFilter::knowing(&response, false, Some(&private_only));
        assert!(private_cache.keep(b"f") && private_cache.keep(b"d"));
        let private = StoredFieldFilter::new(&response, false);
        assert!(private.keep(b"f") && !private.keep(b"d"));
        let plain = FieldList::from_pairs(&[("X", "1"), ("Transfer-Encoding", "chunked")]);
        assert_eq!(
            pairs(&StoredFieldFilter::new(&plain, true).stored_fields()),
            owned(&[("X", "1")])
        );
    }

    #[test]
    fn freshen_replaces_all_but_protected_fields() {
        let stored = FieldList::from_pairs(&[
            ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("Age", "30"),
            ("Cache-Control", "max-age=1"),
            ("Content-Type", "text/plain"),
            ("Content-Length", "5"),
            ("Content-Encoding", "gzip"),
            ("ETag", "\"abcdef\""),
            ("Set-Cookie", "a=b"),
            ("Set-Cookie", "c=d"),
            ("Test-Header", "A"),
        ]);
        let update = FieldList::from_pairs(&[
            ("Date", "Mon, 01 Jan 2024 00:10:00 GMT"),
            ("Cache-Control", "max-age=3600"),
            ("Content-Type", "text/plain;charset=utf-8"),
            ("Content-Length", "10"),
            ("Content-Encoding", "br"),
            ("ETag", "\"ghijkl\""),
            ("Set-Cookie", "a=c"),
            ("Connection", "x-hop"),
            ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"),
            ("New-Field", "n"),
        ]);
        assert_eq!(
            pairs(&freshen_headers(&stored, &update)),
            owned(&[
                ("Content-Length", "5"),
                ("Content-Encoding", "gzip"),
                ("ETag", "\"abcdef\""),
                ("Test-Header", "A"),
                ("Date", "Mon, 01 Jan 2024 00:10:00 GMT"),
                ("Cache-Control", "max-age=3600"),
                ("Content-Type", "text/plain;charset=utf-8"),
                ("Set-Cookie", "a=c"),
                ("New-Field", "n"),
            ])
        );
        // An update without Date/Age drops the stored ones.
        let bare = FieldList::from_pairs(&[("ETag", "\"abcdef\"")]);
        let merged = freshen_headers(&stored, &bare);
        assert!(!merged.contains(HeaderId::Date) && !merged.contains(HeaderId::Age));
        assert_eq!(merged.first_named(b"test-header"), Some(&b"A"[..]));
    }

    #[test]
    fn selection_for_update() {
        let config = PolicyConfig::default();
        let meta = |pairs: &[(&str, &str)], t: u64| {
            StoredMeta::from_response(
                200,
                &FieldList::from_pairs(pairs),
                t,
                t,
                b"http://h/",
                &config,
            )
        };
        let lm = "Wed, 01 Jan 2020 00:00:00 GMT";
        let a = meta(&[("ETag", "\"a\"")], 10);
        let a_weak_old = meta(&[("ETag", "W/\"w\"")], 10);
        let a_weak_new = meta(&[("ETag", "W/\"w\"")], 20);
        let dated = meta(&[("Last-Modified", lm)], 10);
        let bare = meta(&[], 10);
        let all = [&a, &a_weak_old, &a_weak_new, &dated, &bare];
        type Case<'a> = (&'a [&'a StoredMeta], &'a [(&'a str, &'a str)], &'a [usize]);
        let cases: &[Case<'_>] = &[
            (&all, &[("ETag", "\"a\"")], &[0]),
            (&all, &[("ETag", "W/\"w\"")], &[2]),
            (&all, &[("ETag", "\"w\"")], &[]),
            (&all, &[("Last-Modified", lm)], &[3]),
            (&all, &[], &[]),
            (&[&a], &[("ETag", "\"ghijkl\"")], &[0]),
            (&[&bare], &[], &[0]),
            (&[], &[("ETag", "\"a\"")], &[]),
        ];
        for (candidates, update, expected) in cases {
            assert_eq!(
                select_for_update(candidates, &FieldList::from_pairs(update)),
                expected.to_vec(),
                "{update:?} over {} candidates",
                candidates.len()
            );
        }
    }
}
