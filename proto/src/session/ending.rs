//! How a session ends: a close asked for by the caller, the terminal
//! step every end (closed, expired, auth failed) goes through, which
//! answers every request and abandons every watch, and the fresh session
//! that may follow an expired one.

use super::*;

impl<R, W: Clone> Session<R, W> {
    /// Ends the session: closeSession if connected, at once otherwise.
    /// `handle` is answered when the server confirms (or the wait times out).
    pub fn close(&mut self, now: Instant, handle: R) {
        match self.phase {
            Phase::Connected => {
                let xid = self.take_xid();
                encode_request(&mut self.out, xid, &Request::CloseSession);
                self.mark_sent(now);
                self.close_handle = Some(handle);
                self.phase = Phase::Closing {
                    deadline: now + self.read_timeout(),
                };
                // Closed for its users from now on: the server may delete our
                // nodes before its answer reaches us.
                self.set_state(SessionState::Closed);
            }
            Phase::Closing { .. } => self.events.push_back(SessionEvent::Reply {
                handle,
                result: Ok(Response::Empty),
            }),
            _ => {
                if matches!(self.phase, Phase::Handshaking { .. }) {
                    self.events
                        .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                }
                self.close_handle = Some(handle);
                if !self.state.is_terminal() {
                    self.finish(SessionState::Closed, RequestError::Closed);
                } else if let Some(h) = self.close_handle.take() {
                    self.events.push_back(SessionEvent::Reply {
                        handle: h,
                        result: Ok(Response::Empty),
                    });
                }
            }
        }
    }

    /// Terminal: answer everyone, abandon every watch, want no connection.
    /// The state is announced first, so whoever is answered sees it.
    pub(super) fn finish(&mut self, state: SessionState, reason: RequestError) {
        self.phase = Phase::Ended;
        self.end_sasl();
        self.set_state(state);
        self.out.clear();
        self.input.clear();
        self.long_frame = None;
        self.last_probe = None;
        let in_flight = std::mem::take(&mut self.in_flight);
        for p in in_flight {
            if let Some(handle) = p.handle {
                self.refuse(handle, p.watcher, reason.clone());
            }
        }
        let queued = std::mem::take(&mut self.queued);
        for q in queued {
            self.refuse(q.handle, q.watcher, reason.clone());
        }
        for h in self.auth_in_flight.drain(..).flatten() {
            self.events.push_back(SessionEvent::Reply {
                handle: h,
                result: Err(reason.clone()),
            });
        }
        for watcher in self.watches.drain_all() {
            self.events.push_back(SessionEvent::WatchAbandoned {
                watcher,
                reason: reason.clone(),
            });
        }
        if let Some(h) = self.close_handle.take() {
            self.events.push_back(SessionEvent::Reply {
                handle: h,
                result: Ok(Response::Empty),
            });
        }
    }

    /// A fresh session to follow this one after it expired: the same
    /// configuration, credentials, SASL login and liveness rule, and the
    /// newest zxid seen, so that a server behind what we saw refuses us as
    /// on any reconnect. It has no id, no watch and nothing in flight:
    /// everything of this one was answered or abandoned when it ended.
    pub fn successor(&self, now: Instant) -> Self {
        let mut next = Session::new(self.config.clone(), now);
        next.auths = self.auths.clone();
        next.last_zxid = self.last_zxid;
        next.leader_check = self.leader_check;
        #[cfg(feature = "sasl")]
        {
            next.sasl_config = self.sasl_config.clone();
        }
        next
    }
}
