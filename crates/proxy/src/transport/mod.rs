//! Bytes in and out of sockets, knowing nothing of HTTP: the connection type every protocol
//! runs over ([`Conn`]), gather writes and reads bounded by deadlines (`io`), name resolution
//! (`dns`), and the socket tricks of transparent interception (`intercept`).
//!
//! [`Conn`] is an enum rather than a boxed trait object: the hit path calls it for every read
//! and write, and a match on a variant costs nothing a vtable would not. Plain TCP or TLS
//! (`tls`: rustls through tokio-rustls, either side).

mod conn;
pub mod dns;
pub mod intercept;
pub mod io;
pub mod tls;

pub use conn::Conn;
