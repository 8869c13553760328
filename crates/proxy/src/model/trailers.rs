//! Trailer fields (RFC 9110 §6.5): fields sent after the content, kept as name and value pairs
//! so that any protocol's writer can send them on.

use bytes::Bytes;

/// A trailer section, already stripped of the fields that must never be trailers (RFC 9110
/// §6.5.1): what the decoder of the incoming wire kept. Empty (and unallocated) for almost
/// every message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trailers(Vec<(Bytes, Bytes)>);

impl Trailers {
    pub fn new(fields: Vec<(Bytes, Bytes)>) -> Trailers {
        Trailers(fields)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields as `(name, value)`, in the order received.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.0.iter().map(|(n, v)| (&n[..], &v[..]))
    }
}
