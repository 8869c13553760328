//! Records the git commit the binary is built from as `SEPIA_COMMIT`, for `sepia --version`:
//! `$SEPIA_COMMIT` when set (a packager building from a tarball names the commit it came
//! from), else `git rev-parse --short HEAD` when the source is a git checkout with git
//! installed, else "unknown" (a tarball still builds).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SEPIA_COMMIT");
    let commit = std::env::var("SEPIA_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SEPIA_COMMIT={commit}");
}

/// The short commit of HEAD when this source is Sepia's git checkout, and the files whose change means a new commit (HEAD itself, the
/// branch it points at, packed refs) so that cargo runs this again after a commit or checkout.
fn git_commit() -> Option<String> {
    // A tarball unpacked inside some other repository (a distribution's packaging, say) must
    // not take that repository's commit: Sepia's own has the workspace at its top.
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?).canonicalize();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize();
    if top.ok()? != workspace.ok()? {
        return None;
    }
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    Some(commit)
}

/// One line of git's output, or `None` when git is missing, fails, or says nothing.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}
