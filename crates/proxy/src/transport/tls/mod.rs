//! TLS with rustls (aws-lc-rs provider) through tokio-rustls: the connection type (`TlsConn`),
//! a listener's certificates chosen by SNI and reloaded when their files change (`certs`),
//! the server side's configuration and handshake (`listener`), and the client side toward
//! https origins (`client`).

mod certs;
pub mod client;
mod listener;
mod stream;
#[cfg(test)]
pub mod test_certs;

pub use listener::TlsListener;
pub use stream::TlsConn;
