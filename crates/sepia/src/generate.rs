//! `sepia generate man DIR` and `sepia generate completions SHELL`: the manual pages and the
//! shell completions, made from the same clap definition that parses the command line, so they
//! cannot drift from it. Packagers run them at build time (see the README, "Running as a
//! service").

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap_complete::Shell;
use roff::{bold, roman, Roff};

/// What the options do not say, for `sepia.1` and the end of `sepia --help`:
/// (section, [(term, meaning)]).
const NOTES: &[(&str, &[(&str, &str)])] = &[
    (
        "ENVIRONMENT",
        &[
            (
                "SEPIA_LOG",
                "The event log's level or filter (e.g. debug, or sepia_proxy=trace); overrides \
                 server.log_level.",
            ),
            (
                "NOTIFY_SOCKET",
                "Set by systemd for a Type=notify service: Sepia sends READY=1 once every \
                 listener accepts connections and STOPPING=1 when it begins to shut down.",
            ),
        ],
    ),
    (
        "SIGNALS",
        &[
            (
                "SIGTERM, SIGINT",
                "Stop accepting connections, let in-flight requests finish for up to \
                 server.shutdown_grace, then exit.",
            ),
            (
                "SIGUSR1",
                "Reopen the access log file (after logrotate renamed it).",
            ),
        ],
    ),
    (
        "FILES",
        &[(
            "/etc/sepia/sepia.toml",
            "The configuration the systemd unit (dist/sepia.service) starts Sepia with; \
             every key is described in the README.",
        )],
    ),
];

/// [`NOTES`] as plain text, for `after_long_help`.
pub fn help_notes() -> String {
    let mut text = String::new();
    for (section, items) in NOTES {
        text.push_str(&format!("{section}:\n"));
        // A blank line after each section: see `trim_end` below for the last one.
        for (term, meaning) in *items {
            text.push_str(&format!("  {term}\n          {meaning}\n"));
        }
        text.push('\n');
    }
    text.trim_end().to_string()
}

/// Writes `sepia.1` and one page per subcommand (`sepia-reverse.1`, …) into `dir`, which is
/// made if missing, and prints their paths.
pub fn man(cmd: clap::Command, dir: &Path) -> ExitCode {
    // The notes get sections of their own in sepia.1, not clap_mangen's one "EXTRA" paragraph.
    let mut cmd = cmd
        .disable_help_subcommand(true)
        .after_long_help(None::<&str>);
    // Fills in what the pages print: each subcommand's full name ("sepia-reverse"), versions.
    cmd.build();
    let mut pages = Vec::new();
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| write_main_page(&cmd, dir, &mut pages))
        .and_then(|()| {
            let mut subcommands = cmd.get_subcommands().filter(|s| !s.is_hide_set());
            subcommands.try_for_each(|sub| write_pages(sub.clone(), dir, &mut pages))
        });
    match written {
        Ok(()) => {
            for page in pages {
                println!("{}", page.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "sepia: cannot write the manual pages to {}: {e}",
                dir.display()
            );
            ExitCode::from(1)
        }
    }
}

/// `sepia.1`: clap_mangen's sections, then [`NOTES`], then the version.
fn write_main_page(cmd: &clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    man.render_subcommands_section(&mut page)?;
    let mut notes = Roff::new();
    for (section, items) in NOTES {
        notes.control("SH", [*section]);
        for (term, meaning) in *items {
            notes.control("TP", []);
            notes.text([bold(*term)]);
            notes.text([roman(*meaning)]);
        }
    }
    notes.to_writer(&mut page)?;
    man.render_version_section(&mut page)?;
    let mut file = std::fs::File::create(&path)?;
    file.write_all(&page)?;
    pages.push(path);
    Ok(())
}

/// The page of `cmd`, then those of its subcommands, depth first.
fn write_pages(cmd: clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> io::Result<()> {
    let subcommands: Vec<_> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    pages.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
    for sub in subcommands {
        write_pages(sub, dir, pages)?;
    }
    Ok(())
}

/// Prints the completion script for `shell` on stdout.
pub fn completions(mut cmd: clap::Command, shell: Shell) -> ExitCode {
    clap_complete::generate(shell, &mut cmd, "sepia", &mut io::stdout());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_notes_list_every_term() {
        let text = help_notes();
        for (section, items) in NOTES {
            assert!(text.contains(&format!("{section}:")), "{text}");
            for (term, _) in *items {
                assert!(text.contains(term), "{text}");
            }
        }
    }
}
