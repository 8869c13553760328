//! Running the real `curl` against Sepia: a second, independent HTTP implementation on the
//! client side (it sends `Expect: 100-continue` for large uploads, chunked uploads, HTTP/1.0,
//! proxy requests and CONNECT exactly as users' tools do).

use std::process::{Command, Stdio};

use tempfile::TempDir;

/// What one curl run produced.
#[derive(Debug)]
pub struct CurlOutput {
    /// curl's exit code (0 on success; 18 = partial body, 52 = empty reply, 56 = recv failure).
    pub exit_code: i32,
    /// The final HTTP status (0 when there was none).
    pub status: u16,
    /// Every response head curl received, as dumped by `-D` (interim and CONNECT heads too).
    pub headers: String,
    pub body: Vec<u8>,
    pub stderr: String,
}

impl CurlOutput {
    /// First value of `name` in the **last** response head (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        let last_head = self
            .headers
            .split("\r\n\r\n")
            .filter(|h| !h.trim().is_empty())
            .last()
            .unwrap_or_default();
        last_head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Panics with curl's stderr unless it exited 0 with `status`.
    pub fn assert_status(&self, status: u16) {
        assert!(
            self.exit_code == 0 && self.status == status,
            "curl: exit {} status {} (wanted {status})\nstderr: {}\nheaders:\n{}",
            self.exit_code,
            self.status,
            self.stderr,
            self.headers
        );
    }
}

/// Runs `curl -sS ARGS...` with a 30 s overall limit and no proxy from the environment,
/// capturing the status, the response heads and the body.
pub fn curl(args: &[&str]) -> CurlOutput {
    run_curl(Command::new("curl"), args)
}

/// [`curl`] inside network namespace `netns` (`ip netns exec NETNS curl ...`; needs root).
pub fn curl_in_netns(netns: &str, args: &[&str]) -> CurlOutput {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", netns, "curl"]);
    run_curl(command, args)
}

fn run_curl(mut command: Command, args: &[&str]) -> CurlOutput {
    let dir = TempDir::new().expect("create temp dir");
    let body_path = dir.path().join("body");
    let head_path = dir.path().join("headers");
    command
        .args(["-sS", "--max-time", "30", "-o"])
        .arg(&body_path)
        .arg("-D")
        .arg(&head_path)
        .args(["-w", "%{http_code}"])
        .args(args)
        .stdin(Stdio::null());
    for var in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        command.env_remove(var);
    }
    let out = command
        .output()
        .expect("run curl (is /usr/bin/curl installed?)");
    CurlOutput {
        exit_code: out.status.code().unwrap_or(-1),
        status: String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        headers: std::fs::read_to_string(&head_path).unwrap_or_default(),
        body: std::fs::read(&body_path).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_comes_from_the_last_head() {
        let out = CurlOutput {
            exit_code: 0,
            status: 200,
            headers:
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nVia: 1.1 sepia\r\nX-A:  b \r\n\r\n"
                    .into(),
            body: Vec::new(),
            stderr: String::new(),
        };
        assert_eq!(out.header("via").as_deref(), Some("1.1 sepia"));
        assert_eq!(out.header("X-A").as_deref(), Some("b"));
        assert_eq!(out.header("missing"), None);
    }

    #[test]
    fn failed_connection_reports_exit_code_and_no_status() {
        let addr = crate::free_addr();
        let out = curl(&[&format!("http://{addr}/")]);
        assert_ne!(out.exit_code, 0);
        assert_eq!(out.status, 0);
    }
}
