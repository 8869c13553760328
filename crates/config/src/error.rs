//! One error type for everything that can be wrong with a configuration, always naming the
//! file, and the line and key when there is one, so an operator can go straight to it.

use std::fmt;
use std::ops::Range;

/// A configuration that could not be loaded: `file:line: key 'a.b': message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    file: String,
    line: Option<usize>,
    key: Option<String>,
    message: String,
}

impl ConfigError {
    /// An error not tied to a place in a file (e.g. the file cannot be read, or a
    /// command-line value).
    pub fn new(file: &str, key: Option<&str>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: file.to_string(),
            line: None,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }

    /// An error at byte offsets `span` of `text`, the contents of `file`.
    pub(crate) fn at(
        file: &str,
        text: &str,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: file.to_string(),
            line: span.map(|span| line_of(text, span.start)),
            key,
            message: message.into(),
        }
    }

    /// Turns a toml/serde error into one naming the key by its path (`listen[0].mode`) and
    /// rewording serde's messages into the file's vocabulary (keys, not fields).
    pub(crate) fn from_toml(
        file: &str,
        text: &str,
        error: serde_path_to_error::Error<toml::de::Error>,
    ) -> ConfigError {
        let mut key = key_path(error.path());
        let inner = error.into_inner();
        let raw_message = inner.message().trim().replace('\n', "; ");
        let message = if let Some(rest) = raw_message.strip_prefix("unknown field `") {
            // "unknown field `conect`, expected one of `connect`, `request_head`"
            let expected = rest.split_once("`, ").map_or("", |(_, expected)| expected);
            format!("unknown key ({})", expected.replace('`', ""))
        } else if let Some(rest) = raw_message.strip_prefix("missing field `") {
            let field = rest.trim_end_matches('`');
            key = Some(match key {
                Some(parent) => format!("{parent}.{field}"),
                None => field.to_string(),
            });
            "required key is missing".to_string()
        } else {
            raw_message
        };
        ConfigError::at(file, text, inner.span(), key, message)
    }

    /// The file name as given (or `"command line"`).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// 1-based line number, when the error has a place in the file.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// Dotted key path such as `timeouts.connect` or `route[1].host`.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// What is wrong and what was expected.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "key '{key}': ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// `listen[0].mode` from serde_path_to_error's segments, skipping the private keys toml's
/// `Spanned` wrapper uses internally.
fn key_path(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if key.starts_with("$__serde_spanned") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_whatever_is_known() {
        let text = "a\nb\nc";
        let full = ConfigError::at("s.toml", text, Some(4..5), Some("x.y".into()), "bad");
        assert_eq!(full.to_string(), "s.toml:3: key 'x.y': bad");
        assert_eq!(full.line(), Some(3));
        assert_eq!(full.key(), Some("x.y"));
        let no_line = ConfigError::new("s.toml", Some("listen"), "missing");
        assert_eq!(no_line.to_string(), "s.toml: key 'listen': missing");
        let no_key = ConfigError::at("s.toml", text, Some(0..1), None, "syntax");
        assert_eq!(no_key.to_string(), "s.toml:1: syntax");
    }

    #[test]
    fn line_of_counts_newlines_before_offset() {
        let text = "one\ntwo\n\nfour";
        let cases = [(0, 1), (3, 1), (4, 2), (8, 3), (9, 4), (100, 4)];
        for (offset, want) in cases {
            assert_eq!(line_of(text, offset), want, "offset {offset}");
        }
    }
}
