//! The HTTP/1.1 shapes the origin side builds and reads, translated for the HTTP/2 origin
//! client (RFC 9113 §8.3).
//!
//! The request head is built once, as for HTTP/1.1 (`h1::request_head`: the forwarded fields,
//! Via, X-Forwarded-For, the conditionals of a revalidation), then translated: the method,
//! the target and Host become `:method`, `:path` and `:authority` with the origin's scheme
//! (§8.3.1), and the connection-specific fields are left out (§8.2.2). The response head is
//! written as an HTTP/1.1 status line and field lines and parsed by the codec the pipeline
//! already reads responses through, so every reader of `ResponseView` sees one shape.

use bytes::{BufMut, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Request, StatusCode, Uri};
use sepia_http1::{
    BodyFraming, HeaderId, Limits, RequestDecoder, RequestHead, ResponseDecoder, ResponseHead,
};

use crate::model::{BodyLength, Method, Trailers};

/// Why a request head cannot be sent over HTTP/2.
pub const UNTRANSLATABLE: &str = "the request cannot be sent to the origin server over HTTP/2";

/// The HTTP/2 request for the HTTP/1.1 head `head`, toward an origin of `scheme`.
pub fn request(head: &[u8], scheme: &'static str) -> Result<Request<()>, &'static str> {
    let mut buf = BytesMut::from(head);
    let mut parsed = RequestHead::default();
    match RequestDecoder::new(Limits::default()).decode(&mut buf, &mut parsed) {
        Ok(true) => {}
        _ => return Err(UNTRANSLATABLE),
    }
    // RFC 9113 §8.3.1: ":authority" stands for Host, which a client then leaves out.
    let authority = parsed.host().ok_or(UNTRANSLATABLE)?;
    let uri = Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(parsed.target())
        .build()
        .map_err(|_| UNTRANSLATABLE)?;
    let method = http::Method::from_bytes(parsed.method_raw()).map_err(|_| UNTRANSLATABLE)?;
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .version(http::Version::HTTP_2)
        .body(())
        .map_err(|_| UNTRANSLATABLE)?;
    let fields = request.headers_mut();
    for field in parsed.headers().iter() {
        // RFC 9113 §8.2.2: no connection-specific field (Transfer-Encoding included: DATA
        // frames delimit the content).
        if field.id == HeaderId::Host || field.id.is_hop_by_hop() {
            continue;
        }
        let name = HeaderName::from_bytes(field.name).map_err(|_| UNTRANSLATABLE)?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| UNTRANSLATABLE)?;
        fields.append(name, value);
    }
    Ok(request)
}

/// Parses the response head `status` and `fields` into `out` through the HTTP/1.1 codec,
/// `buf` holding the text, and returns the length of the content that follows (`ended`: the
/// head ended the stream); `None` when the codec refuses the head.
pub fn response(
    (status, fields, ended): (StatusCode, &HeaderMap, bool),
    method: Method,
    buf: &mut BytesMut,
    out: &mut ResponseHead,
) -> Option<BodyLength> {
    if !parse_response(status, fields, buf, out) {
        return None;
    }
    Some(match out.body_framing(method) {
        BodyFraming::Empty => BodyLength::None,
        BodyFraming::Length(n) => BodyLength::Known(n),
        // The head ended the stream: no content, and no Content-Length said otherwise.
        _ if ended => BodyLength::Known(0),
        // Until END_STREAM (RFC 9113 §8.1).
        _ => BodyLength::Unknown,
    })
}

fn parse_response(
    status: StatusCode,
    fields: &HeaderMap,
    buf: &mut BytesMut,
    out: &mut ResponseHead,
) -> bool {
    buf.clear();
    // The whole head in one allocation: the buffer starts empty on every request
    // (`Scratch::release_response`), and growing it field by field reallocated it several times.
    let fields_len: usize = fields
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    buf.reserve(b"HTTP/1.1 000 \r\n\r\n".len() + fields_len);
    buf.put_slice(b"HTTP/1.1 ");
    buf.put_slice(status.as_str().as_bytes());
    buf.put_slice(b" \r\n");
    for (name, value) in fields {
        buf.put_slice(name.as_str().as_bytes());
        buf.put_slice(b": ");
        buf.put_slice(value.as_bytes());
        buf.put_slice(b"\r\n");
    }
    buf.put_slice(b"\r\n");
    let decoded = ResponseDecoder::new(Limits::default()).decode(buf, out);
    matches!(decoded, Ok(true)) && buf.is_empty()
}

/// `trailers` as an HTTP/2 trailer section (RFC 9113 §8.1).
pub fn trailer_map(trailers: &Trailers) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in trailers.iter() {
        let name = HeaderName::from_bytes(name);
        let value = HeaderValue::from_bytes(value);
        if let (Ok(n), Ok(v)) = (name, value) {
            if sepia_http1::allowed_in_trailers(n.as_str().as_bytes()) {
                map.append(n, v);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::fields::received_trailers;

    #[test]
    fn a_request_head_becomes_pseudo_headers_without_connection_fields() {
        let head = b"POST /up?x=1 HTTP/1.1\r\nHost: origin.test:8443\r\nUser-Agent: t\r\n\
                     Via: 1.1 sepia\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nX-A: 2\r\n\r\n";
        let req = request(head, "https").unwrap();
        assert_eq!(req.method(), http::Method::POST);
        assert_eq!(req.uri().scheme_str(), Some("https"));
        assert_eq!(req.uri().authority().unwrap().as_str(), "origin.test:8443");
        assert_eq!(req.uri().path_and_query().unwrap().as_str(), "/up?x=1");
        let names: Vec<_> = req.headers().keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["user-agent", "via", "x-a"]);
        assert_eq!(req.headers().get_all("x-a").iter().count(), 2);
        assert!(req.headers().get("host").is_none());
        assert!(req.headers().get("transfer-encoding").is_none());
    }

    #[test]
    fn a_response_head_reads_as_an_http1_one() {
        let mut fields = HeaderMap::new();
        fields.append("content-length", HeaderValue::from_static("12"));
        fields.append("cache-control", HeaderValue::from_static("max-age=60"));
        let (mut buf, mut head) = (BytesMut::new(), ResponseHead::default());
        let length = response(
            (StatusCode::OK, &fields, false),
            Method::Get,
            &mut buf,
            &mut head,
        );
        assert_eq!(length, Some(BodyLength::Known(12)));
        assert_eq!((head.status, head.content_length), (200, Some(12)));
        assert_eq!(
            head.headers().get(HeaderId::CacheControl),
            Some(&b"max-age=60"[..])
        );
        let head_request = response(
            (StatusCode::OK, &fields, true),
            Method::Head,
            &mut buf,
            &mut head,
        );
        assert_eq!(head_request, Some(BodyLength::None));
        let bare = HeaderMap::new();
        let open = response(
            (StatusCode::OK, &bare, false),
            Method::Get,
            &mut buf,
            &mut head,
        );
        assert_eq!(open, Some(BodyLength::Unknown), "to the end of the stream");
        let ended = response(
            (StatusCode::OK, &bare, true),
            Method::Get,
            &mut buf,
            &mut head,
        );
        assert_eq!(ended, Some(BodyLength::Known(0)));
        let mut bad = HeaderMap::new();
        bad.append("content-length", HeaderValue::from_static("x"));
        let refused = response(
            (StatusCode::OK, &bad, false),
            Method::Get,
            &mut buf,
            &mut head,
        );
        assert_eq!(refused, None);
    }

    #[test]
    fn a_head_without_host_is_refused() {
        assert!(request(b"GET / HTTP/1.0\r\n\r\n", "http").is_err());
    }

    #[test]
    fn trailers_keep_only_what_may_be_a_trailer() {
        let mut map = HeaderMap::new();
        map.append("x-checksum", HeaderValue::from_static("abc"));
        map.append("content-length", HeaderValue::from_static("3"));
        let kept = received_trailers(Some(map));
        let fields: Vec<_> = kept.iter().collect();
        assert_eq!(fields, [(&b"x-checksum"[..], &b"abc"[..])]);
        assert_eq!(trailer_map(&kept).len(), 1);
        assert!(received_trailers(None).is_empty());
    }
}
