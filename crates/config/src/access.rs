//! `[[acl]]` and `[[http_access]]` → compiled [`AccessRules`], every problem reported at the
//! line of the value at fault. Squid skips a bad `http_access` line with a warning and goes on
//! with a rule set nobody wrote; here it stops the load.

use sepia_access::{AccessRules, Acl, AclOptions, AclType};

use crate::error::ConfigError;
use crate::raw::{RawAcl, RawForward, RawHttpAccess};

/// `None` when there are no `[[http_access]]` rules (the behaviour without access rules).
pub(crate) fn resolve(
    acls: &[RawAcl],
    rules: &[RawHttpAccess],
    forward: &RawForward,
    file: &str,
    text: &str,
) -> Result<Option<AccessRules>, ConfigError> {
    let err = |span, key: String, message: String| {
        ConfigError::at(file, text, Some(span), Some(key), message)
    };
    if rules.is_empty() {
        return match acls.first() {
            Some(first) => Err(err(
                first.name.span(),
                "acl[0]".into(),
                "[[acl]] tables have no effect without [[http_access]] rules (add rules that \
                 use them, or remove them)"
                    .into(),
            )),
            None => Ok(None),
        };
    }
    if forward.allow.span() != (0..0) {
        return Err(err(
            forward.allow.span(),
            "forward.allow".into(),
            "forward.allow cannot be combined with [[http_access]] rules, which govern every \
             request: use an [[acl]] of type \"src\" with these networks and an allow rule"
                .into(),
        ));
    }
    let mut compiled = AccessRules::new();
    for (i, raw) in acls.iter().enumerate() {
        let acl = compile_acl(i, raw, file, text)?;
        compiled
            .add_acl(acl)
            .map_err(|message| err(raw.name.span(), format!("acl[{i}].name"), message))?;
    }
    for (i, rule) in rules.iter().enumerate() {
        let names: Vec<&str> = rule
            .acl
            .get_ref()
            .iter()
            .map(|n| n.get_ref().as_str())
            .collect();
        compiled
            .add_rule(rule.action.0, &names)
            .map_err(|e| match e.term {
                Some(t) => err(
                    rule.acl.get_ref()[t].span(),
                    format!("http_access[{i}].acl[{t}]"),
                    e.message,
                ),
                None => err(rule.acl.span(), format!("http_access[{i}].acl"), e.message),
            })?;
    }
    Ok(Some(compiled))
}

fn compile_acl(i: usize, raw: &RawAcl, file: &str, text: &str) -> Result<Acl, ConfigError> {
    let err = |span, key: String, message: String| {
        ConfigError::at(file, text, Some(span), Some(key), message)
    };
    let kind = raw.kind.get_ref();
    let ty = AclType::from_name(kind).ok_or_else(|| {
        let names: Vec<&str> = AclType::ALL.iter().map(|(n, _)| *n).collect();
        err(
            raw.kind.span(),
            format!("acl[{i}].type"),
            format!(
                "unknown ACL type \"{kind}\" (expected one of {})",
                names.join(", ")
            ),
        )
    })?;
    let values: Vec<&str> = raw
        .values
        .get_ref()
        .iter()
        .map(|v| v.get_ref().0.as_str())
        .collect();
    let options = AclOptions {
        ignore_case: raw.ignore_case.as_ref().is_some_and(|b| *b.get_ref()),
        header: raw.header.as_ref().map(|h| h.get_ref().as_str()),
    };
    Acl::new(raw.name.get_ref(), ty, &values, options).map_err(|e| {
        // Point at the value at fault, else at the option the message is about.
        let (span, key) = match e.value {
            Some(v) => (
                raw.values.get_ref()[v].span(),
                format!("acl[{i}].values[{v}]"),
            ),
            None if e.message.contains("ignore_case") => (
                raw.ignore_case
                    .as_ref()
                    .map_or(raw.kind.span(), |b| b.span()),
                format!("acl[{i}].ignore_case"),
            ),
            None if e.message.contains("header") => (
                raw.header.as_ref().map_or(raw.kind.span(), |h| h.span()),
                format!("acl[{i}].header"),
            ),
            None => (raw.values.span(), format!("acl[{i}].values")),
        };
        err(span, key, e.message)
    })
}

#[cfg(test)]
mod tests;
