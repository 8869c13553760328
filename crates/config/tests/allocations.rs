//! The per-request lookups must not allocate: measured with a counting global allocator.
//! One test per binary, so no other test's allocations are counted.

use std::alloc::System;
use std::net::IpAddr;

use sepia_config::Config;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const FILE: &str = r#"
[[listen]]
address = "127.0.0.1:8080"
mode = "reverse"

[[route]]
host = "*"
origins = ["http://127.0.0.1:9000"]

[[route]]
host = "*.example.com"
origins = ["http://127.0.0.1:9001"]

[[route]]
host = "www.example.com"
origins = ["http://127.0.0.1:9002"]
"#;

#[test]
fn route_for_host_and_client_allowed_do_not_allocate() {
    let config = Config::from_toml_str(FILE, "alloc.toml").unwrap();
    let hosts: [&[u8]; 4] = [
        b"www.example.com",
        b"A.EXAMPLE.COM",
        b"example.com",
        b"other.",
    ];
    let ips: Vec<IpAddr> = [
        "127.0.0.1",
        "8.8.8.8",
        "::1",
        "::ffff:10.0.0.1",
        "2001:db8::1",
    ]
    .iter()
    .map(|ip| ip.parse().unwrap())
    .collect();

    // The counter is process-wide, so the test harness's own threads can add a stray
    // allocation at the start; a real per-lookup allocation shows in every one of the
    // 9,000 lookups of every attempt, so the best of three attempts must be exactly zero.
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let region = Region::new(GLOBAL);
        let mut ports = 0u32;
        let mut allowed = 0u32;
        for _ in 0..1000 {
            for host in hosts {
                ports += u32::from(config.route_for_host(host).unwrap().origins[0].port - 9000);
            }
            for ip in &ips {
                allowed += u32::from(config.forward.client_allowed(*ip));
            }
        }
        attempts.push(region.change().allocations);
        assert_eq!(ports, 1000 * (2 + 1));
        assert_eq!(allowed, 1000 * 3);
    }
    assert_eq!(
        attempts.iter().min(),
        Some(&0),
        "allocations per attempt: {attempts:?}"
    );
}
