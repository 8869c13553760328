//! Squid's sizes (`256 MB`) and times (`2 hours`), and the Sepia forms they become
//! (`"256MiB"`, `"2h"`); TOML strings.

/// A Squid size: a number and an optional unit (`bytes`, `KB`, `MB`, `GB`; Squid's units are
/// binary); `default_unit` applies when the unit is missing. Returns the size in bytes.
pub(crate) fn squid_bytes(number: &str, unit: Option<&str>, default_unit: u64) -> Option<u64> {
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let scale = match unit.map(str::to_ascii_lowercase).as_deref() {
        None => default_unit,
        Some("byte" | "bytes" | "b") => 1,
        Some("kb" | "k" | "kib") => 1 << 10,
        Some("mb" | "m" | "mib") => 1 << 20,
        Some("gb" | "g" | "gib") => 1 << 30,
        Some(_) => return None,
    };
    let bytes = n * scale as f64;
    (bytes < u64::MAX as f64).then_some(bytes.round() as u64)
}

/// `bytes` in Sepia's form: the largest of GiB, MiB, KiB and B that divides it.
pub(crate) fn sepia_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// A Squid time: a number and a unit word (`30 seconds`, `2 hours`, `1 day`); `default_unit`
/// (seconds) applies when the unit is missing. Returns milliseconds.
pub(crate) fn squid_time_ms(number: &str, unit: Option<&str>, default_unit: u64) -> Option<u64> {
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let unit = unit.map(|u| u.to_ascii_lowercase());
    let unit = unit.as_deref().map(|u| u.strip_suffix('s').unwrap_or(u));
    let secs: f64 = match unit {
        None => default_unit as f64,
        Some("msec" | "millisecond" | "m") => 0.001,
        Some("second" | "sec") => 1.0,
        Some("minute" | "min") => 60.0,
        Some("hour") => 3600.0,
        Some("day") => 86_400.0,
        Some("week") => 7.0 * 86_400.0,
        Some("fortnight") => 14.0 * 86_400.0,
        Some("month") => 30.0 * 86_400.0,
        Some("year") => 365.0 * 86_400.0,
        Some("decade") => 3650.0 * 86_400.0,
        Some(_) => return None,
    };
    let ms = n * secs * 1000.0;
    (ms < u64::MAX as f64).then_some(ms.round() as u64)
}

/// Milliseconds in Sepia's duration form: the largest of d, h, m, s and ms that divides it.
pub(crate) fn sepia_duration(ms: u64) -> String {
    for (per, unit) in [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ] {
        if ms != 0 && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    if ms == 0 {
        return "0s".into();
    }
    format!("{ms}ms")
}

/// A TOML basic string with `"`, `\` and control characters escaped.
pub(crate) fn toml_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML array of strings.
pub(crate) fn toml_strs<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| toml_str(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// `on`/`off` (also `yes`/`no`, `1`/`0`, as Squid reads them).
pub(crate) fn on_off(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "on" | "yes" | "enable" | "1" | "true" => Some(true),
        "off" | "no" | "disable" | "0" | "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(squid_bytes("256", Some("MB"), 1), Some(256 << 20));
        assert_eq!(squid_bytes("4", Some("KB"), 1), Some(4096));
        assert_eq!(squid_bytes("100", None, 1 << 20), Some(100 << 20));
        assert_eq!(squid_bytes("0.5", Some("GB"), 1), Some(512 << 20));
        assert_eq!(squid_bytes("x", None, 1), None);
        assert_eq!(squid_bytes("1", Some("furlong"), 1), None);
        assert_eq!(sepia_size(256 << 20), "256MiB");
        assert_eq!(sepia_size(1536), "1536B");
        assert_eq!(sepia_size(4 << 30), "4GiB");
        assert_eq!(sepia_size(0), "0B");
    }

    #[test]
    fn times() {
        assert_eq!(squid_time_ms("2", Some("hours"), 1), Some(7_200_000));
        assert_eq!(squid_time_ms("30", Some("seconds"), 1), Some(30_000));
        assert_eq!(squid_time_ms("1", Some("minute"), 1), Some(60_000));
        assert_eq!(squid_time_ms("15", None, 60), Some(900_000));
        assert_eq!(sepia_duration(7_200_000), "2h");
        assert_eq!(sepia_duration(259_200_000), "3d");
        assert_eq!(sepia_duration(90_000), "90s");
        assert_eq!(sepia_duration(1500), "1500ms");
        assert_eq!(sepia_duration(0), "0s");
    }

    #[test]
    fn toml_strings() {
        assert_eq!(toml_str(r"\.(jpg)$"), r#""\\.(jpg)$""#);
        assert_eq!(toml_str("a\"b"), r#""a\"b""#);
        assert_eq!(toml_strs(&["a", "b"]), r#"["a", "b"]"#);
    }
}
