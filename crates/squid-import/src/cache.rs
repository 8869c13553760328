//! `cache_mem`, `maximum_object_size(_in_memory)`, `cache_dir`, `refresh_pattern` and
//! `cache deny all` → `[cache]`, `[[cache.disk]]`, `[[cache.refresh]]`.

use crate::cx::Cx;
use crate::out::Table;
use crate::parse::Directive;
use crate::units::{sepia_duration, sepia_size, squid_bytes, toml_str};

/// Squid 5's defaults.
const SQUID_MAX_OBJECT: u64 = 4 << 20;
const SQUID_MAX_IN_MEMORY: u64 = 512 << 10;
const SEPIA_MIN_DISK: u64 = 64 << 20;

#[derive(Default)]
pub(crate) struct Cache {
    memory: Option<(u64, Directive)>,
    max_object: Option<(u64, Directive)>,
    max_in_memory: Option<(u64, Directive)>,
    disks: usize,
    refresh: usize,
}

impl Cache {
    pub(crate) fn take(&mut self, cx: &mut Cx, d: &Directive) -> bool {
        match d.name.as_str() {
            "cache_mem" => set_size(cx, d, &mut self.memory),
            "maximum_object_size" => set_size(cx, d, &mut self.max_object),
            "maximum_object_size_in_memory" => set_size(cx, d, &mut self.max_in_memory),
            "cache_dir" => self.disks += cache_dir(cx, d),
            "refresh_pattern" => self.refresh += refresh(cx, d),
            "cache" => cache_rule(cx, d),
            _ => return false,
        }
        true
    }

    /// The memory budget and the largest object, with Squid's defaults where squid.conf
    /// relies on them: Squid keeps objects up to `maximum_object_size` (4 MB) and, in memory,
    /// up to `maximum_object_size_in_memory` (512 KB); without a cache_dir, that is the limit.
    pub(crate) fn finish(&self, cx: &mut Cx) {
        let memory = match &self.memory {
            Some((bytes, d)) => {
                let src = cx.src(d);
                cx.out
                    .set("cache", "memory", toml_str(&sepia_size(*bytes)), src);
                *bytes
            }
            None => 256 << 20,
        };
        let (mut max, mut src) = match &self.max_object {
            Some((b, d)) => (*b, cx.src(d)),
            None => (
                SQUID_MAX_OBJECT,
                "Squid's default maximum_object_size 4 MB".into(),
            ),
        };
        if self.disks == 0 {
            let (in_mem, in_src) = match &self.max_in_memory {
                Some((b, d)) => (*b, cx.src(d)),
                None => (
                    SQUID_MAX_IN_MEMORY,
                    "Squid's default maximum_object_size_in_memory 512 KB (no cache_dir)".into(),
                ),
            };
            if in_mem < max {
                (max, src) = (in_mem, in_src);
            }
        } else if let Some((_, d)) = &self.max_in_memory {
            cx.differs(
                d,
                "Sepia has one object size limit (cache.max_object, from maximum_object_size): \
                 objects reach the disk through memory",
            );
        }
        if max > memory {
            max = memory;
            src.push_str(" (lowered to cache.memory: Sepia's limit)");
        }
        if max > 0 && memory > 0 {
            cx.out
                .set("cache", "max_object", toml_str(&sepia_size(max)), src);
        }
        if self.refresh == 0 {
            let why = "Squid's default heuristic for responses without expiry: 20% of their age, \
                       at most 3 days";
            cx.out
                .set("cache", "heuristic_percent", "20".into(), why.into());
            cx.out
                .set("cache", "heuristic_max", toml_str("3d"), why.into());
        }
    }
}

/// A size directive: the last valid one wins, as in Squid.
fn set_size(cx: &mut Cx, d: &Directive, slot: &mut Option<(u64, Directive)>) {
    if let Some(bytes) = size(cx, d) {
        *slot = Some((bytes, d.clone()));
    }
}

fn size(cx: &mut Cx, d: &Directive) -> Option<u64> {
    let bytes = d
        .args
        .first()
        .and_then(|n| squid_bytes(n, d.args.get(1).map(String::as_str), 1));
    if bytes.is_none() {
        cx.skip(d, "expected a size such as `256 MB`");
    }
    bytes
}

/// `cache_dir TYPE PATH MBYTES …` → one `[[cache.disk]]`; returns how many were written.
fn cache_dir(cx: &mut Cx, d: &Directive) -> usize {
    let [kind, path, mbytes, rest @ ..] = d.args.as_slice() else {
        if d.args.first().map(String::as_str) == Some("null") {
            return 0;
        }
        cx.skip(d, "expected cache_dir TYPE PATH MBYTES");
        return 0;
    };
    if !matches!(kind.as_str(), "ufs" | "aufs" | "diskd" | "rock") {
        cx.skip(d, &format!("unknown cache_dir type {kind}"));
        return 0;
    }
    if !path.starts_with('/') {
        cx.skip(d, "Sepia's cache.disk path must be absolute");
        return 0;
    }
    let Some(mut bytes) = squid_bytes(mbytes, None, 1 << 20) else {
        cx.skip(d, "expected the size in megabytes");
        return 0;
    };
    if bytes < SEPIA_MIN_DISK {
        cx.differs(d, "raised to 64 MiB, the smallest disk Sepia takes");
        bytes = SEPIA_MIN_DISK;
    }
    let options: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .filter(|o| o.contains('='))
        .collect();
    let mut why = format!(
        "Sepia keeps its own format (log-structured segments): Squid's {kind} objects there \
         are not read; give Sepia an empty directory of its own, or clear this one"
    );
    if !options.is_empty() {
        why.push_str(&format!("; options left out: {}", options.join(" ")));
    }
    cx.differs(d, &why);
    let table = Table::new(cx.src(d))
        .with("path", toml_str(path))
        .with("size", toml_str(&sepia_size(bytes)));
    cx.out.push("cache.disk", table);
    1
}

/// `refresh_pattern [-i] REGEX MIN PERCENT% MAX [OPTIONS]` → one `[[cache.refresh]]`.
fn refresh(cx: &mut Cx, d: &Directive) -> usize {
    let (icase, args) = match d.args.first().map(String::as_str) {
        Some("-i") => (true, &d.args[1..]),
        _ => (false, &d.args[..]),
    };
    let [pattern, min, percent, max, options @ ..] = args else {
        cx.skip(d, "expected refresh_pattern [-i] REGEX MIN PERCENT MAX");
        return 0;
    };
    let minutes = |m: &str| m.parse::<u64>().ok().map(|m| sepia_duration(m * 60_000));
    let pct = percent.trim_end_matches('%').parse::<u64>().ok();
    let (Some(min), Some(pct), Some(max)) = (minutes(min), pct, minutes(max)) else {
        cx.skip(d, "expected whole minutes and a whole percentage");
        return 0;
    };
    let pattern = if icase {
        format!("(?i){pattern}")
    } else {
        pattern.clone()
    };
    if let Err(e) = regex::Regex::new(&pattern) {
        cx.skip(
            d,
            &format!("Sepia cannot compile this regular expression: {e}"),
        );
        return 0;
    }
    if pct > 1000 {
        cx.skip(d, "Sepia takes percentages up to 1000");
        return 0;
    }
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let why = "Sepia follows RFC 9111: it never overrides an origin's explicit freshness or \
               no-store/private";
    cx.left_out(d, &options, why);
    let table = Table::new(cx.src(d))
        .with("pattern", toml_str(&pattern))
        .with("min", toml_str(&min))
        .with("percent", pct.to_string())
        .with("max", toml_str(&max));
    cx.out.push("cache.refresh", table);
    1
}

/// `cache deny all` turns the cache off; other `cache` rules have no equivalent.
fn cache_rule(cx: &mut Cx, d: &Directive) {
    if d.args == ["deny", "all"] {
        let src = cx.src(d);
        cx.out.set("cache", "enabled", "false".into(), src);
    } else {
        cx.skip(
            d,
            "Sepia decides what to store by RFC 9111 only: no per-request cache rules \
             (only `cache deny all`, which turns the cache off, is translated)",
        );
    }
}
