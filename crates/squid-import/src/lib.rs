//! `sepia import-squid`: a squid.conf translated into Sepia's TOML configuration.
//!
//! Pure: [`translate`] takes the text of a squid.conf and returns the TOML text and a
//! [`Note`] for every directive that could not be translated, or was translated with a
//! difference, each saying why. The notes are also written into the TOML as `#` comments at
//! its top, and every translated key carries the squid.conf line it came from.
//!
//! What is translated: `http_port` / `https_port` (plain, `accel`, `intercept`, `tproxy`,
//! `vhost`, `defaultsite`, TLS certificates), `cache_peer … parent … originserver` with
//! `cache_peer_domain` / `cache_peer_access` (→ `[[route]]`), `acl` (the types Sepia has,
//! plus `browser` and `referer_regex` as `req_header`; Squid's predefined ACLs when used),
//! `http_access` (order kept, Squid's implicit last rule made explicit), `auth_param basic`,
//! `refresh_pattern`, `cache_mem`, `maximum_object_size`, `cache_dir`, `cache deny all`,
//! `access_log` / `logformat`, `via`, `forwarded_for`, `visible_hostname`, `workers`,
//! `shutdown_lifetime`, the timeouts Sepia has and `request_header_max_size`. Squid's
//! defaults are written out where Squid relies on them and Sepia's differ.

mod access;
mod cache;
mod cx;
mod listen;
mod misc;
mod out;
mod parse;
mod units;

use cx::{short, Cx};
pub use cx::{Note, NoteKind};

/// The result of [`translate`].
#[derive(Clone, Debug)]
pub struct Translation {
    /// The Sepia configuration, with the notes as comments at its top.
    pub toml: String,
    pub notes: Vec<Note>,
}

/// Translates the squid.conf `text`; `file_name` is used in comments only.
pub fn translate(text: &str, file_name: &str) -> Translation {
    let directives = parse::parse(text);
    let mut cx = Cx::new(file_name);
    let mut access = access::Access::default();
    let mut listen = listen::Listen::default();
    let mut cache = cache::Cache::default();
    let mut misc = misc::Misc::default();
    for d in &directives {
        if d.text.contains("${") {
            cx.differs(
                d,
                "Squid macros (${...}) are not expanded; the text was taken as is",
            );
        }
        let taken = access.take(&mut cx, d)
            || listen.take(&mut cx, d)
            || cache.take(&mut cx, d)
            || misc.take(&mut cx, d);
        if !taken {
            let why = misc::no_equivalent(&d.name);
            cx.skip(d, &why);
        }
    }
    let acls = access.finish_acls(&mut cx, &misc);
    listen.finish(&mut cx, &acls);
    access.finish_rules(&mut cx, &acls, listen.has_forward());
    cache.finish(&mut cx);
    misc.finish(&mut cx);
    let toml = header(&cx) + &cx.out.render();
    Translation {
        toml,
        notes: cx.into_notes(),
    }
}

/// The comment block at the top: where the file came from and every note.
fn header(cx: &Cx) -> String {
    let mut text = format!(
        "# Sepia configuration translated from {} by `sepia import-squid`.\n\
         # Check it with `sepia check --config FILE`; every key names the squid.conf line it\n\
         # came from.\n",
        cx.file()
    );
    for (kind, title) in [
        (NoteKind::NotTranslated, "Not translated"),
        (NoteKind::Differs, "Translated with a difference"),
    ] {
        let notes: Vec<&Note> = cx.notes().iter().filter(|n| n.kind == kind).collect();
        if notes.is_empty() {
            continue;
        }
        text.push_str(&format!("#\n# {title} ({}):\n", notes.len()));
        for n in notes {
            let mut block = if n.line == 0 {
                format!("{}:\n", cx.file())
            } else {
                format!("{}:{}: {}\n", cx.file(), n.line, short(&n.directive))
            };
            block.push_str(&indent(&wrap(&n.message, 90), "    "));
            text.push_str(&out::comment_lines(&block));
        }
    }
    text
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// `text` broken into lines of at most `width` characters at spaces.
fn wrap(text: &str, width: usize) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.join("\n")
}

#[cfg(test)]
mod tests;
