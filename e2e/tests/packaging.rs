//! What a packager and an operator use: `sepia --version`, the manual pages and shell
//! completions from `sepia generate`, the systemd unit and example configuration in `dist/`,
//! readiness through `$NOTIFY_SOCKET` (sd_notify), and the event log as JSON lines.

use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sepia_e2e::{curl, free_addr, reverse_config, sepia_bin, Origin, Sepia};

fn sepia(args: &[&str]) -> Output {
    let out = Command::new(sepia_bin())
        .args(args)
        .output()
        .expect("run sepia");
    assert!(
        out.status.success(),
        "sepia {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The subcommands `sepia --help` lists (its "Commands:" block), `help` aside.
fn subcommands() -> Vec<String> {
    let help = text(&sepia(&["--help"]).stdout);
    let block = help.split("Commands:").nth(1).expect("a Commands: block");
    let names: Vec<String> = block
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    for expected in ["check", "reverse", "forward", "import-squid", "generate"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    names
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = text(&sepia(&["--version"]).stdout);
    let rest = out
        .trim()
        .strip_prefix(concat!("sepia ", env!("CARGO_PKG_VERSION"), " (commit "))
        .unwrap_or_else(|| panic!("unexpected --version: {out:?}"));
    let commit = rest.strip_suffix(')').expect("closing parenthesis");
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(workspace())
        .output();
    match head {
        Ok(head) if head.status.success() => {
            let head = text(&head.stdout);
            assert!(
                commit.len() >= 7 && head.starts_with(commit),
                "the binary says commit {commit:?}, the checkout is at {head} (rebuild sepia?)"
            );
        }
        _ => println!("SKIPPED: the commit check (no git checkout here); sepia says {commit:?}"),
    }
}

/// Formats a page the way `man` shows it, in plain ASCII, and fails on groff's complaints.
fn render_man(page: &Path) -> String {
    let out = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("LC_ALL", "C")
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "120")
        .output()
        .expect("man (Debian package man-db)");
    let stderr = text(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "man -l {}: {:?}\n{stderr}",
        page.display(),
        out.status
    );
    text(&out.stdout)
}

#[test]
fn man_pages_cover_every_subcommand_and_render() {
    let dir = tempfile::tempdir().unwrap();
    let out = text(&sepia(&["generate", "man", dir.path().to_str().unwrap()]).stdout);
    let main = render_man(&dir.path().join("sepia.1"));
    assert!(main.contains("--config"), "{main}");
    assert!(main.contains("--version"), "{main}");
    assert!(main.contains("SIGUSR1"), "the signals section: {main}");
    for name in subcommands() {
        assert!(
            main.contains(&name),
            "sepia.1 does not mention {name}:\n{main}"
        );
        let page = dir.path().join(format!("sepia-{name}.1"));
        assert!(
            out.contains(page.to_str().unwrap()),
            "{page:?} not listed: {out}"
        );
        let rendered = render_man(&page);
        assert!(rendered.contains(&format!("sepia-{name}")), "{rendered}");
    }
    let reverse = render_man(&dir.path().join("sepia-reverse.1"));
    for option in [
        "--listen",
        "--origin",
        "--cache-dir",
        "--cache-memory",
        "--tls-cert",
    ] {
        assert!(
            reverse.contains(option),
            "sepia-reverse.1 lacks {option}:\n{reverse}"
        );
    }
    let completions = render_man(&dir.path().join("sepia-generate-completions.1"));
    assert!(completions.contains("bash") && completions.contains("zsh"));
}

/// Sources the bash completion script and asks it what `line` completes to.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\n\
         spec=$(complete -p sepia) || exit 3\n\
         func=$(sed -E 's/.* -F ([^ ]+) .*/\\1/' <<<\"$spec\")\n\
         COMP_WORDS=({})\n\
         COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         \"$func\" sepia \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" ")
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .expect("bash");
    assert!(out.status.success(), "bash: {}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_subcommands_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sepia.bash");
    std::fs::write(&script, sepia(&["generate", "completions", "bash"]).stdout).unwrap();
    assert_eq!(bash_complete(&script, &["sepia", "rev"]), vec!["reverse"]);
    let options = bash_complete(&script, &["sepia", "reverse", "--cache-d"]);
    assert!(options.contains(&"--cache-dir".to_string()), "{options:?}");
    assert!(
        options.contains(&"--cache-dir-size".to_string()),
        "{options:?}"
    );
    assert!(!options.contains(&"--origin".to_string()), "{options:?}");
    let shells = bash_complete(&script, &["sepia", "generate", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&shell.to_string()), "{shells:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_the_options() {
    for (shell, marker) in [("zsh", "#compdef sepia"), ("fish", "complete -c sepia")] {
        let script = text(&sepia(&["generate", "completions", shell]).stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("cache-dir"), "{shell}: {script}");
        assert!(script.contains("import-squid"), "{shell}: {script}");
    }
}

#[test]
fn the_example_configuration_is_valid() {
    let example = workspace().join("dist/sepia.toml");
    let out = sepia(&["check", "--config", example.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("is valid"));
}

#[test]
fn systemd_accepts_the_unit() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("SKIPPED: systemd-analyze is not installed (Debian package systemd)");
        return;
    }
    // The unit names /usr/bin/sepia, which verify wants to exist: point it at the binary
    // under test instead.
    let unit = std::fs::read_to_string(workspace().join("dist/sepia.service")).unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sepia.service");
    let bin = sepia_bin().canonicalize().unwrap();
    std::fs::write(&path, unit.replace("/usr/bin/sepia", bin.to_str().unwrap())).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "systemd-analyze verify: {said}");
    // Lines about the unit itself (other units on the machine may have their own complaints).
    let ours: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("sepia.service"))
        .collect();
    assert!(ours.is_empty(), "{ours:?}");
}

/// Receives one notification within `timeout`, or `None`.
fn notification(socket: &UnixDatagram, timeout: Duration) -> Option<String> {
    socket.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 4096];
    socket.recv(&mut buf).ok().map(|n| text(&buf[..n]))
}

/// Sepia under `$NOTIFY_SOCKET=name`, where `socket` receives.
fn readiness_and_stopping(socket: &UnixDatagram, name: &str) {
    let origin = Origin::start();
    let listen = free_addr();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sepia.toml");
    std::fs::write(&config, reverse_config(&listen, &[&origin.url()])).unwrap();
    let started = Instant::now();
    let mut child = Command::new(sepia_bin())
        .arg("--config")
        .arg(&config)
        .env("NOTIFY_SOCKET", name)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = notification(socket, Duration::from_secs(10));
    let ready_after = started.elapsed();
    // At the moment READY=1 arrives the listener must already take connections.
    let accepted = TcpStream::connect(&listen);
    let ready = ready.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("no READY=1 within 10 s")
    });
    assert!(
        accepted.is_ok(),
        "READY=1 before the listener accepts: {accepted:?}"
    );
    // An idle connection left open would hold the drain for the whole shutdown_grace.
    drop(accepted);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(
        ready
            .lines()
            .any(|l| l == format!("STATUS=serving on {listen}")),
        "{ready:?}"
    );
    curl(&["-o", "/dev/null", &format!("http://{listen}/bytes/10")]).assert_status(200);
    // Nothing more until it is told to stop.
    assert_eq!(notification(socket, Duration::from_millis(300)), None);
    let stop_sent = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let stopping = notification(socket, Duration::from_secs(5)).expect("STOPPING=1");
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping:?}");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    println!(
        "READY=1 {:?} after start; exited {:?} after SIGTERM",
        ready_after,
        stop_sent.elapsed()
    );
}

#[test]
fn notifies_readiness_and_stopping_to_a_path_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    readiness_and_stopping(&socket, path.to_str().unwrap());
}

#[test]
fn notifies_readiness_and_stopping_to_an_abstract_socket() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("sepia-e2e-notify-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&addr).unwrap();
    readiness_and_stopping(&socket, &format!("@{name}"));
}

/// Every stderr line is one JSON object with the fields a log shipper reads.
fn assert_json_lines(stderr: &str) -> Vec<serde_json::Value> {
    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
        })
        .collect();
    assert!(!events.is_empty(), "no event logged");
    for event in &events {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(event[key].is_string(), "{key} missing: {event}");
        }
    }
    events
}

#[test]
fn the_event_log_is_json_lines_when_configured() {
    let origin = Origin::start();
    let config = reverse_config(&free_addr(), &[&origin.url()]).replacen(
        "[server]\n",
        "[server]\nlog_format = \"json\"\nlog_level = \"debug\"\n",
        1,
    );
    let mut sepia = Sepia::start(&config);
    curl(&["-o", "/dev/null", &format!("{}/bytes/10", sepia.url())]).assert_status(200);
    sepia.send_signal("USR1");
    std::thread::sleep(Duration::from_millis(200));
    assert!(sepia
        .terminate(Duration::from_secs(5))
        .is_some_and(|s| s.success()));
    let events = assert_json_lines(&sepia.stderr());
    let listening = format!("listening on {}", sepia.addr());
    assert!(
        events
            .iter()
            .any(|e| e["message"] == listening && e["level"] == "INFO"),
        "{events:?}"
    );
    // log_level = "debug" lets debug events through (SIGUSR1 without a log file is one).
    assert!(events.iter().any(|e| e["level"] == "DEBUG"), "{events:?}");
}

#[test]
fn access_log_failures_are_json_events_too() {
    let origin = Origin::start();
    let logs = tempfile::tempdir().unwrap();
    let log_dir = logs.path().join("sepia");
    std::fs::create_dir(&log_dir).unwrap();
    let log_file = log_dir.join("access.log");
    let config = reverse_config(&free_addr(), &[&origin.url()])
        .replacen("[server]\n", "[server]\nlog_format = \"json\"\n", 1)
        .replacen(
            "path = \"stdout\"",
            &format!("path = \"{}\"", log_file.display()),
            1,
        );
    let mut sepia = Sepia::start(&config);
    curl(&["-o", "/dev/null", &format!("{}/bytes/10", sepia.url())]).assert_status(200);
    // The directory is gone: the reopen that SIGUSR1 asks for fails, and says so.
    std::fs::remove_dir_all(&log_dir).unwrap();
    sepia.send_signal("USR1");
    let reported = sepia_e2e::wait_until(Duration::from_secs(5), || {
        sepia.stderr().contains("access log not reopened")
    });
    assert!(sepia
        .terminate(Duration::from_secs(5))
        .is_some_and(|s| s.success()));
    assert!(reported, "{}", sepia.stderr());
    let events = assert_json_lines(&sepia.stderr());
    assert!(
        events.iter().any(|e| e["level"] == "ERROR"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("access log not reopened"))),
        "{events:?}"
    );
}

#[test]
fn the_command_line_selects_json_lines_for_a_quick_start() {
    let origin = Origin::start();
    let listen = free_addr();
    let origin_url = origin.url();
    let mut sepia = Sepia::start_args(&[
        "--log-format",
        "json",
        "reverse",
        "--listen",
        &listen,
        "--origin",
        &origin_url,
        "--workers",
        "1",
    ]);
    assert!(sepia
        .terminate(Duration::from_secs(40))
        .is_some_and(|s| s.success()));
    let events = assert_json_lines(&sepia.stderr());
    assert!(
        events.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("shutting down"))),
        "{events:?}"
    );
}

#[test]
fn the_event_log_is_text_by_default() {
    let origin = Origin::start();
    let mut sepia = Sepia::start(&reverse_config(&free_addr(), &[&origin.url()]));
    assert!(sepia
        .terminate(Duration::from_secs(5))
        .is_some_and(|s| s.success()));
    let stderr = sepia.stderr();
    assert!(
        stderr.contains(&format!("listening on {}", sepia.addr())),
        "{stderr}"
    );
    assert!(stderr.lines().all(|l| !l.starts_with('{')), "{stderr}");
    // Not a terminal: no colour escapes in a file or the journal.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}
