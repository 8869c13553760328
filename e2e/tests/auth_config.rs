//! `[auth]` through the real binary's `sepia check`: a usable section is accepted, and a
//! missing htpasswd file or a helper that cannot run is refused with file, line and key.

use std::process::{Command, Output};

use sepia_e2e::sepia_bin;

const LISTENER: &str = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";

/// `sepia check` on LISTENER + `auth`; returns the output and the config file's path.
fn check(dir: &tempfile::TempDir, auth: &str) -> (Output, String) {
    let path = dir.path().join("sepia.toml");
    std::fs::write(&path, format!("{LISTENER}[auth]\n{auth}")).unwrap();
    let path = path.display().to_string();
    let out = Command::new(sepia_bin())
        .args(["check", "--config", &path])
        .output()
        .expect("run sepia");
    (out, path)
}

#[test]
fn check_accepts_htpasswd_and_helper_sections() {
    let dir = tempfile::tempdir().unwrap();
    let htpasswd = dir.path().join("htpasswd");
    std::fs::write(&htpasswd, "carol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\n").unwrap();
    let sections = [
        format!("realm = \"Staff\"\nhtpasswd = \"{}\"\n", htpasswd.display()),
        "helper = [\"/bin/cat\"]\nhelper_children = 2\nhelper_concurrency = 4\n".to_string(),
    ];
    for auth in sections {
        let (out, _) = check(&dir, &auth);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "[auth]\n{auth}\nstderr: {stderr}"
        );
    }
}

#[test]
fn check_refuses_unusable_sections_naming_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let cases = [
        (
            format!("htpasswd = \"{}\"\n", missing.display()),
            5,
            "auth.htpasswd",
        ),
        (
            "\nhelper = [\"/nonexistent/helper\"]\n".to_string(),
            6,
            "auth.helper",
        ),
        (
            "helper = [\"/bin/cat\"]\nhelper_childs = 2\n".to_string(),
            6,
            "auth.helper_childs",
        ),
    ];
    for (auth, line, key) in cases {
        let (out, path) = check(&dir, &auth);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(c) if c != 0),
            "[auth]\n{auth} accepted"
        );
        assert!(
            stderr.contains(&format!("{path}:{line}: key '{key}'")),
            "[auth]\n{auth}: wanted {path}:{line} and {key} in {stderr:?}"
        );
    }
}
