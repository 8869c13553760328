//! The helper backend against real processes: tests/helpers/fake_helper.py in each of its
//! modes, and Squid's own basic_ncsa_auth when it is installed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use sepia_auth::{Authenticator, Verdict};
use sepia_config::{AuthBackend, AuthConfig, HelperConfig};

fn header(user: &str, password: &str) -> Vec<u8> {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}").into_bytes()
}

/// Valid for fake_helper.py: the password is the user name followed by "-pw".
fn good(user: &str) -> Vec<u8> {
    header(user, &format!("{user}-pw"))
}

fn valid(user: &str) -> Verdict {
    Verdict::Valid(user.into())
}

fn config(program: PathBuf, args: Vec<String>, children: usize, concurrency: usize) -> AuthConfig {
    AuthConfig {
        realm: "Test".into(),
        backend: AuthBackend::Helper(HelperConfig {
            program,
            args,
            children,
            concurrency,
            timeout: Duration::from_secs(5),
        }),
        credentials_ttl: Duration::from_secs(3600),
        negative_ttl: Duration::ZERO,
    }
}

/// fake_helper.py in `mode`, with a file counting its starts.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    /// `None` (and a SKIPPED line) when python3 cannot run here.
    fn new() -> Option<Fake> {
        let ok = std::process::Command::new("python3")
            .arg("-c")
            .arg("pass")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("SKIPPED: python3 is not available to run tests/helpers/fake_helper.py");
            return None;
        }
        Some(Fake {
            dir: tempfile::tempdir().unwrap(),
        })
    }

    fn config(&self, mode: &str, limit: u32, children: usize, concurrency: usize) -> AuthConfig {
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/fake_helper.py");
        let starts = self.dir.path().join("starts").display().to_string();
        let args = vec![mode.to_string(), starts, limit.to_string()];
        config(program, args, children, concurrency)
    }

    fn starts(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("starts"))
            .map_or(0, |text| text.lines().count())
    }

    /// Waits up to 5 s for `n` starts in all.
    async fn wait_for_starts(&self, n: usize) -> usize {
        for _ in 0..100 {
            if self.starts() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.starts()
    }
}

#[tokio::test]
async fn plain_protocol_answers_and_escapes() {
    let Some(fake) = Fake::new() else { return };
    let auth = Authenticator::from_config(&fake.config("plain", 0, 2, 0)).unwrap();
    assert_eq!(auth.challenge(), b"Basic realm=\"Test\"");
    assert_eq!(auth.verify(&good("alice")).await, valid("alice"));
    assert_eq!(
        auth.verify(&header("alice", "nope")).await,
        Verdict::Invalid
    );
    // Spaces, % and non-ASCII are %-escaped on the way to the helper and must survive.
    let odd = "j\u{f6}rg 100%";
    assert_eq!(auth.verify(&good(odd)).await, valid(odd));
    assert_eq!(auth.verify(b"Basic !!!").await, Verdict::Invalid);
    assert_eq!(auth.verify(b"Digest x").await, Verdict::Invalid);
    assert_eq!(
        fake.wait_for_starts(2).await,
        2,
        "both children started once"
    );
}

#[tokio::test]
async fn a_cache_hit_does_not_ask_the_helper() {
    let Some(fake) = Fake::new() else { return };
    // The helper exits on its second line: a second check that reached it would fail.
    let auth = Authenticator::from_config(&fake.config("crash", 1, 1, 0)).unwrap();
    assert_eq!(auth.verify(&good("alice")).await, valid("alice"));
    for _ in 0..3 {
        assert_eq!(auth.verify(&good("alice")).await, valid("alice"));
    }
    // Same credentials, different spelling of the scheme and spacing: same token, still a hit.
    let mut other_spelling = b"basic   ".to_vec();
    other_spelling.extend_from_slice(&good("alice")[6..]);
    assert_eq!(auth.verify(&other_spelling).await, valid("alice"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.starts(), 1, "the helper was never restarted");
}

#[tokio::test]
async fn concurrent_protocol_matches_out_of_order_replies_by_channel() {
    let Some(fake) = Fake::new() else { return };
    let auth = Authenticator::from_config(&fake.config("concurrent", 0, 1, 4)).unwrap();
    assert_eq!(
        fake.wait_for_starts(1).await,
        1,
        "timings count from a running child"
    );
    let started = Instant::now();
    let (slow_sam, slow_sue) = (good("slow-sam"), header("slow-sue", "wrong"));
    let slow_good = auth.verify(&slow_sam);
    let slow_bad = auth.verify(&slow_sue);
    let fast = async {
        // Sent after the slow ones, answered before them.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let verdict = auth.verify(&good("fast-fay")).await;
        (verdict, started.elapsed())
    };
    let ((fast, fast_at), slow_good, slow_bad) = tokio::join!(fast, slow_good, slow_bad);
    let slow_at = started.elapsed();
    assert_eq!(fast, valid("fast-fay"));
    assert_eq!(slow_good, valid("slow-sam"));
    assert_eq!(slow_bad, Verdict::Invalid);
    assert!(
        fast_at < Duration::from_millis(450) && slow_at >= Duration::from_millis(500),
        "fast answered at {fast_at:?}, slow ones at {slow_at:?}: one child, several in flight"
    );
    assert_eq!(fake.starts(), 1);
}

#[tokio::test]
async fn a_crashed_child_is_restarted() {
    let Some(fake) = Fake::new() else { return };
    let auth = Authenticator::from_config(&fake.config("crash", 2, 1, 0)).unwrap();
    assert_eq!(auth.verify(&good("u1")).await, valid("u1"));
    assert_eq!(auth.verify(&good("u2")).await, valid("u2"));
    // The third line kills the only child: with no other child to retry on, the request
    // waits for the replacement and is answered by it.
    assert_eq!(auth.verify(&good("u3")).await, valid("u3"));
    assert_eq!(
        fake.wait_for_starts(2).await,
        2,
        "restarted after the crash"
    );
    let mut verdict = Verdict::Unavailable;
    for _ in 0..50 {
        verdict = auth.verify(&good("u3")).await;
        if verdict != Verdict::Unavailable {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(verdict, valid("u3"), "the restarted child answers");
}

#[tokio::test]
async fn a_request_in_flight_on_a_crashing_child_is_retried_on_another() {
    let Some(fake) = Fake::new() else { return };
    // The first child started dies on its second line; the other one never does.
    let auth = Authenticator::from_config(&fake.config("crash-once", 1, 2, 0)).unwrap();
    for user in ["r1", "r2", "r3", "r4", "r5"] {
        assert_eq!(auth.verify(&good(user)).await, valid(user), "{user}");
    }
    assert_eq!(
        fake.wait_for_starts(3).await,
        3,
        "the crashed child was restarted"
    );
}

#[tokio::test]
async fn a_hung_child_times_out_and_is_restarted() {
    let Some(fake) = Fake::new() else { return };
    let mut config = fake.config("hang", 0, 1, 0);
    if let AuthBackend::Helper(helper) = &mut config.backend {
        helper.timeout = Duration::from_millis(300);
    }
    let auth = Authenticator::from_config(&config).unwrap();
    // Python may take longer than the timeout to start on a busy machine; a child killed
    // before it ran would not count as a start.
    assert_eq!(fake.wait_for_starts(1).await, 1);
    let started = Instant::now();
    assert_eq!(auth.verify(&good("h")).await, Verdict::Unavailable);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_millis(1500),
        "answered after {waited:?}"
    );
    assert_eq!(
        fake.wait_for_starts(2).await,
        2,
        "the hung child was replaced"
    );
}

#[tokio::test]
async fn broken_helper_answers_and_garbage_are_unavailable() {
    let Some(fake) = Fake::new() else { return };
    let auth = Authenticator::from_config(&fake.config("bh", 0, 1, 0)).unwrap();
    assert_eq!(auth.verify(&good("b")).await, Verdict::Unavailable);
    assert_eq!(auth.verify(&good("b")).await, Verdict::Unavailable);
    assert_eq!(
        fake.starts(),
        1,
        "BH is an answer, not a failure of the child"
    );
    drop(auth);

    let fake = Fake::new().unwrap();
    let auth = Authenticator::from_config(&fake.config("garbage", 0, 1, 0)).unwrap();
    assert_eq!(auth.verify(&good("g")).await, Verdict::Unavailable);
    assert!(
        fake.wait_for_starts(2).await >= 2,
        "a child speaking garbage is replaced"
    );
}

#[tokio::test]
async fn a_helper_that_cannot_start_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("not-a-program");
    let err = Authenticator::from_config(&config(program, vec![], 1, 0)).unwrap_err();
    assert!(
        err.to_string().starts_with("cannot start the auth helper"),
        "{err}"
    );
}

/// Squid's own helper, from Debian's `squid` package, over Sepia's pool: the escaping and
/// the plain protocol as a real helper understands them. (basic_ncsa_auth has no `{SHA}`
/// support, so carol is not asked.)
#[tokio::test]
async fn squid_basic_ncsa_auth() {
    let program = PathBuf::from("/usr/lib/squid/basic_ncsa_auth");
    if !program.exists() {
        println!(
            "SKIPPED: {} is not installed (Debian package squid)",
            program.display()
        );
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/htpasswd");
    let args = vec![fixture.display().to_string()];
    let auth = Authenticator::from_config(&config(program, args, 2, 0)).unwrap();
    let cases = [
        ("alice", "wonder land"),                                   // apr1, a space
        ("dan", "long password that is longer than sixteen bytes"), // apr1
        ("erin", "x"),                                              // apr1
        ("md5crypt", "openssl"),                                    // $1$
        ("bob", "s3cr:et"),             // bcrypt through crypt(3), a colon
        ("frank", "bcrypt cost seven"), // bcrypt, cost 7
    ];
    for (user, password) in cases {
        assert_eq!(
            auth.verify(&header(user, password)).await,
            valid(user),
            "{user}"
        );
        assert_eq!(
            auth.verify(&header(user, "wrong")).await,
            Verdict::Invalid,
            "{user} with a wrong password"
        );
    }
    assert_eq!(auth.verify(&header("nobody", "x")).await, Verdict::Invalid);
}
