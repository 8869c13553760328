//! What the store keeps beside a response's bytes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use sepia_cache_policy::{Piece, StoredMeta};

use crate::h1::stored_head::HeadLayout;

/// The policy's view of a stored response and where its fields sit in the stored head
/// (needed to freshen them on a 304, RFC 9111 §4.3.4, and by front ends that do not write the
/// stored head as it is).
pub struct Entry {
    pub meta: StoredMeta,
    pub layout: HeadLayout,
    /// Content-Type, a slice of the stored head kept apart for the access log of every hit.
    pub content_type: Option<Bytes>,
    /// For a piece of a representation kept from a `206` (RFC 9111 §3.3), which bytes the
    /// stored body is: stored under its own key ([`super::piece_key`]), so that only the code
    /// that answers ranges from pieces ever finds it.
    pub piece: Option<Piece>,
    /// The stored fields as an HTTP/2 front end sends them, built by the first HTTP/2 hit and
    /// cloned by the next ones (see `front/h2/heads.rs`); never built for an HTTP/1.1-only
    /// object.
    pub h2_fields: OnceLock<FieldMap>,
    /// The purge bans it was last checked against (`bans.rs`): those issued when it was
    /// made; 0 for one read back from disk, checked against every ban.
    pub born: AtomicU64,
}

/// Stored fields in the `http` crate's map, and the bytes of their names and values.
pub struct FieldMap {
    pub map: http::HeaderMap,
    pub bytes: u64,
}

impl Entry {
    /// The entry of `head`, built by `stored_head::build` together with `layout`.
    pub fn new(meta: StoredMeta, head: &Bytes, layout: HeadLayout) -> Entry {
        Entry {
            meta,
            content_type: layout.content_type(head),
            layout,
            piece: None,
            h2_fields: OnceLock::new(),
            born: AtomicU64::new(BAN_GENERATION.load(Relaxed)),
        }
    }

    /// The entry of a piece: bytes `piece.first..=piece.last` of the representation.
    pub fn with_piece(mut self, piece: Option<Piece>) -> Entry {
        self.piece = piece;
        self
    }
}

/// The store's metadata type: shared, so a 304 update and the readers of a fill hold it cheaply.
pub type Meta = Arc<Entry>;

/// Purge bans issued so far (`bans.rs`, which counts them): an entry made now is born at
/// this generation and is checked only against bans issued after it. Kept here, beside the
/// field it sets, so that `bans` imports `entry` and not the other way round.
pub(super) static BAN_GENERATION: AtomicU64 = AtomicU64::new(0);
