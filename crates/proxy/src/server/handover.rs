//! Listening sockets handed from a running Sepia to the binary that replaces it (a binary
//! upgrade): the same sockets, so their queues of pending connections are never closed and
//! no connection attempt is refused while the processes change places.
//!
//! The old process gives out duplicates of every socket it listens on ([`super::Reloader::
//! sockets`]), each with the configured address it serves (its [`SocketRole`]); how they
//! travel (SCM_RIGHTS over a Unix socket) is the binary's business. The new process binds
//! with them ([`super::Server::bind_with`]): a configured listener takes the passed socket of
//! the same role and address, when its local address is indeed that one; other listeners
//! are bound fresh, and passed sockets nobody takes are closed here (the old process closes
//! its own copies as it stops, so a listener the new configuration dropped goes away).
//! As for a reload, a listener on port 0 is bound anew.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::fd::OwnedFd;

use sepia_config::{Listener, Mode};

/// What a passed socket is for: the configured address it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketRole {
    /// A `[[listen]]` listener; `transparent` for a `tproxy` one (its socket is
    /// IP_TRANSPARENT, so only a `tproxy` listener may take it).
    Listener {
        address: SocketAddr,
        transparent: bool,
    },
    /// The `[admin]` listener.
    Admin { address: SocketAddr },
}

/// A listening socket and its role.
#[derive(Debug)]
pub struct PassedSocket {
    pub role: SocketRole,
    pub fd: OwnedFd,
}

/// The text form of a role, one word and an address (`listen 127.0.0.1:8080`, `tproxy
/// [::]:80`, `admin 127.0.0.1:9090`): what the binary sends beside each descriptor.
impl fmt::Display for SocketRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketRole::Listener {
                address,
                transparent: false,
            } => write!(f, "listen {address}"),
            SocketRole::Listener {
                address,
                transparent: true,
            } => write!(f, "tproxy {address}"),
            SocketRole::Admin { address } => write!(f, "admin {address}"),
        }
    }
}

impl std::str::FromStr for SocketRole {
    type Err = String;

    fn from_str(text: &str) -> Result<SocketRole, String> {
        let (word, address) = text
            .split_once(' ')
            .ok_or_else(|| format!("not a socket role: {text:?}"))?;
        let address: SocketAddr = address
            .parse()
            .map_err(|e| format!("socket role {text:?}: {e}"))?;
        match word {
            "listen" => Ok(SocketRole::Listener {
                address,
                transparent: false,
            }),
            "tproxy" => Ok(SocketRole::Listener {
                address,
                transparent: true,
            }),
            "admin" => Ok(SocketRole::Admin { address }),
            _ => Err(format!("not a socket role: {text:?}")),
        }
    }
}

impl SocketRole {
    /// The role of configured listener `l`.
    pub(super) fn of(l: &Listener) -> SocketRole {
        SocketRole::Listener {
            address: l.address,
            transparent: l.mode == Mode::Tproxy,
        }
    }

    fn address(&self) -> SocketAddr {
        match self {
            SocketRole::Listener { address, .. } | SocketRole::Admin { address } => *address,
        }
    }
}

/// Sockets received from the process being replaced, and what else the takeover changes.
#[derive(Debug, Default)]
pub struct Inherited {
    sockets: Vec<PassedSocket>,
    /// Disks the old process holds are waited for (it lets go when it exits) instead of
    /// refused: the new process serves from memory and the origins meanwhile.
    pub wait_for_disks: bool,
}

impl Inherited {
    /// A binary upgrade's new process, with the sockets the old one passed.
    pub fn takeover(sockets: Vec<PassedSocket>) -> Inherited {
        Inherited {
            sockets,
            wait_for_disks: true,
        }
    }

    /// The passed socket for `role`, ready for tokio: `None` when none was passed (or it
    /// does not listen on the role's address: then it is closed, and the caller binds).
    pub(super) fn take(&mut self, role: SocketRole) -> Option<StdListener> {
        if role.address().port() == 0 {
            return None;
        }
        let at = self.sockets.iter().position(|s| s.role == role)?;
        let listener = StdListener::from(self.sockets.swap_remove(at).fd);
        match usable(&listener, role) {
            Ok(()) => Some(listener),
            Err(e) => {
                tracing::warn!("passed socket for {role} not used, binding anew: {e}");
                None
            }
        }
    }

    /// Passed sockets no listener took, by role (they close when dropped).
    pub(super) fn leftover(&self) -> impl Iterator<Item = &SocketRole> {
        self.sockets.iter().map(|s| &s.role)
    }
}

/// Checks that a passed descriptor is a socket listening on `role`'s address, and makes it
/// non-blocking as tokio needs.
fn usable(listener: &StdListener, role: SocketRole) -> io::Result<()> {
    let local = listener.local_addr()?;
    if local != role.address() {
        return Err(io::Error::other(format!("it listens on {local}")));
    }
    listener.set_nonblocking(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_back_from_their_text() {
        for text in [
            "listen 127.0.0.1:8080",
            "tproxy [::]:80",
            "admin 127.0.0.1:9090",
        ] {
            let role: SocketRole = text.parse().unwrap();
            assert_eq!(role.to_string(), text);
        }
        assert!("listen".parse::<SocketRole>().is_err());
        assert!("bind 127.0.0.1:1".parse::<SocketRole>().is_err());
        assert!("listen nowhere".parse::<SocketRole>().is_err());
    }

    #[test]
    fn a_passed_socket_serves_only_its_own_address() {
        let socket = StdListener::bind("127.0.0.1:0").unwrap();
        let address = socket.local_addr().unwrap();
        let role = SocketRole::Listener {
            address,
            transparent: false,
        };
        let passed = |role| PassedSocket {
            role,
            fd: OwnedFd::from(socket.try_clone().unwrap()),
        };
        let mut inherited = Inherited::takeover(vec![passed(role)]);
        let tproxy = SocketRole::Listener {
            address,
            transparent: true,
        };
        assert!(
            inherited.take(tproxy).is_none(),
            "a plain socket for tproxy"
        );
        assert!(inherited.take(role).is_some());
        assert!(inherited.take(role).is_none(), "taken twice");
        // A descriptor whose socket listens elsewhere than its role says.
        let elsewhere = SocketRole::Listener {
            address: "127.0.0.1:1".parse().unwrap(),
            transparent: false,
        };
        let mut inherited = Inherited::takeover(vec![passed(elsewhere)]);
        assert!(inherited.take(elsewhere).is_none());
        assert_eq!(inherited.leftover().count(), 0);
    }
}
