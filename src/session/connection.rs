//! The connection's life as the driver reports it: TCP up (the handshake
//! goes out), bytes in (split into frames and dispatched), the connection
//! gone (requests in flight fail with ConnectionLoss), and time passing
//! (handshake, read and leader timeouts; pings and probes).

use super::*;

/// A reply longer than this lets the input buffer go once it is consumed.
pub(super) const LONG_REPLY: usize = 64 * 1024;

impl<R, W: Clone> Session<R, W> {
    /// A TCP connection is up: send the handshake.
    pub fn handle_connected(&mut self, now: Instant) {
        if self.phase != Phase::Disconnected || self.state.is_terminal() {
            return;
        }
        self.out.clear();
        self.input.clear();
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
        self.probe_in_flight = false;
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
        self.probe_in_flight = false;
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
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        if !matches!(
            self.phase,
            Phase::Handshaking { .. } | Phase::Connected | Phase::Closing { .. }
        ) {
            return;
        }
        self.input.extend_from_slice(bytes);
        if let Ok(Some(len)) = frame_len(&self.input, self.config.max_frame) {
            // A long reply arriving in pieces: room for all of it at once,
            // not a doubling (and a copy) per piece.
            self.input
                .reserve((4 + len).saturating_sub(self.input.len()));
        }
        self.last_heard = Some(now);
        let mut long_reply = false;
        loop {
            let frame = match split_frame(&mut self.input, self.config.max_frame) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    if long_reply && self.input.len() < LONG_REPLY {
                        // A long reply (a listing of thousands) grew the
                        // buffer: let it go rather than keep its size for
                        // the life of the session, keeping only the start
                        // of the next frame, if one has come (a session
                        // waiting in a long queue may hear nothing more
                        // for hours). Small replies keep reusing the one
                        // buffer.
                        self.input = BytesMut::from(&self.input[..]);
                    }
                    return;
                }
                Err(e) => return self.protocol_error(now, format!("bad frame: {e}")),
            };
            long_reply |= frame.len() > LONG_REPLY;
            let result = if matches!(self.phase, Phase::Handshaking { .. }) {
                self.on_connect_response(now, &frame)
            } else if let Some(sasl) = self.on_sasl_frame(now, &frame) {
                sasl
            } else {
                self.on_message(&frame)
            };
            if let Err(msg) = result {
                return self.protocol_error(now, msg);
            }
            if !matches!(
                self.phase,
                Phase::Handshaking { .. } | Phase::Connected | Phase::Closing { .. }
            ) {
                return;
            }
        }
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
                        self.probe_in_flight = true;
                        self.send_as(now, Request::Sync("/".to_owned()), None, None);
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
