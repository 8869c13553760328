//! A credentials-cache hit must not allocate, and must not wait: it is on every request of an
//! authenticated client. Measured with a counting global allocator; one test per binary, so no
//! other test's allocations are counted.

use std::alloc::System;
use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sepia_auth::{Authenticator, Verdict};
use sepia_config::{AuthBackend, AuthConfig};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn a_cache_hit_is_immediate_and_allocation_free() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/htpasswd");
    let config = AuthConfig {
        realm: "Sepia".into(),
        backend: AuthBackend::Htpasswd(fixture),
        credentials_ttl: Duration::from_secs(3600),
        negative_ttl: Duration::from_secs(60),
    };
    let auth = runtime
        .block_on(async { Authenticator::from_config(&config) })
        .unwrap();
    // "carol:pässword" ({SHA}), "bob:s3cr:et" (bcrypt), "bob:wrong" (rejected).
    let headers: [(&[u8], Verdict); 3] = [
        (
            b"Basic Y2Fyb2w6cMOkc3N3b3Jk",
            Verdict::Valid("carol".into()),
        ),
        (b"Basic Ym9iOnMzY3I6ZXQ=", Verdict::Valid("bob".into())),
        (b"Basic Ym9iOndyb25n", Verdict::Invalid),
    ];
    for (header, want) in &headers {
        assert_eq!(&runtime.block_on(auth.verify(header)), want, "first check");
    }
    let _inside = runtime.enter();
    for (header, want) in &headers {
        let region = Region::new(GLOBAL);
        let mut verify = pin!(auth.verify(header));
        let polled = verify
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        let change = region.change();
        assert_eq!(
            polled,
            Poll::Ready(want.clone()),
            "answered on the first poll"
        );
        assert_eq!(change.allocations, 0, "a hit allocated: {change:?}");
    }
}
