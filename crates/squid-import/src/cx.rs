//! What every part of the translation shares: the notes and the output being written.

use crate::out::Out;
use crate::parse::Directive;

/// Something the translation could not carry over exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The squid.conf line (1-based) of the directive; 0 for notes about the whole file.
    pub line: usize,
    /// The directive as written (comments removed, continuations joined), or empty.
    pub directive: String,
    /// What happened and why.
    pub message: String,
    pub kind: NoteKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    /// The directive is not in the result.
    NotTranslated,
    /// The directive is in the result, but Sepia will not behave exactly as Squid did.
    Differs,
}

/// What every part of the translation shares: the notes and the output.
pub(crate) struct Cx {
    file: String,
    notes: Vec<Note>,
    pub out: Out,
}

impl Cx {
    pub(crate) fn new(file: &str) -> Cx {
        Cx {
            file: file.to_string(),
            notes: Vec::new(),
            out: Out::default(),
        }
    }

    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    pub(crate) fn notes(&self) -> &[Note] {
        &self.notes
    }

    pub(crate) fn into_notes(self) -> Vec<Note> {
        self.notes
    }

    /// `squid.conf:12: cache_mem 256 MB`, the comment that says where a key came from.
    pub(crate) fn src(&self, d: &Directive) -> String {
        format!("{}:{}: {}", self.file, d.line, short(&d.text))
    }

    /// The directive is not in the result, because `why`.
    pub(crate) fn skip(&mut self, d: &Directive, why: &str) {
        self.note(d, why, NoteKind::NotTranslated);
    }

    /// The directive is in the result with a difference: `why`.
    pub(crate) fn differs(&mut self, d: &Directive, why: &str) {
        self.note(d, why, NoteKind::Differs);
    }

    /// Options of `d` that were left out, and `why` (nothing when there are none).
    pub(crate) fn left_out(&mut self, d: &Directive, options: &[&str], why: &str) {
        if !options.is_empty() {
            let message = format!("options left out: {} ({why})", options.join(" "));
            self.differs(d, &message);
        }
    }

    /// A note about the file as a whole (a Squid default, a missing piece).
    pub(crate) fn general(&mut self, why: &str) {
        self.notes.push(Note {
            line: 0,
            directive: String::new(),
            message: why.to_string(),
            kind: NoteKind::Differs,
        });
    }

    fn note(&mut self, d: &Directive, why: &str, kind: NoteKind) {
        self.notes.push(Note {
            line: d.line,
            directive: d.text.clone(),
            message: why.to_string(),
            kind,
        });
    }
}

/// At most 100 characters of a directive, for comments.
pub(crate) fn short(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= 100 {
        return text;
    }
    let cut: String = text.chars().take(97).collect();
    format!("{cut}...")
}
