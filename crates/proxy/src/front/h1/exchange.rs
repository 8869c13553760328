//! One request on an HTTP/1.1 client connection, as the pipeline sees it: the request's content
//! read off the connection ([`Downstream`]) and every answer written in HTTP/1.1
//! ([`Responder`]). This is where the connection's fate is decided: it carries another
//! request only when the client asked for persistence (RFC 9112 §9.3), its request content was
//! read whole, the answer's framing lets the client find its end, and nothing failed.

use std::time::Duration;

use bytes::Bytes;
use sepia_http1::{RequestHead, Version};
use sepia_store::Object;
use tokio::io::AsyncReadExt;

use super::client_io::ClientIo;
use super::errors::{error_response, CONNECT_ESTABLISHED, CONTINUE_100};
use super::relayed::{self, Framed};
use super::stored::{self, Wire};
use super::tunnel::{pipe, Ends};
use crate::cache::Meta;
use crate::front::burst;
use crate::h1::body::{write_end, write_piece, BodyDecoder, BodyOut, BodyReadError};
use crate::h1::fields::H1Fields;
use crate::model::{
    BodyError, BodyLength, BodyPiece, Downstream, Gone, LocalAnswer, Outcome, ResponseView,
    Trailers,
};
use crate::pipeline::{Responder, StoredAnswer, Tunneled};
use crate::state::shutdown::Shutdown;
use crate::state::State;
use crate::transport::io::write_parts_within;
use crate::transport::Conn;

/// One request being answered.
pub struct H1Exchange<'s> {
    state: &'s State,
    io: &'s mut ClientIo,
    req: &'s RequestHead,
    shutdown: &'s Shutdown,
    /// The request content still to read.
    body: BodyDecoder,
    /// The client waits for `100 Continue` before sending its content (RFC 9110 §10.1.1).
    continue_pending: bool,
    /// A started response's head, built in `io.head_buf` and not written yet: it goes out with
    /// the first piece of content.
    head_pending: bool,
    /// How a started response's content is framed.
    out: BodyOut,
    /// The connection may carry another request after this response.
    keep: bool,
    sent: u64,
}

impl<'s> H1Exchange<'s> {
    pub fn new(
        state: &'s State,
        io: &'s mut ClientIo,
        req: &'s RequestHead,
        shutdown: &'s Shutdown,
    ) -> H1Exchange<'s> {
        let body = BodyDecoder::new(req.body_framing());
        // Only a client that has not begun sending its content waits for the go-ahead.
        let continue_pending = req.expect_continue
            && req.version == Version::Http11
            && io.buf.is_empty()
            && !body.is_done();
        H1Exchange {
            state,
            io,
            req,
            shutdown,
            body,
            continue_pending,
            head_pending: false,
            out: BodyOut::Raw,
            keep: false,
            sent: 0,
        }
    }

    /// Whether the connection carries another request after `outcome`.
    pub fn keeps_connection(&self, outcome: &Outcome) -> bool {
        self.keep && !outcome.close
    }

    /// Whether a response whose framing allows it (`framing_ends`) leaves the connection
    /// usable: persistence asked for, the request content read whole, no shutdown under way.
    fn may_keep(&self, framing_ends: bool) -> bool {
        self.req.keep_alive && framing_ends && self.body.is_done() && !self.shutdown.has_begun()
    }

    /// Chooses how a started response's content of `length` is framed for this client, and
    /// whether the connection survives that framing.
    fn frame(&mut self, length: BodyLength) -> BodyOut {
        let (out, framing_ends) = BodyOut::for_length(length, self.req.version == Version::Http11);
        self.out = out;
        self.keep = self.may_keep(framing_ends);
        out
    }

    fn limit(&self) -> Duration {
        self.state.config.timeouts.client_idle
    }

    /// Counts a write, or marks the connection unusable after a failed one.
    fn wrote(&mut self, written: std::io::Result<u64>) -> Result<(), Gone> {
        match written {
            Ok(n) => {
                self.sent += n;
                Ok(())
            }
            Err(_) => {
                self.keep = false;
                Err(Gone)
            }
        }
    }

    /// Where a started response's next piece goes: the connection, the head still pending (or
    /// nothing), the framing and the write deadline.
    fn outgoing(&mut self) -> (&mut Conn, &[u8], BodyOut, Duration) {
        let limit = self.limit();
        let ClientIo { conn, head_buf, .. } = &mut *self.io;
        let prefix: &[u8] = if self.head_pending { head_buf } else { &[] };
        (conn, prefix, self.out, limit)
    }

    fn wire(&self) -> Wire<'s> {
        Wire {
            keep: self.keep,
            version: self.req.version,
            via: self.state.via(),
            limit: self.limit(),
        }
    }
}

impl Downstream for H1Exchange<'_> {
    fn awaits_continue(&self) -> bool {
        self.continue_pending
    }

    async fn body_next(&mut self) -> Result<BodyPiece, BodyError> {
        let limit = self.limit();
        if self.continue_pending {
            self.continue_pending = false;
            write_parts_within(&mut self.io.conn, &[CONTINUE_100], limit)
                .await
                .map_err(|_| BodyError::Gone)?;
        }
        let ClientIo { conn, buf, .. } = &mut *self.io;
        let fields = H1Fields(self.req.headers());
        match self.body.next(conn, buf, limit, &fields).await {
            Ok(piece) => Ok(piece),
            Err(BodyReadError::Framing) => Err(BodyError::Framing),
            Err(BodyReadError::Closed | BodyReadError::Io(_)) => Err(BodyError::Gone),
        }
    }

    async fn interim(&mut self, head: &impl ResponseView) -> Result<(), Gone> {
        // HTTP/1.0 has no interim responses (RFC 9110 §15.2).
        if self.req.version != Version::Http11 {
            return Ok(());
        }
        let limit = self.limit();
        let ClientIo { conn, head_buf, .. } = &mut *self.io;
        head_buf.clear();
        relayed::interim(head_buf, head);
        write_parts_within(conn, &[head_buf], limit)
            .await
            .map_err(|_| Gone)
    }

    async fn gone(&mut self) {
        // Pipelined requests may arrive meanwhile; read them (bounded) so EOF is noticed.
        let watch_limit = self.state.config.limits.max_request_head;
        let ClientIo { conn, buf, .. } = &mut *self.io;
        while buf.len() < watch_limit {
            if matches!(conn.read_buf(buf).await, Ok(0) | Err(_)) {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

impl<'s> Responder for H1Exchange<'s> {
    type Request = RequestHead;

    async fn send_stored(
        &mut self,
        obj: &Object<Meta>,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone> {
        // First, so that what follows (a shutdown, for one) is read after the wait.
        burst::let_the_pass_finish().await;
        self.keep = self.may_keep(true);
        let wire = self.wire();
        let after = stored::plan_head(&mut self.io.head_buf, obj, answer, &wire);
        let written = stored::write(&mut *self.io, obj, after, wire.limit).await;
        self.wrote(written)
    }

    async fn start_fill(
        &mut self,
        obj: &Object<Meta>,
        length: BodyLength,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone> {
        let out = self.frame(length);
        let wire = self.wire();
        let chunked = out == BodyOut::Chunked;
        let written =
            stored::write_fill_head(&mut *self.io, obj, length, chunked, answer, &wire).await;
        self.wrote(written)
    }

    async fn start_relayed(
        &mut self,
        head: &impl ResponseView,
        length: BodyLength,
        cache_status: &[u8],
    ) -> Result<(), Gone> {
        burst::let_the_pass_finish().await;
        let out = self.frame(length);
        let framed = Framed {
            length,
            out,
            request_method: self.req.method,
            client_version: self.req.version,
            keep_alive: self.keep,
            via: self.state.via(),
            cache_status,
        };
        self.io.head_buf.clear();
        relayed::build(&mut self.io.head_buf, head, &framed);
        self.head_pending = true;
        Ok(())
    }

    async fn send_data(&mut self, data: &Bytes) -> Result<(), Gone> {
        let (conn, prefix, out, limit) = self.outgoing();
        let written = write_piece(conn, prefix, data, out, limit).await;
        self.head_pending = false;
        self.wrote(written)
    }

    async fn send_end(&mut self, trailers: &Trailers) -> Result<(), Gone> {
        let (conn, prefix, out, limit) = self.outgoing();
        let written = write_end(conn, prefix, trailers, out, limit).await;
        self.head_pending = false;
        self.wrote(written)
    }

    async fn send_local(&mut self, answer: LocalAnswer, close: bool) -> Result<(), Gone> {
        self.keep = !close && self.may_keep(true);
        let state = self.state;
        let page = error_response(
            answer.status,
            answer.detail,
            !self.keep,
            state.via(),
            state.challenge(),
            answer.retry_after,
        );
        let limit = self.limit();
        let written = write_parts_within(&mut self.io.conn, &[&page], limit).await;
        self.wrote(written.map(|()| page.len() as u64))
    }

    async fn tunnel(&mut self, mut origin: Conn, idle: Duration) -> Result<Tunneled, Gone> {
        self.keep = false;
        let limit = self.limit();
        let established =
            write_parts_within(&mut self.io.conn, &[CONNECT_ESTABLISHED], limit).await;
        self.wrote(established.map(|()| CONNECT_ESTABLISHED.len() as u64))?;
        // Bytes the client sent right after its CONNECT head belong to the tunnel.
        let early = self.io.buf.split();
        let (client_read, client_write) = self.io.conn.split();
        let (origin_read, origin_write) = origin.split();
        let client = Ends {
            read: client_read,
            write: client_write,
        };
        let origin = Ends {
            read: origin_read,
            write: origin_write,
        };
        let (up, down) = pipe(client, origin, &early, idle).await;
        self.sent += down;
        Ok(Tunneled { up, down })
    }

    fn bytes_sent(&self) -> u64 {
        self.sent
    }
}
