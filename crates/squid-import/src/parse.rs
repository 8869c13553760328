//! squid.conf as Squid's parser reads it: `\` at the end of a line continues it, a line that
//! starts with `#` is a comment and so is everything from a token that starts with `#`,
//! tokens are separated by white space and a `"quoted string"` is one token (quotes kept, so
//! that the translator can tell Squid's `"/path/to/file"` values apart).

/// One directive: its name, its tokens and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Directive {
    /// The line of squid.conf where the directive starts (1-based).
    pub line: usize,
    pub name: String,
    pub args: Vec<String>,
    /// The directive as written (continuations joined, comments removed), for notes.
    pub text: String,
    /// Byte offset in `text` where each arg starts, for values that take the rest of the line.
    starts: Vec<usize>,
}

impl Directive {
    /// A directive Squid assumes by default (line 0), e.g. `http_port 3128`.
    pub(crate) fn synthetic(text: &str) -> Directive {
        directive(0, text).unwrap_or_else(|| unreachable!("a synthetic directive has a name"))
    }

    /// The text from arg `i` to the end of the line, as written (`realm Squid proxy`).
    pub(crate) fn rest_from(&self, i: usize) -> &str {
        self.starts.get(i).map_or("", |&at| self.text[at..].trim())
    }
}

/// Every directive of `text`, in order.
pub(crate) fn parse(text: &str) -> Vec<Directive> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        if let Some(cont) = line.strip_suffix('\\') {
            joined.push_str(cont);
            joined.push(' ');
            pending = Some((start, joined));
            continue;
        }
        joined.push_str(line);
        out.extend(directive(start, &joined));
    }
    if let Some((start, joined)) = pending {
        out.extend(directive(start, &joined));
    }
    out
}

fn directive(line: usize, text: &str) -> Option<Directive> {
    let (_, end) = tokens(text);
    let text = text[..end].trim();
    let (found, _) = tokens(text);
    let mut iter = found.into_iter();
    let (_, name) = iter.next()?;
    let (starts, args) = iter.unzip();
    Some(Directive {
        line,
        name,
        args,
        text: text.to_string(),
        starts,
    })
}

/// The tokens of `text` with their offsets, and where the comment (if any) begins.
fn tokens(text: &str) -> (Vec<(usize, String)>, usize) {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if bytes[i] == b'#' {
            return (out, i);
        }
        let start = i;
        if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        out.push((start, text[start..i].to_string()));
    }
    (out, text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_continuations_and_quotes() {
        let d = parse(
            "# a comment\n\n  acl a src 10.0.0.0/8\t# trailing\nacl b \\\n  dstdomain .x.org\n\
             acl f dstdomain \"/etc/squid/f list\"\nauth_param basic realm My  proxy # c\n",
        );
        assert_eq!(d.len(), 4);
        assert_eq!((d[0].line, d[0].name.as_str()), (3, "acl"));
        assert_eq!(d[0].args, ["a", "src", "10.0.0.0/8"]);
        assert_eq!(d[1].line, 4);
        assert_eq!(d[1].args, ["b", "dstdomain", ".x.org"]);
        assert_eq!(d[2].args[2], "\"/etc/squid/f list\"");
        assert_eq!(d[3].rest_from(2), "My  proxy");
        assert_eq!(d[3].text, "auth_param basic realm My  proxy");
    }

    #[test]
    fn a_continuation_on_the_last_line_still_counts() {
        let d = parse("http_port 3128 \\");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].args, ["3128"]);
    }
}
