//! systemd's service notification protocol (sd_notify(3)): newline-separated `KEY=VALUE`
//! assignments sent as one datagram to the `AF_UNIX` socket named by `$NOTIFY_SOCKET`, which
//! systemd sets for a `Type=notify` service. A name starting with `@` is in the abstract
//! namespace (unix(7)); anything else is a path. Without `$NOTIFY_SOCKET` (not under systemd)
//! every call does nothing.
//!
//! The states a service manager cares about, in the order Sepia goes through them:
//! [`ready`] once every listener accepts connections, [`reloading`] then [`ready`] around a
//! configuration reload, [`main_pid`] when a new binary takes over, [`stopping`] when shutdown
//! begins. A failed send is logged and otherwise ignored: a proxy that serves is worth more
//! than a status line.
//!
//! The socket stays in the environment on purpose: a binary started for an upgrade inherits it
//! and announces itself with [`main_pid`] and [`ready`].

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets to the notification socket.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// `READY=1`: start-up (or a reload) is finished and the service serves; with a `STATUS=` line.
pub fn ready(status: &str) {
    notify(&format!("READY=1\nSTATUS={}", one_line(status)));
}

/// `STOPPING=1`: shutdown has begun (connections are draining); with a `STATUS=` line.
pub fn stopping(status: &str) {
    notify(&format!("STOPPING=1\nSTATUS={}", one_line(status)));
}

/// `RELOADING=1`: a configuration reload has begun; call [`ready`] when it is done (either way:
/// an invalid file leaves the running configuration serving). `MONOTONIC_USEC` is what
/// `Type=notify-reload` (systemd 253) wants beside it, and older managers ignore it.
pub fn reloading() {
    let usec = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u128 * 1_000_000 + t.tv_nsec() as u128 / 1_000)
        .unwrap_or(0);
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
}

/// `MAINPID=`: the service's main process is now `pid` (a binary upgrade's new process, sent
/// by it or by the old one; the unit needs `NotifyAccess=all` for the former).
pub fn main_pid(pid: u32) {
    notify(&format!("MAINPID={pid}"));
}

/// `STATUS=`: a free-form line `systemctl status` shows.
pub fn status(text: &str) {
    notify(&format!("STATUS={}", one_line(text)));
}

/// A `STATUS=` value must not end the assignment early.
fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

fn notify(message: &str) {
    let Some(socket) = std::env::var_os(NOTIFY_SOCKET) else {
        return;
    };
    let socket = socket.to_string_lossy();
    if let Err(e) = send(&socket, message) {
        tracing::warn!("service manager notification to {socket} failed: {e}");
    }
}

/// Sends `message` as one datagram to the socket `name` (`@abstract` or a path).
fn send(name: &str, message: &str) -> io::Result<()> {
    let addr = match name.strip_prefix('@') {
        Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name.as_bytes())?,
        None if name.starts_with('/') => SocketAddr::from_pathname(name)?,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "not an absolute path or an abstract (@) socket name",
            ))
        }
    };
    let socket = UnixDatagram::unbound()?;
    let sent = socket.send_to_addr(message.as_bytes(), &addr)?;
    if sent != message.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "datagram cut short",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = socket.recv(&mut buf).expect("receive");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.to_str().unwrap(), "READY=1\nSTATUS=serving").unwrap();
        assert_eq!(receive(&listener), "READY=1\nSTATUS=serving");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = format!("sepia-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        send(&format!("@{name}"), "STOPPING=1").unwrap();
        assert_eq!(receive(&listener), "STOPPING=1");
    }

    #[test]
    fn refuses_a_relative_name_and_reports_a_missing_socket() {
        let e = send("relative/notify", "READY=1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        let dir = tempfile::tempdir().unwrap();
        assert!(send(dir.path().join("absent").to_str().unwrap(), "READY=1").is_err());
    }

    #[test]
    fn a_status_stays_on_one_line() {
        assert_eq!(one_line("a\nb"), "a b");
    }
}
