//! One named ACL: its type, its values compiled once, and how it matches a request.

use std::fmt;

use ipnet::IpNet;
use jiff::Timestamp;
use regex::bytes::{RegexBuilder, RegexSet, RegexSetBuilder};

use crate::request::{Dst, Request};
use crate::values::{self, Domain, TimeSpec};

/// The ACL types, with Squid's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AclType {
    /// `src`: the client's address is in one of the networks.
    Src,
    /// `dst`: one of the destination's resolved addresses is in one of the networks.
    Dst,
    /// `dstdomain`: the destination host is one of the names (`.suffix` for a whole domain).
    DstDomain,
    /// `port`: the destination port is one of the ports or ranges.
    Port,
    /// `method`: the request method is one of the tokens (case-sensitive).
    Method,
    /// `url_regex`: the absolute URL matches one of the regular expressions.
    UrlRegex,
    /// `urlpath_regex`: the path and query match one of the regular expressions.
    UrlPathRegex,
    /// `time`: the local day and time are in one of the `[days] [hh:mm-hh:mm]` specs.
    Time,
    /// `req_header`: a value of the named header matches one of the regular expressions.
    ReqHeader,
    /// `proxy_auth`: `REQUIRED` (any authenticated user) or a list of user names.
    ProxyAuth,
}

impl AclType {
    /// Every type with its configuration name, in the order the README lists them.
    pub const ALL: [(&'static str, AclType); 10] = [
        ("src", AclType::Src),
        ("dst", AclType::Dst),
        ("dstdomain", AclType::DstDomain),
        ("port", AclType::Port),
        ("method", AclType::Method),
        ("url_regex", AclType::UrlRegex),
        ("urlpath_regex", AclType::UrlPathRegex),
        ("time", AclType::Time),
        ("req_header", AclType::ReqHeader),
        ("proxy_auth", AclType::ProxyAuth),
    ];

    /// The type named `name` (exactly, lowercase as in Squid).
    pub fn from_name(name: &str) -> Option<AclType> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// The configuration name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("", |(n, _)| n)
    }

    /// Whether the type needs a header name (`req_header` only).
    pub fn takes_header(self) -> bool {
        self == AclType::ReqHeader
    }

    /// Whether `ignore_case` (Squid's `-i`) means something for this type.
    pub fn takes_ignore_case(self) -> bool {
        matches!(
            self,
            AclType::UrlRegex | AclType::UrlPathRegex | AclType::ReqHeader | AclType::ProxyAuth
        )
    }
}

/// Options besides the values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclOptions<'a> {
    /// Squid's `-i`: regular expressions and user names compared ignoring case.
    pub ignore_case: bool,
    /// The field name for `req_header`.
    pub header: Option<&'a str>,
}

/// Why an ACL could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclError {
    /// The index of the offending value, when one value is at fault.
    pub value: Option<usize>,
    pub message: String,
}

impl AclError {
    fn whole(message: impl Into<String>) -> AclError {
        AclError {
            value: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value {
            Some(i) => write!(f, "value {i}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A compiled ACL. Equality compares what it was built from (name, type, values, options):
/// compiled regular expressions have no equality of their own.
#[derive(Clone)]
pub struct Acl {
    name: String,
    ty: AclType,
    values: Vec<String>,
    ignore_case: bool,
    header: Option<String>,
    matcher: Matcher,
}

#[derive(Clone)]
enum Matcher {
    Networks(Vec<IpNet>),
    Domains(Vec<Domain>),
    Ports(Vec<(u16, u16)>),
    Methods(Vec<Box<[u8]>>),
    Regexes(RegexSet),
    Times(Vec<TimeSpec>),
    AnyUser,
    Users(Vec<String>),
}

/// Why a match could not be decided from the facts at hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    /// A `proxy_auth` ACL and no authenticated user.
    Auth,
    /// A `dst` ACL and no resolved destination yet.
    Dst,
}

impl Acl {
    /// Compiles an ACL. `values` must not be empty; each is checked by the type's parser.
    pub fn new(
        name: &str,
        ty: AclType,
        values: &[&str],
        options: AclOptions<'_>,
    ) -> Result<Acl, AclError> {
        if values.is_empty() {
            return Err(AclError::whole("an ACL needs at least one value"));
        }
        if let Some(i) = values.iter().position(|v| v.is_empty()) {
            return Err(AclError {
                value: Some(i),
                message: "empty value".into(),
            });
        }
        if options.ignore_case && !ty.takes_ignore_case() {
            return Err(AclError::whole(format!(
                "ignore_case does not apply to {} ACLs (only url_regex, urlpath_regex, \
                 req_header and proxy_auth)",
                ty.name()
            )));
        }
        match (ty.takes_header(), options.header) {
            (true, None) => {
                return Err(AclError::whole(
                    "a req_header ACL needs header = \"Field-Name\"",
                ))
            }
            (true, Some(h)) => values::header_name(h).map_err(AclError::whole)?,
            (false, Some(_)) => {
                return Err(AclError::whole(format!(
                    "header applies only to req_header ACLs, not {}",
                    ty.name()
                )))
            }
            (false, None) => {}
        }
        let matcher = compile(ty, values, options.ignore_case)?;
        Ok(Acl {
            name: name.to_string(),
            ty,
            values: values.iter().map(|v| v.to_string()).collect(),
            ignore_case: options.ignore_case,
            header: options.header.map(str::to_string),
            matcher,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn acl_type(&self) -> AclType {
        self.ty
    }

    /// Whether the ACL matches `req`; allocation-free.
    pub(crate) fn matches(&self, req: &Request<'_>) -> Result<bool, Pending> {
        Ok(match &self.matcher {
            Matcher::Networks(nets) if self.ty == AclType::Src => {
                values::in_networks(nets, req.client)
            }
            Matcher::Networks(nets) => match req.dst {
                Dst::Unresolved => return Err(Pending::Dst),
                Dst::Resolved(ips) => ips.iter().any(|ip| values::in_networks(nets, *ip)),
                Dst::Failed => false,
            },
            Matcher::Domains(domains) => domains.iter().any(|d| d.matches(req.host)),
            Matcher::Ports(ranges) => ranges
                .iter()
                .any(|&(low, high)| (low..=high).contains(&req.port)),
            Matcher::Methods(methods) => methods.iter().any(|m| **m == *req.method),
            Matcher::Regexes(set) => match self.ty {
                AclType::UrlRegex => set.is_match(req.url),
                AclType::UrlPathRegex => set.is_match(req.path),
                _ => {
                    let name = self.header.as_deref().unwrap_or_default();
                    req.headers
                        .any_value(name, &mut |value| set.is_match(value))
                }
            },
            Matcher::Times(specs) => {
                let Some((weekday, minute)) = local_day_minute(req) else {
                    return Ok(false);
                };
                specs.iter().any(|s| s.matches(weekday, minute))
            }
            Matcher::AnyUser => {
                req.user.ok_or(Pending::Auth)?;
                true
            }
            Matcher::Users(users) => {
                let user = req.user.ok_or(Pending::Auth)?;
                users.iter().any(|u| {
                    if self.ignore_case {
                        u.eq_ignore_ascii_case(user)
                    } else {
                        u == user
                    }
                })
            }
        })
    }
}

/// The weekday (0 = Sunday) and minute after midnight of `req.now` in `req.tz`; `None` only
/// for a clock outside jiff's range (years beyond ±9999), which no `time` ACL then matches.
fn local_day_minute(req: &Request<'_>) -> Option<(u8, u16)> {
    let ts = Timestamp::try_from(req.now).ok()?;
    let local = req.tz.get().to_datetime(ts);
    let weekday = u8::try_from(local.weekday().to_sunday_zero_offset()).ok()?;
    let minute = u16::try_from(i32::from(local.hour()) * 60 + i32::from(local.minute())).ok()?;
    Some((weekday, minute))
}

fn each<T>(values: &[&str], parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, AclError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            parse(v).map_err(|message| AclError {
                value: Some(i),
                message,
            })
        })
        .collect()
}

fn compile(ty: AclType, values: &[&str], ignore_case: bool) -> Result<Matcher, AclError> {
    Ok(match ty {
        AclType::Src | AclType::Dst => Matcher::Networks(each(values, values::parse_network)?),
        AclType::DstDomain => Matcher::Domains(each(values, values::domain)?),
        AclType::Port => Matcher::Ports(each(values, values::port_range)?),
        AclType::Method => Matcher::Methods(each(values, values::method)?),
        AclType::Time => Matcher::Times(each(values, values::time_spec)?),
        AclType::UrlRegex | AclType::UrlPathRegex | AclType::ReqHeader => {
            // Each pattern alone first, so an error names the value at fault; then one set,
            // so a request is matched against all of them in a single pass.
            each(values, |v| {
                RegexBuilder::new(v)
                    .case_insensitive(ignore_case)
                    .build()
                    .map(|_| ())
                    .map_err(|e| format!("invalid regular expression: {e}"))
            })?;
            let set = RegexSetBuilder::new(values)
                .case_insensitive(ignore_case)
                .build()
                .map_err(|e| AclError::whole(format!("invalid regular expressions: {e}")))?;
            Matcher::Regexes(set)
        }
        AclType::ProxyAuth => {
            if values.contains(&"REQUIRED") {
                if values.len() > 1 {
                    return Err(AclError::whole(
                        "\"REQUIRED\" (any authenticated user) must be the only value",
                    ));
                }
                Matcher::AnyUser
            } else {
                each(values, values::user_name)?;
                Matcher::Users(values.iter().map(|v| v.to_string()).collect())
            }
        }
    })
}

impl PartialEq for Acl {
    fn eq(&self, other: &Acl) -> bool {
        self.name == other.name
            && self.ty == other.ty
            && self.values == other.values
            && self.ignore_case == other.ignore_case
            && self.header == other.header
    }
}

impl fmt::Debug for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acl")
            .field("name", &self.name)
            .field("type", &self.ty.name())
            .field("values", &self.values)
            .field("ignore_case", &self.ignore_case)
            .field("header", &self.header)
            .finish()
    }
}
