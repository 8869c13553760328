//! The codec's parsed heads seen through the pipeline's views. Every method reads positions the
//! codec recorded while parsing: nothing is copied or parsed again.

use bytes::Bytes;
use sepia_http1::{BodyFraming, RequestHead, ResponseHead};

use super::fields::H1Fields;
use crate::model::{BodyLength, FieldView, Method, RequestView, ResponseView, Version};

/// The view's version of an h1 message.
pub fn version(v: sepia_http1::Version) -> Version {
    match v {
        sepia_http1::Version::Http10 => Version::Http10,
        sepia_http1::Version::Http11 => Version::Http11,
    }
}

/// The content length a framing announces.
pub fn body_length(framing: BodyFraming) -> BodyLength {
    match framing {
        BodyFraming::Empty => BodyLength::None,
        BodyFraming::Length(n) => BodyLength::Known(n),
        BodyFraming::Chunked | BodyFraming::UntilClose => BodyLength::Unknown,
    }
}

impl RequestView for RequestHead {
    fn method(&self) -> Method {
        self.method
    }

    fn method_raw(&self) -> &[u8] {
        RequestHead::method_raw(self)
    }

    fn target(&self) -> &[u8] {
        RequestHead::target(self)
    }

    fn version(&self) -> Version {
        version(self.version)
    }

    fn fields(&self) -> impl FieldView + '_ {
        H1Fields(self.headers())
    }

    fn host(&self) -> Option<&[u8]> {
        RequestHead::host(self)
    }

    fn body(&self) -> BodyLength {
        body_length(self.body_framing())
    }

    fn declared_length(&self) -> Option<u64> {
        self.content_length
    }

    fn share(&self, part: &[u8]) -> Bytes {
        self.raw().slice_ref(part)
    }
}

impl ResponseView for ResponseHead {
    fn status(&self) -> u16 {
        self.status
    }

    fn reason(&self) -> &[u8] {
        ResponseHead::reason(self)
    }

    fn fields(&self) -> impl FieldView + '_ {
        H1Fields(self.headers())
    }

    fn declared_length(&self) -> Option<u64> {
        self.content_length
    }
}
