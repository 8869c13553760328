//! Content-Length bodies (RFC 9112 §6.2): hand out whatever part of the body is buffered.

use bytes::{Bytes, BytesMut};

/// Yields a body of known length as zero-copy slices split off the read buffer.
#[derive(Clone, Debug)]
pub struct LengthDecoder {
    remaining: u64,
}

impl LengthDecoder {
    pub fn new(len: u64) -> Self {
        LengthDecoder { remaining: len }
    }

    /// Body bytes not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    pub fn is_done(&self) -> bool {
        self.remaining == 0
    }

    /// Returns up to `remaining` bytes from the front of `buf` (`None` if `buf` is empty or the
    /// body is complete). Bytes past the body stay in `buf`: they belong to the next message.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Option<Bytes> {
        if buf.is_empty() || self.remaining == 0 {
            return None;
        }
        let n = usize::try_from(self.remaining).map_or(buf.len(), |r| r.min(buf.len()));
        self.remaining -= n as u64;
        Some(buf.split_to(n).freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_exactly_the_body() {
        let mut d = LengthDecoder::new(5);
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert_eq!(d.decode(&mut buf).as_deref(), Some(&b"abc"[..]));
        assert_eq!((d.remaining(), d.is_done()), (2, false));
        assert_eq!(d.decode(&mut buf), None, "empty buffer");
        buf.extend_from_slice(b"deGET /");
        assert_eq!(d.decode(&mut buf).as_deref(), Some(&b"de"[..]));
        assert!(d.is_done());
        assert_eq!(d.decode(&mut buf), None, "done");
        assert_eq!(&buf[..], b"GET /", "the next message is untouched");
    }

    #[test]
    fn zero_and_huge_lengths() {
        let mut d = LengthDecoder::new(0);
        assert!(d.is_done());
        assert_eq!(d.decode(&mut BytesMut::from(&b"x"[..])), None);
        let mut d = LengthDecoder::new(u64::MAX);
        let mut buf = BytesMut::from(&b"xyz"[..]);
        assert_eq!(d.decode(&mut buf).as_deref(), Some(&b"xyz"[..]));
        assert_eq!(d.remaining(), u64::MAX - 3);
    }

    #[test]
    fn slices_share_the_buffer() {
        let mut buf = BytesMut::from(&b"0123456789"[..]);
        let start = buf.as_ptr();
        let data = LengthDecoder::new(4).decode(&mut buf).unwrap();
        assert_eq!(data.as_ptr(), start, "no copy");
    }
}
