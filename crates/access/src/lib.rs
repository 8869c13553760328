//! Squid-style access rules: named ACLs and an ordered list of `allow` / `deny` rules
//! (Squid's `acl` and `http_access` directives), compiled once when the configuration is
//! loaded and evaluated for every request without allocating.
//!
//! The crate is pure: no I/O, no clock, no resolver. The caller hands in the request's facts as
//! a borrowed [`Request`] (client address, destination host, port, method, URL, headers, the
//! authenticated user, the current time and the time zone to read it in). Two facts may need
//! work the caller does only when a rule actually asks for them:
//!
//! * `dst` ACLs need the destination's addresses. [`AccessRules::check`] answers
//!   [`NeedDst`] when it reaches one while [`Request::dst`] is [`Dst::Unresolved`]; the caller
//!   resolves the host and checks again (Squid's asynchronous "DNS lookup, then resume").
//! * `proxy_auth` ACLs need a user. Reaching one while [`Request::user`] is `None` ends the
//!   check with [`Verdict::AuthRequired`], which the proxy answers with 407 (as Squid does).
//!
//! Semantics (see the README, section Access rules):
//! * an ACL matches when any of its values matches;
//! * a rule matches when every ACL it names matches (`!name` negates one), evaluated left to
//!   right and stopping at the first that does not match, so a later `proxy_auth` is only
//!   reached when the earlier ACLs matched;
//! * the first matching rule decides; when none matches the request is denied. (Squid answers
//!   the opposite of the last rule's action instead; an explicit default is less surprising.)
//! * `all` is predefined (every IPv4 and IPv6 client), as in Squid.

mod acl;
mod request;
mod rules;
mod values;

pub use acl::{Acl, AclError, AclOptions, AclType};
pub use jiff::tz::TimeZone;
pub use request::{Dst, HeaderLookup, LocalZone, NoHeaders, Request};
pub use rules::{AccessRules, Action, NeedDst, TermError, Verdict};
pub use values::{in_networks, is_host_name, parse_network};
