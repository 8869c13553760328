//! The admin listener (`[admin]`, `--admin ADDR`) seen from outside, with the real binary and
//! curl: `/metrics` (OpenMetrics text that counts requests by result code, every family
//! documented in docs/METRICS.md and none missing), `/stats` (JSON), `/health`, `/config` (the
//! token redacted), `POST /purge` by URL, prefix and tag (the next request reaches the origin;
//! each purge logged), the bearer token, the allow-list, and the quick start's `--admin`.

use std::collections::BTreeSet;
use std::time::Duration;

use sepia_e2e::fixtures::with_admin;
use sepia_e2e::{curl, free_addr, reverse_config, wait_until, CurlOutput, Origin, Sepia};

const TOKEN: &str = "e2e-admin-token-0123456789";

/// A reverse proxy in front of a test origin, with `[admin]` at a free address plus `extra`
/// keys; returns the admin base URL too.
fn start(extra: &str) -> (Origin, Sepia, String) {
    let origin = Origin::start();
    let config = reverse_config(&free_addr(), &[&origin.url()]);
    let (sepia, base) = with_admin(&config, extra);
    (origin, sepia, base)
}

fn get(sepia: &Sepia, path: &str) -> CurlOutput {
    curl(&[&format!("{}{path}", sepia.url())])
}

fn admin_get(base: &str, path: &str) -> CurlOutput {
    curl(&[&format!("{base}{path}")])
}

fn purge(base: &str, json: &str, extra: &[&str]) -> CurlOutput {
    let url = format!("{base}/purge");
    let mut args = vec![
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        json,
    ];
    args.extend_from_slice(extra);
    args.push(&url);
    curl(&args)
}

/// A storable response (max-age=60) with `Surrogate-Key: tags`, through the origin's
/// `/fields-from-request/` route.
fn get_tagged(sepia: &Sepia, path: &str, tags: &str) -> CurlOutput {
    curl(&[
        "-H",
        "X-Set-Cache-Control: max-age=60",
        "-H",
        &format!("X-Set-Surrogate-Key: {tags}"),
        &format!("{}/fields-from-request/{path}", sepia.url()),
    ])
}

/// The value of the sample `name{labels}` (labels as written, in order) in a scrape.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .map(|v| v.trim().parse().expect("a number"))
}

/// The families of docs/METRICS.md's table.
fn documented() -> BTreeSet<(String, String)> {
    let doc = include_str!("../../docs/METRICS.md");
    doc.lines()
        .filter(|l| l.starts_with("| `sepia_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_string(), cells[2].to_string())
        })
        .collect()
}

/// Checks the OpenMetrics text: every line a comment, `# EOF` last, every sample of a
/// family declared by `# TYPE` and written as `name{labels} number`; returns the families.
fn parse_openmetrics(text: &str) -> BTreeSet<(String, String)> {
    let mut families = BTreeSet::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "{text}");
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            families.insert((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = series.split('{').next().unwrap();
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split("\",") {
                    let (key, value) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
                    assert!(value.starts_with('"'), "{line}");
                }
            }
        }
        let declared = families.iter().any(|(family, kind)| match kind.as_str() {
            "counter" => name == format!("{family}_total"),
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{family}{s}")),
            _ => name == family,
        });
        assert!(declared, "sample of an undeclared family: {line}");
    }
    families
}

#[test]
fn metrics_count_requests_by_result_code_and_match_the_documentation() {
    let (origin, sepia, base) = start("");
    for _ in 0..3 {
        get(&sepia, "/cacheable/a").assert_status(200); // a miss, then two hits
    }
    get(&sepia, "/plain").assert_status(200); // not storable: a miss each time
    get(&sepia, "/plain").assert_status(200);
    assert_eq!(origin.request_count(), 3);

    let scrape = admin_get(&base, "/metrics");
    scrape.assert_status(200);
    let content_type = scrape.header("content-type").unwrap();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = scrape.text();
    let families = parse_openmetrics(&text);
    assert_eq!(
        families,
        documented(),
        "a scrape and docs/METRICS.md differ (left: scrape)"
    );
    let listener = sepia.addr().to_string();
    let count = |text: &str, result: &str| {
        let series = format!(
            "sepia_requests_total{{listener=\"{listener}\",protocol=\"http/1.1\",\
             method=\"GET\",result=\"{result}\"}}"
        );
        sample(text, &series).unwrap_or(0.0)
    };
    assert_eq!(count(&text, "TCP_MISS"), 3.0, "{text}");
    assert_eq!(count(&text, "TCP_MEM_HIT"), 2.0, "{text}");
    let hits = sample(&text, "sepia_request_duration_seconds_count{class=\"hit\"}");
    assert_eq!(hits, Some(2.0), "{text}");
    // Origin connections and latency by route and origin: three requests reached the origin,
    // the first on a new connection, the others on it again.
    let at_origin = format!("route=\"*\",origin=\"{}\"", origin.addr());
    let event = |e: &str| {
        let series = format!("sepia_origin_connections_total{{{at_origin},event=\"{e}\"}}");
        sample(&text, &series)
    };
    assert_eq!(event("opened"), Some(1.0), "{text}");
    assert_eq!(event("reused"), Some(2.0), "{text}");
    assert_eq!(event("failed"), Some(0.0), "{text}");
    assert!(
        !text.contains("route=\"-\""),
        "no requests without a route: {text}"
    );
    let latency = sample(&text, "sepia_origin_latency_seconds_count{route=\"*\"}");
    assert_eq!(latency, Some(3.0), "{text}");
    let waited = sample(&text, "sepia_origin_latency_seconds_sum{route=\"*\"}");
    assert!(waited > Some(0.0), "{text}");
    assert_eq!(sample(&text, "sepia_cache_objects"), Some(1.0), "{text}");
    assert!(sample(&text, "sepia_process_resident_memory_bytes") > Some(1e6));
    assert!(sample(&text, "sepia_process_open_fds") > Some(3.0));

    // Counters only grow: two more hits later.
    get(&sepia, "/cacheable/a").assert_status(200);
    get(&sepia, "/cacheable/a").assert_status(200);
    let text = admin_get(&base, "/metrics").text();
    assert_eq!(count(&text, "TCP_MEM_HIT"), 4.0, "{text}");
}

#[test]
fn stats_health_and_config() {
    let (_origin, sepia, base) = start(&format!("token = \"{TOKEN}\"\n"));
    let bearer = format!("Authorization: Bearer {TOKEN}");
    for _ in 0..2 {
        get(&sepia, "/cacheable/s").assert_status(200);
    }
    let stats = curl(&["-H", &bearer, &format!("{base}/stats")]);
    stats.assert_status(200);
    assert_eq!(
        stats.header("content-type").as_deref(),
        Some("application/json")
    );
    let json: serde_json::Value = serde_json::from_slice(&stats.body).expect("JSON");
    assert_eq!(json["requests"]["total"], 2, "{json:#}");
    assert_eq!(json["requests"]["hits"], 1, "{json:#}");
    assert_eq!(json["by_result"]["TCP_MISS"], 1, "{json:#}");
    assert_eq!(json["by_result"]["TCP_MEM_HIT"], 1, "{json:#}");
    assert_eq!(json["cache"]["objects"], 1, "{json:#}");
    assert_eq!(json["listeners"][0], sepia.addr().to_string(), "{json:#}");
    assert!(json["latency"]["hit"]["count"] == 1, "{json:#}");

    let health = curl(&["-H", &bearer, &format!("{base}/health")]);
    health.assert_status(200);
    let json: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!(json["status"], "ok");

    let config = curl(&["-H", &bearer, &format!("{base}/config")]);
    config.assert_status(200);
    let text = config.text();
    assert!(text.contains(&sepia.addr().to_string()), "{text}");
    assert!(text.contains("<redacted>"), "{text}");
    assert!(
        !text.contains(TOKEN),
        "the token leaks through /config:\n{text}"
    );

    // The dashboard: one page with no external assets.
    let page = admin_get(&base, "/");
    page.assert_status(200);
    let html = page.text();
    assert!(html.contains("<title>Sepia</title>"), "{html}");
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    // Unknown paths and methods.
    curl(&["-H", &bearer, &format!("{base}/nope")]).assert_status(404);
    let put = curl(&["-X", "PUT", "-H", &bearer, &format!("{base}/metrics")]);
    put.assert_status(405);
}

#[test]
fn purge_by_url_prefix_and_tag_removes_what_it_names_and_is_logged() {
    let (origin, sepia, base) = start("");
    let at_origin = |path: &str| {
        origin
            .requests()
            .iter()
            .filter(|r| r.target.contains(path))
            .count()
    };
    for path in [
        "/cacheable/one",
        "/cacheable/two",
        "/cacheable/dir/a",
        "/cacheable/dir/b",
    ] {
        get(&sepia, path).assert_status(200);
        get(&sepia, path).assert_status(200);
        assert_eq!(at_origin(path), 1, "{path} was not stored");
    }

    // By URL: as the clients name it.
    let url = format!("{}/cacheable/one", sepia.url());
    let r = purge(&base, &format!("{{\"url\": \"{url}\"}}"), &[]);
    r.assert_status(200);
    let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(json["removed"], 1, "{json:#}");
    get(&sepia, "/cacheable/one").assert_status(200);
    assert_eq!(at_origin("/cacheable/one"), 2, "purged by URL, yet a hit");
    get(&sepia, "/cacheable/two").assert_status(200);
    assert_eq!(
        at_origin("/cacheable/two"),
        1,
        "a purge by URL removed another URL"
    );

    // By prefix: everything under /cacheable/dir/, nothing else.
    let prefix = format!("{}/cacheable/dir/", sepia.url());
    purge(&base, &format!("{{\"prefix\": \"{prefix}\"}}"), &[]).assert_status(200);
    get(&sepia, "/cacheable/dir/a").assert_status(200);
    get(&sepia, "/cacheable/dir/b").assert_status(200);
    assert_eq!(
        at_origin("/cacheable/dir/a"),
        2,
        "purged by prefix, yet a hit"
    );
    assert_eq!(
        at_origin("/cacheable/dir/b"),
        2,
        "purged by prefix, yet a hit"
    );
    get(&sepia, "/cacheable/two").assert_status(200);
    assert_eq!(
        at_origin("/cacheable/two"),
        1,
        "the prefix purge removed /cacheable/two"
    );
    // Stored again after the purge: hits again.
    get(&sepia, "/cacheable/dir/a").assert_status(200);
    assert_eq!(
        at_origin("/cacheable/dir/a"),
        2,
        "not stored again after the prefix purge"
    );

    // By tag (Surrogate-Key, a default tag field).
    get_tagged(&sepia, "t1", "news sport").assert_status(200);
    get_tagged(&sepia, "t2", "weather").assert_status(200);
    get_tagged(&sepia, "t1", "news sport").assert_status(200);
    get_tagged(&sepia, "t2", "weather").assert_status(200);
    assert_eq!(
        (at_origin("/t1"), at_origin("/t2")),
        (1, 1),
        "tagged objects not stored"
    );
    purge(&base, "{\"tag\": \"sport\"}", &[]).assert_status(200);
    get_tagged(&sepia, "t1", "news sport").assert_status(200);
    get_tagged(&sepia, "t2", "weather").assert_status(200);
    assert_eq!(at_origin("/t1"), 2, "purged by tag, yet a hit");
    assert_eq!(
        at_origin("/t2"),
        1,
        "the tag purge removed an object without the tag"
    );

    // Bad requests.
    purge(&base, "{\"prefix\": \"/no-scheme\"}", &[]).assert_status(400);
    purge(&base, "{\"nothing\": 1}", &[]).assert_status(400);
    purge(&base, "not json", &[]).assert_status(400);

    // Every purge is logged (stderr, target sepia::admin) and counted.
    let logged = wait_until(Duration::from_secs(5), || {
        let err = sepia.stderr();
        err.contains("purge by URL")
            && err.contains("purge by prefix")
            && err.contains("purge by tag")
    });
    assert!(logged, "purges not logged:\n{}", sepia.stderr());
    let text = admin_get(&base, "/metrics").text();
    for kind in ["url", "prefix", "tag"] {
        let series = format!("sepia_purges_total{{kind=\"{kind}\"}}");
        assert_eq!(sample(&text, &series), Some(1.0), "{kind}: {text}");
    }
}

#[test]
fn a_configured_token_is_required() {
    let (_origin, _sepia, base) = start(&format!("token = \"{TOKEN}\"\n"));
    for path in ["/metrics", "/stats", "/health", "/config"] {
        let r = admin_get(&base, path);
        assert_eq!(r.status, 401, "{path} without a token: {}", r.status);
        assert!(r.header("www-authenticate").is_some(), "{path}");
        let wrong = curl(&[
            "-H",
            "Authorization: Bearer wrong-token-wrong-token!",
            &format!("{base}{path}"),
        ]);
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        let right = curl(&[
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
            &format!("{base}{path}"),
        ]);
        right.assert_status(200);
    }
    assert_eq!(purge(&base, "{\"tag\": \"x\"}", &[]).status, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    purge(&base, "{\"tag\": \"x\"}", &["-H", &bearer]).assert_status(200);
}

#[test]
fn a_client_outside_the_allow_list_is_refused() {
    let (_origin, sepia, base) = start("allow = [\"10.0.0.0/8\"]\n");
    for path in ["/metrics", "/", "/health"] {
        assert_eq!(admin_get(&base, path).status, 403, "{path} from loopback");
    }
    assert_eq!(purge(&base, "{\"tag\": \"x\"}", &[]).status, 403);
    assert!(
        sepia.stderr().contains("not in admin.allow"),
        "{}",
        sepia.stderr()
    );
    // The proxy itself still serves.
    get(&sepia, "/plain").assert_status(200);
}

#[test]
fn quick_start_admin_flag() {
    let origin = Origin::start();
    let (listen, admin) = (free_addr(), free_addr());
    let sepia = Sepia::start_args(&[
        "reverse",
        "--listen",
        &listen,
        "--origin",
        &origin.url(),
        "--admin",
        &admin,
    ]);
    get(&sepia, "/cacheable/q").assert_status(200);
    let base = format!("http://{admin}");
    let ok = wait_until(Duration::from_secs(5), || {
        let text = admin_get(&base, "/metrics").text();
        text.contains("result=\"TCP_MISS\"} 1")
    });
    assert!(ok, "{}", admin_get(&base, "/metrics").text());
    assert!(
        sepia.stderr().contains("admin listener on"),
        "{}",
        sepia.stderr()
    );

    let forward =
        Sepia::start_args(&["forward", "--listen", &free_addr(), "--admin", &free_addr()]);
    assert!(
        forward.stderr().contains("admin listener on")
            || wait_until(Duration::from_secs(3), || forward
                .stderr()
                .contains("admin listener on"))
    );
}

/// The value of the unlabelled or fully labelled series `series` in a scrape of `base`.
fn scraped(base: &str, series: &str) -> Option<f64> {
    sample(&admin_get(base, "/metrics").text(), series)
}

#[test]
fn client_connections_are_counted_idle_then_parked() {
    let (_origin, sepia, base) = start("");
    let gauges = || {
        let text = admin_get(&base, "/metrics").text();
        let g = |name| sample(&text, name).unwrap_or(-1.0);
        (
            g("sepia_client_connections_open"),
            g("sepia_client_connections_idle"),
            g("sepia_client_connections_parked"),
        )
    };
    assert_eq!(gauges(), (0.0, 0.0, 0.0));
    let mut client = sepia_e2e::RawClient::connect(sepia.addr());
    client.send(b"GET /hello HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().status, 200);
    // Waiting for its next request: idle; after a second or two without one: parked.
    assert!(
        wait_until(Duration::from_secs(5), || gauges() == (1.0, 1.0, 0.0)),
        "{:?}",
        gauges()
    );
    assert!(
        wait_until(Duration::from_secs(5), || gauges() == (1.0, 0.0, 1.0)),
        "{:?}",
        gauges()
    );
    drop(client);
    assert!(
        wait_until(Duration::from_secs(5), || gauges() == (0.0, 0.0, 0.0)),
        "{:?}",
        gauges()
    );
}

/// A forward proxy whose clients must authenticate with the auth crate's test helper in
/// `mode`, with an admin listener; returns the admin base URL too.
fn helper_proxy(mode: &str, starts: &std::path::Path) -> (Sepia, String) {
    let helper = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/auth/tests/helpers/fake_helper.py");
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"forward\"\n\n\
         [cache]\nenabled = false\n\n\
         [auth]\nhelper = [\"{}\", \"{mode}\", \"{}\"]\nhelper_children = 1\n\
         helper_timeout = \"2s\"\n\n\
         [[acl]]\nname = \"anyone\"\ntype = \"proxy_auth\"\nvalues = [\"REQUIRED\"]\n\n\
         [[http_access]]\naction = \"allow\"\nacl = [\"anyone\"]\n\n",
        free_addr(),
        helper.display(),
        starts.display()
    );
    with_admin(&config, "")
}

fn get_as(sepia: &Sepia, origin: &Origin, user: &str) -> CurlOutput {
    let proxy = sepia.url();
    curl(&[
        "-x",
        &proxy,
        "--proxy-user",
        user,
        &format!("{}/a", origin.url()),
    ])
}

#[test]
fn the_auth_helper_queue_and_answers_are_counted() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        return eprintln!("SKIPPED: python3 (runs the test helper) is not installed");
    }
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let (sepia, base) = helper_proxy("plain", &dir.path().join("starts"));
    let answers = |result: &str| {
        let series = format!("sepia_auth_helper_answers_total{{result=\"{result}\"}}");
        scraped(&base, &series)
    };
    assert_eq!(answers("ok"), Some(0.0));
    get_as(&sepia, &origin, "alice:alice-pw").assert_status(200);
    get_as(&sepia, &origin, "bob:wrong").assert_status(407);
    assert_eq!((answers("ok"), answers("err")), (Some(1.0), Some(1.0)));
    let state = |s: &str| {
        scraped(
            &base,
            &format!("sepia_auth_helper_requests{{state=\"{s}\"}}"),
        )
    };
    assert_eq!(
        (state("queued"), state("in_flight")),
        (Some(0.0), Some(0.0))
    );

    // A helper that never answers: the check is in flight until helper_timeout, then ends
    // "unavailable" (the client gets 503).
    let (sepia, base) = helper_proxy("hang", &dir.path().join("starts-hang"));
    let waiting = std::thread::spawn({
        let (proxy, url) = (sepia.url(), format!("{}/b", origin.url()));
        move || curl(&["-x", &proxy, "--proxy-user", "carol:carol-pw", &url]).status
    });
    let in_flight = "sepia_auth_helper_requests{state=\"in_flight\"}";
    assert!(
        wait_until(Duration::from_secs(2), || scraped(&base, in_flight)
            == Some(1.0)),
        "{:?}",
        scraped(&base, in_flight)
    );
    assert_eq!(waiting.join().unwrap(), 503);
    let unavailable = "sepia_auth_helper_answers_total{result=\"unavailable\"}";
    assert_eq!(scraped(&base, unavailable), Some(1.0));
}
