//! A budget for the frames a client can send without asking for anything: PING, SETTINGS and
//! PRIORITY. The h2 crate answers them itself and never shows them to Sepia, so a client
//! could flood them for as long as its connection lives (a PING or SETTINGS flood costs the
//! server an answer each). RFC 9113 §10.5 lets an endpoint treat such activity as a
//! connection error; this meter reads the frame headers of what the client sends and ends
//! the connection when there are more than `BUDGET` of them within `WINDOW`.

use std::time::Duration;

use tokio::time::Instant;

/// Frames without a request allowed per window: a well-behaved client sends a SETTINGS and its
/// ACK, and a few PINGs to measure round trips or keep a connection alive.
pub const BUDGET: u32 = 1_000;
pub const WINDOW: Duration = Duration::from_secs(10);

/// The client connection preface (RFC 9113 §3.4), which precedes the first frame.
const PREFACE_LEN: usize = 24;
const HEADER_LEN: usize = 9;
/// Frame types (RFC 9113 §6) that carry no request.
const PRIORITY: u8 = 0x2;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// Follows frame boundaries across reads and counts the frames that carry no request.
pub struct ControlMeter {
    /// Preface bytes still to skip.
    preface_left: usize,
    header: [u8; HEADER_LEN],
    /// Bytes of `header` read so far.
    header_len: usize,
    /// Payload bytes of the current frame still to skip.
    payload_left: usize,
    window_start: Option<Instant>,
    counted: u32,
}

/// The client sent more than [`BUDGET`] frames without a request within [`WINDOW`].
#[derive(Debug, PartialEq, Eq)]
pub struct Flood;

impl ControlMeter {
    pub fn new() -> ControlMeter {
        ControlMeter {
            preface_left: PREFACE_LEN,
            header: [0; HEADER_LEN],
            header_len: 0,
            payload_left: 0,
            window_start: None,
            counted: 0,
        }
    }

    /// Reads `bytes`, the next bytes the client sent, at time `now`.
    pub fn scan(&mut self, mut bytes: &[u8], now: Instant) -> Result<(), Flood> {
        let skip = self.preface_left.min(bytes.len());
        self.preface_left -= skip;
        bytes = &bytes[skip..];
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let skip = self.payload_left.min(bytes.len());
                self.payload_left -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            let take = (HEADER_LEN - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + take].copy_from_slice(&bytes[..take]);
            self.header_len += take;
            bytes = &bytes[take..];
            if self.header_len == HEADER_LEN {
                self.header_len = 0;
                let h = self.header;
                self.payload_left =
                    usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let (kind, flags) = (h[3], h[4]);
                let control =
                    kind == PRIORITY || (matches!(kind, SETTINGS | PING) && flags & ACK == 0);
                if control {
                    self.count(now)?;
                }
            }
        }
        Ok(())
    }

    fn count(&mut self, now: Instant) -> Result<(), Flood> {
        match self.window_start {
            Some(start) if now.duration_since(start) < WINDOW => {}
            _ => {
                self.window_start = Some(now);
                self.counted = 0;
            }
        }
        self.counted += 1;
        if self.counted > BUDGET {
            return Err(Flood);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            0,
        ];
        f.extend_from_slice(payload);
        f
    }

    fn preface() -> Vec<u8> {
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
    }

    #[test]
    fn a_ping_flood_is_caught_wherever_reads_split_the_frames() {
        let mut wire = preface();
        wire.extend(frame(SETTINGS, 0, &[0; 6]));
        for _ in 0..BUDGET {
            wire.extend(frame(PING, 0, b"12345678"));
        }
        let now = Instant::now();
        for step in [1, 7, 9, 17, 4096] {
            let mut meter = ControlMeter::new();
            let verdict = wire
                .chunks(step)
                .try_for_each(|piece| meter.scan(piece, now));
            assert_eq!(verdict, Err(Flood), "read {step} bytes at a time");
        }
    }

    #[test]
    fn requests_data_acks_and_window_updates_do_not_count() {
        let mut wire = preface();
        let now = Instant::now();
        for _ in 0..5 * BUDGET {
            wire.extend(frame(0x1, 0x5, b"header block")); // HEADERS
            wire.extend(frame(0x0, 0x0, &[7; 300])); // DATA, whose bytes look like headers
            wire.extend(frame(PING, ACK, b"12345678"));
            wire.extend(frame(SETTINGS, ACK, b""));
            wire.extend(frame(0x8, 0, &[0, 0, 1, 0])); // WINDOW_UPDATE
        }
        assert_eq!(ControlMeter::new().scan(&wire, now), Ok(()));
    }

    #[test]
    fn the_budget_is_per_window() {
        let mut meter = ControlMeter::new();
        let start = Instant::now();
        meter.scan(&preface(), start).unwrap();
        let ping = frame(PING, 0, b"12345678");
        for i in 0..3 * BUDGET {
            // A steady BUDGET per WINDOW, spread evenly, never exceeds it.
            let at = start + WINDOW * i / BUDGET;
            assert_eq!(meter.scan(&ping, at), Ok(()), "ping {i}");
        }
    }
}
