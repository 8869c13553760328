//! `[[http_access]]` rules applied to each request (Squid's `http_access`), once the target is
//! known and before any cache or origin work.
//!
//! The facts handed to the rules are slices of the request head, plus the normalised absolute
//! URL written into the connection's reused key buffer, so a check allocates nothing unless a
//! `dst` ACL is reached for a host name (then the name is resolved, once, and the rules are
//! checked again with its addresses: Squid's asynchronous dst lookup).

use std::net::IpAddr;
use std::time::SystemTime;

use bytes::Bytes;
use sepia_access::{AccessRules, Dst, HeaderLookup, Request, Verdict};
use sepia_config::Mode;
use sepia_http1::{Method, RequestHead};
use sepia_observe::ResultCode;

use crate::client::ClientSide;
use crate::exchange::Outcome;
use crate::shared::Shared;
use crate::target::{parse_absolute, split_authority, TargetError};

/// The user the request authenticated as (`proxy_auth` ACLs).
///
/// Hook for proxy authentication: `None` until an authenticator is connected, so rules that
/// reach a `proxy_auth` ACL answer 407 with a Basic challenge.
pub(crate) fn authenticated_user<'a>(
    _shared: &'a Shared,
    _req: &'a RequestHead,
) -> Option<&'a str> {
    None
}

/// Applies `rules` to `req`. `None` lets the request go on; otherwise the answer to send
/// (403 for a denial, 407 when credentials are needed), logged as `TCP_DENIED` like Squid.
///
/// A request whose target cannot be determined is let through here: `dispatch` answers it
/// with 400, 405 or 501 before any origin or cache work, exactly as without rules.
pub(crate) async fn enforce(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    mode: Mode,
    rules: &AccessRules,
    keep_client: bool,
) -> Option<Outcome> {
    let mut url = std::mem::take(&mut cs.key);
    let verdict = decide(shared, cs, req, mode, rules, &mut url).await;
    cs.key = url;
    let (status, detail) = match verdict? {
        Verdict::Allow => return None,
        Verdict::Deny => (403, "access denied by the proxy's access rules"),
        Verdict::AuthRequired => (407, "proxy authentication required"),
    };
    Some(Outcome {
        status,
        bytes_sent: 0,
        keep_client,
        result: ResultCode::TcpDenied,
        peer: None,
        content_type: None,
        local: Some((status, detail)),
        body_complete: false,
    })
}

async fn decide(
    shared: &Shared,
    cs: &ClientSide,
    req: &RequestHead,
    mode: Mode,
    rules: &AccessRules,
    url_buf: &mut Vec<u8>,
) -> Option<Verdict> {
    let target = Target::of(req, mode, url_buf)?;
    let host = split_authority(&target.authority)?.host;
    let (url, path): (&[u8], &[u8]) = match target.path_start {
        Some(start) => (url_buf, &url_buf[start..]),
        None => (&req.target, b""),
    };
    let fields = Fields(req);
    let mut facts = Request {
        client: cs.peer.ip(),
        dst: Dst::Unresolved,
        host,
        port: target.port,
        method: &req.method_raw,
        url,
        path,
        headers: &fields,
        user: authenticated_user(shared, req),
        now: SystemTime::now(),
        tz: &shared.tz,
    };
    let literal = std::str::from_utf8(host)
        .ok()
        .and_then(|h| h.parse::<IpAddr>().ok());
    if let Some(ip) = &literal {
        // An IP literal is its own address: no lookup, no second pass.
        facts.dst = Dst::Resolved(std::slice::from_ref(ip));
    }
    match rules.check(&facts) {
        Ok(verdict) => Some(verdict),
        Err(_need_dst) => {
            let name = std::str::from_utf8(host).unwrap_or_default();
            let addrs: Vec<IpAddr> = match shared.resolver.resolve(name, target.port).await {
                Ok(addrs) => addrs.iter().map(|a| a.ip()).collect(),
                Err(_) => Vec::new(),
            };
            facts.dst = if addrs.is_empty() {
                Dst::Failed
            } else {
                Dst::Resolved(&addrs)
            };
            // With the addresses known, no ACL can ask for them again.
            Some(rules.check(&facts).unwrap_or(Verdict::Deny))
        }
    }
}

/// Where the request goes, as the rules see it.
struct Target {
    /// `host[:port]`: the URL's authority, the Host of an origin-form request (reverse mode),
    /// or CONNECT's target (RFC 9112 §3.2.3).
    authority: Bytes,
    port: u16,
    /// Where the path starts in the URL written to the buffer; `None` for CONNECT, whose URL
    /// is its `host:port` target and whose path is empty.
    path_start: Option<usize>,
}

impl Target {
    /// Mirrors `dispatch`'s reading of the target; `None` exactly where it answers an error.
    /// Writes the absolute URL into `url`, normalised like the cache key (lowercase scheme
    /// and host, no default port: Squid's url_regex also sees its canonical URL).
    fn of(req: &RequestHead, mode: Mode, url: &mut Vec<u8>) -> Option<Target> {
        if req.method == Method::Connect {
            let port = split_authority(&req.target)
                .filter(|_| mode == Mode::Forward)?
                .port?;
            return Some(Target {
                authority: req.target.clone(),
                port,
                path_start: None,
            });
        }
        let (authority, origin_form) = match parse_absolute(&req.target) {
            Ok(t) => (t.authority, t.origin_form),
            Err(TargetError::NotAbsolute) if mode == Mode::Reverse => {
                (req.host()?.clone(), req.target.clone())
            }
            Err(_) => return None,
        };
        let port = split_authority(&authority)?.port.unwrap_or(80);
        sepia_cache_policy::primary_key(b"http", &authority, &origin_form, url);
        let path_start = Some(sepia_cache_policy::key_origin(url).len());
        Some(Target {
            authority,
            port,
            path_start,
        })
    }
}

/// The request's header fields for `req_header` ACLs.
struct Fields<'a>(&'a RequestHead);

impl HeaderLookup for Fields<'_> {
    fn any_value(&self, name: &str, matches: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.0
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .any(|h| matches(&h.value))
    }
}
