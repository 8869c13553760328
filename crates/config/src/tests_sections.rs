//! Tests of one section each: the cache and its disks, sendfile, interception listeners,
//! targeted cache control, h2c, the quick-start cache flags, the admin listener.

use super::*;

#[test]
fn cache_section_is_validated() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let err = |extra: &str| {
        Config::from_toml_str(&format!("{base}{extra}"), "t.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err("[cache]\nmemory = \"1MiB\"\nmax_object = \"2MiB\"\n");
    assert!(e.starts_with("t.toml:6: key 'cache.max_object'"), "{e}");
    let e = err("[cache]\nmemory = \"256MB\"\n");
    assert!(e.contains("t.toml:5") && e.contains("invalid size"), "{e}");
    let e = err("[[cache.refresh]]\npattern = \"(\"\nmin = \"0s\"\npercent = 10\nmax = \"1h\"\n");
    assert!(
        e.contains("cache.refresh[0].pattern") && e.contains("regular expression"),
        "{e}"
    );
    let e = err("[cache]\nmemmory = \"1MiB\"\n");
    assert!(e.contains("unknown key"), "{e}");
    let ok = Config::from_toml_str(
        &format!("{base}[cache]\nenabled = false\npurge_allow = [\"10.0.0.0/8\"]\n"),
        "t.toml",
    )
    .unwrap();
    assert!(!ok.cache.enabled);
    assert!(ok.cache.purge_allowed("10.1.2.3".parse().unwrap()));
    assert!(!ok.cache.purge_allowed("127.0.0.1".parse().unwrap()));
}

#[test]
fn sendfile_defaults_on_and_can_be_tuned_or_turned_off() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    assert_eq!(parse("").unwrap().cache.sendfile_min_bytes, Some(64 << 10));
    let c = parse("[cache]\nsendfile_min = \"1MiB\"\n").unwrap();
    assert_eq!(c.cache.sendfile_min_bytes, Some(1 << 20));
    let c = parse("[cache]\nsendfile = false\nsendfile_min = \"1MiB\"\n").unwrap();
    assert_eq!(c.cache.sendfile_min_bytes, None);
    let e = parse("[cache]\nsendfile_min = \"lots\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.toml:5") && e.contains("sendfile_min"), "{e}");
    let e = parse("[cache]\nsendfile = \"yes\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.toml:5") && e.contains("cache.sendfile"),
        "{e}"
    );
    assert_eq!(parse("").unwrap().cache.sendfile_dir, None);
    let dir = std::env::temp_dir();
    let c = parse(&format!("[cache]\nsendfile_dir = \"{}\"\n", dir.display())).unwrap();
    assert_eq!(c.cache.sendfile_dir, Some(dir));
    let e = parse("[cache]\nsendfile_dir = \"/nonexistent/dir\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.toml:5")
            && e.contains("cache.sendfile_dir")
            && e.contains("is not a directory"),
        "{e}"
    );
}

#[test]
fn interception_listeners_and_spoof_client_defaults() {
    let text = "[[listen]]\naddress = \"0.0.0.0:3129\"\nmode = \"intercept\"\n\
                [[listen]]\naddress = \"0.0.0.0:3130\"\nmode = \"tproxy\"\n\
                [[listen]]\naddress = \"[::]:3130\"\nmode = \"tproxy\"\nspoof_client = false\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let got: Vec<(Mode, bool)> = config
        .listeners
        .iter()
        .map(|l| (l.mode, l.spoof_client))
        .collect();
    assert_eq!(
        got,
        [
            (Mode::Intercept, false),
            (Mode::Tproxy, true),
            (Mode::Tproxy, false)
        ]
    );
    assert!(Mode::Intercept.is_interception() && Mode::Tproxy.is_interception());
    assert!(!Mode::Forward.is_interception() && !Mode::Reverse.is_interception());
}

#[test]
fn targeted_cache_control_defaults_by_mode_and_is_checked() {
    let text = "[[route]]\nhost = \"*\"\norigins = [\"http://127.0.0.1:8080\"]\n\
                [[listen]]\naddress = \"0.0.0.0:80\"\nmode = \"reverse\"\n\
                [[listen]]\naddress = \"0.0.0.0:81\"\nmode = \"forward\"\n\
                [[listen]]\naddress = \"0.0.0.0:82\"\nmode = \"reverse\"\n\
                targeted_cache_control = [\"Sepia-Cache-Control\", \"CDN-Cache-Control\"]\n\
                [[listen]]\naddress = \"0.0.0.0:83\"\nmode = \"reverse\"\n\
                targeted_cache_control = []\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let lists: Vec<Vec<String>> = config
        .listeners
        .iter()
        .map(|l| l.targeted_cache_control.clone())
        .collect();
    assert_eq!(
        lists,
        [
            vec!["CDN-Cache-Control".to_string()],
            vec![],
            vec!["Sepia-Cache-Control".into(), "CDN-Cache-Control".into()],
            vec![],
        ]
    );
    let listener = "[[listen]]\naddress = \"0.0.0.0:81\"\nmode = \"forward\"\n";
    for (list, error) in [
        (
            "[\"Cache-Control\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control[0]': \"Cache-Control\" cannot be a \
             targeted field",
        ),
        (
            "[\"a b\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control[0]': invalid field name \"a b\"",
        ),
        (
            "[\"X-CC\", \"x-cc\"]",
            "t.toml:4: key 'listen[0].targeted_cache_control': \"x-cc\" is listed twice",
        ),
    ] {
        let text = format!("{listener}targeted_cache_control = {list}\n");
        let e = Config::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(error), "{e}");
    }
}

#[test]
fn h2c_is_off_unless_a_listener_asks_for_it() {
    let text = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n\
                [[listen]]\naddress = \"127.0.0.1:3129\"\nmode = \"forward\"\nh2c = true\n";
    let config = Config::from_toml_str(text, "t.toml").unwrap();
    let got: Vec<bool> = config.listeners.iter().map(|l| l.h2c).collect();
    assert_eq!(got, [false, true]);
}

#[test]
fn cache_disks_are_validated_with_their_key() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    let err = |extra: &str| parse(extra).unwrap_err().to_string();
    assert!(parse("").unwrap().cache.disks.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let two = format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\nwrite_budget = \"100GiB\"\nadmission = \"earned\"\n\
         [[cache.disk]]\npath = \"{}\"\nsize = \"64MiB\"\n",
        a.display(),
        b.display()
    );
    let c = parse(&two).unwrap();
    assert_eq!(c.cache.disks.len(), 2);
    assert_eq!(c.cache.disks[0].path, a);
    assert_eq!(c.cache.disks[0].size_bytes, 1 << 30);
    assert_eq!(c.cache.disks[0].write_budget_per_day, Some(100 << 30));
    assert_eq!(c.cache.disks[1].write_budget_per_day, None);
    assert_eq!(c.cache.disks[0].admission, crate::DiskAdmission::Earned);
    assert_eq!(c.cache.disks[1].admission, crate::DiskAdmission::Fill);
    let e = err(&format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\nadmission = \"all\"\n",
        a.display()
    ));
    assert!(e.contains("admission") && e.contains("earned"), "{e}");
    assert_eq!(c.cache.disk_read_threads, 16);
    let threads = |n: &str| parse(&format!("[cache]\ndisk_read_threads = {n}\n"));
    assert_eq!(threads("64").unwrap().cache.disk_read_threads, 64);
    for bad in ["0", "1025"] {
        let e = threads(bad).unwrap_err().to_string();
        assert!(e.contains("disk_read_threads"), "{e}");
    }
    assert_eq!(c.cache.disk_io, crate::DiskIo::IoUring);
    let io = |v: &str| parse(&format!("[cache]\ndisk_io = \"{v}\"\n"));
    assert_eq!(io("threads").unwrap().cache.disk_io, crate::DiskIo::Threads);
    assert_eq!(
        io("io_uring").unwrap().cache.disk_io,
        crate::DiskIo::IoUring
    );
    let e = io("aio").unwrap_err().to_string();
    assert!(e.contains("disk_io") && e.contains("io_uring"), "{e}");
    assert_eq!(c.cache.disk_ring_depth, 24);
    let depth = |n: &str| parse(&format!("[cache]\ndisk_ring_depth = {n}\n"));
    assert_eq!(depth("128").unwrap().cache.disk_ring_depth, 128);
    for bad in ["0", "1025", "\"24\""] {
        let e = depth(bad).unwrap_err().to_string();
        assert!(e.contains("disk_ring_depth"), "{e}");
    }

    let e = err("[[cache.disk]]\npath = \"relative\"\nsize = \"1GiB\"\n");
    assert!(
        e.starts_with("t.toml:5: key 'cache.disk[0].path'") && e.contains("absolute"),
        "{e}"
    );
    let e = err("[[cache.disk]]\npath = \"/nonexistent/x/y\"\nsize = \"1GiB\"\n");
    assert!(
        e.contains("cache.disk[0].path") && e.contains("parent"),
        "{e}"
    );
    let e = err(&format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1MiB\"\n",
        a.display()
    ));
    assert!(
        e.starts_with("t.toml:6: key 'cache.disk[0].size'") && e.contains("64 MiB"),
        "{e}"
    );
    let e = err(&format!("[[cache.disk]]\npath = \"{}\"\n", a.display()));
    assert!(e.contains("size"), "{e}");
    let nested = format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\n[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\n",
        a.display(),
        a.join("inner").display()
    );
    let e = err(&nested);
    assert!(
        e.contains("cache.disk[1].path") && e.contains("overlaps"),
        "{e}"
    );
    let e = err(&format!(
        "[[cache.disk]]\npath = \"{}\"\nsize = \"1GiB\"\nspeed = 1\n",
        a.display()
    ));
    assert!(e.contains("speed"), "{e}");
}

#[test]
fn quick_cache_flags_set_memory_and_one_disk() {
    let origins = vec!["http://127.0.0.1:8080".to_string()];
    let base = || Config::quick_reverse("127.0.0.1:80", &origins, None, None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let quick = QuickCache {
        memory: Some("8MiB".into()),
        dir: Some(tmp.path().join("cache")),
        dir_size: Some("2GiB".into()),
    };
    let c = base().with_quick_cache(&quick).unwrap();
    assert_eq!(c.cache.memory_bytes, 8 << 20);
    assert_eq!(
        c.cache.max_object_bytes,
        8 << 20,
        "max_object lowered to the memory"
    );
    assert_eq!(c.cache.disks[0].size_bytes, 2 << 30);
    assert_eq!(c.cache.disks[0].path, tmp.path().join("cache"));
    let default_size = QuickCache {
        dir_size: None,
        ..quick.clone()
    };
    let c = base().with_quick_cache(&default_size).unwrap();
    assert_eq!(c.cache.disks[0].size_bytes, QuickCache::DEFAULT_DIR_SIZE);
    let untouched = base().with_quick_cache(&QuickCache::default()).unwrap();
    assert_eq!(untouched.cache, base().cache);
    for (bad, flag) in [
        (
            QuickCache {
                memory: Some("lots".into()),
                ..QuickCache::default()
            },
            "--cache-memory",
        ),
        (
            QuickCache {
                dir_size: Some("1MiB".into()),
                ..quick.clone()
            },
            "--cache-dir-size",
        ),
        (
            QuickCache {
                dir: Some("/nonexistent/a/b".into()),
                ..quick.clone()
            },
            "--cache-dir",
        ),
    ] {
        let e = base().with_quick_cache(&bad).unwrap_err();
        assert_eq!(e.key(), Some(flag), "{e}");
    }
}

#[test]
fn admin_is_off_unless_configured_and_validated_with_its_key() {
    let base = "[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    let err = |extra: &str| parse(extra).unwrap_err().to_string();
    assert_eq!(parse("").unwrap().admin, None);
    let a = parse("[admin]\nlisten = \"127.0.0.1:9090\"\n")
        .unwrap()
        .admin
        .unwrap();
    assert_eq!(a.listen, "127.0.0.1:9090".parse().unwrap());
    assert!(a.allows("127.0.0.1".parse().unwrap()));
    assert!(a.allows("::ffff:127.0.0.2".parse().unwrap()));
    assert!(!a.allows("10.0.0.1".parse().unwrap()));
    assert_eq!(a.token, None);
    assert_eq!(a.tag_fields, ["Surrogate-Key", "Cache-Tag"]);
    let a = parse(
        "[admin]\nlisten = \"[::1]:9090\"\nallow = [\"10.0.0.0/8\"]\n\
         token = \"s3cret-s3cret-s3cret\"\ntag_fields = [\"Cache-Tag\"]\n",
    )
    .unwrap()
    .admin
    .unwrap();
    assert!(a.allows("10.1.1.1".parse().unwrap()));
    assert!(!a.allows("127.0.0.1".parse().unwrap()));
    assert_eq!(a.token.as_deref(), Some("s3cret-s3cret-s3cret"));
    assert!(
        !format!("{a:?}").contains("s3cret"),
        "the token leaks: {a:?}"
    );
    assert_eq!(a.tag_fields, ["Cache-Tag"]);

    let e = err("[admin]\nlisten = \"127.0.0.1:3128\"\n");
    assert!(
        e.starts_with("t.toml:5: key 'admin.listen'") && e.contains("listen[0]"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken = \"short\"\n");
    assert!(
        e.starts_with("t.toml:6: key 'admin.token'") && e.contains("too short"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken = \"has a space in it, long\"\n");
    assert!(
        e.contains("admin.token") && e.contains("invalid token"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\ntag_fields = [\"bad field\"]\n");
    assert!(e.starts_with("t.toml:6: key 'admin.tag_fields'"), "{e}");
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\nallow = [\"10.0.0.1/8\"]\n");
    assert!(e.contains("admin.allow"), "{e}");
    let e = err("[admin]\nlisten = \"127.0.0.1:9090\"\nport = 1\n");
    assert!(
        e.contains("'admin.port'") && e.contains("unknown key"),
        "{e}"
    );
    let e = err("[admin]\nallow = []\n");
    assert!(e.contains("admin.listen"), "{e}");

    let quick = Config::quick_forward("127.0.0.1:3128", None, None).unwrap();
    let q = quick
        .clone()
        .with_quick_admin(Some("127.0.0.1:9091"))
        .unwrap();
    assert_eq!(q.admin.unwrap().listen, "127.0.0.1:9091".parse().unwrap());
    let e = quick.clone().with_quick_admin(Some("nope")).unwrap_err();
    assert!(e.to_string().contains("--admin"), "{e}");
    let e = quick.with_quick_admin(Some("127.0.0.1:3128")).unwrap_err();
    assert!(e.to_string().contains("already used"), "{e}");
}

#[test]
fn active_health_checks_are_off_unless_interval_is_set_and_validated() {
    let base = "[[listen]]\naddress = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\
                [[route]]\nhost = \"www.example.com\"\norigins = [\"http://127.0.0.1:9\"]\n\
                [route.health]\n";
    let parse = |extra: &str| Config::from_toml_str(&format!("{base}{extra}"), "t.toml");
    assert_eq!(parse("").unwrap().routes[0].health.active, None);
    let c = parse("interval = \"500ms\"\n").unwrap();
    let active = c.routes[0].health.active.clone().unwrap();
    assert_eq!(
        active,
        ActiveCheck {
            interval: std::time::Duration::from_millis(500),
            path: "/".into(),
            expect: StatusRange { min: 200, max: 399 },
            timeout: std::time::Duration::from_secs(2),
            rise: 2,
            fall: 3,
            host: None,
        }
    );
    let c = parse(
        "interval = \"1s\"\npath = \"/healthz\"\nexpect = 204\ntimeout = \"300ms\"\nrise = 1\n\
         fall = 5\nhost = \"check.example.com\"\n",
    )
    .unwrap();
    let active = c.routes[0].health.active.clone().unwrap();
    assert_eq!(active.path, "/healthz");
    assert_eq!(active.expect, StatusRange { min: 204, max: 204 });
    assert_eq!((active.rise, active.fall), (1, 5));
    assert_eq!(active.host.as_deref(), Some("check.example.com"));
    let err = |extra: &str| parse(extra).unwrap_err().to_string();
    let e = err("path = \"/x\"\n");
    assert!(
        e.starts_with("t.toml:8: key 'route[0].health.path': active checks are on only with"),
        "{e}"
    );
    let e = err("interval = \"10ms\"\n");
    assert!(
        e.contains("t.toml:8: key 'route[0].health.interval': must be at least 100ms"),
        "{e}"
    );
    let e = err("interval = \"1s\"\nexpect = \"2xx-\"\n");
    assert!(
        e.starts_with("t.toml:9: key 'route[0].health.expect': invalid status range"),
        "{e}"
    );
    let e = err("interval = \"1s\"\nexpect = 700\n");
    assert!(e.contains("route[0].health.expect"), "{e}");
    let e = err("interval = \"1s\"\npath = \"health\"\n");
    assert!(
        e.starts_with("t.toml:9: key 'route[0].health.path': invalid path"),
        "{e}"
    );
    let e = err("interval = \"1s\"\nhost = \"a\\r\\nb\"\n");
    assert!(
        e.starts_with("t.toml:9: key 'route[0].health.host': invalid host"),
        "{e}"
    );
    let e = err("interval = \"1s\"\ntimeout = \"0s\"\n");
    assert!(
        e.contains("route[0].health.timeout': must be more than 0s"),
        "{e}"
    );
    let e = err("interval = \"1s\"\nrise = 0\n");
    assert!(
        e.contains("route[0].health.rise': 0 is out of range (expected 1 to 100)"),
        "{e}"
    );
    let e = err("interval = \"1s\"\nintervall = \"1s\"\n");
    assert!(e.contains("unknown key"), "{e}");
}
