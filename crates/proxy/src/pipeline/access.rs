//! `[[http_access]]` rules applied to each request (Squid's `http_access`), once the target is
//! known and before any cache or origin work.
//!
//! The facts handed to the rules are slices of the request head, plus the normalised absolute
//! URL written into the connection's reused key buffer, so a check allocates nothing unless a
//! `dst` ACL is reached for a host name (then the name is resolved, once, and the rules are
//! checked again with its addresses: Squid's asynchronous dst lookup).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::SystemTime;

use sepia_access::{AccessRules, Dst, HeaderLookup, Request, Verdict};
use sepia_auth::Verdict as AuthVerdict;
use sepia_cache_policy::Fields as _;
use sepia_observe::ResultCode;

use super::context::Exchange;
use super::responder::Responder;
use crate::model::{split_authority, FieldView, HeaderId, Outcome, RequestView, Scheme};
use crate::state::State;

/// Applies `rules` to the request. `None` lets it go on; otherwise the answer to send (403
/// for a denial, 407 when credentials are needed, 503 when the authentication helpers cannot
/// answer), logged as `TCP_DENIED` like Squid. The user a request authenticated as is left in
/// `x.user` for the access log. `url_buf` is the connection's reused buffer for the URL.
///
/// A request whose target cannot be determined (`target` is `None`) is let through here: the
/// pipeline answers it with 400, 409 or 501 before any origin or cache work, exactly as
/// without rules.
pub(super) async fn enforce<C: Responder>(
    x: &mut Exchange<'_, C>,
    target: Option<RuleTarget<'_>>,
    rules: &AccessRules,
    url_buf: &mut Vec<u8>,
) -> Option<Outcome> {
    let target = target?;
    let client = x.cx.conn.client.peer.ip();
    let decision = decide(x.cx.state, client, x.cx.req, target, rules, url_buf).await;
    x.user = decision.user;
    let (status, detail) = match decision.verdict {
        Verdict::Allow => return None,
        Verdict::Deny => (403, "access denied by the proxy's access rules"),
        Verdict::AuthRequired if decision.auth_unavailable => {
            (503, "the authentication service is unavailable")
        }
        Verdict::AuthRequired => (407, "proxy authentication required"),
    };
    Some(Outcome::local(status, detail).logged_as(ResultCode::TcpDenied))
}

struct Decision {
    verdict: Verdict,
    /// Set when the request's credentials were verified.
    user: Option<Arc<str>>,
    /// The credentials could not be checked (helpers down or timing out).
    auth_unavailable: bool,
}

async fn decide(
    state: &State,
    client: IpAddr,
    req: &impl RequestView,
    target: RuleTarget<'_>,
    rules: &AccessRules,
    url_buf: &mut Vec<u8>,
) -> Decision {
    let host = target.host;
    let (url, path): (&[u8], &[u8]) = match target.origin_form {
        // The absolute URL normalised like the cache key (lowercase scheme and host, no
        // default port): Squid's url_regex also sees its canonical URL.
        Some(origin_form) => {
            let scheme = target.scheme.as_bytes();
            sepia_cache_policy::primary_key(scheme, target.authority, origin_form, url_buf);
            let path_start = sepia_cache_policy::key_origin(url_buf).len();
            (url_buf, &url_buf[path_start..])
        }
        None => (req.target(), b""),
    };
    let fields = RequestFields(req.fields());
    // Declared before `facts` so that the facts can borrow them once they are known.
    let resolved: OnceLock<Vec<IpAddr>> = OnceLock::new();
    let mut user: Option<Arc<str>> = None;
    let literal = std::str::from_utf8(host)
        .ok()
        .and_then(|h| h.parse::<IpAddr>().ok());
    let mut facts = Request {
        client,
        // An IP literal is its own address: no lookup, no second pass.
        dst: match &literal {
            Some(ip) => Dst::Resolved(std::slice::from_ref(ip)),
            None => Dst::Unresolved,
        },
        host,
        port: target.port,
        method: req.method_raw(),
        url,
        path,
        headers: &fields,
        // Credentials are checked only when a rule reaches a `proxy_auth` ACL (Squid does the
        // same), so requests the rules decide without them never pay for a verification.
        user: None,
        now: SystemTime::now(),
        tz: &state.tz,
    };
    let mut verdict = check(state, rules, &mut facts, &resolved).await;
    let mut auth_unavailable = false;
    if verdict == Verdict::AuthRequired {
        let credentials = fields.0.first(HeaderId::ProxyAuthorization);
        if let (Some(auth), Some(value)) = (&state.auth, credentials) {
            match auth.verify(value).await {
                AuthVerdict::Valid(name) => {
                    user = Some(name);
                    facts.user = user.as_deref();
                    verdict = check(state, rules, &mut facts, &resolved).await;
                }
                AuthVerdict::Invalid => {}
                AuthVerdict::Unavailable => auth_unavailable = true,
            }
        }
    }
    Decision {
        verdict,
        user,
        auth_unavailable,
    }
}

/// Checks the rules; when they reach a `dst` ACL for a host name, resolves the name (once per
/// request: `resolved` keeps the addresses) and checks again with them.
async fn check<'a>(
    state: &State,
    rules: &AccessRules,
    facts: &mut Request<'a>,
    resolved: &'a OnceLock<Vec<IpAddr>>,
) -> Verdict {
    match rules.check(facts) {
        Ok(verdict) => verdict,
        Err(_need_dst) => {
            let name = std::str::from_utf8(facts.host).unwrap_or_default();
            let found = match state.upstreams.resolver.resolve(name, facts.port).await {
                Ok(addrs) => addrs.iter().map(|a| a.ip()).collect(),
                Err(_) => Vec::new(),
            };
            let addrs = resolved.get_or_init(|| found);
            facts.dst = if addrs.is_empty() {
                Dst::Failed
            } else {
                Dst::Resolved(addrs)
            };
            // With the addresses known, no ACL can ask for them again.
            rules.check(facts).unwrap_or(Verdict::Deny)
        }
    }
}

/// Where the request goes, as the rules see it: read by the pipeline from the target it
/// parses anyway.
pub(super) struct RuleTarget<'a> {
    scheme: Scheme,
    /// `host[:port]`: the URL's authority, the Host of an origin-form request (reverse and
    /// interception listeners), or CONNECT's target (RFC 9112 §3.2.3).
    authority: &'a [u8],
    host: &'a [u8],
    port: u16,
    /// The origin-form of an http URL; `None` for CONNECT, whose URL is its `host:port`
    /// target and whose path is empty.
    origin_form: Option<&'a [u8]>,
}

impl<'a> RuleTarget<'a> {
    /// A request for `origin_form` at `authority` (the scheme's default port unless given).
    pub(super) fn url(
        scheme: Scheme,
        authority: &'a [u8],
        origin_form: &'a [u8],
    ) -> Option<RuleTarget<'a>> {
        let auth = split_authority(authority)?;
        Some(RuleTarget {
            scheme,
            authority,
            host: auth.host,
            port: auth.port.unwrap_or(scheme.default_port()),
            origin_form: Some(origin_form),
        })
    }

    /// A CONNECT to `authority`, which must name its port.
    pub(super) fn connect(authority: &'a [u8]) -> Option<RuleTarget<'a>> {
        let auth = split_authority(authority)?;
        Some(RuleTarget {
            // Only the port the CONNECT names matters; the URL rules see is its target.
            scheme: Scheme::Http,
            authority,
            host: auth.host,
            port: auth.port?,
            origin_form: None,
        })
    }
}

/// The request's header fields for `req_header` ACLs.
struct RequestFields<F>(F);

impl<F: FieldView> HeaderLookup for RequestFields<F> {
    fn any_value(&self, name: &str, matches: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        // Well-known names are matched by the id the codec assigned at parse time.
        self.0.values(name.as_bytes()).any(matches)
    }
}
