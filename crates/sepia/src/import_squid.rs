//! `sepia import-squid squid.conf [-o FILE]`: the file read, translated by
//! `sepia_squid_import`, checked as `sepia check` would, and written out.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use sepia_config::Config;
use sepia_squid_import::NoteKind;

/// Exit status: 0 when the translation was written and passes the configuration check, 1
/// when it was written but does not pass here (the reason on stderr: e.g. a helper program
/// or certificate this machine lacks), 2 when nothing could be written.
pub(crate) fn run(input: &Path, output: Option<&Path>) -> ExitCode {
    let (text, name) = match read(input) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("sepia: cannot read {}: {e}", input.display());
            return ExitCode::from(2);
        }
    };
    let translation = sepia_squid_import::translate(&text, &name);
    let written = match output {
        Some(path) => std::fs::write(path, &translation.toml),
        None => std::io::stdout().write_all(translation.toml.as_bytes()),
    };
    if let Err(e) = written {
        eprintln!("sepia: cannot write the translation: {e}");
        return ExitCode::from(2);
    }
    let count = |kind| translation.notes.iter().filter(|n| n.kind == kind).count();
    eprintln!(
        "sepia: translated {name}: {} directive(s) not translated, {} with a difference (listed \
         in the comments at the top)",
        count(NoteKind::NotTranslated),
        count(NoteKind::Differs)
    );
    let target = output.map_or("the translation".to_string(), |p| p.display().to_string());
    match Config::from_toml_str(&translation.toml, &target) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sepia: warning: the translation does not pass `sepia check` here: {e}");
            ExitCode::from(1)
        }
    }
}

fn read(input: &Path) -> std::io::Result<(String, String)> {
    if input == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        return Ok((text, "squid.conf".into()));
    }
    let bytes = std::fs::read(input)?;
    let name = input
        .file_name()
        .map_or("squid.conf".into(), |n| n.to_string_lossy().into_owned());
    Ok((String::from_utf8_lossy(&bytes).into_owned(), name))
}
