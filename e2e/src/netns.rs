//! Network namespaces for the interception tests (root only): a client, a router where Sepia
//! runs, and an origin, joined by veth pairs, with the client's traffic to the origin routed
//! through the router:
//!
//! ```text
//!  client ns             router ns (Sepia)              origin ns
//!  c0 10.77.1.2  ----  r0 10.77.1.1   r1 10.77.2.1  ----  o0 10.77.2.2
//!     fd77:1::2           fd77:1::1      fd77:2::1           fd77:2::2
//! ```
//!
//! The router then gets iptables REDIRECT or TPROXY rules ([`Lab::redirect`], [`Lab::tproxy`]).
//! Every namespace is deleted on drop, also when a test fails. Anything the kernel or the
//! machine refuses while building comes back as `Err(reason)`, so that a test can say
//! `SKIPPED: reason` instead of passing silently.

use std::fs::File;
use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::sched::{setns, CloneFlags};

use crate::origin::Origin;

pub const CLIENT_V4: &str = "10.77.1.2";
pub const ROUTER_CLIENT_SIDE_V4: &str = "10.77.1.1";
pub const ROUTER_ORIGIN_SIDE_V4: &str = "10.77.2.1";
pub const ORIGIN_V4: &str = "10.77.2.2";
pub const CLIENT_V6: &str = "fd77:1::2";
pub const ROUTER_ORIGIN_SIDE_V6: &str = "fd77:2::1";
pub const ORIGIN_V6: &str = "fd77:2::2";

/// Runs a command to completion; `Err` names it and carries its stderr.
pub fn run(argv: &[&str]) -> Result<(), String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", argv.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "`{}` failed ({}): {}",
        argv.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace with a name unique to this process and call, its loopback up.
    pub fn add(role: &str) -> Result<Netns, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let name = format!("sepia-{}-{n}-{role}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `argv` inside the namespace.
    pub fn exec(&self, argv: &[&str]) -> Result<(), String> {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(argv);
        run(&full)
    }

    /// Runs a command line (split at whitespace, no quoting) inside the namespace.
    pub fn exec_line(&self, line: &str) -> Result<(), String> {
        self.exec(&line.split_whitespace().collect::<Vec<_>>())
    }

    /// Runs `f` on a thread that has joined the namespace: sockets it creates live there.
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let handle = self.handle().unwrap_or_else(|e| panic!("{e}"));
        enter(&handle, f)
    }

    /// `/etc/netns/NAME/FILE`, which `ip netns exec` mounts over `/etc/FILE` (e.g. `hosts`).
    pub fn set_etc_file(&self, file: &str, contents: &str) -> Result<(), String> {
        let dir = self.etc_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        std::fs::write(dir.join(file), contents).map_err(|e| format!("write {file}: {e}"))
    }

    /// Writes a `/proc/sys` setting (e.g. `net/ipv4/ip_forward`) of this namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), String> {
        let path = format!("/proc/sys/{key}");
        self.enter(|| std::fs::write(&path, value))
            .map_err(|e| format!("{}: set {path}: {e}", self.name))
    }

    /// Starts a test [`Origin`] on `addr` inside the namespace.
    pub fn start_origin(&self, addr: &str) -> NsOrigin {
        let handle = self.handle().unwrap_or_else(|e| panic!("{e}"));
        let origin = enter(&handle, || Origin::start_on(addr));
        NsOrigin {
            origin: Some(origin),
            handle,
        }
    }

    fn handle(&self) -> Result<File, String> {
        let path = format!("/run/netns/{}", self.name);
        File::open(&path).map_err(|e| format!("open {path}: {e}"))
    }

    fn etc_dir(&self) -> PathBuf {
        PathBuf::from("/etc/netns").join(&self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
        let _ = std::fs::remove_dir_all(self.etc_dir());
    }
}

fn enter<T: Send>(handle: &File, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                setns(handle, CloneFlags::CLONE_NEWNET).expect("setns into the test namespace");
                f()
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// An [`Origin`] living in a namespace; stopped from inside it (its shutdown connects to its
/// own address), and keeping the namespace alive until then.
pub struct NsOrigin {
    origin: Option<Origin>,
    handle: File,
}

impl Deref for NsOrigin {
    type Target = Origin;
    fn deref(&self) -> &Origin {
        self.origin.as_ref().expect("origin present until drop")
    }
}

impl Drop for NsOrigin {
    fn drop(&mut self) {
        if let Some(origin) = self.origin.take() {
            enter(&self.handle, move || drop(origin));
        }
    }
}

/// The three namespaces and their links (see the module documentation).
pub struct Lab {
    pub client: Netns,
    pub router: Netns,
    pub origin: Netns,
}

impl Lab {
    /// Builds the namespaces, links, addresses, routes and forwarding.
    pub fn build() -> Result<Lab, String> {
        let lab = Lab {
            client: Netns::add("client")?,
            router: Netns::add("router")?,
            origin: Netns::add("origin")?,
        };
        link(&lab.client, "c0", &lab.router, "r0")?;
        link(&lab.router, "r1", &lab.origin, "o0")?;
        let (c, r, o) = (&lab.client, &lab.router, &lab.origin);
        // `nodad`: IPv6 addresses usable at once, not after duplicate address detection.
        let addresses: [(&Netns, &str, &str); 8] = [
            (c, "c0", "10.77.1.2/24"),
            (c, "c0", "fd77:1::2/64"),
            (r, "r0", "10.77.1.1/24"),
            (r, "r0", "fd77:1::1/64"),
            (r, "r1", "10.77.2.1/24"),
            (r, "r1", "fd77:2::1/64"),
            (o, "o0", "10.77.2.2/24"),
            (o, "o0", "fd77:2::2/64"),
        ];
        for (ns, dev, cidr) in addresses {
            if cidr.contains(':') {
                ns.exec(&["ip", "-6", "addr", "add", cidr, "dev", dev, "nodad"])?;
            } else {
                ns.exec(&["ip", "addr", "add", cidr, "dev", dev])?;
            }
            ns.exec(&["ip", "link", "set", dev, "up"])?;
        }
        c.exec(&[
            "ip",
            "route",
            "add",
            "default",
            "via",
            ROUTER_CLIENT_SIDE_V4,
        ])?;
        c.exec(&["ip", "-6", "route", "add", "default", "via", "fd77:1::1"])?;
        o.exec(&[
            "ip",
            "route",
            "add",
            "default",
            "via",
            ROUTER_ORIGIN_SIDE_V4,
        ])?;
        o.exec(&[
            "ip",
            "-6",
            "route",
            "add",
            "default",
            "via",
            ROUTER_ORIGIN_SIDE_V6,
        ])?;
        r.sysctl("net/ipv4/ip_forward", "1")?;
        r.sysctl("net/ipv6/conf/all/forwarding", "1")?;
        // Spoofed connections and diverted replies arrive on interfaces that are not the
        // route back to their source; strict reverse-path filtering would drop them.
        r.sysctl("net/ipv4/conf/all/rp_filter", "0")?;
        r.sysctl("net/ipv4/conf/default/rp_filter", "0")?;
        Ok(lab)
    }

    /// NAT REDIRECT of the client side's port-80 traffic (IPv4 and IPv6) to `port`.
    pub fn redirect(&self, port: u16) -> Result<(), String> {
        for tool in ["iptables", "ip6tables"] {
            self.router.exec_line(&format!(
                "{tool} -t nat -A PREROUTING -i r0 -p tcp --dport 80 -j REDIRECT --to-ports {port}"
            ))?;
        }
        Ok(())
    }

    /// TPROXY of the client side's port-80 traffic (IPv4 and IPv6) to `port`, the policy
    /// routing that delivers marked packets locally, and the `-m socket` rule that sends the
    /// replies to spoofed connections (and the rest of diverted flows) to Sepia's sockets.
    pub fn tproxy(&self, port: u16) -> Result<(), String> {
        for tool in ["iptables", "ip6tables"] {
            for line in [
                format!("{tool} -t mangle -N DIVERT"),
                format!("{tool} -t mangle -A DIVERT -j MARK --set-mark 1"),
                format!("{tool} -t mangle -A DIVERT -j ACCEPT"),
                format!("{tool} -t mangle -A PREROUTING -p tcp -m socket -j DIVERT"),
                format!(
                    "{tool} -t mangle -A PREROUTING -i r0 -p tcp --dport 80 \
                     -j TPROXY --tproxy-mark 0x1/0x1 --on-port {port}"
                ),
            ] {
                self.router.exec_line(&line)?;
            }
        }
        self.deliver_marked_locally()
    }

    /// Policy routing for TPROXY: packets marked 1 are delivered to local sockets.
    fn deliver_marked_locally(&self) -> Result<(), String> {
        for (ip, any) in [("-4", "0.0.0.0/0"), ("-6", "::/0")] {
            self.router
                .exec_line(&format!("ip {ip} rule add fwmark 1 lookup 100"))?;
            self.router
                .exec_line(&format!("ip {ip} route add local {any} dev lo table 100"))?;
        }
        Ok(())
    }

    /// The nftables equivalent of [`Lab::redirect`] (`"redirect"`) or [`Lab::tproxy`]
    /// (`"tproxy"`), as documented in docs/INTERCEPTION.md.
    pub fn nft(&self, kind: &str, port: u16) -> Result<(), String> {
        let rules = match kind {
            "redirect" => format!(
                "table inet sepia_nat {{\n chain prerouting {{\n  \
                 type nat hook prerouting priority dstnat;\n  \
                 iifname \"r0\" tcp dport 80 redirect to :{port}\n }}\n}}\n"
            ),
            _ => format!(
                "table inet sepia_tproxy {{\n chain prerouting {{\n  \
                 type filter hook prerouting priority mangle;\n  \
                 meta l4proto tcp socket transparent 1 meta mark set 1 accept\n  \
                 iifname \"r0\" tcp dport 80 tproxy to :{port} meta mark set 1 accept\n }}\n}}\n"
            ),
        };
        let file = std::env::temp_dir().join(format!("{}.nft", self.router.name()));
        std::fs::write(&file, rules).map_err(|e| format!("write {}: {e}", file.display()))?;
        let loaded = self.router.exec(&["nft", "-f", &file.to_string_lossy()]);
        let _ = std::fs::remove_file(&file);
        loaded?;
        match kind {
            "redirect" => Ok(()),
            _ => self.deliver_marked_locally(),
        }
    }
}

/// A veth pair with one end in each namespace.
fn link(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) -> Result<(), String> {
    run(&[
        "ip",
        "link",
        "add",
        a_dev,
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        b_dev,
        "netns",
        b.name(),
    ])
}
