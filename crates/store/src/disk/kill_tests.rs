//! kill -9 for real: a child process (this test binary, re-run on one ignored test) writes
//! objects and reports which ones it has flushed; the parent kills it with SIGKILL at a
//! random moment, reopens the disk, and checks that every flushed object is there and that
//! every object found is byte-identical to what was written. Twenty cycles on one disk.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::tests::{cfg, check, put};
use super::{DiskConfig, DiskEngine};

const DIR_VAR: &str = "SEPIA_DISK_KILL_CHILD_DIR";
const CYCLE_VAR: &str = "SEPIA_DISK_KILL_CYCLE";
const PER_CYCLE: usize = 400;

fn kill_cfg(dir: &std::path::Path) -> DiskConfig {
    DiskConfig {
        size_bytes: 128 << 20,
        checkpoint_interval: Duration::from_millis(150),
        ..cfg(dir)
    }
}

/// The child's side: write until killed, printing `synced N` after each flush.
#[test]
#[ignore = "run by kill_minus_nine_cycles as a child process"]
fn kill_child() {
    let (Ok(dir), Ok(cycle)) = (std::env::var(DIR_VAR), std::env::var(CYCLE_VAR)) else {
        return;
    };
    let e = DiskEngine::open(kill_cfg(dir.as_ref())).expect("open");
    for i in 0..PER_CYCLE {
        put(&e, &format!("c{cycle}-{i}"));
        if i % 10 == 9 {
            e.sync(false);
            println!("synced {i}");
        }
    }
    println!("done");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn kill_minus_nine_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut synced_per_cycle: Vec<Option<usize>> = Vec::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for cycle in 0..20 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "disk::kill_tests::kill_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_VAR, dir.path())
            .env(CYCLE_VAR, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Kill after a random number of acknowledged flushes (sometimes none), plus jitter.
        let wanted = (rng % 30) as usize;
        let mut synced = None;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(n) = line.strip_prefix("synced ") {
                synced = Some(n.parse::<usize>().unwrap());
                if synced.unwrap() / 10 >= wanted {
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_micros(rng % 20_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        synced_per_cycle.push(synced);
        let e = DiskEngine::open(kill_cfg(dir.path())).unwrap();
        assert!(e.wait_loaded(Duration::from_secs(10)));
        for (c, synced) in synced_per_cycle.iter().enumerate() {
            for i in 0..PER_CYCLE {
                let key = format!("c{c}-{i}");
                let found = check(&e, &key).is_some();
                if synced.is_some_and(|s| i <= s) {
                    assert!(
                        found,
                        "cycle {cycle}: {key} was flushed before the kill but is gone"
                    );
                }
            }
        }
        e.close();
    }
    assert!(
        synced_per_cycle.iter().filter(|s| s.is_some()).count() >= 10,
        "{synced_per_cycle:?}"
    );
}
