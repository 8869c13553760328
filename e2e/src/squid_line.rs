//! Squid's native access-log line, `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a
//! %mt`, split into its fields, with a check of each field's shape. Used on Sepia's lines and,
//! in `tests/squid_log.rs`, on the lines Squid itself writes.

use std::net::IpAddr;

/// One native-format line.
#[derive(Clone, Debug)]
pub struct SquidLine {
    /// The line without its newline.
    pub line: String,
    /// The space-separated fields (the runs of spaces that pad `%6tr` separate nothing).
    pub fields: Vec<String>,
}

impl SquidLine {
    /// Splits `line`; panics unless it has exactly ten fields.
    pub fn parse(line: &str) -> SquidLine {
        let fields: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        assert_eq!(fields.len(), 10, "not a Squid native line: {line:?}");
        SquidLine {
            line: line.to_string(),
            fields,
        }
    }

    /// `%Ss`, e.g. `TCP_MISS`.
    pub fn code(&self) -> &str {
        self.fields[3].split_once('/').map_or("", |(c, _)| c)
    }

    /// `%03>Hs` as written, e.g. `200` or `000`.
    pub fn status(&self) -> &str {
        self.fields[3].split_once('/').map_or("", |(_, s)| s)
    }

    /// `%<st`.
    pub fn bytes(&self) -> u64 {
        self.fields[4].parse().expect("bytes field")
    }

    /// `%tr`.
    pub fn elapsed_ms(&self) -> u64 {
        self.fields[1].parse().expect("elapsed field")
    }

    pub fn method(&self) -> &str {
        &self.fields[5]
    }

    pub fn url(&self) -> &str {
        &self.fields[6]
    }

    pub fn user(&self) -> &str {
        &self.fields[7]
    }

    /// `%Sh`, e.g. `HIER_DIRECT`.
    pub fn hierarchy(&self) -> &str {
        self.fields[8].split_once('/').map_or("", |(h, _)| h)
    }

    /// `%<a`: the peer IP or `-`.
    pub fn peer(&self) -> &str {
        self.fields[8].split_once('/').map_or("", |(_, p)| p)
    }

    /// `%mt`.
    pub fn mime_type(&self) -> &str {
        &self.fields[9]
    }

    /// The part of the line up to the end of `%6tr`: `SECONDS.MMM` then the elapsed time
    /// right-aligned in (at least) six columns.
    fn time_prefix(&self) -> (&str, &str) {
        let line = &self.line;
        let ts_end = line.find(' ').expect("a space after the timestamp");
        let rest = &line[ts_end + 1..];
        let spaces = rest.len() - rest.trim_start_matches(' ').len();
        let digits = rest[spaces..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let tr_end = spaces + digits;
        (&line[..ts_end], &rest[..tr_end])
    }

    /// Checks the shape of every field as Squid writes it, whatever the values.
    pub fn assert_layout(&self) {
        let line = &self.line;
        let (ts, tr) = self.time_prefix();
        let (secs, millis) = ts
            .split_once('.')
            .unwrap_or_else(|| panic!("%ts.%03tu: {line:?}"));
        assert!(
            !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit()),
            "{line:?}"
        );
        assert!(
            millis.len() == 3 && millis.bytes().all(|b| b.is_ascii_digit()),
            "{line:?}"
        );
        assert!(tr.len() >= 6, "%6tr is padded to six columns: {line:?}");
        let digits = tr.trim_start_matches(' ');
        assert!(
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
            "{line:?}"
        );
        assert!(
            tr.len() == 6 || !tr.starts_with(' '),
            "%6tr: wider values are not padded: {line:?}"
        );
        assert!(self.fields[2].parse::<IpAddr>().is_ok(), "%>a: {line:?}");
        let code = self.code();
        assert!(
            code.len() > 4 && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
            "%Ss: {line:?}"
        );
        let status = self.status();
        assert!(
            status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit()),
            "{line:?}"
        );
        assert!(
            self.fields[4].bytes().all(|b| b.is_ascii_digit()),
            "%<st: {line:?}"
        );
        assert!(
            self.method().bytes().all(|b| b.is_ascii_uppercase()),
            "%rm: {line:?}"
        );
        assert!(!self.url().is_empty(), "%ru: {line:?}");
        assert!(!self.user().is_empty(), "%[un: {line:?}");
        let hier = self.hierarchy();
        assert!(
            hier.len() > 4 && hier.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
            "%Sh: {line:?}"
        );
        let peer = self.peer();
        assert!(
            peer == "-" || peer.parse::<IpAddr>().is_ok(),
            "%<a: {line:?}"
        );
        let mime = self.mime_type();
        assert!(
            mime == "-" || (mime.contains('/') && !mime.contains(';')),
            "%mt is a media type or '-': {line:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squid_line_fields_and_layout() {
        let line = SquidLine::parse(
            "1795433241.614     11 127.0.0.1 TCP_MISS/200 298 GET \
             http://127.0.0.1:38080/index.html - HIER_DIRECT/127.0.0.1 text/html",
        );
        line.assert_layout();
        assert_eq!(line.code(), "TCP_MISS");
        assert_eq!(line.status(), "200");
        assert_eq!(line.bytes(), 298);
        assert_eq!(line.elapsed_ms(), 11);
        assert_eq!(line.method(), "GET");
        assert_eq!(line.url(), "http://127.0.0.1:38080/index.html");
        assert_eq!(line.user(), "-");
        assert_eq!(line.hierarchy(), "HIER_DIRECT");
        assert_eq!(line.peer(), "127.0.0.1");
        assert_eq!(line.mime_type(), "text/html");
        SquidLine::parse("1.000 1234567 ::1 TCP_TUNNEL/200 1 CONNECT a:443 - HIER_DIRECT/::1 -")
            .assert_layout();
    }

    #[test]
    #[should_panic(expected = "%6tr")]
    fn unpadded_elapsed_is_caught() {
        SquidLine::parse("1.000 11 127.0.0.1 TCP_MISS/200 1 GET u - HIER_NONE/- -").assert_layout();
    }

    #[test]
    #[should_panic(expected = "%mt")]
    fn mime_parameters_are_caught() {
        SquidLine::parse(
            "1.000      1 127.0.0.1 TCP_MISS/200 1 GET u - HIER_NONE/- text/html;charset=utf-8",
        )
        .assert_layout();
    }
}
