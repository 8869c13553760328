//! `acl` and `http_access` → `[[acl]]` and `[[http_access]]`.
//!
//! An ACL Sepia cannot express (a type it lacks, values read from a file, a host name where
//! it takes addresses) is left out, and so are the parts of rules that use it, failing
//! closed: an `allow` rule that names it is dropped (what it allowed is denied), a `deny`
//! rule loses that ACL (it denies more). Each such case is a note.

use std::collections::HashMap;

use sepia_access::{Acl, AclOptions, AclType};

use crate::cx::Cx;
use crate::out::Table;
use crate::parse::Directive;
use crate::units::{toml_str, toml_strs};

#[derive(Default)]
pub(crate) struct Access {
    acl_lines: Vec<Directive>,
    rules: Vec<Directive>,
}

/// One ACL after every `acl` line of its name was read.
#[derive(Clone, Debug)]
pub(crate) struct AclDef {
    pub name: String,
    /// The Squid type as written.
    pub squid_type: String,
    /// Why Sepia cannot express it; `None` when it can.
    pub bad: Option<String>,
    /// Sepia's type.
    pub ty: &'static str,
    /// Values with Squid's `-i` (case-insensitive) flag of each.
    pub values: Vec<(String, bool)>,
    pub header: Option<String>,
    /// Squid's predefined ACL (written out only when a rule uses it).
    pub predefined: bool,
    /// Where it was defined, for comments.
    pub sources: Vec<String>,
}

/// Every ACL by name, in the order they were first defined.
#[derive(Default)]
pub(crate) struct Acls {
    defs: Vec<AclDef>,
    index: HashMap<String, usize>,
}

impl Acls {
    pub(crate) fn get(&self, name: &str) -> Option<&AclDef> {
        self.index.get(name).map(|&i| &self.defs[i])
    }

    /// The values of a `dstdomain` ACL Sepia can express.
    pub(crate) fn domains(&self, name: &str) -> Option<Vec<String>> {
        let def = self.get(name)?;
        (def.bad.is_none() && def.ty == "dstdomain")
            .then(|| def.values.iter().map(|(v, _)| v.clone()).collect())
    }
}

/// Squid 5's predefined ACLs (`squid.conf`: "ACLs all, manager, localhost, to_localhost, and
/// CONNECT are predefined"); `all` is predefined in Sepia too.
type Predefined = (&'static str, &'static str, &'static [(&'static str, bool)]);

const PREDEFINED: [Predefined; 4] = [
    (
        "manager",
        "url_regex",
        &[
            ("^cache_object://", true),
            ("^[^:]+://[^/]+/squid-internal-mgr/", false),
        ],
    ),
    (
        "localhost",
        "src",
        &[("127.0.0.1/32", false), ("::1", false)],
    ),
    (
        "to_localhost",
        "dst",
        &[
            ("127.0.0.0/8", false),
            ("0.0.0.0/32", false),
            ("::1/128", false),
            ("::/128", false),
        ],
    ),
    ("CONNECT", "method", &[("CONNECT", false)]),
];

impl Access {
    pub(crate) fn take(&mut self, _cx: &mut Cx, d: &Directive) -> bool {
        match d.name.as_str() {
            "acl" => self.acl_lines.push(d.clone()),
            "http_access" => self.rules.push(d.clone()),
            _ => return false,
        }
        true
    }

    /// Reads every `acl` line into [`Acls`], each checked by Sepia's own ACL compiler.
    pub(crate) fn finish_acls(&self, cx: &mut Cx, misc: &crate::misc::Misc) -> Acls {
        let mut acls = Acls::default();
        for (name, ty, values) in PREDEFINED {
            acls.index.insert(name.to_string(), acls.defs.len());
            acls.defs.push(AclDef {
                name: name.to_string(),
                squid_type: ty.to_string(),
                bad: None,
                ty,
                values: values.iter().map(|(v, i)| (v.to_string(), *i)).collect(),
                header: None,
                predefined: true,
                sources: vec![format!("Squid's predefined ACL {name}")],
            });
        }
        for d in &self.acl_lines {
            add_line(cx, &mut acls, d);
        }
        let case_sensitive_users = misc.auth_case_sensitive();
        for def in &mut acls.defs {
            if def.bad.is_none() {
                def.bad = check(def, case_sensitive_users).err();
            }
        }
        for d in &self.acl_lines {
            if let Some(why) = d.args.first().and_then(|n| acls.get(n)?.bad.clone()) {
                cx.skip(d, &why);
            }
        }
        acls
    }

    /// `[[http_access]]` in order, then Squid's implicit last rule, then the `[[acl]]`s the
    /// rules use (and every other one Sepia can express).
    pub(crate) fn finish_rules(&self, cx: &mut Cx, acls: &Acls, forward: bool) {
        let mut used: Vec<String> = Vec::new();
        let mut emitted: Vec<(String, Vec<String>)> = Vec::new();
        let mut last: Option<(String, Vec<String>)> = None;
        for d in &self.rules {
            let action = d.args.first().map(String::as_str);
            if !matches!(action, Some("allow" | "deny")) || d.args.len() < 2 {
                cx.skip(
                    d,
                    "expected http_access allow|deny ACL...; Squid refuses this line",
                );
                continue;
            }
            let action = d.args[0].clone();
            let terms = d.args[1..].to_vec();
            last = Some((action.clone(), terms.clone()));
            if let Some(terms) = rule_terms(cx, acls, d, &action, &terms) {
                used.extend(terms.iter().map(|t| t.trim_start_matches('!').to_string()));
                let table = Table::new(cx.src(d))
                    .with("action", toml_str(&action))
                    .with("acl", toml_strs(&terms));
                cx.out.push("http_access", table);
                emitted.push((action, terms));
            }
        }
        implicit_rule(cx, last, &mut emitted);
        for def in &acls.defs {
            let wanted = !def.predefined || used.contains(&def.name);
            if def.bad.is_none() && wanted {
                cx.out.push("acl", acl_table(def));
            }
        }
        if forward {
            connect_ports(cx, acls, &emitted);
        }
    }
}

/// Adds one `acl` line to `acls`.
fn add_line(cx: &mut Cx, acls: &mut Acls, d: &Directive) {
    if d.args.len() < 3 {
        cx.skip(
            d,
            "expected acl NAME TYPE VALUE...; Squid refuses this line",
        );
        return;
    }
    let (name, squid_type) = (&d.args[0], &d.args[1]);
    if name == "all" {
        cx.skip(
            d,
            "`all` is predefined in Sepia (every IPv4 and IPv6 client) and cannot be redefined",
        );
        return;
    }
    let piece = translate_line(d);
    let src = cx.src(d);
    match acls.index.get(name) {
        Some(&i) => {
            let def = &mut acls.defs[i];
            if def.squid_type != *squid_type {
                let why = format!(
                    "ACL {name} is already of type {}: Squid refuses a second type",
                    def.squid_type
                );
                cx.skip(d, &why);
                return;
            }
            def.sources.push(src);
            match piece {
                Ok(p) if def.bad.is_none() => def.values.extend(p.values),
                Ok(_) => {}
                Err(why) => def.bad = def.bad.take().or(Some(why)),
            }
        }
        None => {
            let (ty, values, header, bad) = match piece {
                Ok(p) => (p.ty, p.values, p.header, None),
                Err(why) => ("", Vec::new(), None, Some(why)),
            };
            acls.index.insert(name.clone(), acls.defs.len());
            acls.defs.push(AclDef {
                name: name.clone(),
                squid_type: squid_type.clone(),
                bad,
                ty,
                values,
                header,
                predefined: false,
                sources: vec![src],
            });
        }
    }
}

/// What one `acl` line adds.
struct Piece {
    ty: &'static str,
    values: Vec<(String, bool)>,
    header: Option<String>,
}

fn translate_line(d: &Directive) -> Result<Piece, String> {
    let squid_type = d.args[1].as_str();
    let (ty, header) = match squid_type {
        "src" | "dst" | "dstdomain" | "port" | "method" | "url_regex" | "urlpath_regex"
        | "time" | "req_header" | "proxy_auth" => (
            AclType::from_name(squid_type).map_or("", AclType::name),
            None,
        ),
        "browser" => ("req_header", Some("User-Agent".to_string())),
        "referer_regex" => ("req_header", Some("Referer".to_string())),
        other => return Err(unsupported_type(other)),
    };
    let mut icase = false;
    let mut flags_done = false;
    let mut values = Vec::new();
    let mut header = header;
    for token in &d.args[2..] {
        match token.as_str() {
            "-i" if !flags_done => icase = true,
            "+i" if !flags_done => icase = false,
            "-n" if !flags_done => {} // dstdomain: no reverse lookups; Sepia never does any
            "--" if !flags_done => flags_done = true,
            t if t.starts_with('"') => {
                return Err(format!(
                    "Squid reads this ACL's values from the file {t}; Sepia's [[acl]] takes \
                     its values inline: copy them into `values`"
                ))
            }
            t if t.starts_with('-') && t.len() > 1 && !flags_done && ty != "port" => {
                return Err(format!("Sepia has no equivalent of the ACL option {t}"))
            }
            t if ty == "req_header" && header.is_none() => header = Some(t.to_string()),
            t => values.push((t.to_string(), icase)),
        }
    }
    if ty == "time" {
        let joined: Vec<&str> = values.iter().map(|(v, _)| v.as_str()).collect();
        values = vec![(joined.join(" "), false)];
    }
    if ty == "src" || ty == "dst" {
        values = networks(&values)?;
    }
    if values.is_empty() {
        return Err("no values".into());
    }
    Ok(Piece { ty, values, header })
}

fn unsupported_type(ty: &str) -> String {
    let hint = match ty {
        "myport" | "localport" | "myportname" | "myip" | "localip" => {
            "Sepia's rules cannot tell its listeners apart (every rule applies to every listener)"
        }
        "srcdomain" | "dstdom_regex" | "srcdom_regex" => {
            "Sepia matches domains with dstdomain only (no regular expressions, no reverse DNS)"
        }
        "proto" => "Sepia has no protocol ACL (a url_regex such as ^https?:// comes close)",
        "maxconn" | "max_user_ip" => "Sepia has no per-client connection or address limits",
        "proxy_auth_regex" | "ext_user" | "external" | "ident" => {
            "Sepia matches authenticated users with proxy_auth (REQUIRED or a list of names)"
        }
        "rep_header" | "rep_mime_type" | "http_status" => {
            "Sepia's rules are about requests; it has no http_reply_access"
        }
        "any-of" | "all-of" => "Sepia has no ACL groups (write the rules out)",
        _ => "Sepia has no ACL of this type",
    };
    format!(
        "ACL type {ty} is not supported: {hint}; Sepia has src, dst, dstdomain, port, method, \
         url_regex, urlpath_regex, time, req_header and proxy_auth"
    )
}

/// Squid's `src`/`dst` values as CIDR networks: `a.b.c.d`, `net/len`, `net/mask`,
/// `from-to` ranges (split into the networks that cover them exactly) and `all`.
fn networks(values: &[(String, bool)]) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    for (v, _) in values {
        for net in network(v)? {
            out.push((net.to_string(), false));
        }
    }
    Ok(out)
}

fn network(text: &str) -> Result<Vec<ipnet::IpNet>, String> {
    use ipnet::IpNet;
    use std::net::IpAddr;
    if text == "all" {
        return Ok(vec![
            IpNet::from(IpAddr::from([0u8; 4])).trunc_to(0),
            IpNet::from(IpAddr::from([0u16; 8])).trunc_to(0),
        ]);
    }
    let (range, mask) = match text.split_once('/') {
        Some((r, m)) => (r, Some(m)),
        None => (text, None),
    };
    let addr = |s: &str| {
        s.parse::<IpAddr>().map_err(|_| {
            format!(
                "{text} is not an address or network (a host name?): Squid resolves names once \
                 at start-up, Sepia's src and dst ACLs take addresses and networks only"
            )
        })
    };
    let (from, to) = match range.split_once('-') {
        Some((a, b)) => (addr(a)?, addr(b)?),
        None => (addr(range)?, addr(range)?),
    };
    if from != to {
        if mask.is_some() {
            return Err(format!("{text}: Sepia cannot read a range with a mask"));
        }
        return match (from, to) {
            (IpAddr::V4(a), IpAddr::V4(b)) if a <= b => {
                Ok(ipnet::Ipv4Subnets::new(a, b, 0).map(IpNet::V4).collect())
            }
            (IpAddr::V6(a), IpAddr::V6(b)) if a <= b => {
                Ok(ipnet::Ipv6Subnets::new(a, b, 0).map(IpNet::V6).collect())
            }
            _ => Err(format!("{text}: not an address range")),
        };
    }
    let prefix = match mask {
        None => IpNet::from(from).prefix_len(),
        Some(m) => match (m.parse::<u8>(), m.parse::<IpAddr>()) {
            (Ok(len), _) => len,
            (_, Ok(IpAddr::V4(mask))) => u32::from(mask).leading_ones() as u8,
            _ => return Err(format!("{text}: not a network mask")),
        },
    };
    // Squid masks host bits away (with a warning); Sepia would refuse them.
    IpNet::new(from, prefix)
        .map(|n| vec![n.trunc()])
        .map_err(|_| format!("{text}: bad prefix length"))
}

trait TruncTo {
    fn trunc_to(self, len: u8) -> Self;
}

impl TruncTo for ipnet::IpNet {
    fn trunc_to(self, len: u8) -> Self {
        ipnet::IpNet::new(self.addr(), len).map_or(self, |n| n.trunc())
    }
}

/// Whether Sepia's ACL compiler takes `def` as it would be written. User names compare
/// without case unless `auth_param basic casesensitive on`, as in Squid.
fn check(def: &mut AclDef, case_sensitive_users: bool) -> Result<(), String> {
    if def.ty == "proxy_auth" && !case_sensitive_users {
        def.values.iter_mut().for_each(|v| v.1 = true);
    }
    let (values, ignore_case) = sepia_values(def);
    let ty = AclType::from_name(def.ty).ok_or_else(|| format!("unknown type {}", def.ty))?;
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let options = AclOptions {
        ignore_case,
        header: def.header.as_deref(),
    };
    Acl::new(&def.name, ty, &refs, options)
        .map(drop)
        .map_err(|e| format!("Sepia cannot take this ACL: {e}"))
}

/// The values as written for Sepia, and `ignore_case`: set when every value had `-i`;
/// otherwise each `-i` regular expression gets an inline `(?i)`.
fn sepia_values(def: &AclDef) -> (Vec<String>, bool) {
    let all = def.values.iter().all(|(_, i)| *i);
    let values = def.values.iter().map(|(v, _)| v.clone()).collect();
    match def.ty {
        "proxy_auth" => {
            let names = def.values.iter().any(|(v, _)| v != "REQUIRED");
            (values, names && def.values.iter().any(|(_, i)| *i))
        }
        "url_regex" | "urlpath_regex" | "req_header" if !all => {
            let values = def
                .values
                .iter()
                .map(|(v, i)| if *i { format!("(?i){v}") } else { v.clone() })
                .collect();
            (values, false)
        }
        "url_regex" | "urlpath_regex" | "req_header" => (values, true),
        _ => (values, false),
    }
}

fn acl_table(def: &AclDef) -> Table {
    let (values, ignore_case) = sepia_values(def);
    let mut table = Table {
        comments: def.sources.clone(),
        entries: Vec::new(),
    };
    table.set("name", toml_str(&def.name), None);
    table.set("type", toml_str(def.ty), None);
    if let Some(h) = &def.header {
        table.set("header", toml_str(h), None);
    }
    let rendered = if def.ty == "port" {
        let parts: Vec<String> = values
            .iter()
            .map(|v| match v.parse::<u16>() {
                Ok(p) => p.to_string(),
                Err(_) => toml_str(v),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    } else {
        toml_strs(&values)
    };
    table.set("values", rendered, None);
    if ignore_case {
        table.set("ignore_case", "true".into(), None);
    }
    table
}

/// A rule's ACL names for Sepia, or `None` when the rule is left out. Terms naming an ACL
/// Sepia lacks fail closed (see the module doc).
fn rule_terms(
    cx: &mut Cx,
    acls: &Acls,
    d: &Directive,
    action: &str,
    terms: &[String],
) -> Option<Vec<String>> {
    let mut kept = Vec::new();
    let mut missing = Vec::new();
    for term in terms {
        let name = term.trim_start_matches('!');
        let why = match acls.get(name) {
            _ if name == "all" => None,
            None => Some(format!("ACL {name} is not defined (Squid refuses this)")),
            Some(def) => def
                .bad
                .as_ref()
                .map(|_| format!("ACL {name} could not be translated (see its note)")),
        };
        match why {
            None => kept.push(term.clone()),
            Some(why) => missing.push(why),
        }
    }
    if missing.is_empty() {
        return Some(kept);
    }
    let missing = missing.join("; ");
    if action == "allow" {
        let why =
            format!("{missing}: the rule is left out, so what it allowed is denied (fails closed)");
        cx.skip(d, &why);
        return None;
    }
    let why = format!(
        "{missing}: left out of this deny rule, which so denies more than in Squid (fails \
         closed)"
    );
    cx.differs(d, &why);
    if kept.is_empty() {
        kept.push("all".into());
    }
    Some(kept)
}

/// Squid answers a request no rule matched with the opposite of the last rule's action (and
/// denies everything when there is no rule at all); Sepia denies it. The rule is written out.
fn implicit_rule(
    cx: &mut Cx,
    last: Option<(String, Vec<String>)>,
    emitted: &mut Vec<(String, Vec<String>)>,
) {
    let (action, comment) = match last {
        None => (
            "deny",
            "Squid denies every request when squid.conf has no http_access rule",
        ),
        Some((_, terms)) if terms == ["all"] => return,
        Some((action, _)) if action == "deny" => (
            "allow",
            "Squid's implicit last rule: the opposite of the last http_access line",
        ),
        Some(_) => (
            "deny",
            "Squid's implicit last rule: the opposite of the last http_access line",
        ),
    };
    let table = Table::new(comment)
        .with("action", toml_str(action))
        .with("acl", toml_strs(&["all"]));
    cx.out.push("http_access", table);
    emitted.push((action.to_string(), vec!["all".into()]));
}

/// Sepia limits CONNECT to `forward.connect_ports` after the rules allowed it; Squid has only
/// its rules. The usual `http_access deny CONNECT !SSL_ports` says which ports those are.
fn connect_ports(cx: &mut Cx, acls: &Acls, rules: &[(String, Vec<String>)]) {
    let is_connect = |name: &str| {
        acls.get(name)
            .is_some_and(|d| d.ty == "method" && d.values.iter().all(|(v, _)| v == "CONNECT"))
    };
    let ports = rules.iter().find_map(|(action, terms)| {
        let [a, b] = terms.as_slice() else {
            return None;
        };
        let (method, ports) = if is_connect(a) { (a, b) } else { (b, a) };
        let ports = ports.strip_prefix('!')?;
        let def = acls.get(ports).filter(|d| d.ty == "port")?;
        (action == "deny" && is_connect(method)).then_some(def)
    });
    let Some(def) = ports else {
        cx.general(
            "Sepia also limits CONNECT to forward.connect_ports ([443] by default) after the \
             rules allowed it; no `http_access deny CONNECT !ports` rule said which ports Squid \
             tunnels to, so the default stays",
        );
        return;
    };
    let mut list: Vec<u32> = Vec::new();
    for (v, _) in &def.values {
        let (lo, hi) = v.split_once('-').unwrap_or((v, v));
        let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) else {
            continue;
        };
        list.extend(lo..=hi.min(lo + 1024));
    }
    list.sort_unstable();
    list.dedup();
    if list.is_empty() || list.len() > 1024 {
        cx.general(
            "the CONNECT ports of Squid's rules are too many for forward.connect_ports (a list); \
             the default [443] stays",
        );
        return;
    }
    let parts: Vec<String> = list.iter().map(u32::to_string).collect();
    let comment = format!("the ports of ACL {} (Squid's CONNECT rule)", def.name);
    cx.out.set(
        "forward",
        "connect_ports",
        format!("[{}]", parts.join(", ")),
        comment,
    );
}
