//! Large stored bodies kept in unnamed files and sent with `sendfile(2)` (`[cache]
//! sendfile`, `sendfile_min`): every byte a client receives from such a file must be the byte
//! the origin sent, for whole bodies, ranges, HEAD, keep-alive sequences, concurrent clients,
//! clients that leave mid-body and a 304 that refreshes the stored head. The evidence that
//! the file path was taken is the unnamed file's descriptor in /proc/PID/fd (an `O_TMPFILE` in
//! `sendfile_dir` shows as `DIR/#INODE (deleted)`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sepia_e2e::fixtures::reverse_with;
use sepia_e2e::{
    curl, pattern, sha256_hex, wait_until, RawClient, Response, Sepia, REVALIDATE_BODY,
};

/// A cacheable (max-age=60) pattern body of `len` bytes, sent at once by the origin.
fn big_path(len: usize) -> String {
    format!("/slow-cacheable/{len}/0")
}

#[track_caller]
fn assert_hit(r: &Response) {
    let status = r.header("cache-status").unwrap_or_default();
    assert!(status.contains("hit"), "not a hit: {}", r.raw_head);
}

fn get(sepia: &Sepia, path: &str, extra: &str) -> Response {
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n{extra}\r\n").as_bytes());
    client.read_response()
}

/// Whether `dir`'s filesystem can make unnamed files (`O_TMPFILE`), as body files need.
fn unnamed_files_work_in(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_TMPFILE)
        .open(dir)
        .is_ok()
}

/// [`body_files`] once their count is `n` (a fill is committed just after its last byte is
/// relayed, so the count may lag the client's response by a moment).
#[track_caller]
fn settled_body_files(sepia: &Sepia, n: usize) -> Vec<String> {
    wait_until(Duration::from_secs(5), || body_files(sepia).len() == n);
    body_files(sepia)
}

/// Files the proxy holds open that have no name: body files (unnamed files in a
/// directory, or memory files).
fn body_files(sepia: &Sepia) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{}/fd", sepia.pid()))
        .expect("/proc/PID/fd of sepia")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with('/') && target.ends_with(" (deleted)"))
        .collect()
}

#[test]
fn large_hits_come_from_a_body_file_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    // Where the temporary directory's filesystem cannot hold unnamed files, the default
    // directory (or its memory fallback) serves instead and the location is not checked.
    let in_dir = unnamed_files_work_in(dir.path());
    if !in_dir {
        eprintln!(
            "SKIPPED (location only): no O_TMPFILE in {}",
            dir.path().display()
        );
    }
    let dir_line = if in_dir {
        format!("sendfile_dir = \"{}\"\n", dir.path().display())
    } else {
        String::new()
    };
    let (origin, sepia) = reverse_with(&format!("[cache]\nsendfile_min = \"64KiB\"\n{dir_line}"));
    let len = 1_000_003; // not a multiple of any page or chunk size
    let path = big_path(len);
    let url = format!("{}{path}", sepia.url());
    let want = pattern(len);

    let miss = curl(&["-H", "Host: app", &url]);
    miss.assert_status(200);
    assert_eq!(sha256_hex(&miss.body), sha256_hex(&want), "the miss");
    let first_hit = curl(&["-H", "Host: app", &url]);
    assert!(
        first_hit
            .header("cache-status")
            .unwrap_or_default()
            .contains("hit"),
        "{}",
        first_hit.headers
    );
    assert_eq!(
        sha256_hex(&first_hit.body),
        sha256_hex(&want),
        "the first hit"
    );
    let files = settled_body_files(&sepia, 1);
    assert_eq!(
        files.len(),
        1,
        "a 1 MB body hit once is kept in a file: {files:?}"
    );
    if in_dir {
        assert!(
            Path::new(&files[0]).starts_with(dir.path()),
            "made in sendfile_dir: {files:?}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "unnamed: nothing to see or clean up in the directory"
        );
    }

    for round in 0..3 {
        let hit = curl(&["-H", "Host: app", &url]);
        hit.assert_status(200);
        assert!(
            hit.header("cache-status")
                .unwrap_or_default()
                .contains("hit"),
            "round {round}: {}",
            hit.headers
        );
        assert_eq!(
            hit.header("content-length").as_deref(),
            Some("1000003"),
            "round {round}"
        );
        assert_eq!(sha256_hex(&hit.body), sha256_hex(&want), "round {round}");
    }
    assert_eq!(origin.request_count(), 1, "every later GET was a hit");

    // Ranges are sendfile from an offset: first byte, an inner span across pages, the tail.
    for (spec, from, to) in [
        ("0-0", 0, 0),
        ("4095-70000", 4095, 70_000),
        ("999000-", 999_000, len - 1),
        ("-3", len - 3, len - 1),
    ] {
        let part = get(&sepia, &path, &format!("Range: bytes={spec}\r\n"));
        assert_eq!(part.status, 206, "{spec}: {}", part.raw_head);
        assert_eq!(
            part.header("content-range"),
            Some(format!("bytes {from}-{to}/{len}").as_str()),
            "{spec}"
        );
        assert!(part.body == want[from..=to], "{spec}: wrong bytes");
    }

    // HEAD: the length, no body (the next response on the connection parses cleanly).
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("HEAD {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    let head = client.read_head_response();
    assert_eq!(head.header("content-length"), Some("1000003"));
    // Keep-alive: two whole bodies back to back on that same connection.
    for round in 0..2 {
        client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
        let r = client.read_response();
        assert_eq!(r.status, 200, "keep-alive round {round}");
        assert!(r.body == want, "keep-alive round {round}: wrong bytes");
    }
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn bodies_below_the_threshold_or_with_sendfile_off_stay_in_memory() {
    let (_origin, sepia) = reverse_with("[cache]\nsendfile_min = \"256KiB\"\n");
    let below = big_path(256 * 1024 - 1);
    for _ in 0..2 {
        assert!(get(&sepia, &below, "").body == pattern(256 * 1024 - 1));
    }
    // A hit proves the object was committed: only then is "no file" meaningful.
    assert_hit(&get(&sepia, &below, ""));
    assert_eq!(
        body_files(&sepia),
        [] as [String; 0],
        "one byte below sendfile_min"
    );
    let at = big_path(256 * 1024);
    for _ in 0..2 {
        assert!(get(&sepia, &at, "").body == pattern(256 * 1024));
    }
    assert_eq!(
        settled_body_files(&sepia, 1).len(),
        1,
        "exactly sendfile_min"
    );

    let (origin, sepia) = reverse_with("[cache]\nsendfile = false\n");
    let path = big_path(2 << 20);
    for _ in 0..2 {
        assert!(get(&sepia, &path, "").body == pattern(2 << 20));
    }
    assert_hit(&get(&sepia, &path, ""));
    assert_eq!(origin.request_count(), 1, "still cached");
    assert_eq!(body_files(&sepia), [] as [String; 0], "sendfile = false");
}

#[test]
fn concurrent_clients_and_clients_leaving_mid_body_get_whole_bodies() {
    let (origin, sepia) = reverse_with("");
    let len = 3 << 20;
    let path = big_path(len);
    let want = sha256_hex(&pattern(len));
    assert_eq!(sha256_hex(&get(&sepia, &path, "").body), want);
    let hit = get(&sepia, &path, "");
    assert_hit(&hit);
    assert_eq!(sha256_hex(&hit.body), want);
    assert_eq!(
        settled_body_files(&sepia, 1).len(),
        1,
        "a 3 MiB body hit once is a file"
    );

    // Clients that read a little and vanish: the proxy's sendfile fails for them only.
    for _ in 0..5 {
        let mut quitter = RawClient::connect(sepia.addr());
        quitter.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
        let _ = quitter.read_exact_bytes(1000);
    }
    std::thread::scope(|s| {
        for t in 0..6 {
            let (sepia, path, want) = (&sepia, &path, &want);
            s.spawn(move || {
                for round in 0..4 {
                    let r = get(sepia, path, "");
                    assert_eq!(r.status, 200, "thread {t} round {round}");
                    assert_eq!(&sha256_hex(&r.body), want, "thread {t} round {round}");
                }
            });
        }
    });
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn a_304_refreshes_a_body_kept_in_a_file() {
    // Every body goes to a file, so the small `/revalidate/` body is read back for the refresh.
    let (origin, sepia) = reverse_with("[cache]\nsendfile_min = \"1B\"\n");
    let path = "/revalidate/file";
    // The hit below needs the max-age=1 response still fresh.
    sepia_e2e::just_after_a_second_starts();
    let first = get(&sepia, path, "");
    assert_eq!(first.body, REVALIDATE_BODY);
    let hit = get(&sepia, path, "");
    assert_hit(&hit);
    assert_eq!(hit.body, REVALIDATE_BODY);
    assert_eq!(settled_body_files(&sepia, 1).len(), 1);
    // max-age=1: after two seconds the stored response is stale whatever the rounding.
    std::thread::sleep(Duration::from_millis(2100));
    let second = get(&sepia, path, "");
    assert_eq!(origin.request_count(), 2, "revalidated");
    assert_eq!(second.status, 200, "{}", second.raw_head);
    assert_eq!(second.header("x-version"), Some("2"), "{}", second.raw_head);
    assert_eq!(second.body, REVALIDATE_BODY, "the stored body after a 304");
    let third = get(&sepia, path, "");
    assert_eq!(origin.request_count(), 2, "fresh again: a hit");
    assert_eq!(third.header("x-version"), Some("2"));
    assert_eq!(third.body, REVALIDATE_BODY);
    let files = settled_body_files(&sepia, 1);
    assert_eq!(
        files.len(),
        1,
        "the replaced object's file is closed: {files:?}"
    );
}

#[test]
fn a_sendfile_dir_that_cannot_hold_unnamed_files_stops_the_start() {
    // /proc is a directory, but no file can be made in it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sepia.toml");
    let text = sepia_e2e::reverse_config(&sepia_e2e::free_addr(), &["http://127.0.0.1:9"])
        + "[cache]\nsendfile_dir = \"/proc\"\n";
    std::fs::write(&config, text).unwrap();
    let out = Command::new(sepia_e2e::sepia_bin())
        .args(["--config", &config.display().to_string()])
        .output()
        .expect("run sepia");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {stderr}");
    assert!(
        stderr.contains("cache.sendfile_dir") && stderr.contains("/proc"),
        "{stderr}"
    );
}
