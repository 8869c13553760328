//! Conformance: streaming fills and request collapsing.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Barrier;

use super::*;
use crate::{BodyLength, FillError, FinishError, FinishOutcome, Lookup, NotStoredReason, Store};

pub(crate) fn hundred_readers_share_one_fill<S: Store<Meta> + 'static>(
    make: impl Fn(u64, u64) -> S,
) {
    const READERS: usize = 100;
    let store = Arc::new(make(1 << 24, 1 << 22));
    let expected = pattern(256 * 1024, 9);
    runtime().block_on(async {
        let writer = expect_miss(store.lookup(b"/hot", &any));
        let attached = Arc::new(Barrier::new(READERS + 1));
        let tasks: Vec<_> = (0..READERS)
            .map(|_| {
                let store = Arc::clone(&store);
                let attached = Arc::clone(&attached);
                tokio::spawn(async move {
                    let mut reader = expect_pending(store.lookup(b"/hot", &any));
                    attached.wait().await;
                    let head = reader.head().await.expect("head published");
                    let (body, end) = read_all(&mut reader).await;
                    (head.object.head().clone(), body, end)
                })
            })
            .collect();
        attached.wait().await;
        let mut w = writer.publish_head(
            head("hot"),
            1,
            Bytes::new(),
            BodyLength::Known(expected.len() as u64),
        );
        for piece in expected.chunks(4096) {
            w.append(Bytes::copy_from_slice(piece));
            tokio::task::yield_now().await;
        }
        expect_stored(w.finish().expect("complete"));
        for task in tasks {
            let (h, body, end) = task.await.expect("reader task");
            assert_eq!(h, head("hot"));
            assert_eq!(end, Ok(()), "complete fill ends cleanly");
            assert!(
                body == expected,
                "every reader gets the identical complete body"
            );
        }
    });
    let s = store.stats();
    assert_eq!(
        (s.misses, s.collapsed),
        (1, READERS as u64),
        "exactly one writer"
    );
    assert_eq!(body_of(&expect_hit(store.lookup(b"/hot", &any))), expected);
}

pub(crate) fn too_large_object_streamed_but_not_stored<S: Store<Meta> + 'static>(
    make: impl Fn(u64, u64) -> S,
) {
    let store = Arc::new(make(1 << 20, 4096));
    let expected = pattern(40 * 1024, 4);
    runtime().block_on(async {
        let writer = expect_miss(store.lookup(b"/big", &any));
        let mut readers: Vec<_> = (0..3)
            .map(|_| expect_pending(store.lookup(b"/big", &any)))
            .collect();
        let tasks: Vec<_> = readers
            .drain(..)
            .map(|mut r| tokio::spawn(async move { read_all(&mut r).await }))
            .collect();
        let mut w = writer.publish_head(head("big"), 0, Bytes::new(), BodyLength::Unknown);
        for (i, piece) in expected.chunks(1024).enumerate() {
            w.append(Bytes::copy_from_slice(piece));
            if i == 8 {
                assert!(w.is_too_big(), "9 KiB is over the 4 KiB limit");
                // Requests arriving now cannot get the start of the body: they fetch.
                drop(expect_miss(store.lookup(b"/big", &any)));
            }
            tokio::task::yield_now().await;
        }
        assert!(matches!(
            w.finish(),
            Ok(FinishOutcome::NotStored(NotStoredReason::TooBig))
        ));
        for task in tasks {
            let (body, end) = task.await.expect("reader task");
            assert_eq!(end, Ok(()));
            assert!(
                body == expected,
                "attached readers get the full too-big body"
            );
        }
    });
    assert!(
        store.lookup_no_fill(b"/big", &any).is_none(),
        "too big: never stored"
    );
    assert_eq!(store.stats().bytes, 0);
}

pub(crate) fn abort_mid_body_aborts_every_reader<S: Store<Meta> + 'static>(
    make: impl Fn(u64, u64) -> S,
) {
    let store = Arc::new(make(1 << 20, 1 << 18));
    runtime().block_on(async {
        let writer = expect_miss(store.lookup(b"/a", &any));
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let mut r = expect_pending(store.lookup(b"/a", &any));
                tokio::spawn(async move { read_all(&mut r).await })
            })
            .collect();
        let mut w = writer.publish_head(head("a"), 0, Bytes::new(), BodyLength::Known(1000));
        w.append(Bytes::from_static(b"first"));
        tokio::task::yield_now().await;
        w.append(Bytes::from_static(b"second"));
        w.abort(); // origin died mid-body
        for task in tasks {
            let (body, end) = task.await.expect("reader task");
            assert_eq!(end, Err(FillError::Aborted), "never a clean-looking end");
            assert!(
                b"firstsecond".starts_with(&body),
                "a prefix of what was sent: {body:?}"
            );
        }
    });
    assert!(
        store.lookup_no_fill(b"/a", &any).is_none(),
        "nothing incomplete is stored"
    );
    assert!(
        matches!(store.lookup(b"/a", &any), Lookup::Miss(_)),
        "next request fetches again"
    );
    assert!(store.stats().aborted_fills >= 1);
}

pub(crate) fn length_mismatch_aborts_and_stores_nothing<S: Store<Meta>>(
    make: impl Fn(u64, u64) -> S,
) {
    let store = make(1 << 20, 1 << 18);
    for (promised, sent) in [(10u64, &b"short"[..]), (2, &b"longer"[..])] {
        let writer = expect_miss(store.lookup(b"/m", &any));
        let mut reader = expect_pending(store.lookup(b"/m", &any));
        let mut w = writer.publish_head(head("m"), 0, Bytes::new(), BodyLength::Known(promised));
        w.append(Bytes::from_static(sent));
        let expected = FinishError::LengthMismatch {
            expected: promised,
            received: sent.len() as u64,
        };
        assert_eq!(w.finish().err(), Some(expected));
        let (_, end) = runtime().block_on(read_all(&mut reader));
        assert_eq!(end, Err(FillError::Aborted));
        assert!(store.lookup_no_fill(b"/m", &any).is_none());
    }
    assert_eq!(store.stats().bytes, 0);
}

pub(crate) fn not_storable_releases_waiters<S: Store<Meta> + 'static>(
    make: impl Fn(u64, u64) -> S,
) {
    let store = Arc::new(make(1 << 20, 1 << 18));
    runtime().block_on(async {
        let writer = expect_miss(store.lookup(b"/private", &any));
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let mut r = expect_pending(store.lookup(b"/private", &any));
                tokio::spawn(async move { r.head().await.map(|_| ()) })
            })
            .collect();
        tokio::task::yield_now().await;
        writer.release(); // e.g. Cache-Control: private
        for task in tasks {
            assert_eq!(task.await.expect("reader task"), Err(FillError::Released));
        }
    });
    assert!(
        matches!(store.lookup(b"/private", &any), Lookup::Miss(_)),
        "released fill is gone"
    );
    assert_eq!(store.stats().released_fills, 1);
}

pub(crate) fn dropping_the_writer_aborts<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let rt = runtime();
    // Before the head.
    let writer = expect_miss(store.lookup(b"/d", &any));
    let mut reader = expect_pending(store.lookup(b"/d", &any));
    drop(writer);
    assert_eq!(rt.block_on(reader.head()).err(), Some(FillError::Aborted));
    // During the body.
    let writer = expect_miss(store.lookup(b"/d", &any));
    let mut reader = expect_pending(store.lookup(b"/d", &any));
    let mut w = writer.publish_head(head("d"), 0, Bytes::new(), BodyLength::Unknown);
    w.append(Bytes::from_static(b"part"));
    drop(w);
    assert_eq!(
        rt.block_on(read_all(&mut reader)).1,
        Err(FillError::Aborted)
    );
    assert!(store.lookup_no_fill(b"/d", &any).is_none());
    assert!(matches!(store.lookup(b"/d", &any), Lookup::Miss(_)));
}

pub(crate) fn late_reader_gets_the_whole_body<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let writer = expect_miss(store.lookup(b"/late", &any));
    let mut w = writer.publish_head(head("late"), 0, Bytes::new(), BodyLength::Known(15));
    for piece in [&b"aaa"[..], b"bbb", b"ccc"] {
        w.append(Bytes::from_static(piece));
    }
    let mut reader = expect_pending(store.lookup(b"/late", &any));
    let rt = runtime();
    let head_seen = rt.block_on(reader.head()).expect("published");
    assert_eq!(head_seen.length, BodyLength::Known(15));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend_from_slice(&rt.block_on(reader.next_chunk()).unwrap().unwrap());
    }
    assert_eq!(got, b"aaabbbccc", "starts from the first byte");
    w.append(Bytes::from_static(b"ddd"));
    w.append(Bytes::from_static(b"eee"));
    expect_stored(w.finish().unwrap());
    let (rest, end) = rt.block_on(read_all(&mut reader));
    assert_eq!((rest, end), (b"dddeee".to_vec(), Ok(())));
}

pub(crate) fn fill_of_another_variant_is_not_joined<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let writer = expect_miss(store.lookup(b"/vary", &secondary_is(b"gzip")));
    let w = writer.publish_head(
        head("gz"),
        0,
        Bytes::from_static(b"gzip"),
        BodyLength::Known(2),
    );
    // The published head says "gzip": a request selecting "br" must fetch on its own...
    let br_writer = expect_miss(store.lookup(b"/vary", &secondary_is(b"br")));
    // ...while a "gzip" request shares the fill.
    drop(expect_pending(
        store.lookup(b"/vary", &secondary_is(b"gzip")),
    ));
    let mut w = w;
    w.append(Bytes::from_static(b"gz"));
    expect_stored(w.finish().unwrap());
    expect_stored(write_body(br_writer, "br", 0, b"br", b"brotli", 3));
    assert_eq!(
        body_of(&expect_hit(store.lookup(b"/vary", &secondary_is(b"gzip")))),
        b"gz"
    );
    assert_eq!(
        body_of(&expect_hit(store.lookup(b"/vary", &secondary_is(b"br")))),
        b"brotli"
    );
}
