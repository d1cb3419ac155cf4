//! What the server sends: the handshake's answer, replies (in request
//! order), watch events, and what each does to the session.

use super::*;

/// xid, zxid and error code: what precedes every reply's body.
const REPLY_HEADER_LEN: usize = 16;

/// A reply's body as it was gathered.
enum Body<'a> {
    /// In one frame (`body` lies in `frame`, where a listing's names stay).
    Whole { body: &'a [u8], frame: &'a Bytes },
    /// In the pieces of a long frame.
    Pieces(&'a [Bytes]),
}

impl<R, W: Clone> Session<R, W> {
    pub(super) fn on_connect_response(&mut self, now: Instant, frame: &[u8]) -> Result<(), String> {
        let resp =
            ConnectResponse::decode_exact(frame).map_err(|e| format!("connect response: {e}"))?;
        if resp.is_expired() {
            self.events
                .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
            self.finish(SessionState::Expired, RequestError::SessionExpired);
            return Ok(());
        }
        if resp.read_only {
            self.drop_connection(now, DropReason::ReadOnlyServer);
            return Ok(());
        }
        if self.session_id != 0 && resp.session_id != self.session_id {
            return Err(format!(
                "server granted session {:#x} instead of resuming {:#x}",
                resp.session_id, self.session_id
            ));
        }
        let resumed = self.session_id != 0;
        self.session_id = resp.session_id;
        self.passwd = resp.passwd;
        self.negotiated = Some(Duration::from_millis(resp.timeout_ms.max(1) as u64));
        self.phase = Phase::Connected;
        self.lost_reported = false;
        self.last_heard = Some(now);
        self.last_answered_send = Some(self.handshake_sent);
        self.arrived(now, self.handshake_sent);
        // The leader itself created or revalidated the session (a follower
        // asks it: `Learner.validateSession`), touching it no earlier than
        // we sent the handshake.
        self.leader_touch = Some(
            self.leader_touch
                .map_or(self.handshake_sent, |l| l.max(self.handshake_sent)),
        );
        if !self.start_sasl(now, resumed) {
            self.open_for_requests(now, resumed);
        }
        Ok(())
    }

    /// The session is usable: credentials, then re-armed watches, then
    /// whatever waited.
    pub(super) fn open_for_requests(&mut self, now: Instant, resumed: bool) {
        let written = self.out.len();
        for auth in self.auths.clone() {
            encode_request(&mut self.out, xid::AUTH, &Request::Auth(auth));
            self.auth_in_flight.push_back(None);
        }
        for batch in self
            .watches
            .set_watches_batches(self.last_zxid, SET_WATCHES_MAX_BYTES)
        {
            let request = if batch.needs_v2() {
                Request::SetWatches2(batch)
            } else {
                Request::SetWatches(batch)
            };
            encode_request(&mut self.out, xid::SET_WATCHES, &request);
        }
        if self.out.len() > written {
            self.mark_sent(now);
        }
        self.set_state(SessionState::Connected);
        if resumed {
            // The server re-arms persistent watches but does not replay what
            // changed while we were away: tell their owners to look again.
            for (path, watcher) in self.watches.persistent_roots() {
                self.events.push_back(SessionEvent::Watch {
                    watcher,
                    event: WatchEvent {
                        kind: EventType::None,
                        path,
                    },
                });
            }
        }
        while let Some(q) = self.queued.pop_front() {
            self.send(now, q.request, q.handle, q.watcher);
        }
    }

    pub(super) fn on_message(&mut self, now: Instant, frame: &Bytes) -> Result<(), String> {
        let msg = decode_server_message(frame).map_err(|e| format!("reply: {e}"))?;
        let (header, body) = match msg {
            ServerMessage::WatchEvent { event, .. } => {
                self.on_watch_event(event);
                return Ok(());
            }
            ServerMessage::Reply { header, body } => (header, body),
        };
        self.on_reply(now, header, Body::Whole { body, frame })
    }

    /// A long frame, gathered in pieces: a reply to a request is decoded in
    /// place (a listing's names stay in the pieces); anything else is
    /// joined first.
    pub(super) fn on_long_message(
        &mut self,
        now: Instant,
        mut pieces: Vec<Bytes>,
    ) -> Result<(), String> {
        let header = pieces
            .first()
            .and_then(|first| first.get(..REPLY_HEADER_LEN))
            .map(ReplyHeader::decode_exact);
        let header = match header {
            Some(Ok(header))
                if !matches!(
                    header.xid,
                    xid::WATCH_EVENT | xid::PING | xid::AUTH | xid::SET_WATCHES
                ) =>
            {
                header
            }
            _ => return self.on_message(now, &Bytes::from(pieces.concat())),
        };
        if let Some(first) = pieces.first_mut() {
            first.advance(REPLY_HEADER_LEN);
        }
        self.on_reply(now, header, Body::Pieces(&pieces))
    }

    /// A reply: matched to the request in flight it answers, decoded under
    /// that request's op, and delivered.
    fn on_reply(
        &mut self,
        now: Instant,
        header: ReplyHeader,
        body: Body<'_>,
    ) -> Result<(), String> {
        if header.zxid > 0 {
            self.last_zxid = self.last_zxid.max(header.zxid);
        }
        match header.xid {
            xid::PING => {
                if let Some(sent) = self.pings.pop_front() {
                    self.answered(now, sent);
                }
                return Ok(());
            }
            xid::SET_WATCHES => {
                if header.err != ErrorCode::Ok {
                    log::warn!("setWatches answered {:?}", header.err);
                }
                return Ok(());
            }
            xid::AUTH => {
                let handle = self.auth_in_flight.pop_front().flatten();
                if header.err == ErrorCode::Ok {
                    if let Some(h) = handle {
                        self.events.push_back(SessionEvent::Reply {
                            handle: h,
                            result: Ok(Response::Empty),
                        });
                    }
                } else {
                    if let Some(h) = handle {
                        self.events.push_back(SessionEvent::Reply {
                            handle: h,
                            result: Err(RequestError::AuthFailed),
                        });
                    }
                    self.events
                        .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                    self.finish(SessionState::AuthFailed, RequestError::AuthFailed);
                }
                return Ok(());
            }
            _ => {}
        }
        if let Phase::Closing { .. } = self.phase {
            // Everything before the closeSession reply is answered normally.
            if self.in_flight.is_empty() {
                self.events
                    .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                self.finish(SessionState::Closed, RequestError::Closed);
                return Ok(());
            }
        }
        let Some(front) = self.in_flight.front() else {
            return Err(format!(
                "reply for xid {} with nothing in flight",
                header.xid
            ));
        };
        if front.xid != header.xid {
            return Err(format!(
                "reply for xid {} while xid {} is next",
                header.xid, front.xid
            ));
        }
        let Some(p) = crate::spare_room::pop_front(&mut self.in_flight) else {
            return Err("in-flight queue emptied under us".into());
        };
        self.answered(now, p.sent);
        let Some(handle) = p.handle else {
            // Our own liveness sync: nobody to answer.
            if header.err == ErrorCode::Ok {
                self.leader_answered(p.sent);
            }
            if header.err == ErrorCode::SessionExpired {
                self.events
                    .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                self.finish(SessionState::Expired, RequestError::SessionExpired);
            } else if header.err != ErrorCode::Ok {
                log::warn!("liveness sync answered {:?}", header.err);
            }
            return Ok(());
        };
        let decoded = match body {
            Body::Whole { body, frame } => decode_reply_in(p.op, &header, body, Some(frame)),
            Body::Pieces(pieces) => decode_reply_pieces(p.op, &header, pieces),
        };
        let result = match decoded {
            Ok(r) => r,
            Err(e) => {
                // Put the caller back so the disconnect answers it.
                self.in_flight.push_front(InFlight {
                    handle: Some(handle),
                    ..p
                });
                return Err(format!("reply body: {e}"));
            }
        };
        if leader_proof(p.op, &result) {
            self.leader_answered(p.sent);
        }
        if header.err == ErrorCode::SessionExpired {
            self.events.push_back(SessionEvent::Reply {
                handle,
                result: Err(RequestError::SessionExpired),
            });
            if let Some(w) = p.watcher {
                self.events.push_back(SessionEvent::WatchAbandoned {
                    watcher: w,
                    reason: RequestError::SessionExpired,
                });
            }
            self.events
                .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
            self.finish(SessionState::Expired, RequestError::SessionExpired);
            return Ok(());
        }
        if let (Some(w), OpCode::AddWatch, Some(path)) = (&p.watcher, p.op, &p.path) {
            if result.is_ok() {
                self.watches.add_persistent(path, p.recursive, w.clone());
            } else if let Err(code) = &result {
                self.events.push_back(SessionEvent::WatchAbandoned {
                    watcher: w.clone(),
                    reason: RequestError::Server(*code),
                });
            }
            self.events.push_back(SessionEvent::Reply {
                handle,
                result: result.map_err(RequestError::Server),
            });
            return Ok(());
        }
        if let Some(w) = p.watcher {
            let kind = match (p.op, &result) {
                (OpCode::Exists, Ok(_)) | (OpCode::GetData, Ok(_)) => Some(WatchKind::Data),
                (OpCode::Exists, Err(ErrorCode::NoNode)) => Some(WatchKind::Exist),
                (OpCode::GetChildren | OpCode::GetChildren2, Ok(_)) => Some(WatchKind::Child),
                _ => None,
            };
            match (kind, &p.path) {
                (Some(kind), Some(path)) => self.watches.add(kind, path, w),
                _ => self.events.push_back(SessionEvent::WatchAbandoned {
                    watcher: w,
                    reason: match &result {
                        Err(code) => RequestError::Server(*code),
                        Ok(_) => RequestError::Server(ErrorCode::NoWatcher),
                    },
                }),
            }
        }
        self.events.push_back(SessionEvent::Reply {
            handle,
            result: result.map_err(RequestError::Server),
        });
        Ok(())
    }

    pub(super) fn on_watch_event(&mut self, event: WatcherEvent) {
        match event.state {
            KeeperState::SyncConnected | KeeperState::ConnectedReadOnly => {}
            KeeperState::Expired => {
                self.events
                    .push_back(SessionEvent::DropConnection(DropReason::SessionEnded));
                self.finish(SessionState::Expired, RequestError::SessionExpired);
                return;
            }
            other => {
                log::debug!("ignoring watch event with state {other:?}");
                return;
            }
        }
        let persistent: Vec<W> = self
            .watches
            .persistent_matches(event.kind, &event.path)
            .into_iter()
            .cloned()
            .collect();
        let once = self.watches.trigger(event.kind, &event.path);
        for watcher in once.into_iter().chain(persistent) {
            self.events.push_back(SessionEvent::Watch {
                watcher,
                event: WatchEvent {
                    kind: event.kind,
                    path: event.path.clone(),
                },
            });
        }
    }
}
