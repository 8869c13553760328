//! The two messages of a binary upgrade, over a `SOCK_SEQPACKET` socket pair whose one end is
//! the new process's standard input: the old process sends its listening sockets (their
//! descriptors as `SCM_RIGHTS`, and one text line per descriptor naming the role it serves,
//! in the same order), the new one answers `ready PID` once it accepts connections on them.
//! A sequenced-packet socket keeps each message whole, and the end of the new process (it
//! failed, or exited) reads as an empty message: no framing of our own.
//!
//! rustix gives the received descriptors as `OwnedFd`s (no `unsafe` here); they are made
//! close-on-exec as they arrive (`MSG_CMSG_CLOEXEC`), so no child inherits them.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use sepia_proxy::{PassedSocket, SocketRole};

/// The first line of the sockets message (a format version, should it ever change).
const GREETING: &str = "sepia-sockets 1";
/// Descriptors one message carries at most (the kernel's `SCM_MAX_FD`).
const MAX_SOCKETS: usize = 253;
/// Bytes of the sockets message's text at most.
const MAX_TEXT: usize = 64 * 1024;

/// Sends `sockets` (the old process's side).
pub fn send_sockets(socket: &OwnedFd, sockets: &[PassedSocket]) -> io::Result<()> {
    if sockets.len() > MAX_SOCKETS {
        return Err(io::Error::other(format!(
            "{} listening sockets: at most {MAX_SOCKETS} can be handed over",
            sockets.len()
        )));
    }
    let mut text = format!("{GREETING}\n");
    for s in sockets {
        text.push_str(&format!("{}\n", s.role));
    }
    let fds: Vec<BorrowedFd<'_>> = sockets.iter().map(|s| s.fd.as_fd()).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("the descriptors do not fit their message"));
    }
    let iov = [IoSlice::new(text.as_bytes())];
    let sent = sendmsg(socket, &iov, &mut control, SendFlags::empty())?;
    if sent != text.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "sockets message cut short",
        ));
    }
    Ok(())
}

/// Receives the sockets (the new process's side), waiting at most `limit`.
pub fn receive_sockets(socket: &OwnedFd, limit: Duration) -> io::Result<Vec<PassedSocket>> {
    rustix::net::sockopt::set_socket_timeout(
        socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(limit),
    )?;
    let mut text = vec![0u8; MAX_TEXT];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [IoSliceMut::new(&mut text)];
    let msg = recvmsg(socket, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = m {
            fds.extend(received);
        }
    }
    if msg
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
    {
        return Err(io::Error::other("sockets message cut short"));
    }
    let text = std::str::from_utf8(&text[..msg.bytes])
        .map_err(|_| io::Error::other("sockets message is not text"))?;
    parse(text, fds)
}

/// The roles in `text` paired with `fds`, in order.
fn parse(text: &str, fds: Vec<OwnedFd>) -> io::Result<Vec<PassedSocket>> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let mut lines = text.lines();
    match lines.next() {
        Some(GREETING) => {}
        None => return Err(invalid("no sockets message (the process closed)".into())),
        Some(other) => return Err(invalid(format!("unknown sockets message {other:?}"))),
    }
    let roles = lines
        .map(|l| l.parse::<SocketRole>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(invalid)?;
    if roles.len() != fds.len() {
        return Err(invalid(format!(
            "{} roles for {} descriptors",
            roles.len(),
            fds.len()
        )));
    }
    let paired = roles.into_iter().zip(fds);
    Ok(paired.map(|(role, fd)| PassedSocket { role, fd }).collect())
}

/// Tells the old process that this one accepts connections (the new process's side).
pub fn send_ready(socket: &OwnedFd) -> io::Result<()> {
    let text = format!("ready {}", std::process::id());
    let iov = [IoSlice::new(text.as_bytes())];
    let mut control = SendAncillaryBuffer::default();
    sendmsg(socket, &iov, &mut control, SendFlags::empty())?;
    Ok(())
}

/// Waits at most `limit` for `ready PID` (the old process's side): the new process's pid.
/// An empty message means it closed its end (it exited, most likely having failed).
pub fn receive_ready(socket: &OwnedFd, limit: Duration) -> io::Result<u32> {
    rustix::net::sockopt::set_socket_timeout(
        socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(limit),
    )?;
    let mut text = [0u8; 64];
    let mut control = RecvAncillaryBuffer::default();
    let mut iov = [IoSliceMut::new(&mut text)];
    let msg = match recvmsg(socket, &mut iov, &mut control, RecvFlags::empty()) {
        Ok(msg) => msg,
        Err(rustix::io::Errno::AGAIN) => {
            let why = format!("not ready within {} s", limit.as_secs());
            return Err(io::Error::new(io::ErrorKind::TimedOut, why));
        }
        // It closed its end with our sockets message unread.
        Err(rustix::io::Errno::CONNRESET) => return Err(ended()),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&text[..msg.bytes]);
    match text.strip_prefix("ready ").and_then(|p| p.parse().ok()) {
        Some(pid) => Ok(pid),
        None if msg.bytes == 0 => Err(ended()),
        None => Err(io::Error::other(format!("it answered {text:?}"))),
    }
}

fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "it ended before taking over")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    use std::net::TcpListener;

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap()
    }

    #[test]
    fn sockets_travel_with_their_roles() {
        let (old, new) = pair();
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let role = |l: &TcpListener, admin| {
            let address = l.local_addr().unwrap();
            match admin {
                false => SocketRole::Listener {
                    address,
                    transparent: false,
                },
                true => SocketRole::Admin { address },
            }
        };
        let sent = vec![
            PassedSocket {
                role: role(&a, false),
                fd: OwnedFd::from(a.try_clone().unwrap()),
            },
            PassedSocket {
                role: role(&b, true),
                fd: OwnedFd::from(b.try_clone().unwrap()),
            },
        ];
        send_sockets(&old, &sent).unwrap();
        let got = receive_sockets(&new, Duration::from_secs(5)).unwrap();
        assert_eq!(got.len(), 2);
        for (sent, got) in sent.iter().zip(got) {
            assert_eq!(got.role, sent.role);
            // The same socket: it listens where the original does.
            let listener = TcpListener::from(got.fd);
            let address = match sent.role {
                SocketRole::Listener { address, .. } | SocketRole::Admin { address } => address,
            };
            assert_eq!(listener.local_addr().unwrap(), address);
        }
        send_ready(&new).unwrap();
        assert_eq!(
            receive_ready(&old, Duration::from_secs(5)).unwrap(),
            std::process::id()
        );
    }

    #[test]
    fn a_closed_or_silent_peer_is_an_error_not_a_hang() {
        let (old, new) = pair();
        let e = receive_ready(&old, Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(new);
        let e = receive_ready(&old, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let (old, new) = pair();
        drop(old);
        let e = receive_sockets(&new, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
