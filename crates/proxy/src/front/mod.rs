//! Front ends: each owns its client connections and their wire format, reads requests off
//! them and answers through the pipeline's `Responder` seam: HTTP/1.1 (`h1`) and HTTP/2
//! (`h2`, reached by ALPN on TLS listeners or by prior-knowledge h2c on plain listeners that
//! allow it). `burst` is the scheduling hint both use to send the responses of a busy
//! worker's pass back to back.

pub mod burst;
pub mod h1;
pub mod h2;

use sepia_config::Mode;

use crate::model::Scheme;
use crate::transport::intercept::Divert;

/// The listener a connection arrived on, as its front end needs it.
pub struct Listener {
    pub mode: Mode,
    /// Where an intercepted connection was going (`NotDiverted` on other listeners).
    pub divert: Divert,
    /// The listener's index in the configuration.
    pub index: usize,
    /// `Https` on a TLS listener: the scheme of origin-form requests (RFC 9110 §4.2.2).
    pub scheme: Scheme,
}
