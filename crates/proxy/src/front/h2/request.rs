//! An HTTP/2 request as the pipeline sees it (`model::RequestView`): its method, target,
//! `:authority` and fields copied once into one buffer, of which every part the view hands
//! out is a slice (so `share` is a reference count, as for an h1 head).
//!
//! The target is what an HTTP/1.1 client would have sent (RFC 9113 §8.3.1): on a forward
//! proxy listener the absolute URL made of `:scheme`, `:authority` and `:path`, elsewhere
//! `:path`; for CONNECT the authority (§8.5). `:authority` stands for Host, and a Host field
//! is added to the fields when only `:authority` came, so that the cache key, the access
//! rules and the origin request are the same as for the equivalent h1 request.

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use sepia_cache_policy::Fields;

use super::checks::parse_length;
use crate::model::{BodyLength, Field, FieldView, HeaderId, Method, RequestView, Version};

/// Positions in the request's buffer.
#[derive(Clone, Copy, Debug, Default)]
struct Span(u32, u32);

#[derive(Clone, Copy, Debug)]
struct Line {
    id: HeaderId,
    name: Span,
    value: Span,
}

/// One stream's request head.
#[derive(Debug)]
pub struct H2Request {
    raw: Bytes,
    method: Method,
    method_raw: Span,
    target: Span,
    host: Option<Span>,
    lines: Vec<Line>,
    declared: Option<u64>,
    body: BodyLength,
    expect_continue: bool,
}

/// Appends `part` to `buf` and says where it went.
fn push(buf: &mut BytesMut, part: &[u8]) -> Span {
    let start = buf.len() as u32;
    buf.extend_from_slice(part);
    Span(start, buf.len() as u32)
}

impl H2Request {
    /// The request of `parts`; `absolute` asks for an absolute-form target (forward proxy
    /// listeners), `ended` says END_STREAM came with the head (no content).
    pub fn new(parts: &Parts, absolute: bool, ended: bool) -> H2Request {
        let method = parts.method.as_str().as_bytes();
        let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
        let host_field = parts.headers.get(http::header::HOST).map(|h| h.as_bytes());
        let path = parts
            .uri
            .path_and_query()
            .map_or(&b""[..], |p| p.as_str().as_bytes());
        let fields_len: usize = parts
            .headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len())
            .sum();
        let mut buf = BytesMut::with_capacity(
            method.len() + 2 * authority.map_or(0, <[u8]>::len) + 16 + path.len() + fields_len,
        );
        let method_raw = push(&mut buf, method);
        let target = push_target(&mut buf, parts, authority.or(host_field), absolute);
        let mut lines = Vec::with_capacity(parts.headers.len() + 1);
        let mut host = None;
        if let (Some(a), None) = (authority, host_field) {
            let name = push(&mut buf, b"host");
            let value = push(&mut buf, a);
            host = Some(value);
            lines.push(Line {
                id: HeaderId::Host,
                name,
                value,
            });
        }
        for (n, v) in &parts.headers {
            if n == http::header::COOKIE {
                continue;
            }
            let id = HeaderId::from_name(n.as_str().as_bytes());
            let name = push(&mut buf, n.as_str().as_bytes());
            let value = push(&mut buf, v.as_bytes());
            if id == HeaderId::Host && host.is_none() {
                host = Some(value);
            }
            lines.push(Line { id, name, value });
        }
        if let Some(line) = cookie_line(&mut buf, parts) {
            lines.push(line);
        }
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| parse_length(v.as_bytes()));
        let body = match declared {
            _ if ended => BodyLength::None,
            Some(0) => BodyLength::None,
            Some(n) => BodyLength::Known(n),
            None => BodyLength::Unknown,
        };
        let expect_continue = parts
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        H2Request {
            raw: buf.freeze(),
            method: Method::from_bytes(method),
            method_raw,
            target,
            host,
            lines,
            declared,
            body,
            expect_continue,
        }
    }

    /// The client waits for `100 Continue` before sending content (RFC 9110 §10.1.1).
    pub fn expects_continue(&self) -> bool {
        self.expect_continue && self.body != BodyLength::None
    }

    fn at(&self, span: Span) -> &[u8] {
        &self.raw[span.0 as usize..span.1 as usize]
    }
}

/// The request-target an HTTP/1.1 client would have sent (RFC 9113 §8.3.1, §8.5), from the
/// pseudo-fields and `authority` (`:authority`, else Host).
fn push_target(
    buf: &mut BytesMut,
    parts: &Parts,
    authority: Option<&[u8]>,
    absolute: bool,
) -> Span {
    let path = parts
        .uri
        .path_and_query()
        .map_or(&b""[..], |p| p.as_str().as_bytes());
    match authority {
        Some(a) if parts.method == http::Method::CONNECT => push(buf, a),
        Some(a) if absolute => {
            let scheme = parts.uri.scheme_str().unwrap_or("http").as_bytes();
            let Span(start, _) = push(buf, scheme);
            push(buf, b"://");
            push(buf, a);
            Span(start, push(buf, path).1)
        }
        _ => push(buf, path),
    }
}

/// The Cookie fields of a request as one line, their values joined with `"; "`: HTTP/2
/// clients may split the cookie header into one field per cookie, which must be joined before
/// the request goes to an HTTP/1.1 origin (RFC 9113 §8.2.3), where a second Cookie line is
/// not allowed (RFC 6265 §5.4).
fn cookie_line(buf: &mut BytesMut, parts: &Parts) -> Option<Line> {
    let mut crumbs = parts.headers.get_all(http::header::COOKIE).iter();
    let first = crumbs.next()?;
    let name = push(buf, b"cookie");
    let Span(start, mut end) = push(buf, first.as_bytes());
    for crumb in crumbs {
        push(buf, b"; ");
        end = push(buf, crumb.as_bytes()).1;
    }
    let id = HeaderId::from_name(b"cookie");
    Some(Line {
        id,
        name,
        value: Span(start, end),
    })
}

impl RequestView for H2Request {
    fn method(&self) -> Method {
        self.method
    }

    fn method_raw(&self) -> &[u8] {
        self.at(self.method_raw)
    }

    fn target(&self) -> &[u8] {
        self.at(self.target)
    }

    fn version(&self) -> Version {
        Version::Http2
    }

    fn fields(&self) -> impl FieldView + '_ {
        H2Fields(self)
    }

    fn host(&self) -> Option<&[u8]> {
        self.host.map(|s| self.at(s))
    }

    fn body(&self) -> BodyLength {
        self.body
    }

    fn declared_length(&self) -> Option<u64> {
        self.declared
    }

    fn share(&self, part: &[u8]) -> Bytes {
        self.raw.slice_ref(part)
    }
}

/// The request's fields, borrowed.
#[derive(Clone, Copy)]
pub struct H2Fields<'r>(&'r H2Request);

impl Fields for H2Fields<'_> {
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let r = self.0;
        r.lines.iter().map(move |l| (r.at(l.name), r.at(l.value)))
    }

    fn known<'a>(&'a self, id: HeaderId) -> impl Iterator<Item = &'a [u8]> + 'a {
        let r = self.0;
        r.lines
            .iter()
            .filter(move |l| l.id == id)
            .map(move |l| r.at(l.value))
    }
}

impl FieldView for H2Fields<'_> {
    fn each(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        let r = self.0;
        r.lines.iter().map(move |l| Field {
            id: l.id,
            name: r.at(l.name),
            value: r.at(l.value),
        })
    }

    fn connection_names(&self) -> impl Fn(&[u8]) -> bool + '_ {
        // A request with a Connection field never gets here (RFC 9113 §8.2.2, `checks`).
        |_: &[u8]| false
    }

    fn shared(&self, id: HeaderId) -> Option<Bytes> {
        let r = self.0;
        let line = r.lines.iter().find(|l| l.id == id)?;
        Some(r.raw.slice(line.value.0 as usize..line.value.1 as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, uri: &str, fields: &[(&str, &str)], absolute: bool) -> H2Request {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        let (parts, ()) = b.body(()).unwrap().into_parts();
        H2Request::new(&parts, absolute, false)
    }

    #[test]
    fn a_forward_request_reads_like_an_absolute_form_h1_one() {
        let r = request(
            "GET",
            "http://a.test:81/p?q",
            &[("user-agent", "t/1")],
            true,
        );
        assert_eq!(r.target(), b"http://a.test:81/p?q");
        assert_eq!(r.host(), Some(&b"a.test:81"[..]));
        assert_eq!(r.method(), Method::Get);
        assert_eq!(r.version(), Version::Http2);
        let fields = r.fields();
        assert_eq!(fields.first(HeaderId::Host), Some(&b"a.test:81"[..]));
        assert_eq!(fields.first(HeaderId::UserAgent), Some(&b"t/1"[..]));
        assert_eq!(r.body(), BodyLength::Unknown);
        let shared = r.share(r.target());
        assert_eq!(&shared[..], b"http://a.test:81/p?q");
        assert_eq!(
            fields.shared(HeaderId::Host).as_deref(),
            Some(&b"a.test:81"[..])
        );
    }

    #[test]
    fn reverse_and_connect_targets() {
        let r = request("GET", "https://a.test/p", &[("content-length", "0")], false);
        assert_eq!(r.target(), b"/p");
        assert_eq!(r.body(), BodyLength::None);
        assert_eq!(r.declared_length(), Some(0));
        let c = request("CONNECT", "a.test:443", &[], true);
        assert_eq!(c.target(), b"a.test:443");
        assert_eq!(c.method(), Method::Connect);
        let p = request("POST", "http://a.test/", &[("content-length", "7")], false);
        assert_eq!(p.body(), BodyLength::Known(7));
    }

    #[test]
    fn cookie_crumbs_are_joined_into_one_field() {
        let r = request(
            "GET",
            "http://a.test/",
            &[
                ("cookie", "a=1"),
                ("x-a", "1"),
                ("cookie", "b=2"),
                ("cookie", "c=3"),
            ],
            false,
        );
        let fields = r.fields();
        let cookies: Vec<&[u8]> = fields.values(b"cookie").collect();
        assert_eq!(cookies, [&b"a=1; b=2; c=3"[..]]);
        assert_eq!(fields.lines().count(), 3, "host, x-a, cookie");
        assert_eq!(r.share(cookies[0]).len(), 13);
    }

    #[test]
    fn a_host_field_is_kept_once() {
        let r = request("GET", "http://a.test/", &[("host", "a.test")], false);
        assert_eq!(r.fields().known(HeaderId::Host).count(), 1);
        assert_eq!(r.host(), Some(&b"a.test"[..]));
    }
}
