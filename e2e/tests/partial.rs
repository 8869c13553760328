//! Partial content (RFC 9111 §3.3–3.4): a single-range `206` with a strong validator is kept as
//! a piece of its representation, answers later ranges it holds, is combined with pieces of the
//! same validator, and is completed by asking the origin only for the bytes it lacks.

use std::time::Duration;

use sepia_e2e::fixtures::{reverse, reverse_with};
use sepia_e2e::{curl, pattern, Origin, RawClient, Response, Sepia};

/// A GET of `path` with `Range: bytes=RANGE` (none when empty).
fn get_range(sepia: &Sepia, path: &str, range: &str) -> Response {
    get_with(sepia, path, range, "")
}

/// [`get_range`] with more request fields (`extra`, each line ending in CRLF).
fn get_with(sepia: &Sepia, path: &str, range: &str, extra: &str) -> Response {
    let range = if range.is_empty() {
        String::new()
    } else {
        format!("Range: bytes={range}\r\n")
    };
    let mut client = RawClient::connect(sepia.addr());
    let head = format!("GET {path} HTTP/1.1\r\nHost: app\r\n{range}{extra}\r\n");
    client.send(head.as_bytes());
    client.read_response()
}

/// Asserts a 206 carrying bytes `first..=last` of a representation of `complete` pattern bytes.
fn assert_piece(resp: &Response, first: usize, last: usize, complete: usize) {
    assert_eq!(resp.status, 206, "{}", resp.raw_head);
    let range = format!("bytes {first}-{last}/{complete}");
    assert_eq!(resp.header("content-range"), Some(range.as_str()));
    assert_eq!(resp.body, pattern(complete)[first..=last].to_vec());
}

fn status(resp: &Response) -> &str {
    resp.header("cache-status").unwrap_or_default()
}

/// The `Range` and `If-Range` of the origin's last request.
fn last_range(origin: &Origin) -> (Option<String>, Option<String>) {
    let last = origin.requests().pop().expect("the origin saw a request");
    (
        last.header("range").map(str::to_string),
        last.header("if-range").map(str::to_string),
    )
}

#[test]
fn a_kept_piece_answers_the_ranges_it_holds_and_forwards_the_others() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/inside";
    assert_piece(&get_range(&sepia, path, "0-499"), 0, 499, 1000);
    let inside = get_range(&sepia, path, "100-199");
    assert_piece(&inside, 100, 199, 1000);
    assert_eq!(origin.request_count(), 1, "answered from the piece");
    assert!(status(&inside).contains("hit"), "{}", status(&inside));
    let suffix = get_range(&sepia, path, "-100");
    assert_eq!(origin.request_count(), 2, "bytes 900-999 are not held");
    assert_piece(&suffix, 900, 999, 1000);
    // A range past the end of a representation of known length.
    let past = get_range(&sepia, path, "2000-2100");
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */1000"));
}

#[test]
fn pieces_with_the_same_strong_validator_combine() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/combine";
    get_range(&sepia, path, "0-399");
    get_range(&sepia, path, "300-599");
    assert_eq!(origin.request_count(), 2);
    // Bytes 350-550 span both pieces: held only by their combination.
    let spanning = get_range(&sepia, path, "350-550");
    assert_piece(&spanning, 350, 550, 1000);
    assert_eq!(
        origin.request_count(),
        2,
        "answered from the combined piece"
    );
    // The rest makes the representation whole: a full GET is then a plain hit.
    get_range(&sepia, path, "600-999");
    let whole = get_range(&sepia, path, "");
    assert_eq!(whole.status, 200);
    assert_eq!(whole.body, pattern(1000));
    assert_eq!(
        origin.request_count(),
        3,
        "the pieces made a complete response"
    );
    assert!(status(&whole).contains("hit"), "{}", status(&whole));
}

#[test]
fn a_full_get_asks_the_origin_only_for_the_missing_bytes() {
    let (origin, sepia) = reverse();
    let url = format!("http://{}/ranged/1000/complete", sepia.addr());
    let first = curl(&["-r", "0-399", &url]);
    first.assert_status(206);
    let full = curl(&[&url]);
    full.assert_status(200);
    assert_eq!(
        full.body,
        pattern(1000),
        "the stored bytes, then the origin's"
    );
    assert_eq!(full.header("content-length").as_deref(), Some("1000"));
    assert_eq!(full.header("content-range"), None);
    assert_eq!(origin.request_count(), 2);
    let (range, if_range) = last_range(&origin);
    assert_eq!(
        range.as_deref(),
        Some("bytes=400-999"),
        "only the missing range"
    );
    assert_eq!(if_range.as_deref(), Some("\"ranged-1000\""));
    let again = curl(&[&url]);
    again.assert_status(200);
    assert_eq!(again.body, pattern(1000));
    assert_eq!(
        origin.request_count(),
        2,
        "the completed response was stored"
    );
    let ranged = curl(&["-r", "990-", &url]);
    ranged.assert_status(206);
    assert_eq!(ranged.body, pattern(1000)[990..].to_vec());
    assert_eq!(origin.request_count(), 2);
}

#[test]
fn a_piece_of_the_end_is_completed_with_the_beginning() {
    let (origin, sepia) = reverse();
    let path = "/ranged/70000/tail";
    assert_piece(&get_range(&sepia, path, "-5000"), 65000, 69999, 70000);
    let full = get_range(&sepia, path, "");
    assert_eq!(full.status, 200);
    assert_eq!(full.body, pattern(70000));
    assert_eq!(last_range(&origin).0.as_deref(), Some("bytes=0-64999"));
}

#[test]
fn a_changed_representation_is_fetched_whole() {
    let (origin, sepia) = reverse();
    let path = "/ranged-changing/1000/changed";
    get_range(&sepia, path, "0-399");
    let full = get_range(&sepia, path, "");
    assert_eq!(
        full.status, 200,
        "If-Range did not match: the origin sent it all"
    );
    assert_eq!(full.body, pattern(1000));
    assert_eq!(last_range(&origin).1.as_deref(), Some("\"ranged-1000-1\""));
    assert_eq!(full.header("etag"), Some("\"ranged-1000-2\""));
    get_range(&sepia, path, "");
    assert_eq!(
        origin.request_count(),
        2,
        "the new representation was stored"
    );
}

#[test]
fn a_piece_under_a_weak_validator_is_not_kept() {
    let (origin, sepia) = reverse();
    let path = "/ranged-weak/1000/weak";
    assert_piece(&get_range(&sepia, path, "0-399"), 0, 399, 1000);
    assert_piece(&get_range(&sepia, path, "0-399"), 0, 399, 1000);
    assert_eq!(
        origin.request_count(),
        2,
        "a weak validator says nothing of bytes"
    );
    let full = get_range(&sepia, path, "");
    assert_eq!(full.body, pattern(1000));
    assert_eq!(last_range(&origin).0, None, "nothing to complete");
}

#[test]
fn an_unsafe_request_invalidates_the_pieces_of_its_target() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/invalidated";
    get_range(&sepia, path, "0-399");
    get_range(&sepia, path, "0-99");
    assert_eq!(origin.request_count(), 1);
    let mut client = RawClient::connect(sepia.addr());
    client
        .send(format!("POST {path} HTTP/1.1\r\nHost: app\r\nContent-Length: 0\r\n\r\n").as_bytes());
    assert_eq!(client.read_response().status, 200);
    let after = get_range(&sepia, path, "0-99");
    assert_piece(&after, 0, 99, 1000);
    assert_eq!(
        origin.request_count(),
        3,
        "the piece was invalidated (RFC 9111 §4.4)"
    );
}

#[test]
fn a_piece_inside_the_representation_answers_from_its_own_offset() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/middle";
    assert_piece(&get_range(&sepia, path, "200-599"), 200, 599, 1000);
    assert_piece(&get_range(&sepia, path, "300-399"), 300, 399, 1000);
    assert_piece(&get_range(&sepia, path, "200-200"), 200, 200, 1000);
    assert_piece(&get_range(&sepia, path, "599-599"), 599, 599, 1000);
    assert_eq!(origin.request_count(), 1, "all answered from the piece");
    // Bytes before and after it are not held; a full GET cannot be completed with one range.
    assert_piece(&get_range(&sepia, path, "150-250"), 150, 250, 1000);
    assert_eq!(origin.request_count(), 2);
    let whole = get_range(&sepia, path, "");
    assert_eq!(whole.body, pattern(1000));
    assert_eq!(
        last_range(&origin).0,
        None,
        "two ranges missing: fetched whole"
    );
}

#[test]
fn a_piece_answers_conditionals_with_its_validator() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/conditional";
    get_range(&sepia, path, "0-399");
    let not_modified = get_with(&sepia, path, "0-99", "If-None-Match: \"ranged-1000\"\r\n");
    assert_eq!(not_modified.status, 304, "{}", not_modified.raw_head);
    assert_eq!(not_modified.header("etag"), Some("\"ranged-1000\""));
    let failed = get_with(&sepia, path, "0-99", "If-Match: \"other\"\r\n");
    assert_eq!(failed.status, 412);
    assert_eq!(origin.request_count(), 1, "both answered from the piece");
}

#[test]
fn a_piece_before_the_stored_one_combines_with_it() {
    let (origin, sepia) = reverse();
    let path = "/ranged/1000/before";
    get_range(&sepia, path, "600-999");
    get_range(&sepia, path, "100-649");
    assert_piece(&get_range(&sepia, path, "100-999"), 100, 999, 1000);
    assert_eq!(origin.request_count(), 2);
    // Only bytes 0-99 are missing: one range completes it.
    let whole = get_range(&sepia, path, "");
    assert_eq!(whole.body, pattern(1000));
    assert_eq!(last_range(&origin).0.as_deref(), Some("bytes=0-99"));
}

#[test]
fn fields_a_206_to_if_range_leaves_out_are_kept_from_the_stored_piece() {
    let (origin, sepia) = reverse();
    let path = "/ranged-bare/1000/fields";
    let first = get_range(&sepia, path, "0-399");
    assert_eq!(
        first.header("content-type"),
        Some("application/x-sepia-test")
    );
    let completed = get_range(&sepia, path, "");
    assert_eq!(completed.status, 200);
    assert_eq!(completed.body, pattern(1000));
    assert_eq!(
        last_range(&origin).1.as_deref(),
        Some("\"ranged-1000\""),
        "completed with If-Range"
    );
    for resp in [&completed, &get_range(&sepia, path, "")] {
        assert_eq!(
            resp.header("content-type"),
            Some("application/x-sepia-test")
        );
        assert_eq!(resp.header("x-representation"), Some("r1"));
    }
    assert_eq!(origin.request_count(), 2, "the second full GET was a hit");
}

#[test]
fn a_206_to_a_clients_if_range_is_not_kept_on_its_own() {
    let (origin, sepia) = reverse();
    let path = "/ranged-bare/1000/client-if-range";
    let if_range = "If-Range: \"ranged-1000\"\r\n";
    let bare = get_with(&sepia, path, "0-399", if_range);
    assert_piece(&bare, 0, 399, 1000);
    assert_eq!(bare.header("content-type"), None, "the origin left it out");
    get_range(&sepia, path, "0-99");
    assert_eq!(
        origin.request_count(),
        2,
        "nothing was kept without its fields"
    );
}

#[test]
fn an_origin_dying_during_a_completion_leaves_nothing_incomplete() {
    let (origin, sepia) = reverse();
    let path = "/ranged-dying/1000/dies";
    get_range(&sepia, path, "0-399");
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    let received = client.read_until_close();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let body_at = text.find("\r\n\r\n").expect("a head") + 4;
    assert!(
        received.len() - body_at < 1000,
        "the client saw the connection close short of the length it was promised"
    );
    // Nothing was stored: the next full GET completes again.
    let mut again = RawClient::connect(sepia.addr());
    again.set_read_timeout(Duration::from_secs(5));
    again.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    let _ = again.read_until_close();
    assert_eq!(origin.request_count(), 3);
    assert_eq!(last_range(&origin).0.as_deref(), Some("bytes=400-999"));
}

#[test]
fn pieces_kept_in_body_files_are_answered_and_completed() {
    let (origin, sepia) = reverse_with("[cache]\nsendfile_min = \"64KiB\"\n");
    let len = 400_000;
    let path = format!("/ranged/{len}/files");
    assert_piece(&get_range(&sepia, &path, "0-249999"), 0, 249_999, len);
    // The first hit moves the body into a file; the others are sent from it.
    for _ in 0..3 {
        assert_piece(
            &get_range(&sepia, &path, "123457-200000"),
            123_457,
            200_000,
            len,
        );
    }
    assert_eq!(origin.request_count(), 1);
    let whole = get_range(&sepia, &path, "");
    assert!(
        whole.body == pattern(len),
        "stored bytes read back from the file, then the origin's"
    );
    assert_eq!(
        last_range(&origin).0.as_deref(),
        Some("bytes=250000-399999")
    );
    let hit = get_range(&sepia, &path, "");
    assert!(hit.body == pattern(len));
    assert_eq!(origin.request_count(), 2);
}
