//! The HTTP/2 origin client (RFC 9113), for routes with `http2 = true`: connections shared by
//! many requests at once (`conns`), one request sent on a stream with its response handed to
//! the pipeline as a [`Fetched`](super::Fetched) (`exchange`), and that response's body
//! (`body`). Heads are translated from the shape the origin side builds (`h1::for_h2`).

pub(in crate::upstream) mod body;
pub(in crate::upstream) mod conns;
pub(in crate::upstream) mod exchange;
