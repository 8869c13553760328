//! A client connection's socket and its reused buffers.

use bytes::BytesMut;

use crate::transport::Conn;

/// A client connection's socket and the buffers every request on it reuses.
pub struct ClientIo {
    pub conn: Conn,
    /// Bytes read from the client and not consumed yet (the next head, content, pipelining).
    pub buf: BytesMut,
    /// Where outgoing heads are built.
    pub head_buf: BytesMut,
}

impl ClientIo {
    pub fn new(conn: Conn) -> ClientIo {
        ClientIo {
            conn,
            buf: BytesMut::new(),
            head_buf: BytesMut::new(),
        }
    }

    pub fn into_conn(self) -> Conn {
        self.conn
    }
}
