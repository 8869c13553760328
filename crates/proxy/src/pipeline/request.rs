//! A request's way through the pipeline, up to the cache: who may ask (access rules, the
//! listener's allow list), what it asks for (CONNECT, or the URL read from the target and the
//! Host), and where it goes (`destination`); then the cache or the pass-through takes over.

use sepia_config::Mode;

use super::access::{self, RuleTarget};
use super::cache_flow;
use super::connect;
use super::context::{Ctx, Exchange};
use super::destination;
use super::intercepted::Intercepted;
use super::responder::Responder;
use crate::model::{parse_absolute, AbsoluteTarget, Method, Outcome, RequestView, TargetError};

/// Answers the request; `key` is the connection's buffer for the cache key.
pub(super) async fn answer<C: Responder>(x: &mut Exchange<'_, C>, key: &mut Vec<u8>) -> Outcome {
    // [[http_access]] rules replace forward.allow and govern every listener; they are applied
    // once the target is read, to every request whose target can be determined (the others
    // are answered with an error before any origin or cache work either way).
    let rules = x.cx.state.config.http_access.as_ref();
    if rules.is_none() && !x.cx.conn.allowed {
        return Outcome::local(403, "access denied: this proxy does not serve your address");
    }
    if x.cx.req.method() == Method::Connect {
        if x.cx.conn.mode != Mode::Forward {
            return Outcome::local(405, "CONNECT is not allowed here").closing();
        }
        if let Some(rules) = rules {
            let target = RuleTarget::connect(x.cx.req.target());
            if let Some(denied) = access::enforce(x, target, rules, key).await {
                return denied;
            }
        }
        return Box::pin(connect::tunnel(x)).await;
    }
    let req = x.cx.req;
    let absolute = match parse_absolute(req.target(), |part| req.share(part)) {
        Ok(t) => Some(t),
        Err(TargetError::NotAbsolute) => None,
        Err(TargetError::UnsupportedScheme) => {
            return Outcome::local(501, "only http:// and https:// URLs are supported")
        }
        Err(TargetError::BadAuthority) => {
            return Outcome::local(400, "invalid host in the request URL").closing()
        }
    };
    if let Some(rules) = rules {
        let target = rule_target(x, absolute.as_ref());
        if let Some(denied) = access::enforce(x, target, rules, key).await {
            return denied;
        }
    }
    let Ctx { state, req, conn } = x.cx;
    let scheme = conn.scheme;
    match x.cx.conn.mode {
        Mode::Forward => match destination::forward(absolute.as_ref()) {
            Ok(dest) => cache_flow::answer(x, key, &dest).await,
            Err(refused) => refused,
        },
        Mode::Reverse => match destination::reverse(state, req, absolute.as_ref(), scheme) {
            Ok(dest) => cache_flow::answer(x, key, &dest).await,
            Err(refused) => refused,
        },
        Mode::Intercept | Mode::Tproxy => {
            match Intercepted::find(state, &conn.divert, req, absolute, scheme).await {
                Ok(found) => cache_flow::answer(x, key, &found.destination()).await,
                Err(refused) => refused,
            }
        }
    }
}

/// The target the access rules see: the absolute URL, or for the listeners that receive
/// origin-form (reverse, interception) the Host and the target.
fn rule_target<'a, C: Responder>(
    x: &Exchange<'a, C>,
    absolute: Option<&'a AbsoluteTarget>,
) -> Option<RuleTarget<'a>> {
    let req: &'a C::Request = x.cx.req;
    match absolute {
        Some(t) => RuleTarget::url(t.scheme, &t.authority, &t.origin_form),
        None if x.cx.conn.mode != Mode::Forward => req
            .host()
            .and_then(|host| RuleTarget::url(x.cx.conn.scheme, host, req.target())),
        None => None,
    }
}
