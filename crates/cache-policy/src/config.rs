//! Policy settings: shared or private cache, heuristic freshness rules.
//!
//! Built once (regexes compiled into one `RegexSet`) and then only read, so a
//! config reload builds a new [`PolicyConfig`] and swaps it.

use std::fmt;

use regex::bytes::RegexSet;

use crate::targeted::TargetList;

/// Default heuristic fraction of the time since `Last-Modified`: the 10%
/// RFC 9111 §4.2.2 calls typical.
pub const DEFAULT_HEURISTIC_PERCENT: u32 = 10;

/// Default cap on a heuristic lifetime: one day.
///
/// Squid caps at three days; one day bounds how long content that never said
/// it was cacheable can be served without asking the origin, at the cost of a
/// daily revalidation (cheap when the response has a validator).
pub const DEFAULT_HEURISTIC_MAX: u64 = 24 * 60 * 60;

/// How to compute a heuristic freshness lifetime (RFC 9111 §4.2.2), in the
/// manner of Squid's `refresh_pattern min percent max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeuristicRule {
    /// Lifetime floor in seconds; also the lifetime without `Last-Modified`.
    pub min: u64,
    /// Percentage of (`Date` − `Last-Modified`).
    pub percent: u32,
    /// Lifetime ceiling in seconds.
    pub max: u64,
}

impl Default for HeuristicRule {
    fn default() -> Self {
        Self {
            min: 0,
            percent: DEFAULT_HEURISTIC_PERCENT,
            max: DEFAULT_HEURISTIC_MAX,
        }
    }
}

impl HeuristicRule {
    /// The heuristic lifetime given the time between `Last-Modified` and the
    /// response's `Date` (`None` without a usable `Last-Modified`).
    pub fn lifetime(&self, since_last_modified: Option<u64>) -> u64 {
        match since_last_modified {
            Some(interval) => {
                let scaled = u128::from(interval) * u128::from(self.percent) / 100;
                u64::try_from(scaled)
                    .unwrap_or(u64::MAX)
                    .clamp(self.min, self.max)
            }
            None => self.min,
        }
    }
}

/// Why a configuration could not be built.
#[derive(Debug)]
pub enum PolicyConfigError {
    /// A refresh pattern is not a valid regular expression.
    InvalidPattern(regex::Error),
    /// A rule's `min` exceeds its `max`; `index` counts refresh rules from 0,
    /// `None` is the default rule.
    MinAboveMax {
        /// Which rule.
        index: Option<usize>,
    },
}

impl fmt::Display for PolicyConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyConfigError::InvalidPattern(e) => write!(f, "invalid refresh pattern: {e}"),
            PolicyConfigError::MinAboveMax { index: Some(i) } => {
                write!(f, "refresh rule {i}: min is above max")
            }
            PolicyConfigError::MinAboveMax { index: None } => {
                write!(f, "default heuristic rule: min is above max")
            }
        }
    }
}

impl std::error::Error for PolicyConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyConfigError::InvalidPattern(e) => Some(e),
            PolicyConfigError::MinAboveMax { .. } => None,
        }
    }
}

/// Immutable cache policy settings.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    shared: bool,
    default_rule: HeuristicRule,
    rules: Vec<HeuristicRule>,
    patterns: RegexSet,
    stale_if_error_default: u32,
    targets: TargetList,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            shared: true,
            default_rule: HeuristicRule::default(),
            rules: Vec::new(),
            patterns: RegexSet::empty(),
            stale_if_error_default: 0,
            targets: TargetList::default(),
        }
    }
}

impl PolicyConfig {
    /// Starts from the defaults: shared cache, 10% heuristic capped at a day,
    /// no refresh rules, no stale-on-error without `stale-if-error`.
    pub fn builder() -> PolicyConfigBuilder {
        PolicyConfigBuilder::default()
    }

    /// Whether this is a shared cache (RFC 9111 §1): `private` responses are
    /// not stored, `s-maxage` applies, `Authorization` restricts storing.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// The heuristic rule for a URL: the first refresh rule whose pattern
    /// matches, else the default rule.
    ///
    /// `url` is normally the primary cache key (see [`crate::primary_key`]),
    /// e.g. `http://example.com/a.png?x`.
    pub fn heuristic_rule(&self, url: &[u8]) -> HeuristicRule {
        if self.rules.is_empty() {
            return self.default_rule;
        }
        // SetMatches iterates in ascending pattern order: first match wins.
        self.patterns
            .matches(url)
            .iter()
            .next()
            .map_or(self.default_rule, |i| self.rules[i])
    }

    /// The targeted fields this cache obeys (RFC 9213), highest priority first.
    pub fn targets(&self) -> &TargetList {
        &self.targets
    }

    /// This policy with another target list: one cache serving listeners that obey different
    /// targeted fields keeps one policy per list.
    pub fn with_targets(&self, targets: TargetList) -> PolicyConfig {
        PolicyConfig {
            targets,
            ..self.clone()
        }
    }

    /// Seconds a stale response may be served when the origin fails, for
    /// responses without `stale-if-error` (RFC 9111 §4.2.4 allows serving
    /// stale when the origin is unreachable; 0 disables it).
    pub fn stale_if_error_default(&self) -> u32 {
        self.stale_if_error_default
    }
}

/// Builder for [`PolicyConfig`].
#[derive(Clone, Debug)]
pub struct PolicyConfigBuilder {
    shared: bool,
    default_rule: HeuristicRule,
    patterns: Vec<String>,
    rules: Vec<HeuristicRule>,
    stale_if_error_default: u32,
}

impl Default for PolicyConfigBuilder {
    fn default() -> Self {
        Self {
            shared: true,
            default_rule: HeuristicRule::default(),
            patterns: Vec::new(),
            rules: Vec::new(),
            stale_if_error_default: 0,
        }
    }
}

impl PolicyConfigBuilder {
    /// Shared (proxy) cache or private (user agent) cache.
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// Percentage of (`Date` − `Last-Modified`) used when no refresh rule
    /// matches.
    pub fn heuristic_percent(mut self, percent: u32) -> Self {
        self.default_rule.percent = percent;
        self
    }

    /// Cap in seconds on heuristic lifetimes when no refresh rule matches.
    pub fn heuristic_max(mut self, seconds: u64) -> Self {
        self.default_rule.max = seconds;
        self
    }

    /// Floor in seconds on heuristic lifetimes when no refresh rule matches.
    pub fn heuristic_min(mut self, seconds: u64) -> Self {
        self.default_rule.min = seconds;
        self
    }

    /// Adds a refresh rule (like Squid's `refresh_pattern`): URLs matching
    /// `pattern` (a `regex` crate expression; prefix `(?i)` for
    /// case-insensitive) use `rule`. Rules are tried in the order added.
    pub fn refresh_rule(mut self, pattern: &str, rule: HeuristicRule) -> Self {
        self.patterns.push(pattern.to_owned());
        self.rules.push(rule);
        self
    }

    /// Seconds to serve stale on origin errors without `stale-if-error`.
    pub fn stale_if_error_default(mut self, seconds: u32) -> Self {
        self.stale_if_error_default = seconds;
        self
    }

    /// Validates the rules and compiles the patterns.
    pub fn build(self) -> Result<PolicyConfig, PolicyConfigError> {
        if self.default_rule.min > self.default_rule.max {
            return Err(PolicyConfigError::MinAboveMax { index: None });
        }
        if let Some(index) = self.rules.iter().position(|r| r.min > r.max) {
            return Err(PolicyConfigError::MinAboveMax { index: Some(index) });
        }
        let patterns = RegexSet::new(&self.patterns).map_err(PolicyConfigError::InvalidPattern)?;
        Ok(PolicyConfig {
            shared: self.shared,
            default_rule: self.default_rule,
            rules: self.rules,
            patterns,
            stale_if_error_default: self.stale_if_error_default,
            targets: TargetList::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_rule_lifetime() {
        let rule = HeuristicRule {
            min: 60,
            percent: 20,
            max: 3600,
        };
        let cases: &[(Option<u64>, u64)] = &[
            (None, 60),
            (Some(0), 60),
            (Some(1000), 200),
            (Some(100_000), 3600),
            (Some(u64::MAX), 3600),
        ];
        for (interval, expected) in cases {
            assert_eq!(rule.lifetime(*interval), *expected, "{interval:?}");
        }
        assert_eq!(HeuristicRule::default().lifetime(Some(86_400)), 8_640);
        assert_eq!(
            HeuristicRule::default().lifetime(Some(100 * 86_400)),
            DEFAULT_HEURISTIC_MAX
        );
    }

    #[test]
    fn first_matching_refresh_rule_wins() {
        let images = HeuristicRule {
            min: 3600,
            percent: 50,
            max: 86_400,
        };
        let any_png = HeuristicRule {
            min: 1,
            percent: 1,
            max: 2,
        };
        let config = PolicyConfig::builder()
            .heuristic_percent(5)
            .refresh_rule(r"(?i)\.(png|jpe?g)(\?|$)", images)
            .refresh_rule(r"\.png$", any_png)
            .build()
            .unwrap();
        let cases: &[(&str, HeuristicRule)] = &[
            ("http://a/x.PNG", images),
            ("http://a/x.jpg?v=1", images),
            (
                "http://a/x.html",
                HeuristicRule {
                    percent: 5,
                    ..HeuristicRule::default()
                },
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(config.heuristic_rule(url.as_bytes()), *expected, "{url}");
        }
        assert!(config.shared());
        assert_eq!(config.stale_if_error_default(), 0);
    }

    #[test]
    fn builder_rejects_bad_rules() {
        let bad_regex = PolicyConfig::builder()
            .refresh_rule("(", HeuristicRule::default())
            .build();
        assert!(matches!(
            bad_regex,
            Err(PolicyConfigError::InvalidPattern(_))
        ));
        let inverted = HeuristicRule {
            min: 10,
            percent: 10,
            max: 5,
        };
        let err = PolicyConfig::builder()
            .refresh_rule(".", inverted)
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            PolicyConfigError::MinAboveMax { index: Some(0) }
        ));
        assert_eq!(err.to_string(), "refresh rule 0: min is above max");
        let err = PolicyConfig::builder()
            .heuristic_min(100)
            .heuristic_max(10)
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            PolicyConfigError::MinAboveMax { index: None }
        ));
        let private = PolicyConfig::builder()
            .shared(false)
            .stale_if_error_default(30)
            .build()
            .unwrap();
        assert!(!private.shared());
        assert_eq!(private.stale_if_error_default(), 30);
    }
}
