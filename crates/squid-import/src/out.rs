//! The Sepia TOML being written: its tables in the README's order, each key with the
//! squid.conf line it came from as a comment.

use std::collections::BTreeMap;

/// One table (`[cache]`) or one element of an array of tables (`[[route]]`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Table {
    /// Comment lines written above the header (without `# `).
    pub comments: Vec<String>,
    /// `key = value  # comment`, in order; values are TOML already.
    pub entries: Vec<(String, String, Option<String>)>,
}

impl Table {
    pub(crate) fn new(comment: impl Into<String>) -> Table {
        Table {
            comments: vec![comment.into()],
            entries: Vec::new(),
        }
    }

    pub(crate) fn with(mut self, key: &str, value: String) -> Table {
        self.set(key, value, None);
        self
    }

    /// Sets `key` (replacing an earlier value of it: the last directive wins, as in Squid).
    pub(crate) fn set(&mut self, key: &str, value: String, comment: Option<String>) {
        self.entries.retain(|(k, _, _)| k != key);
        self.entries.push((key.to_string(), value, comment));
    }
}

/// The sections, in the order they are written. Single tables and arrays of tables alike
/// are a list; a single table has at most one element.
pub(crate) const SECTIONS: [(&str, bool); 14] = [
    ("server", false),
    ("listen", true),
    ("limits", false),
    ("timeouts", false),
    ("headers", false),
    ("forward", false),
    ("route", true),
    ("access_log", false),
    ("cache", false),
    ("cache.refresh", true),
    ("cache.disk", true),
    ("acl", true),
    ("http_access", true),
    ("auth", false),
];

#[derive(Debug, Default)]
pub(crate) struct Out {
    sections: BTreeMap<&'static str, Vec<Table>>,
}

fn section_name(name: &str) -> &'static str {
    SECTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, _)| *n)
        .unwrap_or_else(|| unreachable!("unknown section {name}"))
}

impl Out {
    /// `key = value` in the single table `section`, with its source as a comment.
    pub(crate) fn set(&mut self, section: &str, key: &str, value: String, comment: String) {
        let tables = self.sections.entry(section_name(section)).or_default();
        if tables.is_empty() {
            tables.push(Table::default());
        }
        tables[0].set(key, value, Some(comment));
    }

    /// One more element of the array of tables `section`.
    pub(crate) fn push(&mut self, section: &str, table: Table) {
        self.sections
            .entry(section_name(section))
            .or_default()
            .push(table);
    }

    pub(crate) fn count(&self, section: &str) -> usize {
        self.sections.get(section).map_or(0, Vec::len)
    }

    /// The TOML text.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        for (name, array) in SECTIONS {
            for table in self.sections.get(name).into_iter().flatten() {
                text.push('\n');
                for c in &table.comments {
                    text.push_str(&comment_lines(c));
                }
                if array {
                    text.push_str(&format!("[[{name}]]\n"));
                } else {
                    text.push_str(&format!("[{name}]\n"));
                }
                for (key, value, comment) in &table.entries {
                    match comment {
                        Some(c) => text.push_str(&format!("{key} = {value}  # {c}\n")),
                        None => text.push_str(&format!("{key} = {value}\n")),
                    }
                }
            }
        }
        text
    }
}

/// `text` as `# ` comment lines (one per line of `text`).
pub(crate) fn comment_lines(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "#\n".to_string()
            } else {
                format!("# {l}\n")
            }
        })
        .collect()
}
