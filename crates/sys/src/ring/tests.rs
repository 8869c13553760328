use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use bytes::Bytes;
use std::fs::File;

fn data_file(len: u32) -> (Arc<File>, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&data).unwrap();
    (Arc::new(f), data)
}

/// A ring driven by its thread.
struct Driven {
    ring: Arc<ReadRing>,
    _driver: ThreadDriver,
}

impl std::ops::Deref for Driven {
    type Target = ReadRing;
    fn deref(&self) -> &ReadRing {
        &self.ring
    }
}

/// A ring, or `None` (said) where io_uring is refused here: a container's seccomp profile
/// (Docker's blocks it), `kernel.io_uring_disabled`. Sepia then reads with threads.
/// `path` opened for `O_DIRECT` reads (refused on tmpfs: callers skip what needs it).
fn open_direct(path: &std::path::Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)
}

fn undriven(depth: u32, queued: usize, bytes: usize) -> Option<ReadRing> {
    match ReadRing::new(depth, queued, bytes) {
        Ok(ring) => Some(ring),
        Err(e) => {
            println!("SKIPPED: io_uring refused here ({e})");
            None
        }
    }
}

fn ring(depth: u32, queued: usize, bytes: usize) -> Option<Driven> {
    let ring = Arc::new(undriven(depth, queued, bytes)?);
    let driver = ThreadDriver::start(&ring).unwrap();
    Some(Driven {
        ring,
        _driver: driver,
    })
}

type Answer = (u64, usize, io::Result<Bytes>);

fn read(file: &Arc<File>, at: u64, len: usize, tx: &mpsc::Sender<Answer>) -> Read {
    let tx = tx.clone();
    read_then(
        file,
        at,
        len,
        Box::new(move |r| {
            let _ = tx.send((at, len, r));
        }),
    )
}

/// `len` bytes at `at`, into any buffer, answered to `done`.
fn read_then(file: &Arc<File>, at: u64, len: usize, done: Done) -> Read {
    Read {
        file: Arc::clone(file),
        at,
        len,
        need: len,
        align: 1,
        fallback: None,
        done,
    }
}

/// The next `n` answers, each exactly the bytes of its range of `data`.
fn expect_exact(rx: &mpsc::Receiver<Answer>, data: &[u8], n: usize) {
    for _ in 0..n {
        let (at, len, r) = recv(rx);
        assert_eq!(&r.unwrap()[..], &data[at as usize..at as usize + len]);
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
    let Ok(direct) = open_direct(&path) else {
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
    let panics = Box::new(|_| panic!("a callback that panics"));
    ring.submit(read_then(&file, 0, 10, panics));
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
    let Some(driven) = ring(16, 100_000, 1 << 20) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (ring, file, tx) = (Arc::clone(&driven.ring), Arc::clone(&file), tx.clone());
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
    expect_exact(&rx, &data, 8_000);
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
    expect_exact(&rx, &data, 20);
    assert_eq!(ring.completed(), 20);
}

/// The event loop's way: nobody else drives the ring; the descriptor says when to.
#[test]
fn a_ring_driven_by_its_caller_runs_callbacks_on_the_driving_thread() {
    let (file, data) = data_file(100_000);
    let Some(ring) = undriven(4, 100, 1 << 20) else {
        return;
    };
    let fd = ring.poll_fd().unwrap();
    let (tx, rx) = mpsc::channel();
    for i in 0..10u64 {
        ring.submit(read(&file, i * 7_000, 5_000, &tx));
    }
    assert_eq!(ring.completed(), 0, "nothing completes undriven");
    assert!(rx.try_recv().is_err());
    let mut got = 0;
    let me = std::thread::current().id();
    while got < 10 {
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let ten_s = rustix::event::Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        };
        let n = rustix::event::poll(&mut fds, Some(&ten_s)).unwrap();
        assert_eq!(n, 1, "the descriptor is readable when reads complete");
        let (n, _) = ring.drive(3);
        assert!(n <= 3, "at most the number asked for");
        got += n;
        while let Ok((at, len, r)) = rx.try_recv() {
            assert_eq!(&r.unwrap()[..], &data[at as usize..at as usize + len]);
        }
    }
    assert_eq!(ring.completed(), 10);
    assert!(!ring.wants_retry());
    // Callbacks run where `drive` is called.
    let (tx, rx) = mpsc::channel();
    let on_thread = Box::new(move |_| tx.send(std::thread::current().id()).unwrap());
    ring.submit(read_then(&file, 0, 10, on_thread));
    while ring.drive(usize::MAX).0 == 0 {
        std::thread::yield_now();
    }
    assert_eq!(rx.recv().unwrap(), me);
}

/// A ring driven by a task on a current-thread runtime (the proxy's way).
fn on_a_runtime() -> Option<(Arc<ReadRing>, tokio::runtime::Runtime, RingDriver)> {
    let ring = Arc::new(undriven(8, 1000, 1 << 20)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let driver = RingDriver::start(&ring, Some(rt.handle())).unwrap();
    Some((ring, rt, driver))
}

/// The proxy's way: a task on its runtime drives the ring, and callbacks run on the
/// runtime's thread.
#[test]
fn a_ring_driven_by_a_runtime_completes_reads_on_its_worker() {
    let (file, data) = data_file(200_000);
    let Some((ring, rt, driver)) = on_a_runtime() else {
        return;
    };
    let (worker, got) = rt.block_on(async {
        let worker = std::thread::current().id();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..100u64 {
            let tx = tx.clone();
            let done = Box::new(move |r: io::Result<Bytes>| {
                let _ = tx.send((i, r, std::thread::current().id()));
            });
            ring.submit(read_then(&file, i * 1_000, 3_000, done));
        }
        drop(tx);
        let mut got = Vec::new();
        while let Some(answer) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("every read completes")
        {
            got.push(answer);
        }
        (worker, got)
    });
    assert_eq!(got.len(), 100);
    for (i, r, thread) in got {
        let at = i as usize * 1_000;
        assert_eq!(&r.unwrap()[..], &data[at..at + 3_000]);
        assert_eq!(thread, worker, "the callback ran on the runtime's thread");
    }
    drop(driver);
    drop(rt);
}

/// Several workers submit; one of them drives; every read completes.
#[test]
fn a_ring_driven_on_a_multi_thread_runtime_completes_reads_from_every_worker() {
    let (file, data) = data_file(1 << 20);
    let Some(ring) = undriven(16, 100_000, 1 << 20) else {
        return;
    };
    let ring = Arc::new(ring);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _driver = RingDriver::start(&ring, Some(rt.handle())).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.block_on(async {
        let tasks: Vec<_> = (0..8u64)
            .map(|t| {
                let (ring, file, tx) = (Arc::clone(&ring), Arc::clone(&file), tx.clone());
                tokio::spawn(async move {
                    for i in 0..200u64 {
                        let at = (t * 100_000 + i * 4_096) % ((1 << 20) - 5_000);
                        ring.submit(read(&file, at, 4_096, &tx));
                        if i % 20 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    expect_exact(&rx, &data, 1_600);
}

/// A driver whose runtime goes away leaves no read hanging: a thread takes over, and
/// reads submitted before and after complete.
#[test]
fn a_ring_whose_runtime_shut_down_is_driven_by_a_thread_from_then_on() {
    let (file, data) = data_file(10_000);
    let Some((ring, rt, driver)) = on_a_runtime() else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    // Queued to the kernel, waiting for the driver's turn that will never come.
    ring.submit(read(&file, 0, 100, &tx));
    drop(rt);
    ring.submit(read(&file, 100, 100, &tx));
    expect_exact(&rx, &data, 2);
    assert_eq!(ring.has_room(), Some(true));
    let threads = std::fs::read_dir("/proc/self/task").unwrap();
    let names: Vec<String> = threads
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("sepia-disk-ring")),
        "{names:?}"
    );
    let taken_over = driver.takeover().expect("driven by the runtime");
    assert!(taken_over.lock().unwrap().is_some(), "a thread took over");
    // A driver stopped on purpose: no thread takes over.
    let Some((other, rt, stopped)) = on_a_runtime() else {
        return;
    };
    let takeover = stopped.takeover().expect("driven by the runtime");
    drop(stopped);
    rt.block_on(async {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    });
    assert!(
        takeover.lock().unwrap().is_none(),
        "a thread took over after a deliberate stop"
    );
    // Alive until here: a ring already gone would let no thread take over either.
    drop(other);
    drop(driver);
}

/// A driver dropped while its runtime ends before the task sees the stop: nobody drives
/// the ring, so it says so (the store then reads with its threads) and refuses reads at
/// once; the one already queued is answered when the ring goes.
#[test]
fn a_ring_whose_driver_was_dropped_before_its_runtime_ended_refuses_reads() {
    let (file, data) = data_file(10_000);
    let Some((ring, rt, driver)) = on_a_runtime() else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    ring.submit(read(&file, 0, 100, &tx));
    drop(driver);
    drop(rt);
    assert_eq!(ring.has_room(), None);
    ring.submit(read(&file, 100, 100, &tx));
    let (at, _, r) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("refused at once");
    assert_eq!(at, 100);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::Interrupted);
    drop(ring);
    let (at, _, r) = recv(&rx);
    assert_eq!((at, &r.unwrap()[..]), (0, &data[..100]));
}

#[test]
fn reads_of_pooled_sizes_land_in_the_slab_directly_or_buffered() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    // 4 MiB of buffers in flight: a slab of two huge-page chunks.
    let Some(ring) = ring(8, 10, 4 << 20) else {
        return;
    };
    let slab = ring.slab_gauge().expect("a slab for 4 MiB of buffers");
    let (tx, rx) = mpsc::channel();
    let buffered = Arc::new(File::open(&path).unwrap());
    let direct = open_direct(&path).map(Arc::new);
    let mut held = Vec::new();
    for (k, at) in [0u64, 65_536, 139_264, 4096].into_iter().enumerate() {
        let mut r = read(&buffered, at, 65_536, &tx);
        if let (Ok(direct), true) = (&direct, k % 2 == 0) {
            r = read(direct, at, 65_536, &tx);
            (r.align, r.fallback) = (4096, Some(Arc::clone(&buffered)));
        }
        ring.submit(r);
        let b = recv(&rx).2.expect("read");
        assert_eq!(&b[..], &data[at as usize..at as usize + 65_536]);
        assert!(slab.contains(b.as_ptr()), "read {k} in the slab");
        assert_eq!(b.as_ptr().align_offset(4096), 0, "slots are page-aligned");
        held.push(b);
    }
    // Four slots held at once are four different slots.
    let mut at: Vec<usize> = held.iter().map(|b| b.as_ptr() as usize).collect();
    at.sort_unstable();
    at.dedup();
    assert_eq!(at.len(), 4);
}
