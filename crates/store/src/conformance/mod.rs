//! The conformance suite every store must pass (Envoy's cache-filter idea, DESIGN.md).
//!
//! Each test is a function generic over [`Store`] taking a factory
//! `Fn(budget_bytes, max_object_bytes) -> S`; [`conformance_suite!`] expands them into
//! named `#[test]`s for one factory. The memory store runs it (with one shard and with
//! several, see `memory_tests.rs`); a disk store adds one invocation and must pass the same.

mod fills;
mod storage;

pub(crate) use fills::*;
pub(crate) use storage::*;

use std::sync::Arc;

use bytes::Bytes;

use crate::{
    Body, BodyLength, FillError, FillReader, FillWriter, FinishOutcome, Lookup, Object, Store,
};

/// Metadata type used by the suite: a version number the tests can tell objects apart by.
pub(crate) type Meta = u32;

pub(crate) fn head(tag: &str) -> Bytes {
    Bytes::from(format!("HTTP/1.1 200 OK\r\nX-Tag: {tag}\r\n\r\n"))
}

pub(crate) fn any(_: &Object<Meta>) -> bool {
    true
}

pub(crate) fn secondary_is(secondary: &'static [u8]) -> impl Fn(&Object<Meta>) -> bool {
    move |o| o.secondary().as_ref() == secondary
}

#[track_caller]
pub(crate) fn expect_miss(lookup: Lookup<Meta>) -> FillWriter<Meta> {
    match lookup {
        Lookup::Miss(w) => w,
        other => panic!("expected Miss, got {other:?}"),
    }
}

#[track_caller]
pub(crate) fn expect_pending(lookup: Lookup<Meta>) -> FillReader<Meta> {
    match lookup {
        Lookup::Pending(r) => r,
        other => panic!("expected Pending, got {other:?}"),
    }
}

#[track_caller]
pub(crate) fn expect_hit(lookup: Lookup<Meta>) -> Arc<Object<Meta>> {
    match lookup {
        Lookup::Hit(o) => o,
        other => panic!("expected Hit, got {other:?}"),
    }
}

/// Whether `hit` is the stored object `stored` itself, or (a store that moves a body into a
/// file on its first hit) the same response with that body now in a file.
pub(crate) fn is_stored_object(hit: &Arc<Object<Meta>>, stored: &Arc<Object<Meta>>) -> bool {
    Arc::ptr_eq(hit, stored)
        || (matches!(stored.body(), Body::Chunks(_))
            && matches!(hit.body(), Body::File(_))
            && hit.head() == stored.head()
            && hit.meta() == stored.meta()
            && hit.secondary() == stored.secondary()
            && body_of(hit) == body_of(stored))
}

pub(crate) fn body_of(object: &Object<Meta>) -> Vec<u8> {
    object
        .body()
        .to_chunks()
        .expect("a stored body reads back")
        .iter()
        .flat_map(|c| c.iter().copied())
        .collect()
}

/// Deterministic body bytes of `len`, different per `seed`.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// Fills `writer` with `body` in `chunk`-sized pieces and a correct Content-Length.
pub(crate) fn write_body(
    writer: FillWriter<Meta>,
    tag: &str,
    meta: Meta,
    secondary: &[u8],
    body: &[u8],
    chunk: usize,
) -> FinishOutcome<Meta> {
    let length = BodyLength::Known(body.len() as u64);
    let mut w = writer.publish_head(head(tag), meta, Bytes::copy_from_slice(secondary), length);
    for piece in body.chunks(chunk) {
        w.append(Bytes::copy_from_slice(piece));
    }
    w.finish().expect("length matches")
}

/// Misses on `key`/`secondary` and stores `body`; returns what `finish` said.
pub(crate) fn store_object<S: Store<Meta>>(
    store: &S,
    key: &[u8],
    secondary: &'static [u8],
    body: &[u8],
    meta: Meta,
) -> FinishOutcome<Meta> {
    let writer = expect_miss(store.lookup(key, &secondary_is(secondary)));
    write_body(writer, "t", meta, secondary, body, 1000)
}

#[track_caller]
pub(crate) fn expect_stored(outcome: FinishOutcome<Meta>) -> Arc<Object<Meta>> {
    match outcome {
        FinishOutcome::Stored(o) => o,
        other => panic!("expected Stored, got {other:?}"),
    }
}

/// Reads a fill to its end; returns the body and how it ended.
pub(crate) async fn read_all(reader: &mut FillReader<Meta>) -> (Vec<u8>, Result<(), FillError>) {
    let mut body = Vec::new();
    loop {
        match reader.next_chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => return (body, Ok(())),
            Err(e) => return (body, Err(e)),
        }
    }
}

/// A multi-threaded runtime: the collapsing tests must hold with real parallelism.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Expands the suite into `#[test]`s for one store factory `Fn(u64, u64) -> S`.
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance::conformance_suite!(@tests $make;
            hit_after_fill,
            budget_respected_under_many_inserts,
            budget_respected_under_concurrent_inserts,
            eviction_prefers_one_hit_wonders,
            too_large_object_streamed_but_not_stored,
            known_length_too_large_not_stored,
            vary_variants_side_by_side,
            purge_removes_all_variants,
            purge_during_fill_prevents_commit,
            remove_variant_removes_only_that_variant,
            update_after_304_shares_body,
            lookup_no_fill_never_starts_a_fill,
            refresh_replaces_the_same_variant,
            hundred_readers_share_one_fill,
            abort_mid_body_aborts_every_reader,
            length_mismatch_aborts_and_stores_nothing,
            not_storable_releases_waiters,
            dropping_the_writer_aborts,
            late_reader_gets_the_whole_body,
            fill_of_another_variant_is_not_joined,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::$name($make);
            }
        )*
    };
}

pub(crate) use conformance_suite;
