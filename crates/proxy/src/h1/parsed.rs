//! Heads parsed from text, for the tests of the code that reads them.

use bytes::BytesMut;
use sepia_http1::{Limits, RequestDecoder, RequestHead, ResponseDecoder, ResponseHead};

/// `raw`, a whole request head, parsed.
pub fn request(raw: &str) -> RequestHead {
    let mut buf = BytesMut::from(raw.as_bytes());
    let mut head = RequestHead::default();
    let decoder = RequestDecoder::new(Limits::default());
    assert_eq!(
        decoder.clone().decode(&mut buf, &mut head),
        Ok(true),
        "{raw}"
    );
    head
}

/// `raw`, a whole response head, parsed.
pub fn response(raw: &str) -> ResponseHead {
    let mut buf = BytesMut::from(raw.as_bytes());
    let mut head = ResponseHead::default();
    let decoder = ResponseDecoder::new(Limits::default());
    assert_eq!(
        decoder.clone().decode(&mut buf, &mut head),
        Ok(true),
        "{raw}"
    );
    head
}
