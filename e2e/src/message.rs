//! A deliberately small, strict HTTP/1.1 message reader shared by the test origin (requests)
//! and the raw client (responses). It exists so that tests can see exactly what went over the
//! wire: header order, duplicates, framing (RFC 9112 §6) and where a connection ended.

use std::io::{self, BufRead, Read};

/// Largest head either side accepts; the proxy's own limit is far smaller, so hitting this means
/// something is badly wrong rather than a legitimately large head.
const MAX_HEAD: usize = 1 << 20;

/// One header field as it appeared on the wire (name case preserved, value trimmed of OWS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// A parsed head: the start line and the header fields in wire order.
#[derive(Clone, Debug)]
pub(crate) struct Head {
    pub start_line: String,
    pub headers: Vec<Header>,
    /// The head exactly as received (start line, fields and the blank line).
    pub raw: Vec<u8>,
}

/// Finds the first value of `name` (case-insensitive, RFC 9110 §5.1).
pub(crate) fn find<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// Whether any `name` field lists `token` in its comma-separated value (case-insensitive).
pub(crate) fn has_token(headers: &[Header], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .flat_map(|h| h.value.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Reads one head. `Ok(None)` means the peer closed cleanly before sending any byte of it.
pub(crate) fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut raw = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    loop {
        let start = raw.len();
        let n = reader.read_until(b'\n', &mut raw)?;
        if n == 0 {
            if raw.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "connection closed inside a head: {:?}",
                    String::from_utf8_lossy(&raw)
                ),
            ));
        }
        if raw.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
        let line = trim_eol(&raw[start..]);
        if line.is_empty() {
            if lines.is_empty() {
                // Tolerate a stray CRLF between messages (RFC 9112 §2.2).
                raw.clear();
                continue;
            }
            break;
        }
        lines.push(String::from_utf8_lossy(line).into_owned());
    }
    let start_line = lines.remove(0);
    let headers = lines
        .iter()
        .map(|line| {
            let (name, value) = line.split_once(':').ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad field line {line:?}"),
                )
            })?;
            Ok(Header {
                name: name.to_string(),
                value: value.trim_matches([' ', '\t']).to_string(),
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(Some(Head {
        start_line,
        headers,
        raw,
    }))
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// How a message body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// Framing of a body given its headers; `Err` for what a strict recipient must reject.
pub(crate) fn framing(headers: &[Header], is_request: bool) -> io::Result<Framing> {
    let te: Vec<&str> = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("transfer-encoding"))
        .flat_map(|h| h.value.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(last) = te.last() {
        if last.eq_ignore_ascii_case("chunked") {
            return Ok(Framing::Chunked);
        }
        if is_request {
            return Err(invalid(format!(
                "request transfer-coding {te:?} not ending in chunked"
            )));
        }
        return Ok(Framing::UntilClose);
    }
    let mut length: Option<u64> = None;
    for h in headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
    {
        for v in h.value.split(',') {
            let n: u64 = v
                .trim()
                .parse()
                .map_err(|_| invalid(format!("bad content-length {:?}", h.value)))?;
            if length.is_some_and(|l| l != n) {
                return Err(invalid("differing content-length".into()));
            }
            length = Some(n);
        }
    }
    Ok(match (length, is_request) {
        (Some(n), _) => Framing::Length(n),
        (None, true) => Framing::None,
        (None, false) => Framing::UntilClose,
    })
}

/// Reads a body with the given framing into `sink`, returning the number of bytes.
pub(crate) fn read_body(
    reader: &mut impl BufRead,
    framing: Framing,
    sink: &mut impl FnMut(&[u8]),
) -> io::Result<u64> {
    match framing {
        Framing::None => Ok(0),
        Framing::Length(n) => copy_exact(reader, n, sink),
        Framing::UntilClose => {
            let mut total = 0u64;
            loop {
                let buf = reader.fill_buf()?;
                if buf.is_empty() {
                    return Ok(total);
                }
                let len = buf.len();
                sink(buf);
                reader.consume(len);
                total += len as u64;
            }
        }
        Framing::Chunked => read_chunked(reader, sink),
    }
}

fn copy_exact(reader: &mut impl BufRead, n: u64, sink: &mut impl FnMut(&[u8])) -> io::Result<u64> {
    let mut left = n;
    while left > 0 {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("body ended {left} bytes short of {n}"),
            ));
        }
        let take = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        sink(&buf[..take]);
        reader.consume(take);
        left -= take as u64;
    }
    Ok(n)
}

/// Decodes a chunked body (RFC 9112 §7.1), rejecting anything that is not strictly valid.
fn read_chunked(reader: &mut impl BufRead, sink: &mut impl FnMut(&[u8])) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let mut line = Vec::new();
        read_line(reader, &mut line)?;
        let size_text = line.split(|&b| b == b';').next().unwrap_or_default();
        let size_text = std::str::from_utf8(size_text)
            .map_err(|_| invalid("non-ASCII chunk size".into()))?
            .trim_end_matches([' ', '\t']);
        if size_text.is_empty() || size_text.len() > 16 {
            return Err(invalid(format!("bad chunk size {size_text:?}")));
        }
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailer section, then the final CRLF.
            loop {
                let mut trailer = Vec::new();
                read_line(reader, &mut trailer)?;
                if trailer.is_empty() {
                    return Ok(total);
                }
            }
        }
        copy_exact(reader, size, sink)?;
        total += size;
        let mut crlf = Vec::new();
        read_line(reader, &mut crlf)?;
        if !crlf.is_empty() {
            return Err(invalid("chunk data not followed by CRLF".into()));
        }
    }
}

/// Reads one CRLF-terminated line (without the CRLF); EOF before the LF is an error.
fn read_line(reader: &mut impl BufRead, out: &mut Vec<u8>) -> io::Result<()> {
    let n = reader.by_ref().take(64 * 1024).read_until(b'\n', out)?;
    if n == 0 || out.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "line not terminated",
        ));
    }
    out.pop();
    if out.last() == Some(&b'\r') {
        out.pop();
    }
    Ok(())
}

/// A response as a client received it.
#[derive(Clone, Debug)]
pub struct Response {
    /// `HTTP/1.1` or `HTTP/1.0` as on the status line.
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
    /// Status codes of interim (1xx) responses received before this one, in order.
    pub interim: Vec<u16>,
    /// The final response's head as received.
    pub raw_head: String,
}

impl Response {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// Every value of header `name`, in wire order.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
            .collect()
    }

    /// Whether header `name` lists `token` (e.g. `Connection: close`).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        has_token(&self.headers, name, token)
    }

    /// The body as (lossy) text, for assertions and messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Reads one complete response, skipping (and recording) interim 1xx responses.
    /// `head_request` says the request was HEAD, whose response never has a body.
    pub(crate) fn read(reader: &mut impl BufRead, head_request: bool) -> io::Result<Response> {
        let mut interim = Vec::new();
        loop {
            let head = read_head(reader)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before a response",
                )
            })?;
            let mut parts = head.start_line.splitn(3, ' ');
            let version = parts.next().unwrap_or_default().to_string();
            let status: u16 = parts
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| invalid(format!("bad status line {:?}", head.start_line)))?;
            if !version.starts_with("HTTP/1.") {
                return Err(invalid(format!("bad status line {:?}", head.start_line)));
            }
            let reason = parts.next().unwrap_or_default().to_string();
            if (100..200).contains(&status) && status != 101 {
                interim.push(status);
                continue;
            }
            let framing = if head_request || status == 204 || status == 304 || status == 101 {
                Framing::None
            } else {
                framing(&head.headers, false)?
            };
            let mut body = Vec::new();
            read_body(reader, framing, &mut |b| body.extend_from_slice(b))?;
            return Ok(Response {
                version,
                status,
                reason,
                headers: head.headers,
                body,
                interim,
                raw_head: String::from_utf8_lossy(&head.raw).into_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_response(wire: &[u8], head: bool) -> io::Result<Response> {
        Response::read(&mut io::BufReader::new(wire), head)
    }

    #[test]
    fn response_framings() {
        let cases: &[(&[u8], bool, u16, &[u8])] = &[
            (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef", false, 200, b"abc"),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n1\r\nd\r\n0\r\nT: 1\r\n\r\n",
                false,
                200,
                b"abcd",
            ),
            (b"HTTP/1.0 200 OK\r\n\r\nuntil close", false, 200, b"until close"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", true, 200, b""),
            (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n", false, 304, b""),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
                false,
                201,
                b"x",
            ),
        ];
        for (wire, head, status, body) in cases {
            let r = read_response(wire, *head).unwrap();
            assert_eq!(r.status, *status, "{}", String::from_utf8_lossy(wire));
            assert_eq!(r.body, *body, "{}", String::from_utf8_lossy(wire));
        }
        let r = read_response(cases[5].0, false).unwrap();
        assert_eq!(r.interim, vec![100]);
    }

    #[test]
    fn truncated_or_invalid_bodies_are_errors() {
        let cases: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"HTTP/1.1 200 OK\r\nContent-Le",
            b"",
        ];
        for wire in cases {
            assert!(
                read_response(wire, false).is_err(),
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn request_framing_rules() {
        let h = |pairs: &[(&str, &str)]| -> Vec<Header> {
            pairs
                .iter()
                .map(|(n, v)| Header {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect()
        };
        assert_eq!(framing(&h(&[]), true).unwrap(), Framing::None);
        assert_eq!(
            framing(&h(&[("Content-Length", "5")]), true).unwrap(),
            Framing::Length(5)
        );
        assert_eq!(
            framing(&h(&[("transfer-encoding", "gzip, chunked")]), true).unwrap(),
            Framing::Chunked
        );
        assert!(framing(&h(&[("Transfer-Encoding", "gzip")]), true).is_err());
        assert!(framing(&h(&[("Content-Length", "5, 6")]), true).is_err());
    }

    #[test]
    fn header_lookup_is_case_insensitive_and_token_aware() {
        let headers = vec![
            Header {
                name: "Connection".into(),
                value: "keep-alive, Close".into(),
            },
            Header {
                name: "via".into(),
                value: "1.1 a".into(),
            },
        ];
        assert_eq!(find(&headers, "VIA"), Some("1.1 a"));
        assert!(has_token(&headers, "connection", "close"));
        assert!(!has_token(&headers, "connection", "upgrade"));
    }
}
