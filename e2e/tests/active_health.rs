//! Active origin health checks (`[route.health] interval`) with the real binary: an origin
//! that answers the check path with 500, one that is killed (and comes back after `rise` good
//! checks once restarted), and one that accepts the check and never answers (`timeout`) are
//! marked down, and the route then answers 503; a reload starts and stops the checks.

use std::time::{Duration, Instant};

use sepia_e2e::fixtures::with_admin;
use sepia_e2e::{
    curl, free_addr, reverse_config, wait_until, CurlOutput, Origin, Sepia, TestCert, TlsOrigin,
};

const INTERVAL: Duration = Duration::from_millis(200);
const FALL: u32 = 2;
const RISE: u32 = 3;

/// The `[route.health]` of a check on `path` with this file's interval, rise and fall.
fn checks(path: &str, extra: &str) -> String {
    format!(
        "[route.health]\ninterval = \"{}ms\"\npath = \"{path}\"\nrise = {RISE}\nfall = {FALL}\n\
         timeout = \"500ms\"\n{extra}\n",
        INTERVAL.as_millis()
    )
}

/// A reverse proxy on `listen` (two workers: the checks must still run once per origin) to
/// `origin` with `health`, and an admin listener.
fn config(listen: &str, origin: &str, health: &str) -> String {
    let base = reverse_config(listen, &[origin]).replace("workers = 1", "workers = 2");
    format!("{base}{health}")
}

fn get(sepia: &Sepia, path: &str) -> CurlOutput {
    curl(&["-m", "20", &format!("{}{path}", sepia.url())])
}

/// The value of the sample named `name` (labels included) in a scrape of `base`.
fn sample(base: &str, name: &str) -> Option<f64> {
    let text = curl(&[&format!("{base}/metrics")]).text();
    let line = text.lines().find(|l| l.starts_with(&format!("{name} ")))?;
    line[name.len()..].trim().parse().ok()
}

fn origin_up(base: &str, origin: &str) -> Option<f64> {
    sample(
        base,
        &format!("sepia_origin_up{{route=\"*\",origin=\"{origin}\"}}"),
    )
}

fn checks_counted(base: &str, origin: &str, result: &str) -> f64 {
    let name =
        format!("sepia_health_checks_total{{route=\"*\",origin=\"{origin}\",result=\"{result}\"}}");
    sample(base, &name).unwrap_or(0.0)
}

/// Polls until `origin` is marked `up` (1.0) or down (0.0); returns how long it took.
fn wait_for_state(base: &str, origin: &str, up: f64, within: Duration) -> Duration {
    let started = Instant::now();
    assert!(
        wait_until(within, || origin_up(base, origin) == Some(up)),
        "{origin} never became {up} in {within:?}"
    );
    started.elapsed()
}

/// Requests for `path` the origin received.
fn asked(origin: &Origin, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r| r.target == path)
        .count()
}

#[test]
fn an_origin_answering_500_on_the_check_path_is_marked_down_and_the_route_answers_503() {
    let origin = Origin::start();
    let addr = origin.addr().to_string();
    let health = checks("/status/500", "host = \"check.test\"");
    let (sepia, base) = with_admin(&config(&free_addr(), &origin.url(), &health), "");
    // Down within interval × fall (the first check runs at start), plus scheduling slack.
    let took = wait_for_state(&base, &addr, 0.0, INTERVAL * FALL + Duration::from_secs(3));
    assert!(
        took < INTERVAL * FALL + Duration::from_secs(2),
        "took {took:?}"
    );
    let r = get(&sepia, "/hello");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    assert!(checks_counted(&base, &addr, "status") >= f64::from(FALL));
    assert_eq!(checks_counted(&base, &addr, "ok"), 0.0);
    let log = sepia.stderr();
    assert!(
        log.contains("marked down") && log.contains("status 500"),
        "the transition and its reason are logged: {log}"
    );
    let check = origin
        .requests()
        .into_iter()
        .find(|r| r.target == "/status/500");
    let check = check.expect("the origin saw the check");
    assert_eq!(check.header("host"), Some("check.test"));
    assert_eq!(
        asked(&origin, "/hello"),
        0,
        "the request never reached the origin"
    );
    // One task per origin, not one per worker: about one check per interval.
    let (before, started) = (asked(&origin, "/status/500"), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let per_interval = (asked(&origin, "/status/500") - before) as f64
        / (started.elapsed().as_secs_f64() / INTERVAL.as_secs_f64());
    assert!(per_interval <= 1.2, "{per_interval} checks per interval");
}

#[test]
fn a_killed_origin_is_marked_down_and_a_restarted_one_comes_back_after_rise_good_checks() {
    let origin = Origin::start();
    let addr = origin.addr().to_string();
    let (sepia, base) = with_admin(
        &config(&free_addr(), &origin.url(), &checks("/check", "")),
        "",
    );
    get(&sepia, "/hello").assert_status(200);
    assert!(wait_until(Duration::from_secs(5), || checks_counted(
        &base, &addr, "ok"
    ) >= 1.0));
    drop(origin);
    wait_for_state(&base, &addr, 0.0, INTERVAL * FALL + Duration::from_secs(3));
    assert!(checks_counted(&base, &addr, "error") >= f64::from(FALL));
    get(&sepia, "/hello").assert_status(503);
    let origin = Origin::start_on(&addr);
    wait_for_state(&base, &addr, 1.0, INTERVAL * RISE + Duration::from_secs(3));
    assert!(
        asked(&origin, "/check") >= RISE as usize,
        "up only after {RISE} good checks, saw {}",
        asked(&origin, "/check")
    );
    get(&sepia, "/hello").assert_status(200);
    assert!(sepia.stderr().contains("up again"), "{}", sepia.stderr());
}

#[test]
fn an_origin_that_accepts_and_never_answers_is_marked_down_by_the_timeout() {
    let origin = Origin::start();
    let addr = origin.addr().to_string();
    let (sepia, base) = with_admin(
        &config(&free_addr(), &origin.url(), &checks("/hang", "")),
        "",
    );
    wait_for_state(
        &base,
        &addr,
        0.0,
        (INTERVAL + Duration::from_millis(500)) * FALL * 2,
    );
    assert!(checks_counted(&base, &addr, "timeout") >= f64::from(FALL));
    get(&sepia, "/hello").assert_status(503);
    assert!(
        sepia.stderr().contains("no answer within"),
        "{}",
        sepia.stderr()
    );
}

#[test]
fn a_reload_starts_and_stops_the_checks() {
    let origin = Origin::start();
    let addr = origin.addr().to_string();
    let listen = free_addr();
    let plain = config(&listen, &origin.url(), "");
    let (sepia, base) = with_admin(&plain, "");
    let admin = base.trim_start_matches("http://");
    let admin_section = format!("[admin]\nlisten = \"{admin}\"\n");
    let rewrite = |health: &str| {
        let toml = config(&listen, &origin.url(), health) + &admin_section;
        std::fs::write(sepia.dir().join("sepia.toml"), toml).unwrap();
        sepia.send_signal("HUP");
    };
    get(&sepia, "/hello").assert_status(200);
    assert_eq!(
        asked(&origin, "/status/503"),
        0,
        "no checks without interval"
    );

    rewrite(&checks("/status/503", ""));
    wait_for_state(&base, &addr, 0.0, Duration::from_secs(10));
    get(&sepia, "/hello").assert_status(503);

    // Checks removed: their verdict goes with them, and their task stops.
    rewrite("");
    wait_for_state(&base, &addr, 1.0, Duration::from_secs(10));
    get(&sepia, "/hello").assert_status(200);
    let stopped = asked(&origin, "/status/503");
    std::thread::sleep(INTERVAL * 4);
    assert_eq!(
        asked(&origin, "/status/503"),
        stopped,
        "the check task stopped"
    );
}

#[test]
fn an_https_origin_is_checked_over_tls_verified_the_routes_way() {
    let dir = tempfile::TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "origin", "origin", &["localhost"]);
    let origin = Origin::start();
    let front = TlsOrigin::start(&cert, origin.addr());
    let url = front.url_named("localhost");
    let name = url.trim_start_matches("https://").to_string();
    let health = format!(
        "tls_ca = \"{}\"\n{}",
        cert.ca_str(),
        checks("/status/503", "")
    );
    let (sepia, base) = with_admin(&config(&free_addr(), &url, &health), "");
    wait_for_state(&base, &name, 0.0, INTERVAL * FALL + Duration::from_secs(5));
    assert!(checks_counted(&base, &name, "status") >= f64::from(FALL));
    assert!(
        asked(&origin, "/status/503") >= FALL as usize,
        "checked through TLS"
    );
    get(&sepia, "/hello").assert_status(503);
}
