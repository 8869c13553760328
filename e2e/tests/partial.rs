//! Partial content (RFC 9111 §3.3–3.4): a single-range `206` with a strong validator is kept as
//! a piece of its representation, answers later ranges it holds, is combined with pieces of the
//! same validator, and is completed by asking the origin only for the bytes it lacks.

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{curl, pattern, Origin, RawClient, Response, Sepia};

/// A GET of `path` with `Range: bytes=RANGE` (none when empty).
fn get_range(sepia: &Sepia, path: &str, range: &str) -> Response {
    let range = if range.is_empty() {
        String::new()
    } else {
        format!("Range: bytes={range}\r\n")
    };
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n{range}\r\n").as_bytes());
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
