use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use bytes::BytesMut;
use std::fs::File;

fn data_file(len: u32) -> (Arc<File>, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&data).unwrap();
    (Arc::new(f), data)
}

/// A ring, or `None` (said) where io_uring is refused here: a container's seccomp profile
/// (Docker's blocks it), `kernel.io_uring_disabled`. Sepia then reads with threads.
fn ring(depth: u32, queued: usize, bytes: usize) -> Option<ReadRing> {
    match ReadRing::new(depth, queued, bytes) {
        Ok(ring) => Some(ring),
        Err(e) => {
            println!("SKIPPED: io_uring refused here ({e})");
            None
        }
    }
}

type Answer = (u64, usize, io::Result<BytesMut>);

fn read(file: &Arc<File>, at: u64, len: usize, tx: &mpsc::Sender<Answer>) -> Read {
    let tx = tx.clone();
    Read {
        file: Arc::clone(file),
        at,
        len,
        need: len,
        align: 1,
        fallback: None,
        done: Box::new(move |r| {
            let _ = tx.send((at, len, r));
        }),
    }
}

fn recv(rx: &mpsc::Receiver<Answer>) -> Answer {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("every read completes")
}

#[test]
fn reads_return_exactly_their_ranges_with_more_reads_than_the_depth() {
    let (file, data) = data_file(300_000);
    let Some(ring) = ring(4, 1000, 1 << 20) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let ranges: Vec<(u64, usize)> = (0..200)
        .map(|i| ((i * 1_337) % 250_000, 1 + (i as usize * 97) % 40_000))
        .collect();
    for &(at, len) in &ranges {
        ring.submit(read(&file, at, len, &tx));
    }
    for _ in &ranges {
        let (at, len, r) = recv(&rx);
        let b = r.unwrap();
        assert_eq!(&b[..], &data[at as usize..at as usize + len], "{at}+{len}");
    }
}

#[test]
fn a_read_past_the_end_of_the_file_fails() {
    let (file, _) = data_file(10_000);
    let Some(ring) = ring(8, 10, 1 << 20) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    ring.submit(read(&file, 9_000, 2_000, &tx));
    let e = recv(&rx).2.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    ring.submit(read(&file, 0, 0, &tx));
    assert_eq!(recv(&rx).2.unwrap().len(), 0, "an empty read is empty");
    // Past the end, but only after the bytes needed: what there is.
    let mut r = read(&file, 9_000, 2_000, &tx);
    r.need = 1_000;
    ring.submit(r);
    assert_eq!(recv(&rx).2.unwrap().len(), 1_000);
    let mut r = read(&file, 9_000, 2_000, &tx);
    r.need = 1_001;
    ring.submit(r);
    assert_eq!(
        recv(&rx).2.unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
}

#[test]
fn an_aligned_read_gets_an_aligned_buffer_and_reads_past_the_page_cache() {
    // /var/tmp is a disk file system where there is one; tmpfs refuses O_DIRECT.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    use std::os::unix::fs::OpenOptionsExt;
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(&path);
    let Ok(direct) = direct else {
        return; // no O_DIRECT here: nothing to check
    };
    let file = Arc::new(direct);
    let Some(ring) = ring(8, 10, 1 << 20) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let buffered = Arc::new(File::open(&path).unwrap());
    let mut r = read(&file, 8192, 65_536, &tx);
    (r.align, r.fallback) = (4096, Some(Arc::clone(&buffered)));
    ring.submit(r);
    let (_, _, b) = recv(&rx);
    match b {
        Ok(b) => {
            assert_eq!(b.as_ptr().align_offset(4096), 0);
            assert_eq!(&b[..], &data[8192..8192 + 65_536]);
        }
        Err(e) => panic!("{e}"),
    }
    // The file's last bytes (200,000 is not a multiple of 4096): the whole blocks around
    // them run past its end.
    let mut r = read(&file, 196_608, 8192, &tx);
    (r.align, r.need, r.fallback) = (4096, 200_000 - 196_608, Some(buffered));
    ring.submit(r);
    let b = recv(&rx).2.expect("read directly, or through the fallback");
    assert_eq!(&b[..], &data[196_608..]);
    // An unaligned offset: the kernel refuses the direct read, the fallback reads it.
    let mut r = read(&file, 100, 4096, &tx);
    (r.align, r.fallback) = (4096, Some(Arc::new(File::open(&path).unwrap())));
    ring.submit(r);
    let b = recv(&rx).2.expect("read through the fallback");
    assert_eq!(&b[..], &data[100..4196]);
}

#[test]
fn dropping_the_ring_answers_every_read_and_a_panicking_callback_is_contained() {
    let (file, data) = data_file(100_000);
    let Some(ring) = ring(2, 1000, 1 << 20) else {
        return;
    };
    ring.submit(Read {
        file: Arc::clone(&file),
        at: 0,
        len: 10,
        need: 10,
        align: 1,
        fallback: None,
        done: Box::new(|_| panic!("a callback that panics")),
    });
    let (tx, rx) = mpsc::channel();
    for i in 0..100 {
        ring.submit(read(&file, i * 500, 4096, &tx));
    }
    drop(ring);
    drop(tx);
    let mut answered = 0;
    while let Ok((at, len, r)) = rx.recv_timeout(Duration::from_secs(10)) {
        answered += 1;
        match r {
            Ok(b) => assert_eq!(&b[..], &data[at as usize..at as usize + len]),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::Interrupted),
        }
    }
    assert_eq!(
        answered, 100,
        "each read answered once, read or interrupted"
    );
}

#[test]
fn reads_submitted_from_many_threads_all_complete() {
    let (file, data) = data_file(1 << 20);
    let Some(ring) = ring(16, 100_000, 1 << 20) else {
        return;
    };
    let ring = Arc::new(ring);
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (ring, file, tx) = (Arc::clone(&ring), Arc::clone(&file), tx.clone());
            std::thread::spawn(move || {
                for i in 0..2_000u64 {
                    let at = (i * 4096 + t * 1_000) % ((1 << 20) - 5_000);
                    ring.submit(read(&file, at, 4_096, &tx));
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for _ in 0..8_000 {
        let (at, len, r) = recv(&rx);
        assert_eq!(&r.unwrap()[..], &data[at as usize..at as usize + len]);
    }
}

#[test]
fn malformed_reads_fail_at_once_and_a_byte_budget_still_lets_one_big_read_through() {
    let (file, data) = data_file(300_000);
    let Some(ring) = ring(8, 100, 1_000) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    for (align, need) in [(3, 10), (1 << 21, 10), (1, 11)] {
        let mut r = read(&file, 0, 10, &tx);
        (r.align, r.need) = (align, need);
        ring.submit(r);
        assert_eq!(recv(&rx).2.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
    // Each read is over the 1,000-byte budget: they go one at a time, all of them.
    for i in 0..20u64 {
        ring.submit(read(&file, i * 5_000, 50_000, &tx));
    }
    for _ in 0..20 {
        let (at, len, r) = recv(&rx);
        assert_eq!(&r.unwrap()[..], &data[at as usize..at as usize + len]);
    }
    assert_eq!(ring.completed(), 20);
}
