//! The vocabulary every layer shares, with no I/O and no wire format: how a request and a
//! response are seen (views any protocol's message can implement), where a request goes
//! (targets and authorities), what the client side offers the origin side while a request is
//! forwarded (the [`Downstream`] seam), and how an exchange ended ([`Outcome`]).
//!
//! `HeaderId` and `Method` come from the HTTP/1.1 codec, which classifies field names and
//! methods while it parses; they are protocol-neutral names (an HTTP/2 front end maps its
//! lower-case field names onto the same ids), re-exported here so that nothing above this
//! layer but the h1 code names the codec.

mod client;
mod downstream;
mod message;
mod outcome;
mod target;
mod trailers;

pub use client::ClientInfo;
pub use downstream::{BodyError, BodyPiece, Downstream, Gone};
pub use message::{is_hop, BodyLength, Field, FieldView, RequestView, ResponseView, Version};
pub use outcome::{LocalAnswer, Outcome, LOCAL_ANSWER_TYPE};
pub use sepia_http1::{HeaderId, Method};
pub use target::{parse_absolute, split_authority, AbsoluteTarget, Scheme, TargetError};
pub use trailers::Trailers;
