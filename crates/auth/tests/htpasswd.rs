//! The htpasswd backend through the public API: each format Apache's htpasswd writes, bad and
//! malformed credentials, and users added and removed while running.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use sepia_auth::{Authenticator, Verdict};
use sepia_config::{AuthBackend, AuthConfig};

fn header(user: &str, password: &str) -> Vec<u8> {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}").into_bytes()
}

fn config(path: &Path, negative_ttl: Duration) -> AuthConfig {
    AuthConfig {
        realm: "Staff only".into(),
        backend: AuthBackend::Htpasswd(path.to_path_buf()),
        credentials_ttl: Duration::from_secs(3600),
        negative_ttl,
    }
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/htpasswd")
}

#[tokio::test]
async fn each_format_good_bad_and_malformed() {
    let auth = Authenticator::from_config(&config(&fixture(), Duration::from_secs(5))).unwrap();
    assert_eq!(auth.challenge(), b"Basic realm=\"Staff only\"");
    let users = [
        ("alice", "wonder land"), // apr1
        ("bob", "s3cr:et"),       // bcrypt
        ("carol", "pässword"),    // {SHA}
        ("md5crypt", "openssl"),  // $1$
    ];
    for (user, password) in users {
        let good = header(user, password);
        assert_eq!(
            auth.verify(&good).await,
            Verdict::Valid(user.into()),
            "{user}"
        );
        // Again: now from the cache, same answer.
        assert_eq!(
            auth.verify(&good).await,
            Verdict::Valid(user.into()),
            "{user}"
        );
        let bad = header(user, &format!("{password}x"));
        assert_eq!(auth.verify(&bad).await, Verdict::Invalid, "{user}");
        assert_eq!(auth.verify(&bad).await, Verdict::Invalid, "{user} cached");
    }
    let malformed: [&[u8]; 6] = [
        b"",
        b"Basic",
        b"Bearer YWxpY2U6d29uZGVyIGxhbmQ=",
        b"Basic YWxpY2Uud29uZGVyIGxhbmQ=", // "alice.wonder land": no colon
        b"Basic ***",
        b"Basic YWxpY2U6d29uZGVyIGxhbmQ= x",
    ];
    for value in malformed {
        assert_eq!(auth.verify(value).await, Verdict::Invalid, "{value:?}");
    }
    assert_eq!(auth.verify(&header("nobody", "x")).await, Verdict::Invalid);
    // Any case of the scheme name; the same user under another spelling.
    assert_eq!(
        auth.verify(b"bAsIc YWxpY2U6d29uZGVyIGxhbmQ=").await,
        Verdict::Valid("alice".into())
    );
}

/// Added users can log in at once although their earlier failure was cached, and removed users
/// are refused at once although their success was cached: a new version of the file voids the
/// cache.
#[tokio::test]
async fn users_added_and_removed_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("htpasswd");
    let carol = "carol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\n";
    let dave = "dave:{SHA}GpHWL3ymc5liWkNopqtdSjuqYHM=\n"; // htpasswd -nbs dave pw
    std::fs::write(&path, carol).unwrap();
    let auth = Authenticator::from_config(&config(&path, Duration::from_secs(3600))).unwrap();
    let (carol_login, dave_login) = (header("carol", "pässword"), header("dave", "pw"));
    assert_eq!(auth.verify(&dave_login).await, Verdict::Invalid);
    assert_eq!(
        auth.verify(&carol_login).await,
        Verdict::Valid("carol".into())
    );

    std::fs::write(&path, format!("{carol}{dave}")).unwrap();
    let dave_in = until(&auth, &dave_login, Verdict::Valid("dave".into())).await;
    assert!(dave_in, "dave can log in after being added");

    std::fs::write(&path, dave).unwrap();
    let carol_out = until(&auth, &carol_login, Verdict::Invalid).await;
    assert!(carol_out, "carol is refused after being removed");
}

/// Checks `header` every 100 ms for up to 5 s until it gets `want`.
async fn until(auth: &Authenticator, header: &[u8], want: Verdict) -> bool {
    for _ in 0..50 {
        if auth.verify(header).await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn a_refused_entry_fails_at_start_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("htpasswd");
    std::fs::write(
        &path,
        "# staff\ncarol:{SHA}I7dElEdfX4dJgLdnbVEeI9iG2mQ=\neve:pw\n",
    )
    .unwrap();
    let err = Authenticator::from_config(&config(&path, Duration::ZERO)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: user \"eve\": crypt(3) DES and plaintext entries are not supported; \
             re-create the entry with htpasswd -B (bcrypt) or htpasswd -m (MD5)",
            path.display()
        )
    );
}
