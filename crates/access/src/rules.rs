//! The ordered `allow` / `deny` rules (Squid's `http_access`) over named ACLs.

use std::fmt;

use crate::acl::{Acl, AclOptions, AclType, Pending};
use crate::request::Request;

/// What a rule does when it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    Deny,
}

/// The decision for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A matching `allow` rule.
    Allow,
    /// A matching `deny` rule, or no rule matched (default deny).
    Deny,
    /// A `proxy_auth` ACL was reached without an authenticated user: answer 407 and let the
    /// client retry with credentials (Squid does the same).
    AuthRequired,
}

/// A `dst` ACL was reached before the destination was resolved: resolve it, set
/// [`Request::dst`], and check again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedDst;

/// Why a rule's ACL list was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TermError {
    /// The index of the offending entry of the list, when one entry is at fault.
    pub term: Option<usize>,
    pub message: String,
}

impl fmt::Display for TermError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    acl: usize,
    negated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    action: Action,
    terms: Vec<Term>,
}

/// The name of the predefined ACL that matches every client.
pub const ALL: &str = "all";

/// ACLs and rules, built once; [`AccessRules::check`] decides a request.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessRules {
    acls: Vec<Acl>,
    rules: Vec<Rule>,
}

impl Default for AccessRules {
    fn default() -> Self {
        AccessRules::new()
    }
}

impl AccessRules {
    /// No rules yet (everything denied) and the predefined `all` ACL.
    pub fn new() -> AccessRules {
        let all = Acl::new(
            ALL,
            AclType::Src,
            &["0.0.0.0/0", "::/0"],
            AclOptions::default(),
        )
        .unwrap_or_else(|e| unreachable!("the predefined ACL is valid: {e}"));
        AccessRules {
            acls: vec![all],
            rules: Vec::new(),
        }
    }

    /// Adds a named ACL; names are unique (case-sensitive, as in Squid) and `all` is taken.
    pub fn add_acl(&mut self, acl: Acl) -> Result<(), String> {
        if acl.name() == ALL {
            return Err(format!(
                "\"{ALL}\" is predefined (every client, IPv4 and IPv6) and cannot be redefined"
            ));
        }
        if !is_acl_name(acl.name()) {
            return Err(format!(
                "invalid ACL name \"{}\" (expected letters, digits, '-', '_' or '.', not \
                 starting with '!')",
                acl.name()
            ));
        }
        if self.acls.iter().any(|a| a.name() == acl.name()) {
            return Err(format!("duplicate ACL name \"{}\"", acl.name()));
        }
        self.acls.push(acl);
        Ok(())
    }

    /// Appends a rule: `action` when every named ACL matches (`"!name"` negates one).
    pub fn add_rule(&mut self, action: Action, names: &[&str]) -> Result<(), TermError> {
        if names.is_empty() {
            return Err(TermError {
                term: None,
                message: format!(
                    "a rule needs at least one ACL name (use \"{ALL}\" to match every request)"
                ),
            });
        }
        let terms = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let (negated, bare) = match name.strip_prefix('!') {
                    Some(bare) => (true, bare),
                    None => (false, *name),
                };
                let acl = self
                    .acls
                    .iter()
                    .position(|a| a.name() == bare)
                    .ok_or_else(|| TermError {
                        term: Some(i),
                        message: format!(
                            "unknown ACL \"{bare}\" (define it in an [[acl]] table; \
                             known: {})",
                            self.names()
                        ),
                    })?;
                Ok(Term { acl, negated })
            })
            .collect::<Result<_, _>>()?;
        self.rules.push(Rule { action, terms });
        Ok(())
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.acls.iter().map(Acl::name).collect();
        names.join(", ")
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The ACL named `name`, predefined ones included.
    pub fn acl(&self, name: &str) -> Option<&Acl> {
        self.acls.iter().find(|a| a.name() == name)
    }

    /// Decides `req`: the first rule whose ACLs all match gives the verdict; none → deny.
    /// ACLs of a rule are evaluated left to right and stop at the first mismatch, so a `dst`
    /// or `proxy_auth` ACL costs a lookup or a challenge only when it is reached.
    /// Allocation-free.
    pub fn check(&self, req: &Request<'_>) -> Result<Verdict, NeedDst> {
        'rules: for rule in &self.rules {
            for term in &rule.terms {
                match self.acls[term.acl].matches(req) {
                    Ok(matched) if matched != term.negated => {}
                    Ok(_) => continue 'rules,
                    Err(Pending::Auth) => return Ok(Verdict::AuthRequired),
                    Err(Pending::Dst) => return Err(NeedDst),
                }
            }
            return Ok(match rule.action {
                Action::Allow => Verdict::Allow,
                Action::Deny => Verdict::Deny,
            });
        }
        Ok(Verdict::Deny)
    }
}

/// Squid's ACL names: letters, digits and `-_.`; a leading `!` would read as negation.
fn is_acl_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

#[cfg(test)]
mod tests;
