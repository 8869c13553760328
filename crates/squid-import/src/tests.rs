//! Each directive on small snippets, each note, and every result loaded by Sepia's own
//! configuration loader (`sepia_config`).

use super::*;

fn tr(conf: &str) -> Translation {
    translate(conf, "squid.conf")
}

/// The translation, which must load as a Sepia configuration.
fn valid(conf: &str) -> (Translation, sepia_config::Config) {
    let t = tr(conf);
    match sepia_config::Config::from_toml_str(&t.toml, "out.toml") {
        Ok(c) => (t, c),
        Err(e) => panic!("{e}\n{}", t.toml),
    }
}

fn note(t: &Translation, line: usize) -> &Note {
    t.notes
        .iter()
        .find(|n| n.line == line)
        .unwrap_or_else(|| panic!("no note for line {line}: {:#?}\n{}", t.notes, t.toml))
}

fn has(t: &Translation, text: &str) {
    assert!(t.toml.contains(text), "{text:?} not in\n{}", t.toml);
}

const FORWARD: &str = "http_port 127.0.0.1:3128\n";

#[test]
fn debian_squid_conf() {
    let (t, c) = valid(include_str!("../../../e2e/fixtures/debian-squid.conf"));
    assert_eq!(c.listeners.len(), 2);
    has(&t, "values = [443]");
    has(&t, "connect_ports = [443]");
    has(&t, "acl = [\"localhost\", \"manager\"]");
    has(&t, "\"0.0.0.1/32\", \"0.0.0.2/31\"");
    has(&t, "pattern = \"(?i)(/cgi-bin/|\\\\?)\"");
    assert_eq!(
        t.notes
            .iter()
            .filter(|n| n.kind == NoteKind::NotTranslated)
            .count(),
        2,
        "{:#?}",
        t.notes
    );
    assert!(note(&t, 26).message.contains("included files are not read"));
    assert!(t
        .toml
        .starts_with("# Sepia configuration translated from squid.conf"));
    has(
        &t,
        "# Not translated (2):\n# squid.conf:26: include /etc/squid/conf.d/*.conf\n",
    );
}

#[test]
fn a_bare_port_is_every_address_and_no_rule_denies_everything() {
    let (t, c) = valid("http_port 3128\n");
    let addrs: Vec<String> = c.listeners.iter().map(|l| l.address.to_string()).collect();
    assert_eq!(addrs, ["0.0.0.0:3128", "[::]:3128"]);
    has(&t, "# Squid denies every request when squid.conf has no http_access rule\n[[http_access]]\naction = \"deny\"\nacl = [\"all\"]");
}

#[test]
fn no_http_port_is_squids_3128() {
    let (t, c) = valid("http_access allow all\n");
    assert_eq!(c.listeners.len(), 2);
    assert!(t.notes.iter().any(|n| n.message.contains("no http_port")));
}

#[test]
fn port_addresses_and_modes() {
    let (t, c) = valid(
        "http_port 127.0.0.1:3128\nhttp_port [::1]:3129 intercept\nhttp_port localhost:3130 tproxy\n\
         http_port 10.0.0.1:3131 transparent\nhttp_port proxy.example:3132\nhttp_access allow all\n",
    );
    let got: Vec<(String, String)> = c
        .listeners
        .iter()
        .map(|l| (l.address.to_string(), format!("{:?}", l.mode)))
        .collect();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[1], ("[::1]:3129".into(), "Intercept".into()));
    assert_eq!(got[2], ("127.0.0.1:3130".into(), "Tproxy".into()));
    assert!(note(&t, 5).message.contains("not host names"));
    assert_eq!(note(&t, 5).kind, NoteKind::NotTranslated);
}

#[test]
fn a_repeated_address_is_noted() {
    let (t, c) = valid("http_port 127.0.0.1:3128\nhttp_port 127.0.0.1:3128 accel\ncache_peer 127.0.0.1 parent 80 0 originserver\n");
    assert_eq!(c.listeners.len(), 1);
    assert!(note(&t, 2).message.contains("already a listener"));
}

#[test]
fn accelerator_with_vhost_routes_by_the_peers_domains() {
    let (t, c) = valid(
        "http_port 80 accel defaultsite=www.example.com vhost\n\
         cache_peer 127.0.0.1 parent 8080 0 no-query originserver name=web\n\
         cache_peer 10.0.0.2 parent 8081 0 no-query originserver name=api\n\
         acl our_sites dstdomain www.example.com\n\
         acl api_sites dstdomain .api.example.com\n\
         cache_peer_access web allow our_sites\n\
         cache_peer_access web deny all\n\
         cache_peer_access api allow api_sites\n\
         http_access allow our_sites\n\
         http_access allow api_sites\n",
    );
    let routes: Vec<(String, Vec<String>)> = c
        .routes
        .iter()
        .map(|r| {
            let origins = r.origins.iter().map(|o| format!("{o:?}")).collect();
            (format!("{:?}", r.host), origins)
        })
        .collect();
    assert_eq!(routes.len(), 3, "{routes:?}\n{}", t.toml);
    has(
        &t,
        "host = \"www.example.com\"\norigins = [\"http://127.0.0.1:8080\"]",
    );
    has(
        &t,
        "host = \"api.example.com\"\norigins = [\"http://10.0.0.2:8081\"]",
    );
    has(&t, "host = \"*.api.example.com\"");
    has(&t, "# Squid's implicit last rule: the opposite of the last http_access line\n[[http_access]]\naction = \"deny\"");
    assert!(!t.toml.contains("host = \"*\""));
}

#[test]
fn accelerator_without_vhost_sends_everything_to_defaultsite() {
    let (t, _) = valid(
        "http_port 8080 accel defaultsite=site.example\n\
         cache_peer origin.internal parent 80 0 originserver forceddomain=inner.example\n\
         http_access allow all\n",
    );
    has(
        &t,
        "host = \"*\"\norigins = [\"http://origin.internal:80\"]\nhost_header = \"site.example\"",
    );
    assert_eq!(note(&t, 1).kind, NoteKind::Differs);
}

#[test]
fn cache_peer_domain_and_unrestricted_peers() {
    let (t, _) = valid(
        "http_port 80 accel vhost\n\
         cache_peer 10.0.0.1 parent 80 0 originserver name=a\n\
         cache_peer 10.0.0.2 parent 80 0 originserver name=b\n\
         cache_peer_domain a .example.org !bad.example.org\n\
         http_access allow all\n",
    );
    has(
        &t,
        "host = \"example.org\"\norigins = [\"http://10.0.0.1:80\", \"http://10.0.0.2:80\"]",
    );
    has(&t, "host = \"*\"\norigins = [\"http://10.0.0.2:80\"]");
    assert!(note(&t, 4).message.contains("cannot exclude"));
    assert!(t.notes.iter().any(|n| n.message.contains("round-robins")));
}

#[test]
fn accelerator_without_peers() {
    let (t, _) = valid("http_port 80 accel defaultsite=www.example.com\nhttp_access allow all\n");
    has(&t, "host = \"*\"\norigins = [\"http://www.example.com\"]");
    let t = tr("http_port 80 accel vhost\nhttp_access allow all\n");
    assert!(note(&t, 1).message.contains("needs a [[route]]"));
}

#[test]
fn tls_peers_and_https_ports() {
    let t = tr(
        "https_port 443 accel tls-cert=/etc/ssl/site.pem tls-key=/etc/ssl/site.key vhost\n\
         https_port 8443 intercept tls-cert=/x.pem\nhttps_port 9443\n\
         cache_peer 10.0.0.9 parent 443 0 originserver tls tls-cafile=/ca.pem tls-domain=inner.example login=PASSTHRU\n\
         cache_peer 10.0.0.8 parent 3128 0 default\n\
         cache_peer 10.0.0.7 sibling 3128 3130\n",
    );
    has(
        &t,
        "tls = { certificates = [{ cert = \"/etc/ssl/site.pem\", key = \"/etc/ssl/site.key\" }] }",
    );
    has(&t, "origins = [\"https://10.0.0.9:443\"]\ntls_ca = \"/ca.pem\"\ntls_server_name = \"inner.example\"");
    assert!(note(&t, 2).message.contains("forward and reverse"));
    assert!(note(&t, 3).message.contains("without tls-cert"));
    assert!(note(&t, 4).message.contains("login=PASSTHRU"));
    assert!(note(&t, 5).message.contains("other proxies"));
    assert!(note(&t, 6).message.contains("other proxies"));
}

#[test]
fn acl_types_sepia_has() {
    let (t, _) = valid(&format!(
        "{FORWARD}acl net src 192.168.1.0/255.255.255.0 10.1.2.3/8 2001:db8::/32 all\n\
         acl dsts dst 10.0.0.0/8\nacl doms dstdomain -n .Example.com\nacl p port 80 8000-8080\n\
         acl m method GET HEAD\nacl u url_regex -i \\.exe$ +i \\.Zip$\nacl up urlpath_regex -i ^/admin\n\
         acl t time MTWHF 08:00-17:30\nacl h req_header -i X-Test ^yes\nacl ua browser ^curl/\n\
         acl ref referer_regex example\n\
         http_access deny u\nhttp_access deny up\nhttp_access deny h\nhttp_access deny ua ref\n\
         http_access allow net dsts doms p m t\n"
    ));
    has(
        &t,
        "values = [\"192.168.1.0/24\", \"10.0.0.0/8\", \"2001:db8::/32\", \"0.0.0.0/0\", \"::/0\"]",
    );
    has(&t, "values = [\"(?i)\\\\.exe$\", \"\\\\.Zip$\"]\n");
    has(
        &t,
        "type = \"urlpath_regex\"\nvalues = [\"^/admin\"]\nignore_case = true",
    );
    has(&t, "values = [\"MTWHF 08:00-17:30\"]");
    has(
        &t,
        "type = \"req_header\"\nheader = \"X-Test\"\nvalues = [\"^yes\"]\nignore_case = true",
    );
    has(
        &t,
        "type = \"req_header\"\nheader = \"User-Agent\"\nvalues = [\"^curl/\"]",
    );
    has(&t, "header = \"Referer\"");
    has(&t, "values = [80, \"8000-8080\"]");
    assert!(
        t.notes.is_empty() || t.notes.iter().all(|n| n.line == 0),
        "{:#?}",
        t.notes
    );
}

#[test]
fn acls_sepia_lacks_fail_closed() {
    let (t, _) = valid(&format!(
        "{FORWARD}acl files dstdomain \"/etc/squid/blocked\"\nacl lp localport 3128\n\
         acl ok src 10.0.0.0/8\nacl named src proxy.example.com\n\
         http_access deny files\nhttp_access deny ok lp\nhttp_access allow named\n\
         http_access allow ok !lp\nhttp_access allow nosuch\nhttp_access allow ok\n"
    ));
    assert!(note(&t, 2).message.contains("copy them into `values`"));
    assert!(note(&t, 3).message.contains("localport is not supported"));
    assert!(note(&t, 5).message.contains("host name"));
    // deny files → deny all; deny ok lp → deny ok; allow named / allow ok !lp / allow nosuch dropped.
    assert_eq!(note(&t, 6).kind, NoteKind::Differs);
    has(&t, "# squid.conf:6: http_access deny files\n[[http_access]]\naction = \"deny\"\nacl = [\"all\"]");
    has(&t, "# squid.conf:7: http_access deny ok lp\n[[http_access]]\naction = \"deny\"\nacl = [\"ok\"]");
    for line in [8, 9, 10] {
        assert_eq!(note(&t, line).kind, NoteKind::NotTranslated);
        assert!(note(&t, line).message.contains("fails closed"));
    }
    assert!(note(&t, 10).message.contains("not defined"));
    assert!(!t.toml.contains("name = \"files\""));
}

#[test]
fn acl_oddities() {
    let t = tr(&format!(
        "{FORWARD}acl all src 0.0.0.0/0\nacl a src 10.0.0.0/8\nacl a dst 10.0.0.0/8\nacl x\n\
         acl b src 10.0.0.1/8\nacl r src 10.0.0.9-10.0.0.8\nhttp_access allow a b\n"
    ));
    assert!(note(&t, 2).message.contains("predefined in Sepia"));
    assert!(note(&t, 4).message.contains("already of type src"));
    assert!(note(&t, 5).message.contains("expected acl NAME TYPE"));
    has(
        &t,
        "name = \"b\"\ntype = \"src\"\nvalues = [\"10.0.0.0/8\"]",
    );
    assert!(note(&t, 7).message.contains("not an address range"));
}

#[test]
fn squids_implicit_last_rule() {
    let (t, _) = valid(&format!(
        "{FORWARD}acl bad dstdomain .bad.example\nhttp_access deny bad\n"
    ));
    has(&t, "[[http_access]]\naction = \"allow\"\nacl = [\"all\"]");
    let (t, _) = valid(&format!(
        "{FORWARD}http_access allow localhost\nhttp_access deny all\n"
    ));
    assert_eq!(t.toml.matches("[[http_access]]").count(), 2);
    has(&t, "name = \"localhost\"");
    let t = tr(&format!("{FORWARD}http_access permit all\n"));
    assert!(note(&t, 2)
        .message
        .contains("expected http_access allow|deny"));
}

#[test]
fn connect_ports_follow_the_connect_rule() {
    let (t, c) = valid(&format!(
        "{FORWARD}acl SSL_ports port 443 8443 563\nhttp_access deny CONNECT !SSL_ports\nhttp_access allow all\n"
    ));
    assert_eq!(c.forward.connect_ports, vec![443, 563, 8443]);
    has(&t, "connect_ports = [443, 563, 8443]");
    let (t, _) = valid(&format!("{FORWARD}http_access allow all\n"));
    assert!(t
        .notes
        .iter()
        .any(|n| n.message.contains("forward.connect_ports")));
}

#[test]
fn basic_auth() {
    let (t, c) = valid(&format!(
        "{FORWARD}auth_param basic program /bin/sh /etc/squid/passwd\n\
         auth_param basic children 5 startup=5 idle=1 concurrency=4\n\
         auth_param basic realm Staff proxy\nauth_param basic credentialsttl 30 minutes\n\
         auth_param digest program /usr/lib/squid/digest_file_auth\nauth_param basic utf8 on\n\
         acl users proxy_auth alice Bob\nacl any_user proxy_auth REQUIRED\n\
         http_access allow users\nhttp_access allow any_user\n"
    ));
    let auth = c.auth.expect("auth");
    assert_eq!(auth.realm, "Staff proxy");
    assert_eq!(auth.credentials_ttl.as_secs(), 1800);
    has(&t, "helper = [\"/bin/sh\", \"/etc/squid/passwd\"]");
    has(&t, "helper_children = 5");
    has(&t, "helper_concurrency = 4");
    has(&t, "values = [\"alice\", \"Bob\"]\nignore_case = true");
    has(
        &t,
        "name = \"any_user\"\ntype = \"proxy_auth\"\nvalues = [\"REQUIRED\"]\n",
    );
    assert!(note(&t, 3).message.contains("startup=5 idle=1"));
    assert!(note(&t, 6).message.contains("Basic scheme only"));
    assert!(note(&t, 7).message.contains("no equivalent"));
}

#[test]
fn basic_auth_defaults_and_case_sensitive_users() {
    let (t, _) = valid(&format!(
        "{FORWARD}auth_param basic program /bin/sh\nauth_param basic casesensitive on\n\
         acl users proxy_auth alice\nhttp_access allow users\n"
    ));
    has(
        &t,
        "realm = \"Squid proxy-caching web server\"  # Squid's default",
    );
    has(&t, "helper_children = 20  # Squid's default");
    has(&t, "credentials_ttl = \"2h\"  # Squid's default");
    has(&t, "values = [\"alice\"]\n\n");
}

#[test]
fn refresh_patterns() {
    let (t, _) = valid(&format!(
        "{FORWARD}refresh_pattern -i \\.(gif|png)$ 1440 50% 10080 override-expire ignore-reload\n\
         refresh_pattern (unclosed 0 20% 60\nrefresh_pattern . 0 2000% 60\nrefresh_pattern x 1\n\
         http_access allow all\n"
    ));
    has(
        &t,
        "pattern = \"(?i)\\\\.(gif|png)$\"\nmin = \"1d\"\npercent = 50\nmax = \"7d\"",
    );
    assert!(note(&t, 2)
        .message
        .contains("override-expire ignore-reload"));
    assert!(note(&t, 3).message.contains("regular expression"));
    assert!(note(&t, 4).message.contains("up to 1000"));
    assert!(note(&t, 5).message.contains("expected refresh_pattern"));
    assert!(!t.toml.contains("heuristic_percent"));
}

#[test]
fn memory_objects_and_disks() {
    let (t, c) = valid(&format!(
        "{FORWARD}cache_mem 1 GB\nmaximum_object_size 64 MB\nmaximum_object_size_in_memory 1 MB\n\
         cache_dir rock /var/spool/squid-rock 2048 max-size=1000000\ncache_dir aufs /var/spool/squid 10 16 256\n\
         cache_dir ufs relative 100 16 256\ncache_dir null /tmp\ncache_mem lots\nhttp_access allow all\n"
    ));
    assert_eq!(c.cache.memory_bytes, 1 << 30);
    assert_eq!(c.cache.max_object_bytes, 64 << 20);
    assert_eq!(c.cache.disks.len(), 2);
    has(&t, "path = \"/var/spool/squid-rock\"\nsize = \"2GiB\"");
    has(&t, "path = \"/var/spool/squid\"\nsize = \"64MiB\"");
    assert!(note(&t, 4).message.contains("one object size limit"));
    assert!(note(&t, 5).message.contains("max-size=1000000"));
    assert!(note(&t, 6).message.contains("raised to 64 MiB"));
    assert!(note(&t, 7).message.contains("absolute"));
    assert!(note(&t, 9).message.contains("expected a size"));
    has(&t, "heuristic_percent = 20");
}

#[test]
fn memory_only_limits_and_cache_deny() {
    let (t, c) = valid(&format!(
        "{FORWARD}cache_mem 256 KB\ncache deny all\ncache allow all\nhttp_access allow all\n"
    ));
    assert_eq!(c.cache.max_object_bytes, 256 << 10);
    assert!(!c.cache.enabled);
    has(&t, "lowered to cache.memory");
    assert!(note(&t, 4).message.contains("RFC 9111 only"));
}

#[test]
fn access_logs() {
    let (t, _) = valid(&format!(
        "{FORWARD}logformat mine %ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt\n\
         access_log stdio:/var/log/s.log mine\naccess_log /var/log/other.log\nhttp_access allow all\n"
    ));
    has(&t, "path = \"/var/log/s.log\"");
    has(&t, "format = \"squid\"");
    assert!(note(&t, 4).message.contains("one access log"));
    let (t, _) = valid(&format!(
        "{FORWARD}access_log none\nhttp_access allow all\n"
    ));
    has(&t, "path = \"off\"");
    let (t, _) = valid(&format!(
        "{FORWARD}access_log daemon:/l.log combined !localhost\nhttp_access allow all\n"
    ));
    has(&t, "format = \"combined\"");
    assert!(note(&t, 2).message.contains("ACLs of this line"));
    let t = tr(&format!(
        "{FORWARD}access_log syslog:daemon.info squid\naccess_log /x.log common\n"
    ));
    assert!(note(&t, 2).message.contains("not to syslog"));
    let t = tr(&format!("{FORWARD}access_log /x.log common\n"));
    assert!(note(&t, 2).message.contains("common is not one of Sepia's"));
}

#[test]
fn headers_server_and_timeouts() {
    let (t, c) = valid(&format!(
        "{FORWARD}via off\nforwarded_for truncate\nvisible_hostname cache1.example\nworkers 4\n\
         shutdown_lifetime 5 seconds\nconnect_timeout 30 seconds\nrequest_timeout 1 minute\n\
         client_idle_pconn_timeout 2 minutes\npconn_timeout 90 seconds\nread_timeout 15 minutes\n\
         request_header_max_size 20 KB\nconnect_timeout 0 seconds\nhttp_access allow all\n"
    ));
    assert!(!c.headers.via);
    assert_eq!(c.server.workers, 4);
    has(&t, "x_forwarded_for = \"replace\"");
    has(&t, "via_pseudonym = \"cache1.example\"");
    has(&t, "shutdown_grace = \"5s\"");
    has(&t, "connect = \"30s\"");
    has(&t, "request_head = \"1m\"");
    has(&t, "client_idle = \"2m\"");
    has(&t, "origin_idle = \"90s\"");
    has(&t, "origin_first_byte = \"15m\"");
    has(&t, "max_request_head = 20480");
    assert!(note(&t, 13).message.contains("greater than zero"));
    for (value, xff) in [
        ("on", "append"),
        ("transparent", "off"),
        ("off", "off"),
        ("delete", "off"),
    ] {
        let t = tr(&format!("{FORWARD}forwarded_for {value}\n"));
        has(&t, &format!("x_forwarded_for = \"{xff}\""));
    }
    assert!(note(&tr(&format!("{FORWARD}forwarded_for off\n")), 2)
        .message
        .contains("unknown"));
    assert!(note(&tr(&format!("{FORWARD}via maybe\n")), 2)
        .message
        .contains("on or off"));
}

#[test]
fn everything_else_is_a_note_naming_the_directive() {
    let t = tr(&format!(
        "{FORWARD}coredump_dir /var/spool/squid\ndns_nameservers 1.1.1.1\nfrobnicate yes\n\
         if ${{process_number}} = 1\nendif\nhttp_access allow all\n"
    ));
    assert!(note(&t, 2).message.contains("core dumps"));
    assert!(note(&t, 3).message.contains("resolver"));
    assert!(note(&t, 4)
        .message
        .contains("no equivalent of this directive"));
    assert!(t
        .notes
        .iter()
        .any(|n| n.line == 5 && n.message.contains("macros")));
    has(
        &t,
        "# squid.conf:4: frobnicate yes\n#     Sepia has no equivalent of this directive\n",
    );
}

#[test]
fn continuation_lines_keep_the_first_line_number() {
    let (t, _) =
        valid("http_port \\\n  127.0.0.1:3128\nacl a \\\n src 10.0.0.0/8\nhttp_access allow a\n");
    has(&t, "# squid.conf:3: acl a src 10.0.0.0/8\n");
}
