//! What the store keeps beside a response's bytes.

use std::sync::Arc;

use bytes::Bytes;
use sepia_cache_policy::StoredMeta;

use crate::h1::stored_head::HeadLayout;

/// The policy's view of a stored response and where its fields sit in the stored head
/// (needed to freshen them on a 304, RFC 9111 §4.3.4, and by front ends that do not write the
/// stored head as it is).
pub struct Entry {
    pub meta: StoredMeta,
    pub layout: HeadLayout,
    /// Content-Type, a slice of the stored head kept apart for the access log of every hit.
    pub content_type: Option<Bytes>,
}

impl Entry {
    /// The entry of `head`, built by `stored_head::build` together with `layout`.
    pub fn new(meta: StoredMeta, head: &Bytes, layout: HeadLayout) -> Entry {
        Entry {
            meta,
            content_type: layout.content_type(head),
            layout,
        }
    }
}

/// The store's metadata type: shared, so a 304 update and the readers of a fill hold it cheaply.
pub type Meta = Arc<Entry>;
