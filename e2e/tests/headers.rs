//! What the proxy adds and removes: hop-by-hop fields (RFC 9110 §7.6.1) are not forwarded in
//! either direction, Via (RFC 9110 §7.6.3) and X-Forwarded-For are added, Host is passed.

use sepia_e2e::fixtures::{reverse, reverse_with};
use sepia_e2e::{curl, RawClient, RecordedRequest};

const HOP_BY_HOP_REQUEST: &[u8] = b"GET /hop HTTP/1.1\r\n\
Host: app.example\r\n\
Connection: keep-alive, X-Custom-Hop\r\n\
X-Custom-Hop: must-not-pass\r\n\
Keep-Alive: timeout=5\r\n\
TE: deflate;q=0.5\r\n\
Trailer: X-Checksum\r\n\
Upgrade: example/1\r\n\
Proxy-Connection: keep-alive\r\n\
X-End-To-End: must-pass\r\n\
X-Forwarded-For: 10.1.2.3\r\n\
\r\n";

fn lists(request: &RecordedRequest, name: &str, token: &str) -> bool {
    request
        .headers_named(name)
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().to_ascii_lowercase().starts_with(token))
}

#[test]
fn hop_by_hop_fields_are_not_forwarded_to_the_origin() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(HOP_BY_HOP_REQUEST);
    assert_eq!(client.read_response().status, 200);
    let seen = origin.single_request();
    let head = &seen.raw_head;
    for name in [
        "x-custom-hop",
        "keep-alive",
        "trailer",
        "upgrade",
        "proxy-connection",
    ] {
        assert!(seen.header(name).is_none(), "origin saw {name}:\n{head}");
    }
    assert!(
        !lists(&seen, "te", "deflate"),
        "origin saw the client's TE:\n{head}"
    );
    assert!(
        !lists(&seen, "connection", "x-custom-hop"),
        "Connection forwarded:\n{head}"
    );
    assert_eq!(seen.header("x-end-to-end"), Some("must-pass"), "{head}");
    assert_eq!(
        seen.header("host"),
        Some("app.example"),
        "host_header = pass:\n{head}"
    );
}

#[test]
fn via_and_x_forwarded_for_are_added_toward_the_origin() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(HOP_BY_HOP_REQUEST);
    assert_eq!(client.read_response().status, 200);
    let seen = origin.single_request();
    let via = seen.headers_named("via").join(", ");
    assert!(
        via.contains("1.1 sepia"),
        "Via toward origin: {via:?}\n{}",
        seen.raw_head
    );
    let xff = seen.headers_named("x-forwarded-for").join(", ");
    assert_eq!(
        xff, "10.1.2.3, 127.0.0.1",
        "append mode:\n{}",
        seen.raw_head
    );
}

#[test]
fn response_hop_by_hop_fields_are_removed_and_via_added() {
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /hop HTTP/1.1\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hop");
    assert!(r.header("x-origin-hop").is_none(), "{}", r.raw_head);
    assert!(r.header("keep-alive").is_none(), "{}", r.raw_head);
    assert!(!r.has_token("connection", "x-origin-hop"), "{}", r.raw_head);
    assert_eq!(r.header("x-end-to-end"), Some("kept"), "{}", r.raw_head);
    let via = r.headers_named("via").join(", ");
    assert!(via.contains("sepia"), "Via toward client: {via:?}");
}

#[test]
fn header_settings_change_via_and_x_forwarded_for() {
    let cases = [
        // (extra config, expected Via substring or None for absent, expected XFF)
        (
            "[headers]\nvia = true\nvia_pseudonym = \"edge7\"\nx_forwarded_for = \"replace\"\n",
            Some("1.1 edge7"),
            Some("127.0.0.1"),
        ),
        (
            "[headers]\nvia = false\nx_forwarded_for = \"append\"\n",
            None,
            Some("10.1.2.3, 127.0.0.1"),
        ),
    ];
    for (extra, via, xff) in cases {
        let (origin, sepia) = reverse_with(extra);
        let out = curl(&[
            "-H",
            "X-Forwarded-For: 10.1.2.3",
            &format!("{}/h", sepia.url()),
        ]);
        out.assert_status(200);
        let seen = origin.single_request();
        let seen_via = seen.headers_named("via").join(", ");
        match via {
            Some(v) => assert!(seen_via.contains(v), "{extra}: Via {seen_via:?}"),
            None => assert!(!seen_via.contains("sepia"), "{extra}: Via {seen_via:?}"),
        }
        assert_eq!(
            seen.headers_named("x-forwarded-for").join(", ").as_str(),
            xff.unwrap_or(""),
            "{extra}"
        );
    }
}

#[test]
fn host_header_origin_mode_sends_the_origin_authority() {
    let origin = sepia_e2e::Origin::start();
    let listen = sepia_e2e::free_addr();
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n[[listen]]\naddress = \"{listen}\"\n\
         mode = \"reverse\"\n\n[[route]]\nhost = \"*\"\norigins = [\"{}\"]\nhost_header = \"origin\"\n",
        origin.url()
    );
    let sepia = sepia_e2e::Sepia::start(&config);
    curl(&["-H", "Host: public.example", &format!("{}/h", sepia.url())]).assert_status(200);
    let seen = origin.single_request();
    assert_eq!(
        seen.header("host"),
        Some(origin.addr().to_string().as_str()),
        "{}",
        seen.raw_head
    );
}
