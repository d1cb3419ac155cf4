//! The connection's life as the driver reports it: TCP up (the handshake
//! goes out), bytes in (split into frames and dispatched), the connection
//! gone (requests in flight fail with ConnectionLoss), and time passing
//! (handshake, read and leader timeouts; pings and probes).

use super::*;

/// A frame longer than this is gathered in pieces ([`LongFrame`]), so the
/// input buffer never grows past about twice this.
pub(super) const LONG_REPLY: usize = super::long_frame::PIECE;

/// Bytes moved into the input buffer at a time: with a frame begun there
/// (at most [`LONG_REPLY`] and its length), it stays within 64 KiB.
const INPUT_STEP: usize = 16 * 1024;

/// A frame as it was gathered.
pub(super) enum Frame {
    Whole(Bytes),
    Pieces(Vec<Bytes>),
}

impl<R, W: Clone> Session<R, W> {
    /// A TCP connection is up: send the handshake.
    pub fn handle_connected(&mut self, now: Instant) {
        if self.phase != Phase::Disconnected || self.state.is_terminal() {
            return;
        }
        self.out.clear();
        self.input.clear();
        self.long_frame = None;
        let req = ConnectRequest {
            protocol_version: jute::PROTOCOL_VERSION,
            last_zxid_seen: self.last_zxid,
            timeout_ms: i32::try_from(self.config.session_timeout.as_millis()).unwrap_or(i32::MAX),
            session_id: self.session_id,
            passwd: self.passwd.clone(),
            read_only: false,
        };
        encode_connect(&mut self.out, &req);
        self.touches.clear();
        self.last_probe = None;
        self.mark_sent(now);
        self.handshake_sent = now;
        self.pings.clear();
        // Resuming, a silent server must not eat the time left to find
        // another before the session expires.
        let limit = if self.session_id != 0 {
            self.config.connect_timeout.min(self.timeout() / 3)
        } else {
            self.config.connect_timeout
        };
        self.phase = Phase::Handshaking {
            deadline: now + limit,
        };
    }

    /// The connection is gone (closed by the peer, an I/O error, or dropped
    /// by the driver on our request). Requests in flight fail with
    /// ConnectionLoss: they may or may not have been applied.
    pub fn handle_disconnected(&mut self, _now: Instant) {
        match self.phase {
            Phase::Disconnected | Phase::Ended => return,
            Phase::Closing { .. } => {
                self.finish(SessionState::Closed, RequestError::Closed);
                return;
            }
            Phase::Handshaking { .. } | Phase::Connected => {}
        }
        self.phase = Phase::Disconnected;
        self.end_sasl();
        self.out.clear();
        self.input.clear();
        self.long_frame = None;
        self.last_probe = None;
        for p in self.in_flight.drain(..) {
            let Some(handle) = p.handle else {
                continue;
            };
            self.events.push_back(SessionEvent::Reply {
                handle,
                result: Err(RequestError::ConnectionLoss),
            });
            // A watch whose registration was in flight was never set.
            if let Some(w) = p.watcher {
                self.events.push_back(SessionEvent::WatchAbandoned {
                    watcher: w,
                    reason: RequestError::ConnectionLoss,
                });
            }
        }
        for h in self.auth_in_flight.drain(..).flatten() {
            self.events.push_back(SessionEvent::Reply {
                handle: h,
                result: Err(RequestError::ConnectionLoss),
            });
        }
        if self.state == SessionState::Connected {
            self.set_state(SessionState::Suspended);
        }
    }

    /// Bytes arrived from the server.
    pub fn handle_input(&mut self, now: Instant, mut bytes: &[u8]) {
        if !self.reading() {
            return;
        }
        self.last_heard = Some(now);
        loop {
            if let Some(long) = self.long_frame.as_mut() {
                bytes = &bytes[long.feed(bytes)..];
                if !long.is_complete() {
                    return;
                }
                if let Some(long) = self.long_frame.take() {
                    if !self.dispatch(now, Frame::Pieces(long.into_pieces())) {
                        return;
                    }
                }
            }
            if bytes.is_empty() {
                break;
            }
            // A step at a time: a long frame's bytes go to its pieces, not
            // through this buffer.
            let (step, rest) = bytes.split_at(bytes.len().min(INPUT_STEP));
            bytes = rest;
            self.input.extend_from_slice(step);
            if !self.split_input(now) {
                return;
            }
        }
        crate::spare_room::release_drained(&mut self.input);
    }

    /// Acts on the whole frames in the input buffer; a long frame begun
    /// there moves to its pieces. False once the session stopped reading.
    fn split_input(&mut self, now: Instant) -> bool {
        loop {
            let len = match frame_len(&self.input, self.config.max_frame) {
                Ok(Some(len)) => len,
                Ok(None) => return true,
                Err(e) if matches!(self.phase, Phase::Handshaking { .. }) => {
                    // No ZooKeeper answers the handshake so: say what the peer is not.
                    self.protocol_error(now, not_zookeeper(&self.input[..4], &e));
                    return false;
                }
                Err(e) => {
                    self.protocol_error(now, format!("bad frame: {e}"));
                    return false;
                }
            };
            let frame = if len > LONG_REPLY {
                self.input.advance(4);
                let mut long = LongFrame::new(len);
                let took = long.feed(&self.input);
                self.input.advance(took);
                if !long.is_complete() {
                    self.long_frame = Some(long);
                    return true;
                }
                Frame::Pieces(long.into_pieces())
            } else if self.input.len() >= 4 + len {
                self.input.advance(4);
                Frame::Whole(self.input.split_to(len).freeze())
            } else {
                return true;
            };
            if !self.dispatch(now, frame) {
                return false;
            }
        }
    }

    /// Whether bytes from the server mean anything now.
    fn reading(&self) -> bool {
        matches!(
            self.phase,
            Phase::Handshaking { .. } | Phase::Connected | Phase::Closing { .. }
        )
    }

    /// Acts on one frame; false once the session stopped reading (a
    /// protocol error, or the frame ended the session).
    fn dispatch(&mut self, now: Instant, frame: Frame) -> bool {
        let frame = match frame {
            // Only replies are read in pieces; the handshake's answer and
            // SASL rounds are joined (never long from a sane server).
            Frame::Pieces(pieces)
                if !matches!(self.phase, Phase::Handshaking { .. }) && !self.sasl_in_progress() =>
            {
                let result = self.on_long_message(now, pieces);
                return self.after_frame(now, result);
            }
            Frame::Pieces(pieces) => Bytes::from(pieces.concat()),
            Frame::Whole(frame) => frame,
        };
        let result = if matches!(self.phase, Phase::Handshaking { .. }) {
            self.on_connect_response(now, &frame)
        } else if let Some(sasl) = self.on_sasl_frame(now, &frame) {
            sasl
        } else {
            self.on_message(now, &frame)
        };
        self.after_frame(now, result)
    }

    fn after_frame(&mut self, now: Instant, result: Result<(), String>) -> bool {
        if let Err(msg) = result {
            self.protocol_error(now, msg);
            return false;
        }
        self.reading()
    }

    /// Time passed: ping, time out a silent connection, report a lost session.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Handshaking { deadline } if now >= deadline => {
                self.drop_connection(now, DropReason::HandshakeTimeout);
            }
            Phase::Connected => {
                let heard = self.last_heard.unwrap_or(now);
                if self.unconfirmed_deadline().is_some_and(|d| now >= d) {
                    self.drop_connection(now, DropReason::LeaderUnconfirmed);
                } else if now.saturating_duration_since(heard) >= self.read_timeout() {
                    self.drop_connection(now, DropReason::ReadTimeout);
                } else {
                    if self.probe_due().is_some_and(|d| now >= d) {
                        self.send_probe(now);
                    }
                    if now.saturating_duration_since(self.last_sent) >= self.ping_interval() {
                        encode_request(&mut self.out, xid::PING, &Request::Ping);
                        self.mark_sent(now);
                        self.pings.push_back(now);
                    }
                }
            }
            Phase::Closing { deadline } if now >= deadline => {
                self.events
                    .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                self.finish(SessionState::Closed, RequestError::Closed);
            }
            _ => {}
        }
        self.check_lost(now);
    }

    fn protocol_error(&mut self, now: Instant, msg: String) {
        log::error!("dropping connection: {msg}");
        self.drop_connection(now, DropReason::Protocol(msg));
    }

    pub(super) fn drop_connection(&mut self, now: Instant, reason: DropReason) {
        self.events.push_back(SessionEvent::DropConnection(reason));
        self.handle_disconnected(now);
    }
}

/// Why a first frame no ZooKeeper would send (before the handshake's answer)
/// ends the connection: the peer is something else. An HTTP server answers
/// `HTTP/1.1 400 ...`, whose length bytes spell "HTTP" (1213486160 bytes).
fn not_zookeeper(first: &[u8], e: &jute::DecodeError) -> String {
    if first.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!(
            "the server does not speak ZooKeeper (its first bytes were {:?})",
            String::from_utf8_lossy(first)
        )
    } else {
        format!("the server does not speak ZooKeeper (its answer to the handshake: {e})")
    }
}
