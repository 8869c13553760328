//! The new process's side of an upgrade (`--takeover`): its standard input is the socket the
//! old process sends the listening sockets on (`wire.rs`), and answers `ready` on.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use sepia_proxy::Inherited;

use super::wire;

/// How long the sockets may take to arrive (they are sent right after the spawn).
const SOCKETS_TIMEOUT: Duration = Duration::from_secs(10);

/// The socket to the process being replaced.
pub struct Takeover {
    socket: OwnedFd,
}

impl Takeover {
    /// Takes the socket from stdin, which becomes `/dev/null` (nothing else reads it, and a
    /// later upgrade must not find this socket there).
    pub fn from_stdin() -> io::Result<Takeover> {
        let socket = io::stdin().as_fd().try_clone_to_owned()?;
        let null = std::fs::File::open("/dev/null")?;
        rustix::stdio::dup2_stdin(&null)?;
        Ok(Takeover { socket })
    }

    /// Receives the listening sockets of the old process.
    pub fn receive(&self) -> io::Result<Inherited> {
        let sockets = wire::receive_sockets(&self.socket, SOCKETS_TIMEOUT).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{} expects the sockets of the Sepia it replaces on its stdin \
                     (it is started by SIGUSR2, see `sepia upgrade`): {e}",
                    super::TAKEOVER_FLAG
                ),
            )
        })?;
        for s in &sockets {
            tracing::info!("taking over {}", s.role);
        }
        Ok(Inherited::takeover(sockets))
    }

    /// This process accepts connections: the old one may stop.
    pub fn ready(&self) {
        if let Err(e) = wire::send_ready(&self.socket) {
            tracing::error!("cannot tell the old process that this one took over: {e}");
        }
    }
}
