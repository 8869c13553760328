//! Fill mechanics against a recording target (the store-level behaviour is covered by the
//! conformance suite).

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::*;
use crate::object::Body;

/// A target that records what the fill asked of it.
struct Recorder {
    max: u64,
    commits: Mutex<Vec<Bytes>>,
    detached: Mutex<Vec<DetachReason>>,
}

impl Recorder {
    fn new(max: u64) -> Arc<Self> {
        Arc::new(Recorder {
            max,
            commits: Mutex::new(Vec::new()),
            detached: Mutex::new(Vec::new()),
        })
    }
    fn committed_bodies(&self) -> Vec<Bytes> {
        self.commits.lock().unwrap().clone()
    }
    fn detached(&self) -> Vec<DetachReason> {
        self.detached.lock().unwrap().clone()
    }
}

impl FillTarget<u8> for Recorder {
    fn commit(&self, _ticket: &FillTicket, object: Object<u8>) -> FinishOutcome<u8> {
        let body: Vec<u8> = object
            .body()
            .to_chunks()
            .unwrap()
            .iter()
            .flat_map(|c| c.iter().copied())
            .collect();
        assert_eq!(body.len() as u64, object.body_len());
        self.commits.lock().unwrap().push(Bytes::from(body));
        FinishOutcome::Stored(Arc::new(object))
    }
    fn detach(&self, _ticket: &FillTicket, reason: DetachReason) {
        self.detached.lock().unwrap().push(reason);
    }
    fn max_object_bytes(&self) -> u64 {
        self.max
    }
}

fn start(target: &Arc<Recorder>) -> (Arc<FillShared<u8>>, FillWriter<u8>) {
    let shared = FillShared::new();
    let ticket = FillTicket {
        primary: Bytes::from_static(b"/k"),
        hash: 1,
        id: 1,
    };
    let t: Arc<dyn FillTarget<u8>> = Arc::clone(target) as Arc<dyn FillTarget<u8>>;
    (Arc::clone(&shared), FillWriter::new(shared, t, ticket))
}

fn join(shared: &Arc<FillShared<u8>>) -> FillReader<u8> {
    match shared.try_join(&|_| true) {
        Join::Joined(r) => r,
        Join::Skip => panic!("fill should be joinable"),
    }
}

fn head() -> Bytes {
    Bytes::from_static(b"HTTP/1.1 200 OK\r\n\r\n")
}

/// Reads until the end or an error; returns the bytes read and how it ended.
async fn read_all(r: &mut FillReader<u8>) -> (Vec<u8>, Result<(), FillError>) {
    let mut body = Vec::new();
    loop {
        match r.next_chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            Ok(None) => return (body, Ok(())),
            Err(e) => return (body, Err(e)),
        }
    }
}

#[tokio::test]
async fn reader_sees_head_then_body_then_clean_end() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    let mut body = writer.publish_head(head(), 5, Bytes::from_static(b"v"), BodyLength::Known(6));
    let h = reader.head().await.expect("head");
    assert_eq!(h.object.head(), &head());
    assert_eq!(
        (*h.object.meta(), h.object.secondary().as_ref()),
        (5, &b"v"[..])
    );
    assert_eq!(h.length, BodyLength::Known(6));
    assert!(
        matches!(h.object.body(), Body::Chunks(c) if c.is_empty()),
        "provisional object has no body"
    );
    body.append(Bytes::from_static(b"abc"));
    body.append(Bytes::new()); // ignored
    body.append(Bytes::from_static(b"def"));
    assert!(matches!(body.finish(), Ok(FinishOutcome::Stored(_))));
    assert_eq!(read_all(&mut reader).await, (b"abcdef".to_vec(), Ok(())));
    assert_eq!(
        target.committed_bodies(),
        vec![Bytes::from_static(b"abcdef")]
    );
    assert!(target.detached().is_empty());
}

#[tokio::test]
async fn waiting_reader_is_woken_by_the_writer_not_by_polling() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    let task = tokio::spawn(async move { read_all(&mut reader).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !task.is_finished(),
        "reader must wait for the head and body"
    );
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Unknown);
    body.append(Bytes::from_static(b"x"));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !task.is_finished(),
        "caught-up reader waits for the next event"
    );
    body.append(Bytes::from_static(b"y"));
    body.finish().expect("unknown length always matches");
    assert_eq!(task.await.unwrap(), (b"xy".to_vec(), Ok(())));
}

#[tokio::test]
async fn abort_mid_body_gives_every_reader_an_error_never_a_clean_end() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    let mut ahead = join(&shared);
    let mut behind = join(&shared);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Known(100));
    body.append(Bytes::from_static(b"12"));
    body.append(Bytes::from_static(b"34"));
    assert_eq!(
        ahead.next_chunk().await,
        Ok(Some(Bytes::from_static(b"12")))
    );
    body.abort();
    assert_eq!(ahead.next_chunk().await, Err(FillError::Aborted));
    assert_eq!(
        read_all(&mut behind).await,
        (Vec::new(), Err(FillError::Aborted))
    );
    assert!(target.committed_bodies().is_empty());
    assert_eq!(target.detached(), vec![DetachReason::Aborted]);
}

#[tokio::test]
async fn length_mismatch_aborts_in_both_directions() {
    for (promised, sent) in [(10u64, &b"short"[..]), (3, &b"toolong"[..])] {
        let target = Recorder::new(1 << 20);
        let (shared, writer) = start(&target);
        let mut reader = join(&shared);
        let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Known(promised));
        body.append(Bytes::copy_from_slice(sent));
        let err = body.finish().expect_err("length mismatch");
        assert_eq!(
            err,
            FinishError::LengthMismatch {
                expected: promised,
                received: sent.len() as u64
            }
        );
        assert_eq!(read_all(&mut reader).await.1, Err(FillError::Aborted));
        assert!(target.committed_bodies().is_empty());
    }
}

#[tokio::test]
async fn release_before_head_frees_waiters() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    let mut for_head = join(&shared);
    let mut for_body = join(&shared);
    let waiting = tokio::spawn(async move { for_head.head().await.map(|_| ()) });
    tokio::task::yield_now().await;
    writer.release();
    assert_eq!(waiting.await.unwrap(), Err(FillError::Released));
    assert_eq!(for_body.next_chunk().await, Err(FillError::Released));
    assert!(matches!(shared.try_join(&|_| true), Join::Skip));
    assert_eq!(target.detached(), vec![DetachReason::Released]);
}

#[tokio::test]
async fn dropping_either_writer_aborts() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    drop(writer);
    assert_eq!(reader.head().await.err(), Some(FillError::Aborted));

    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Unknown);
    body.append(Bytes::from_static(b"partial"));
    drop(body);
    assert_eq!(
        read_all(&mut reader).await,
        (Vec::new(), Err(FillError::Aborted))
    );
    assert_eq!(
        target.detached(),
        vec![DetachReason::Aborted, DetachReason::Aborted]
    );
    assert!(target.committed_bodies().is_empty());
}

#[tokio::test]
async fn oversize_keeps_streaming_trims_what_was_read_and_is_not_committed() {
    let max = crate::object::accounted_size(head().len(), 0, 0, 2) + 100;
    let target = Recorder::new(max);
    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Unknown);
    let mut expected = Vec::new();
    for i in 0..20u8 {
        let chunk = Bytes::from(vec![i; 30]);
        expected.extend_from_slice(&chunk);
        body.append(chunk);
        // The reader keeps up: once oversize, read chunks are released at the next append.
        assert_eq!(reader.next_chunk().await.unwrap().unwrap().len(), 30);
    }
    assert!(body.is_too_big());
    assert!(
        body.buffered_chunks() <= 1,
        "read chunks must not be retained: {}",
        body.buffered_chunks()
    );
    assert!(
        matches!(shared.try_join(&|_| true), Join::Skip),
        "too-big fill is not joinable"
    );
    assert!(matches!(
        body.finish(),
        Ok(FinishOutcome::NotStored(NotStoredReason::TooBig))
    ));
    assert_eq!(
        reader.next_chunk().await,
        Ok(None),
        "complete body ends cleanly"
    );
    assert!(target.committed_bodies().is_empty());
    assert_eq!(target.detached(), vec![DetachReason::TooBig]);
    assert_eq!(expected.len(), 600);
}

#[tokio::test]
async fn oversize_slow_reader_still_gets_every_byte() {
    let max = crate::object::accounted_size(head().len(), 0, 0, 2) + 50;
    let target = Recorder::new(max);
    let (shared, writer) = start(&target);
    let mut fast = join(&shared);
    let mut slow = join(&shared);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Unknown);
    let mut expected = Vec::new();
    for i in 0..10u8 {
        let chunk = Bytes::from(vec![i; 25]);
        expected.extend_from_slice(&chunk);
        body.append(chunk);
        fast.next_chunk().await.unwrap().unwrap();
    }
    body.finish().unwrap();
    assert_eq!(read_all(&mut fast).await, (Vec::new(), Ok(())));
    assert_eq!(read_all(&mut slow).await, (expected, Ok(())));
}

#[test]
fn oversize_without_readers_buffers_nothing() {
    let target = Recorder::new(crate::object::accounted_size(head().len(), 0, 0, 2) + 10);
    let (_shared, writer) = start(&target);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Unknown);
    for _ in 0..100 {
        body.append(Bytes::from_static(b"0123456789"));
    }
    assert!(body.is_too_big());
    assert_eq!(body.buffered_chunks(), 0);
    assert_eq!(body.received(), 1000);
}

#[tokio::test]
async fn known_length_over_the_limit_is_too_big_from_the_head() {
    let target = Recorder::new(1000);
    let (shared, writer) = start(&target);
    let mut reader = join(&shared);
    let mut body = writer.publish_head(head(), 0, Bytes::new(), BodyLength::Known(5000));
    assert!(body.is_too_big());
    assert_eq!(target.detached(), vec![DetachReason::TooBig]);
    body.append(Bytes::from(vec![7u8; 5000]));
    assert!(matches!(
        body.finish(),
        Ok(FinishOutcome::NotStored(NotStoredReason::TooBig))
    ));
    let (got, end) = read_all(&mut reader).await;
    assert_eq!((got.len(), end), (5000, Ok(())));
}

#[test]
fn join_respects_selector_and_phase() {
    let target = Recorder::new(1 << 20);
    let (shared, writer) = start(&target);
    // Before the head any selector joins (the reader checks the head later).
    let early = join(&shared);
    let body = writer.publish_head(head(), 0, Bytes::from_static(b"gzip"), BodyLength::Unknown);
    let gzip = |o: &Object<u8>| o.secondary().as_ref() == b"gzip";
    let br = |o: &Object<u8>| o.secondary().as_ref() == b"br";
    assert!(matches!(shared.try_join(&br), Join::Skip));
    let late = match shared.try_join(&gzip) {
        Join::Joined(r) => r,
        Join::Skip => panic!("matching head must be joinable"),
    };
    assert_ne!(early.slot, late.slot);
    drop(early);
    let reused = join(&shared);
    assert_eq!(reused.slot, 0, "freed reader slot is reused");
    body.finish().unwrap();
    assert!(
        matches!(shared.try_join(&gzip), Join::Skip),
        "finished fill is not joinable"
    );
}
