//! Binary upgrade (issue 22, item 3): `sepia upgrade` / SIGUSR2 make the running Sepia start
//! the binary again, hand it its listening sockets and drain. Under continuous load (keep-alive
//! and connection-per-request clients, hits and misses against a real origin) no request fails
//! and no connection is reset; a new binary that cannot take over leaves the old one serving;
//! a disk cache survives the change of process and is never opened by two processes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sepia_e2e::{curl, free_addr, keyed_body, sepia_bin, wait_until, Origin, RawClient, Sepia};
use tempfile::TempDir;

/// Generous for a loaded two-core machine; polls return as soon as the condition holds.
const WAIT: Duration = Duration::from_secs(20);

/// A reverse proxy on `listen` in front of `origin`, with its pid file in `run` and `extra`
/// appended (e.g. a disk).
fn config(listen: &str, origin: &Origin, run: &Path, extra: &str) -> String {
    format!(
        "[server]\nworkers = 2\nshutdown_grace = \"5s\"\npid_file = \"{}\"\n\n\
         [[listen]]\naddress = \"{listen}\"\nmode = \"reverse\"\n\n\
         [access_log]\npath = \"stdout\"\n\n\
         [[route]]\nhost = \"*\"\norigins = [\"{}\"]\n\n{extra}",
        pid_file(run).display(),
        origin.url()
    )
}

fn pid_file(run: &Path) -> PathBuf {
    run.join("sepia.pid")
}

fn pid_in(run: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file(run))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn sepia_cli(args: &[&str]) -> Output {
    Command::new(sepia_bin())
        .args(args)
        .output()
        .expect("run sepia")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The process that took over (not a child of the test): stopped when the test ends.
struct Successor(u32);

impl Drop for Successor {
    fn drop(&mut self) {
        let pid = self.0.to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        if !wait_until(Duration::from_secs(10), || !alive(self.0)) {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    }
}

/// `sepia upgrade -c FILE`, which must succeed: the successor's pid.
fn upgrade(sepia: &Sepia, run: &Path) -> Successor {
    let old = sepia.pid();
    let file = sepia.dir().join("sepia.toml");
    let out = sepia_cli(&["upgrade", "-c", file.to_str().unwrap()]);
    let said = text(&out);
    assert!(
        out.status.success(),
        "sepia upgrade: {said}\nstderr:\n{}",
        sepia.stderr()
    );
    let new = pid_in(run).expect("a pid file after the upgrade");
    assert_ne!(new, old, "{said}");
    assert!(said.contains(&format!("process {new} took over")), "{said}");
    Successor(new)
}

/// What the load saw.
#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    /// Requests sent again on a new connection after a kept-alive one ended in order before
    /// any byte of the answer (RFC 9112 §9.3.1): what every HTTP client does, not a failure.
    resent: AtomicUsize,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }
}

/// Hits (a few URLs stored for a minute) and misses (each URL new, not stored: `/miss-…`
/// answers `no-store`), alternating.
fn target(client: usize, n: usize) -> String {
    match n % 2 {
        0 => format!("/cacheable/hot-{}", n % 4),
        _ => format!("/miss-{client}-{n}"),
    }
}

fn check(path: &str, response: &sepia_e2e::Response) -> Result<(), String> {
    let want = match path.starts_with("/cacheable") {
        true => path.to_string(),
        false => format!("GET {path}"),
    };
    match response.status == 200 && response.text() == want {
        true => Ok(()),
        false => Err(format!("{path}: {} {:?}", response.status, response.text())),
    }
}

/// A client that keeps its connection alive, request after request, until `stop`; odd ones
/// think for `THINK` between requests, so that their connections are often idle when the
/// old process stops (a request then crossing its FIN would be lost, or reset).
fn keep_alive_client(addr: SocketAddr, id: usize, stop: &AtomicBool, tally: &Tally) {
    let mut conn: Option<RawClient> = None;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        if id % 2 == 1 {
            std::thread::sleep(THINK);
        }
        let path = target(id, n);
        n += 1;
        let request = format!("GET {path} HTTP/1.1\r\nHost: site\r\n\r\n");
        let reused = conn.is_some();
        let mut client = match conn.take() {
            Some(c) => c,
            None => match RawClient::try_connect(addr) {
                Ok(c) => c,
                Err(e) => return tally.fail(format!("connect: {e}")),
            },
        };
        let began = client
            .try_send(request.as_bytes())
            .and_then(|()| client.try_answer_began());
        match began {
            Ok(true) => {}
            // Closed in order before answering: send it again on a new connection.
            Ok(false) if reused => {
                tally.resent.fetch_add(1, Ordering::Relaxed);
                n -= 1;
                continue;
            }
            Ok(false) => return tally.fail(format!("{path}: closed before answering")),
            Err(e) => return tally.fail(format!("{path}: {e} (reused: {reused})")),
        }
        match client.try_read_response() {
            Ok(r) => {
                if let Err(e) = check(&path, &r) {
                    return tally.fail(e);
                }
                tally.answered.fetch_add(1, Ordering::Relaxed);
                if !r.has_token("Connection", "close") {
                    conn = Some(client);
                }
            }
            Err(e) => return tally.fail(format!("{path}: answer cut: {e}")),
        }
    }
}

/// A client that opens a connection for each request.
fn one_shot_client(addr: SocketAddr, id: usize, stop: &AtomicBool, tally: &Tally) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let path = target(id, n);
        n += 1;
        let request = format!("GET {path} HTTP/1.1\r\nHost: site\r\nConnection: close\r\n\r\n");
        let answered = RawClient::try_connect(addr).and_then(|mut c| {
            c.try_send(request.as_bytes())?;
            c.try_read_response()
        });
        match answered {
            Ok(r) => match check(&path, &r) {
                Ok(()) => drop(tally.answered.fetch_add(1, Ordering::Relaxed)),
                Err(e) => return tally.fail(e),
            },
            Err(e) => return tally.fail(format!("{path} on a new connection: {e}")),
        }
    }
}

/// A thinking keep-alive client's pause between requests.
const THINK: Duration = Duration::from_millis(2);
/// Keep-alive clients (half of them thinking), then connection-per-request ones.
const KEEP_ALIVE_CLIENTS: usize = 16;
const ONE_SHOT_CLIENTS: usize = 4;

/// The load on `addr` until `stop`.
fn start_load(
    addr: SocketAddr,
    stop: &Arc<AtomicBool>,
    tally: &Arc<Tally>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..KEEP_ALIVE_CLIENTS + ONE_SHOT_CLIENTS)
        .map(|id| {
            let (stop, tally) = (stop.clone(), tally.clone());
            std::thread::spawn(move || match id < KEEP_ALIVE_CLIENTS {
                true => keep_alive_client(addr, id, &stop, &tally),
                false => one_shot_client(addr, id, &stop, &tally),
            })
        })
        .collect()
}

/// Waits until the load has answered `more` requests beyond what it had.
fn load_answers(tally: &Tally, more: usize) {
    let from = tally.answered.load(Ordering::Relaxed);
    let grew = wait_until(WAIT, || {
        tally.answered.load(Ordering::Relaxed) >= from + more
            || !tally.failures.lock().unwrap().is_empty()
    });
    assert!(grew, "the load stalled");
}

#[test]
fn an_upgrade_under_load_fails_no_request_and_the_old_process_exits() {
    let (origin, run) = (Origin::start(), TempDir::new().unwrap());
    let mut sepia = Sepia::start(&config(&free_addr(), &origin, run.path(), ""));
    let old = sepia.pid();
    assert!(wait_until(WAIT, || pid_in(run.path()) == Some(old)));
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let load = start_load(sepia.addr(), &stop, &tally);
    load_answers(&tally, 300);

    let successor = upgrade(&sepia, run.path());
    load_answers(&tally, 300);
    assert!(
        wait_until(WAIT, || !sepia.is_running()),
        "the old process did not exit\nstderr:\n{}",
        sepia.stderr()
    );
    let after_exit = tally.answered.load(Ordering::Relaxed);
    // Served by the new process alone now.
    load_answers(&tally, 300);
    stop.store(true, Ordering::Relaxed);
    load.into_iter().for_each(|t| t.join().unwrap());

    let failures = tally.failures.lock().unwrap();
    let answered = tally.answered.load(Ordering::Relaxed);
    let resent = tally.resent.load(Ordering::Relaxed);
    eprintln!(
        "{answered} answered, {after_exit} before the old process exited, {resent} sent again"
    );
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}\nstderr:\n{}",
        failures.len(),
        sepia.stderr()
    );
    // Connections between requests when the drain began waited for their next request and
    // answered it with `Connection: close`: no client had to send a request twice (closing
    // them at once, 2-5 of ~1,400 requests crossed the FIN and were sent again).
    assert_eq!(resent, 0, "requests sent again");
    assert!(alive(successor.0));
    let stderr = sepia.stderr();
    assert!(
        stderr.contains(&format!("process {} took over", successor.0)),
        "{stderr}"
    );
    assert!(origin.request_count() > 0);
}

#[test]
fn a_new_binary_that_cannot_take_over_leaves_the_old_one_serving() {
    let (origin, run) = (Origin::start(), TempDir::new().unwrap());
    let mut sepia = Sepia::start(&config(&free_addr(), &origin, run.path(), ""));
    let old = sepia.pid();
    assert!(wait_until(WAIT, || pid_in(run.path()) == Some(old)));
    let file = sepia.dir().join("sepia.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let valid_copy = run.path().join("valid.toml");
    std::fs::write(&valid_copy, &good).unwrap();
    std::fs::write(&file, format!("{good}[timeouts]\nconect = \"5s\"\n")).unwrap();

    // `sepia upgrade` validates first: the invalid file is reported, nothing is signalled.
    let out = sepia_cli(&["upgrade", "-c", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("key 'timeouts.conect'"),
        "{}",
        text(&out)
    );

    // Told to upgrade anyway (a file valid for the command, not for the process's own file):
    // the new process refuses its configuration, the old one says so and serves on.
    let out = sepia_cli(&["upgrade", "-c", valid_copy.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("upgrade failed"), "{said}");
    assert!(said.contains("exit status: 2"), "{said}");
    let stderr = sepia.stderr();
    assert!(
        stderr.contains("upgrade failed, this process keeps serving"),
        "{stderr}"
    );
    assert!(stderr.contains("key 'timeouts.conect'"), "{stderr}");
    assert!(sepia.is_running());
    assert_eq!(pid_in(run.path()), Some(old));
    let answer = curl(&[&format!("{}/cacheable/after", sepia.url())]);
    answer.assert_status(200);

    // Fixed: the next upgrade goes through.
    std::fs::write(&file, &good).unwrap();
    let successor = upgrade(&sepia, run.path());
    assert!(wait_until(WAIT, || !sepia.is_running()));
    curl(&[&format!("{}/cacheable/after", sepia.url())]).assert_status(200);
    drop(successor);
}

fn disk(dir: &Path) -> String {
    format!(
        "[cache]\nmemory = \"1MiB\"\nmax_object = \"1MiB\"\n\n[[cache.disk]]\npath = \"{}\"\nsize = \"64MiB\"\n",
        dir.display()
    )
}

#[test]
fn a_second_sepia_on_a_disk_cache_in_use_is_refused() {
    let (origin, run, cache) = (
        Origin::start(),
        TempDir::new().unwrap(),
        TempDir::new().unwrap(),
    );
    let sepia = Sepia::start(&config(
        &free_addr(),
        &origin,
        run.path(),
        &disk(cache.path()),
    ));
    let other_run = TempDir::new().unwrap();
    let second = config(&free_addr(), &origin, other_run.path(), &disk(cache.path()));
    let file = other_run.path().join("second.toml");
    std::fs::write(&file, second).unwrap();
    let started = Instant::now();
    let out = sepia_cli(&["-c", file.to_str().unwrap()]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let expected = format!(
        "disk cache {} is in use by another Sepia (process {})",
        cache.path().display(),
        sepia.pid()
    );
    assert!(said.contains(&expected), "{said}");
    // The first one still serves from its disk.
    curl(&[&format!("{}/cacheable/x", sepia.url())]).assert_status(200);
}

/// Objects stored on disk by the old process are disk hits in the new one, and the origin
/// is not asked again.
#[test]
fn an_upgrade_keeps_the_disk_cache() {
    let (origin, run, cache) = (
        Origin::start(),
        TempDir::new().unwrap(),
        TempDir::new().unwrap(),
    );
    let mut sepia = Sepia::start(&config(
        &free_addr(),
        &origin,
        run.path(),
        &disk(cache.path()),
    ));
    assert!(wait_until(WAIT, || pid_in(run.path()) == Some(sepia.pid())));
    let path = |id: u64| format!("/keyed/200000/{id}");
    let get = |addr: SocketAddr, id: u64| {
        let mut client = RawClient::connect(addr);
        client.send(format!("GET {} HTTP/1.1\r\nHost: site\r\n\r\n", path(id)).as_bytes());
        let r = client.read_response();
        assert_eq!(r.status, 200);
        assert!(r.body == keyed_body(id, 200_000), "object {id}: wrong body");
    };
    // Twice each: the second is a hit, so the object earned a place on disk (written as
    // memory evicts it, or at the old process's exit).
    for id in 0..12 {
        get(sepia.addr(), id);
        get(sepia.addr(), id);
    }
    let fetched = origin.request_count();
    let successor = upgrade(&sepia, run.path());
    assert!(
        wait_until(WAIT, || !sepia.is_running()),
        "{}",
        sepia.stderr()
    );
    assert!(
        wait_until(WAIT, || sepia.stderr().contains("disk cache taken over")),
        "{}",
        sepia.stderr()
    );
    let lines_before = sepia.log_lines().len();
    for id in 0..12 {
        get(sepia.addr(), id);
    }
    assert_eq!(
        origin.request_count(),
        fetched,
        "refetched after the upgrade"
    );
    let lines = sepia.wait_for_log_lines(lines_before + 12, WAIT);
    let disk_hits = lines[lines_before..]
        .iter()
        .filter(|l| l.contains("TCP_HIT/"))
        .count();
    assert!(disk_hits >= 1, "{:#?}", &lines[lines_before..]);
    drop(successor);
}

/// Under systemd (`Type=notify`, `NotifyAccess=all`): the new process announces itself as
/// the main one and ready; the old one does not say the service is stopping.
#[test]
fn the_service_manager_hears_of_the_new_main_process() {
    use std::os::unix::net::UnixDatagram;
    let (origin, run) = (Origin::start(), TempDir::new().unwrap());
    let socket_path = run.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let toml = config(&free_addr(), &origin, run.path(), "");
    let mut sepia =
        Sepia::start_with_env(&toml, &[("NOTIFY_SOCKET", socket_path.to_str().unwrap())]);
    let mut heard = Vec::new();
    let mut receive = |until: &str| {
        let mut buf = [0u8; 512];
        while !heard.iter().any(|m: &String| m.contains(until)) {
            let n = socket.recv(&mut buf).expect("a notification");
            heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    };
    receive("READY=1");
    let successor = upgrade(&sepia, run.path());
    receive(&format!("MAINPID={}", successor.0));
    assert!(wait_until(WAIT, || !sepia.is_running()));
    let mut buf = [0u8; 512];
    socket.set_nonblocking(true).unwrap();
    while let Ok(n) = socket.recv(&mut buf) {
        heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let after = heard
        .iter()
        .skip_while(|m| !m.contains("MAINPID="))
        .cloned()
        .collect::<Vec<_>>();
    assert!(after.iter().any(|m| m.contains("READY=1")), "{heard:?}");
    assert!(!heard.iter().any(|m| m.contains("STOPPING=1")), "{heard:?}");
}
