//! The sans-I/O session core: the ZooKeeper session as a state machine.
//!
//! It owns xids, the requests in flight, pings, timeouts, watches and the
//! session's state, but never touches a socket or reads a clock. The driver
//! hands it bytes, connection events and `now`, then drains what it wants
//! written ([`Session::output`]), its next deadline ([`Session::poll_timeout`])
//! and its events ([`Session::poll_event`]).
//!
//! `R` is whatever the driver uses to answer a caller (a channel sender in
//! the real client, a number in tests); `W` the same for a watcher.

mod error;
#[doc(hidden)]
pub mod fuzz;
mod liveness;
use liveness::leader_ordered;
mod md5;
mod replies;
mod sasl;
mod watches;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use jute::{
    decode_reply_in, decode_server_message, encode_connect, encode_request, frame_len, split_frame,
    xid, AddWatchMode, AuthPacket, ConnectRequest, ConnectResponse, Decode, ErrorCode, EventType,
    KeeperState, OpCode, Request, Response, ServerMessage, WatcherEvent, WatcherType,
};

pub use error::RequestError;
pub use sasl::{SaslConfig, SaslError, SaslMechanism};
pub use watches::WatchKind;
use watches::WatchRegistry;

/// SetWatches batches stay under this, as ZooKeeper's own client does.
const SET_WATCHES_MAX_BYTES: usize = 128 * 1024;
/// A reply longer than this lets the input buffer go once it is consumed.
const LONG_REPLY: usize = 64 * 1024;

/// What the session core is configured with.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The session timeout asked of the server; it may grant another.
    pub session_timeout: Duration,
    /// How long a handshake may take once TCP is up.
    pub connect_timeout: Duration,
    /// Largest frame accepted from the server or sent to it.
    pub max_frame: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_frame: jute::DEFAULT_MAX_FRAME,
        }
    }
}

/// The session's state as the outside world sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// No session yet: connecting for the first time.
    Connecting,
    /// Connected; requests flow, and the leader has heard the session
    /// recently enough (see [`Session::set_leader_check`]).
    Connected,
    /// The connection dropped, or the leader has not confirmed the session
    /// for three quarters of the session timeout; the session may still
    /// live on the server.
    Suspended,
    /// No contact the leader confirmed for a whole session timeout: the
    /// leader has probably expired us. Reconnection goes on; only the server
    /// can say "expired".
    Lost,
    /// The server expired the session. Terminal.
    Expired,
    /// The server refused our credentials. Terminal.
    AuthFailed,
    /// Closed by us. Terminal.
    Closed,
}

impl SessionState {
    /// No further request can succeed.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            SessionState::Expired | SessionState::AuthFailed | SessionState::Closed
        )
    }
}

/// A watch notification: what happened, and to which node. The crate's one
/// event type, re-exported as [`zklock::WatchEvent`](crate::WatchEvent).
///
/// Where it comes from says which path it carries: from the session core
/// ([`SessionEvent::Watch`]) and the lock machine, the server's path (chroot
/// included); from a client's [`Watch`](crate::Watch) or
/// [`PersistentWatch`](crate::PersistentWatch), the path as the caller
/// names it (chroot removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// What happened. [`EventType::None`] from a persistent watch, after a
    /// reconnect, means "re-read what you follow": the server does not
    /// replay what changed while the connection was down.
    pub kind: EventType,
    /// The node concerned.
    pub path: String,
}

/// Why the core wants the current connection dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// Nothing heard for two thirds of the session timeout.
    ReadTimeout,
    /// The handshake took longer than the connect timeout.
    HandshakeTimeout,
    /// The server sent something we cannot accept.
    Protocol(String),
    /// The server answered the handshake as a read-only server.
    ReadOnlyServer,
    /// The session ended (expired, closed, auth failed).
    SessionEnded,
    /// No request the leader must order (a `sync` or a write) was answered
    /// in time: this server may be cut off from the leader while it goes on
    /// answering our pings. See [`Session::set_leader_check`].
    LeaderUnconfirmed,
}

/// What the core has for the driver to deliver.
#[derive(Debug)]
pub enum SessionEvent<R, W> {
    /// A request finished.
    Reply {
        /// The handle given to [`Session::submit`] or [`Session::close`].
        handle: R,
        /// The reply body, or why there is none.
        result: Result<Response, RequestError>,
    },
    /// A watch fired. A one-shot watcher receives at most one of these; a persistent one, one per change until it is released.
    Watch {
        /// The watcher given to [`Session::submit`].
        watcher: W,
        /// What fired it.
        event: WatchEvent,
    },
    /// A watch will never fire: the session ended first.
    WatchAbandoned {
        /// The watcher given to [`Session::submit`].
        watcher: W,
        /// Why it will never fire.
        reason: RequestError,
    },
    /// The session state changed.
    State(SessionState),
    /// Drop the connection now (the core already counts it as gone).
    DropConnection(DropReason),
}

/// A request waiting for its reply, in send order.
struct InFlight<R, W> {
    xid: i32,
    op: OpCode,
    path: Option<String>,
    /// For addWatch: whether the watch is recursive.
    recursive: bool,
    /// `None` for the core's own liveness `sync`, answered to nobody.
    handle: Option<R>,
    watcher: Option<W>,
    /// When it was written: an answer proves the server heard us then.
    sent: Instant,
}

/// A request submitted while no connection is up.
struct Queued<R, W> {
    request: Request,
    handle: R,
    watcher: Option<W>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No TCP connection.
    Disconnected,
    /// TCP up, handshake sent.
    Handshaking {
        deadline: Instant,
    },
    Connected,
    /// closeSession sent, waiting for its reply.
    Closing {
        deadline: Instant,
    },
    /// Terminal; no connection wanted.
    Ended,
}

/// The session state machine. See the module docs.
pub struct Session<R, W> {
    config: SessionConfig,
    phase: Phase,
    state: SessionState,
    session_id: i64,
    passwd: Vec<u8>,
    negotiated: Option<Duration>,
    last_zxid: i64,
    next_xid: i32,
    in_flight: VecDeque<InFlight<R, W>>,
    queued: VecDeque<Queued<R, W>>,
    auth_in_flight: VecDeque<Option<R>>,
    auths: Vec<AuthPacket>,
    watches: WatchRegistry<W>,
    close_handle: Option<R>,
    out: BytesMut,
    input: BytesMut,
    last_heard: Option<Instant>,
    last_sent: Instant,
    /// Send time of the newest request the server answered (the handshake
    /// and pings included): the server heard us no earlier than this, so it
    /// cannot expire us before this plus the session timeout.
    last_answered_send: Option<Instant>,
    /// Send times of pings awaiting their reply, oldest first.
    pings: VecDeque<Instant>,
    /// Send time of the handshake awaiting its reply.
    handshake_sent: Instant,
    lost_reported: bool,
    events: VecDeque<SessionEvent<R, W>>,
    sasl_config: Option<SaslConfig>,
    sasl: Option<sasl::SaslRound>,
    auth_error: Option<SaslError>,
    /// Count only leader-ordered answers as proof of life (on by default).
    leader_check: bool,
    /// Send times of what we wrote on this connection, oldest first, at most
    /// one per [`TOUCH_GRAIN`] of the session timeout: each one touched the
    /// session on the server we talk to.
    touches: VecDeque<Instant>,
    /// The newest of our touches known to have reached the leader's session
    /// tracker: the leader cannot expire us before this plus the timeout.
    leader_touch: Option<Instant>,
    /// Send time of the newest leader-ordered request on this connection.
    last_leader_send: Instant,
    /// Our own liveness `sync` is in flight.
    probe_in_flight: bool,
}

/// Touches are kept at most one per this fraction of the session timeout, so
/// that a busy session keeps a short list (a dropped touch only makes the
/// proof older, never younger).
const TOUCH_GRAIN: u32 = 64;

impl<R, W: Clone> Session<R, W> {
    /// A core with no session yet, wanting its first connection.
    pub fn new(config: SessionConfig, now: Instant) -> Self {
        Session {
            config,
            phase: Phase::Disconnected,
            state: SessionState::Connecting,
            session_id: 0,
            passwd: vec![0; 16],
            negotiated: None,
            last_zxid: 0,
            next_xid: 1,
            in_flight: VecDeque::new(),
            queued: VecDeque::new(),
            auth_in_flight: VecDeque::new(),
            auths: Vec::new(),
            watches: WatchRegistry::default(),
            close_handle: None,
            out: BytesMut::new(),
            input: BytesMut::new(),
            last_heard: None,
            last_sent: now,
            last_answered_send: None,
            pings: VecDeque::new(),
            handshake_sent: now,
            lost_reported: false,
            events: VecDeque::new(),
            sasl_config: None,
            sasl: None,
            auth_error: None,
            leader_check: true,
            touches: VecDeque::new(),
            leader_touch: None,
            last_leader_send: now,
            probe_in_flight: false,
        }
    }

    /// The state last announced through [`SessionEvent::State`].
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The session id, once the server granted one (0 before).
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The timeout the server granted, once connected.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.negotiated
    }

    /// The highest zxid seen in any reply.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Number of watches registered (for tests and diagnostics).
    pub fn watch_count(&self) -> usize {
        self.watches.len()
    }

    /// Why SASL authentication failed, once the session is `AuthFailed` by it.
    pub fn auth_error(&self) -> Option<&SaslError> {
        self.auth_error.as_ref()
    }

    /// Authenticate every connection with SASL before any request is sent.
    pub fn set_sasl(&mut self, config: Option<SaslConfig>) {
        self.sasl_config = config;
    }

    /// Connected, and (with SASL) authenticated: requests may be sent.
    fn is_open(&self) -> bool {
        self.phase == Phase::Connected && !self.sasl_in_progress()
    }

    /// Whether the driver should open a connection now.
    pub fn wants_connection(&self) -> bool {
        self.phase == Phase::Disconnected && !self.state.is_terminal()
    }

    /// Whether the core has finished for good and its driver may stop.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Ended && self.events.is_empty()
    }

    fn set_state(&mut self, state: SessionState) {
        if self.state != state {
            self.state = state;
            self.events.push_back(SessionEvent::State(state));
        }
    }

    // ---- inputs -------------------------------------------------------

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
        self.sasl = None;
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
                    if long_reply && self.input.is_empty() {
                        // A long reply (a listing of thousands) grew the
                        // buffer: let it go rather than keep its size for
                        // the life of the session. Small replies keep
                        // reusing the one buffer.
                        self.input = BytesMut::new();
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

    // ---- commands -----------------------------------------------------

    /// Submits a request. `watcher`, if any, is registered when the reply
    /// says the watch was set; it receives exactly one event or one
    /// [`SessionEvent::WatchAbandoned`]. The answer always comes back as a
    /// [`SessionEvent::Reply`] carrying `handle`.
    pub fn submit(&mut self, now: Instant, request: Request, handle: R, watcher: Option<W>) {
        if self.state.is_terminal() || matches!(self.phase, Phase::Closing { .. }) {
            let reason = self.end_reason();
            self.refuse(handle, watcher, reason);
            return;
        }
        if let Request::Auth(auth) = &request {
            // Credentials are re-sent after every reconnect: once each.
            if !self.auths.contains(auth) {
                self.auths.push(auth.clone());
            }
            if self.is_open() {
                encode_request(&mut self.out, xid::AUTH, &request);
                self.mark_sent(now);
                self.auth_in_flight.push_back(Some(handle));
            } else {
                // Sent with every handshake; the caller learns of a failure
                // through the AuthFailed state.
                self.events.push_back(SessionEvent::Reply {
                    handle,
                    result: Ok(Response::Empty),
                });
            }
            return;
        }
        if self.is_open() {
            self.send(now, request, handle, watcher);
        } else {
            let mut scratch = BytesMut::new();
            let len = encode_request(&mut scratch, 0, &request);
            if len > self.config.max_frame {
                return self.refuse(
                    handle,
                    watcher,
                    RequestError::TooLarge {
                        len,
                        max: self.config.max_frame,
                    },
                );
            }
            self.queued.push_back(Queued {
                request,
                handle,
                watcher,
            });
        }
    }

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

    /// A persistent watch on `path` lost a watcher. Forgets the watchers
    /// `keep` rejects; once no watch of any kind remains on `path`, asks the
    /// server to drop its watches there (answered on `handle`), else answers
    /// at once. ZooKeeper 3.8 removes persistent watches only by type Any,
    /// which would also drop one-shot watches still wanted on the path; a
    /// server watch left behind is not re-armed after the next reconnect.
    pub fn release_persistent(
        &mut self,
        now: Instant,
        path: &str,
        keep: impl FnMut(&W) -> bool,
        handle: R,
    ) {
        self.watches.retain(keep);
        if self.watches.watches_path(path) || self.state.is_terminal() {
            self.events.push_back(SessionEvent::Reply {
                handle,
                result: Ok(Response::Empty),
            });
            return;
        }
        let request = Request::RemoveWatches(jute::WatchesRequest {
            path: path.to_owned(),
            kind: WatcherType::Any,
        });
        self.submit(now, request, handle, None);
    }

    /// Forgets registered watches for which `keep` says no; they are not
    /// re-armed after the next reconnect and never delivered.
    pub fn retain_watches(&mut self, keep: impl FnMut(&W) -> bool) {
        self.watches.retain(keep);
    }

    // ---- outputs ------------------------------------------------------

    /// Bytes waiting to be written.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// The driver wrote `n` bytes of [`Session::output`].
    pub fn consume_output(&mut self, n: usize) {
        self.out.advance(n.min(self.out.len()));
    }

    /// The next event to deliver, if any.
    pub fn poll_event(&mut self) -> Option<SessionEvent<R, W>> {
        self.events.pop_front()
    }

    /// When [`Session::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lost = self.lost_deadline();
        let phase = match self.phase {
            Phase::Handshaking { deadline } | Phase::Closing { deadline } => Some(deadline),
            Phase::Connected => {
                let heard = self.last_heard.map(|h| h + self.read_timeout());
                let ping = Some(self.last_sent + self.ping_interval());
                heard
                    .into_iter()
                    .chain(ping)
                    .chain(self.unconfirmed_deadline())
                    .chain(self.probe_due())
                    .min()
            }
            _ => None,
        };
        lost.into_iter().chain(phase).min()
    }

    // ---- internals ----------------------------------------------------

    fn take_xid(&mut self) -> i32 {
        let x = self.next_xid;
        self.next_xid = if x == i32::MAX { 1 } else { x + 1 };
        x
    }

    fn end_reason(&self) -> RequestError {
        match self.state {
            SessionState::Expired => RequestError::SessionExpired,
            SessionState::AuthFailed => RequestError::AuthFailed,
            _ => RequestError::Closed,
        }
    }

    fn refuse(&mut self, handle: R, watcher: Option<W>, reason: RequestError) {
        if let Some(w) = watcher {
            self.events.push_back(SessionEvent::WatchAbandoned {
                watcher: w,
                reason: reason.clone(),
            });
        }
        self.events.push_back(SessionEvent::Reply {
            handle,
            result: Err(reason),
        });
    }

    fn send(&mut self, now: Instant, request: Request, handle: R, watcher: Option<W>) {
        self.send_as(now, request, Some(handle), watcher);
    }

    fn send_as(&mut self, now: Instant, request: Request, handle: Option<R>, watcher: Option<W>) {
        let mark = self.out.len();
        let xid = self.take_xid();
        let len = encode_request(&mut self.out, xid, &request);
        if len > self.config.max_frame {
            self.out.truncate(mark);
            let max = self.config.max_frame;
            if let Some(handle) = handle {
                self.refuse(handle, watcher, RequestError::TooLarge { len, max });
            }
            return;
        }
        self.mark_sent(now);
        if leader_ordered(request.op_code()) {
            self.last_leader_send = now;
        }
        let (path, recursive) = match &request {
            Request::Exists(p)
            | Request::GetData(p)
            | Request::GetChildren(p)
            | Request::GetChildren2(p)
                if p.watch =>
            {
                (Some(p.path.clone()), false)
            }
            Request::AddWatch(a) => (
                Some(a.path.clone()),
                a.mode == AddWatchMode::PersistentRecursive,
            ),
            _ => (None, false),
        };
        self.in_flight.push_back(InFlight {
            xid,
            op: request.op_code(),
            path,
            recursive,
            handle,
            watcher,
            sent: now,
        });
    }

    fn protocol_error(&mut self, now: Instant, msg: String) {
        log::error!("dropping connection: {msg}");
        self.drop_connection(now, DropReason::Protocol(msg));
    }

    fn drop_connection(&mut self, now: Instant, reason: DropReason) {
        self.events.push_back(SessionEvent::DropConnection(reason));
        self.handle_disconnected(now);
    }

    /// Terminal: answer everyone, abandon every watch, want no connection.
    /// The state is announced first, so whoever is answered sees it.
    fn finish(&mut self, state: SessionState, reason: RequestError) {
        self.phase = Phase::Ended;
        self.sasl = None;
        self.set_state(state);
        self.out.clear();
        self.input.clear();
        self.probe_in_flight = false;
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
}

impl<R, W> std::fmt::Debug for Session<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("state", &self.state)
            .field("phase", &self.phase)
            .field("session_id", &format_args!("{:#x}", self.session_id))
            .field("last_zxid", &self.last_zxid)
            .field("in_flight", &self.in_flight.len())
            .field("watches", &self.watches.len())
            .finish()
    }
}
