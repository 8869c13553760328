//! The admin listener's live dashboard (`GET /`) in headless Chromium (Debian's `chromium`;
//! scripts/test.sh installs it), against the real binary under load: the page polls `/stats`
//! and must show figures that update while it is open, and that have moved between two loads
//! of the page. A screenshot is taken each time; with `SEPIA_DASHBOARD_SCREENSHOT=PATH` it is
//! kept there (how docs/dashboard.png was made).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sepia_e2e::fixtures::with_admin;
use sepia_e2e::{curl, free_addr, reverse_config, wait_until, Origin, RawClient, Sepia};
use tempfile::TempDir;

/// The browser: `$CHROMIUM`, else Debian's `chromium`.
fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "no Chromium at {}: apt-get install chromium (scripts/test.sh does), or set CHROMIUM",
        path.display()
    );
    path
}

/// Runs headless Chromium on `url` with `extra` arguments (`--dump-dom` with
/// `--virtual-time-budget=MS` for that much of the page's virtual time, `--screenshot=...`);
/// returns its standard output.
fn browse(profile: &Path, url: &str, extra: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1200,760",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the element with `id` in a dumped DOM (the dashboard's figures are plain text).
fn text_of(dom: &str, id: &str) -> String {
    let marker = format!("id=\"{id}\"");
    let Some(at) = dom.find(&marker) else {
        return String::new();
    };
    let after = &dom[at..];
    let start = after.find('>').map_or(0, |i| i + 1);
    let end = after[start..].find('<').map_or(after.len(), |i| start + i);
    after[start..end].trim().to_string()
}

/// How many times the page took `/stats` and redrew (`<body data-updates="N">`).
fn updates(dom: &str) -> u32 {
    let Some(at) = dom.find("data-updates=\"") else {
        return 0;
    };
    let rest = &dom[at + 14..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

/// Keep-alive clients sending a mix of hits (20 URLs) and misses until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(sepia: &Sepia) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let threads = (0..2)
            .map(|t| {
                let (stop, sent, addr) = (stop.clone(), sent.clone(), sepia.addr());
                std::thread::spawn(move || {
                    let mut client = RawClient::connect(addr);
                    let deadline = Instant::now() + Duration::from_secs(120);
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let path = match i % 10 {
                            9 => format!("/miss/{t}/{i}"),
                            n => format!("/cacheable/page-{}", (i / 10 + n) % 20),
                        };
                        let req = format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\n\r\n");
                        client.send(req.as_bytes());
                        client.read_response();
                        sent.fetch_add(1, Ordering::Relaxed);
                        i += 1;
                        std::thread::sleep(Duration::from_millis(2));
                    }
                })
            })
            .collect();
        Load {
            stop,
            sent,
            threads,
        }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// The number in "12,345 requests since start".
fn total(dom: &str) -> u64 {
    let text = text_of(dom, "total");
    let digits: String = text
        .split(' ')
        .next()
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

#[test]
fn dashboard_figures_update_under_load_in_headless_chromium() {
    let origin = Origin::start();
    let (sepia, base) = with_admin(&reverse_config(&free_addr(), &[&origin.url()]), "");
    let url = format!("{base}/");
    let load = Load::start(&sepia);
    assert!(wait_until(Duration::from_secs(10), || load
        .sent
        .load(Ordering::Relaxed)
        > 200));
    // The top lists fill when the admin task collects the workers' samples (once a second);
    // headless Chromium's virtual time can run the page's polls before that has happened.
    let stats = format!("{base}/stats");
    assert!(wait_until(Duration::from_secs(10), || curl(&[&stats])
        .text()
        .contains("/cacheable/page-")));

    let profile = TempDir::new().unwrap();
    // 4 s of page time: a poll at 0, 1, 2 and 3 s.
    let dump = ["--dump-dom", "--virtual-time-budget=4000"];
    let first = browse(profile.path(), &url, &dump);
    assert!(updates(&first) >= 2, "the page did not update:\n{first}");
    assert!(text_of(&first, "state").starts_with("live"), "{first}");
    let rps = text_of(&first, "rps");
    assert!(
        rps != "–" && rps != "0",
        "requests/s not shown: {rps:?}\n{first}"
    );
    assert!(text_of(&first, "hit").ends_with('%'), "{first}");
    assert!(text_of(&first, "p50").starts_with("p50 "), "{first}");
    assert!(text_of(&first, "objects").ends_with("objects"), "{first}");
    assert!(first.contains("/cacheable/page-"), "no top URL:\n{first}");
    assert!(first.contains("127.0.0.1"), "no top client:\n{first}");
    let total_first = total(&first);
    assert!(total_first > 200, "{total_first}\n{first}");

    // More load, then the page again: the figures have moved.
    let before = load.sent.load(Ordering::Relaxed);
    assert!(wait_until(Duration::from_secs(10), || {
        load.sent.load(Ordering::Relaxed) > before + 300
    }));
    let dir = TempDir::new().unwrap();
    let png = dir.path().join("dashboard.png");
    let second = browse(profile.path(), &url, &dump);
    let total_second = total(&second);
    assert!(
        total_second > total_first + 300,
        "figures did not move: {total_first} then {total_second}"
    );
    // The screenshot in real time, after 8 s of polls under load, so that the rates and
    // sparklines are the live ones: a wrapper page holds the dashboard in a frame and an image
    // the origin answers after 8 s, which holds back the load event Chromium waits for.
    let wrapper = dir.path().join("wrapper.html");
    let held = format!("{}/delay/8000", origin.url());
    std::fs::write(
        &wrapper,
        format!(
            "<!doctype html><body style=\"margin:0\"><iframe src=\"{url}\" \
             style=\"border:0;width:100vw;height:100vh;display:block\"></iframe>\
             <img src=\"{held}\" style=\"display:none\"></body>"
        ),
    )
    .unwrap();
    let screenshot = format!("--screenshot={}", png.display());
    let shown = format!("file://{}", wrapper.display());
    browse(profile.path(), &shown, &[&screenshot]);
    load.stop();
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{}",
        bytes.len()
    );
    if let Some(keep) = std::env::var_os("SEPIA_DASHBOARD_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}
