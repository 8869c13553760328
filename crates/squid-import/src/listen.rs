//! `http_port` / `https_port` → `[[listen]]`; `cache_peer … parent … originserver` with
//! `cache_peer_domain` / `cache_peer_access` → `[[route]]` (host and origins).

use crate::access::Acls;
use crate::cx::Cx;
use crate::out::Table;
use crate::parse::Directive;
use crate::units::{toml_str, toml_strs};

#[derive(Default)]
pub(crate) struct Listen {
    ports: Vec<Port>,
    peers: Vec<Peer>,
    peer_rules: Vec<Directive>,
}

struct Port {
    d: Directive,
    addresses: Vec<String>,
    mode: &'static str,
    vhost: bool,
    defaultsite: Option<String>,
    /// `tls-cert=` / `tls-key=` of an `https_port`.
    tls: Option<(String, String)>,
}

struct Peer {
    d: Directive,
    name: String,
    origin: String,
    forced_domain: Option<String>,
    tls_ca: Option<String>,
    tls_server_name: Option<String>,
    insecure: bool,
}

impl Listen {
    pub(crate) fn take(&mut self, cx: &mut Cx, d: &Directive) -> bool {
        match d.name.as_str() {
            "http_port" | "https_port" => {
                if let Some(port) = port(cx, d) {
                    self.ports.push(port);
                }
            }
            "cache_peer" => {
                if let Some(peer) = peer(cx, d) {
                    self.peers.push(peer);
                }
            }
            "cache_peer_domain" | "cache_peer_access" => self.peer_rules.push(d.clone()),
            _ => return false,
        }
        true
    }

    /// Whether any listener is a forward proxy (where CONNECT ports matter).
    pub(crate) fn has_forward(&self) -> bool {
        self.ports.is_empty() || self.ports.iter().any(|p| p.mode == "forward")
    }

    pub(crate) fn finish(&self, cx: &mut Cx, acls: &Acls) {
        if self.ports.is_empty() {
            cx.general(
                "squid.conf has no http_port; Sepia needs a listener: this translation listens \
                 as a forward proxy on Squid's customary port 3128, on every address",
            );
            let d = Directive::synthetic("http_port 3128");
            let ports: Vec<Port> = port(cx, &d).into_iter().collect();
            self.emit_listeners(cx, &ports);
        } else {
            self.emit_listeners(cx, &self.ports);
        }
        self.routes(cx, acls);
    }

    fn emit_listeners(&self, cx: &mut Cx, ports: &[Port]) {
        let mut seen: Vec<String> = Vec::new();
        for p in ports {
            for address in &p.addresses {
                if seen.contains(address) {
                    cx.skip(&p.d, &format!("{address} is already a listener"));
                    continue;
                }
                seen.push(address.clone());
                let mut table = Table::new(cx.src(&p.d))
                    .with("address", toml_str(address))
                    .with("mode", toml_str(p.mode));
                if let Some((cert, key)) = &p.tls {
                    let tls = format!(
                        "{{ certificates = [{{ cert = {}, key = {} }}] }}",
                        toml_str(cert),
                        toml_str(key)
                    );
                    table = table.with("tls", tls);
                }
                cx.out.push("listen", table);
            }
        }
    }

    /// The routes: for each host a route serves, the origin peers that may serve it, in
    /// squid.conf order; peers without restrictions serve every host (`"*"`).
    fn routes(&self, cx: &mut Cx, acls: &Acls) {
        let mut hosts: Vec<(String, Vec<usize>, Vec<String>)> = Vec::new();
        let mut any: Vec<usize> = Vec::new();
        for (i, peer) in self.peers.iter().enumerate() {
            match self.domains(cx, acls, peer) {
                None => any.push(i),
                Some((domains, sources)) => {
                    for host in domains.iter().flat_map(|d| route_hosts(d)) {
                        match hosts.iter_mut().find(|(h, _, _)| *h == host) {
                            Some((_, peers, srcs)) => {
                                peers.push(i);
                                srcs.extend(sources.clone());
                            }
                            None => hosts.push((host, vec![i], sources.clone())),
                        }
                    }
                }
            }
        }
        for (_, peers, _) in &mut hosts {
            peers.extend(&any);
        }
        let mut default: Option<(Vec<usize>, Option<String>, String)> =
            (!any.is_empty()).then(|| {
                (
                    any.clone(),
                    None,
                    "peers without domain restrictions".to_string(),
                )
            });
        for p in self.ports.iter().filter(|p| p.mode == "reverse") {
            if let Some(site) = p.defaultsite.as_ref().filter(|_| !p.vhost) {
                let peers = hosts
                    .iter()
                    .find(|(h, _, _)| route_matches(h, site))
                    .map_or(any.clone(), |(_, peers, _)| peers.clone());
                cx.differs(
                    &p.d,
                    &format!(
                        "without vhost Squid sends every request on this port to {site}; \
                         Sepia routes by Host: requests for a host without a route of its \
                         own go to the \"*\" route, to {site}'s origins with Host: {site}"
                    ),
                );
                default = Some((peers, Some(site.clone()), cx.src(&p.d)));
            }
        }
        self.emit_routes(cx, hosts, default);
    }

    fn emit_routes(
        &self,
        cx: &mut Cx,
        hosts: Vec<(String, Vec<usize>, Vec<String>)>,
        default: Option<(Vec<usize>, Option<String>, String)>,
    ) {
        for (host, peers, sources) in hosts {
            self.emit_route(cx, &host, &peers, None, sources);
        }
        if let Some((peers, host_header, why)) = default {
            self.emit_route(cx, "*", &peers, host_header, vec![why]);
        }
        let reverse = self.ports.iter().any(|p| p.mode == "reverse");
        if reverse && cx.out.count("route") == 0 {
            for p in self.ports.iter().filter(|p| p.mode == "reverse") {
                self.direct_route(cx, p);
            }
        }
        if !reverse && !self.peers.is_empty() {
            cx.general(
                "the cache_peer origin servers became [[route]]s, which Sepia uses on reverse \
                 (accel) listeners only; squid.conf has none",
            );
        }
    }

    /// An accelerator without origin peers: Squid goes to the host itself.
    fn direct_route(&self, cx: &mut Cx, p: &Port) {
        match &p.defaultsite {
            Some(site) if !p.vhost && cx.out.count("route") == 0 => {
                let table = Table::new(cx.src(&p.d))
                    .with("host", toml_str("*"))
                    .with("origins", toml_strs(&[format!("http://{site}")]));
                cx.out.push("route", table);
                cx.differs(
                    &p.d,
                    &format!(
                        "no cache_peer: Squid goes to {site} directly; so does the \"*\" route"
                    ),
                );
            }
            _ => cx.differs(
                &p.d,
                "no originserver cache_peer: Squid goes to the host each request names, Sepia \
                 needs a [[route]] with origins for every host (add them: `sepia check` fails \
                 without one)",
            ),
        }
    }

    fn emit_route(
        &self,
        cx: &mut Cx,
        host: &str,
        peers: &[usize],
        host_header: Option<String>,
        sources: Vec<String>,
    ) {
        let peers: Vec<&Peer> = peers.iter().map(|&i| &self.peers[i]).collect();
        let Some(first) = peers.first() else {
            return;
        };
        let mut comments = sources;
        comments.extend(peers.iter().map(|p| cx.src(&p.d)));
        comments.dedup();
        let mut table = Table {
            comments,
            entries: Vec::new(),
        };
        let origins: Vec<&str> = peers.iter().map(|p| p.origin.as_str()).collect();
        table.set("host", toml_str(host), None);
        table.set("origins", toml_strs(&origins), None);
        if let Some(h) = host_header.or(first.forced_domain.clone()) {
            table.set("host_header", toml_str(&h), None);
        }
        let tls = peers.iter().find(|p| p.origin.starts_with("https://"));
        if let Some(p) = tls {
            if let Some(ca) = &p.tls_ca {
                table.set("tls_ca", toml_str(ca), None);
            }
            if let Some(name) = &p.tls_server_name {
                table.set("tls_server_name", toml_str(name), None);
            }
            if p.insecure {
                table.set("tls_insecure_skip_verify", "true".into(), None);
            }
        }
        if peers.len() > 1 {
            cx.general(&format!(
                "route {host}: Sepia round-robins over its {} origins (failing over on connect \
                 errors); Squid uses the first parent that is up unless a cache_peer says \
                 round-robin",
                peers.len()
            ));
        }
        cx.out.push("route", table);
    }

    /// The domains a peer serves (`None`: every domain), from `cache_peer_domain` and
    /// `cache_peer_access` lines naming it, with those lines as sources.
    fn domains(&self, cx: &mut Cx, acls: &Acls, peer: &Peer) -> Option<(Vec<String>, Vec<String>)> {
        let lines: Vec<&Directive> = self
            .peer_rules
            .iter()
            .filter(|d| d.args.first() == Some(&peer.name))
            .collect();
        if lines.is_empty() {
            return None;
        }
        let mut domains = Vec::new();
        let mut sources = Vec::new();
        let mut unrestricted = false;
        for d in lines {
            sources.push(cx.src(d));
            if d.name == "cache_peer_domain" {
                for dom in &d.args[1..] {
                    match dom.strip_prefix('!') {
                        Some(_) => {
                            cx.differs(d, "a route cannot exclude a domain: !domains are left out")
                        }
                        None => domains.push(dom.clone()),
                    }
                }
                continue;
            }
            let rest: Vec<&str> = d.args[1..].iter().map(String::as_str).collect();
            match rest.as_slice() {
                ["allow", "all"] => unrestricted = true,
                ["deny", "all"] => {}
                ["allow", name] if acls.domains(name).is_some() => {
                    domains.extend(acls.domains(name).unwrap_or_default());
                }
                _ => cx.differs(
                    d,
                    "only `allow <dstdomain ACL>`, `allow all` and `deny all` lines become \
                     routes; this line is left out",
                ),
            }
        }
        if unrestricted || domains.is_empty() {
            return None;
        }
        Some((domains, sources))
    }
}

/// The route hosts of a `dstdomain` value: `.example.com` is the domain and its subdomains.
fn route_hosts(domain: &str) -> Vec<String> {
    let domain = domain.to_ascii_lowercase();
    match domain.strip_prefix('.') {
        Some(bare) => vec![bare.to_string(), format!("*.{bare}")],
        None => vec![domain],
    }
}

fn route_matches(route_host: &str, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    match route_host.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => route_host == host,
    }
}

/// One `http_port` / `https_port` line.
fn port(cx: &mut Cx, d: &Directive) -> Option<Port> {
    let Some(spec) = d.args.first() else {
        cx.skip(d, "no port given");
        return None;
    };
    let addresses = match addresses(spec) {
        Ok(a) => a,
        Err(why) => {
            cx.skip(d, &why);
            return None;
        }
    };
    let mut p = Port {
        d: d.clone(),
        addresses,
        mode: "forward",
        vhost: false,
        defaultsite: None,
        tls: None,
    };
    let (mut cert, mut key) = (None, None);
    let mut ignored = Vec::new();
    for opt in &d.args[1..] {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        match k {
            "accel" => p.mode = "reverse",
            "intercept" | "transparent" => p.mode = "intercept",
            "tproxy" => p.mode = "tproxy",
            "vhost" => p.vhost = true,
            "defaultsite" => p.defaultsite = Some(v.to_string()),
            "cert" | "tls-cert" => cert = Some(v.to_string()),
            "key" | "tls-key" => key = Some(v.to_string()),
            "name" => {}
            "ssl-bump" => {
                cx.skip(
                    d,
                    "Sepia does not bump (decrypt) TLS: CONNECT stays a blind tunnel",
                );
                return None;
            }
            _ => ignored.push(opt.as_str()),
        }
    }
    cx.left_out(d, &ignored, "no equivalent in Sepia");
    if d.name == "https_port" {
        let Some(cert) = cert else {
            cx.skip(
                d,
                "an https_port without tls-cert= (cert=) cannot be translated",
            );
            return None;
        };
        if p.mode != "forward" && p.mode != "reverse" {
            cx.skip(
                d,
                "Sepia terminates TLS on forward and reverse listeners only",
            );
            return None;
        }
        let key = key.unwrap_or_else(|| cert.clone());
        p.tls = Some((cert, key));
    }
    Some(p)
}

/// `3128` (every address: one IPv4 and one IPv6 listener), `1.2.3.4:3128`, `[::1]:3128`,
/// `localhost:3128`.
fn addresses(spec: &str) -> Result<Vec<String>, String> {
    if let Ok(port) = spec.parse::<u16>() {
        return Ok(vec![format!("0.0.0.0:{port}"), format!("[::]:{port}")]);
    }
    if spec.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(vec![spec.to_string()]);
    }
    if let Some(port) = spec.strip_prefix("localhost:") {
        if port.parse::<u16>().is_ok() {
            return Ok(vec![format!("127.0.0.1:{port}")]);
        }
    }
    Err(format!(
        "{spec}: Sepia listens on IP addresses (IPv4:port or [IPv6]:port), not host names"
    ))
}

/// One `cache_peer` line; only origin servers (`parent … originserver`) become origins.
fn peer(cx: &mut Cx, d: &Directive) -> Option<Peer> {
    let [host, kind, http_port, _icp, options @ ..] = d.args.as_slice() else {
        cx.skip(
            d,
            "expected cache_peer HOST TYPE HTTP-PORT ICP-PORT [OPTIONS]",
        );
        return None;
    };
    if kind != "parent" || !options.iter().any(|o| o == "originserver") {
        cx.skip(
            d,
            "Sepia does not relay through other proxies (parents, siblings, ICP/HTCP): only \
             `parent … originserver` peers become route origins",
        );
        return None;
    }
    let mut p = Peer {
        d: d.clone(),
        name: host.clone(),
        origin: String::new(),
        forced_domain: None,
        tls_ca: None,
        tls_server_name: None,
        insecure: false,
    };
    let mut scheme = "http";
    let mut ignored = Vec::new();
    for opt in options {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        match k {
            "originserver" | "no-query" | "no-digest" | "no-netdb-exchange" | "default" => {}
            "name" => p.name = v.to_string(),
            "ssl" | "tls" => scheme = "https",
            "sslcafile" | "tls-cafile" => p.tls_ca = Some(v.to_string()),
            "ssldomain" | "tls-domain" => p.tls_server_name = Some(v.to_string()),
            "sslflags" | "tls-flags" if v.contains("DONT_VERIFY_PEER") => p.insecure = true,
            "forceddomain" => p.forced_domain = Some(v.to_string()),
            _ => ignored.push(opt.as_str()),
        }
    }
    cx.left_out(d, &ignored, "no equivalent in Sepia");
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    p.origin = format!("{scheme}://{host}:{http_port}");
    Some(p)
}
