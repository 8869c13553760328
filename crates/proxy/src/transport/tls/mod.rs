//! TLS with rustls (aws-lc-rs provider) through tokio-rustls: the connection type (`TlsConn`),
//! a listener's certificates chosen by SNI and reloaded when their files change (`certs`),
//! and the server side's configuration and handshake (`listener`).

mod certs;
mod listener;
mod stream;

pub use listener::TlsListener;
pub use stream::TlsConn;
