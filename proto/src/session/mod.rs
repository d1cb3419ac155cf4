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

mod connection;
mod ending;
mod error;
mod events;
#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzz;
mod liveness;
mod long_frame;
use liveness::{leader_proof, Touch};
use long_frame::LongFrame;
#[cfg(feature = "sasl")]
mod md5;
mod replies;
mod requests;
#[cfg(feature = "sasl")]
mod sasl;
mod watches;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use jute::{
    decode_reply_in, decode_reply_pieces, decode_server_message, encode_connect, encode_request,
    frame_len, xid, AddWatchMode, AuthPacket, ConnectRequest, ConnectResponse, Decode, ErrorCode,
    EventType, KeeperState, MultiResult, OpCode, ReplyHeader, Request, Response, ServerMessage,
    WatcherEvent, WatcherType,
};

pub use error::RequestError;
pub use events::{DropReason, SessionChange, SessionEvent, SessionState, WatchEvent};
#[cfg(feature = "sasl")]
pub use sasl::{SaslConfig, SaslError, SaslMechanism};
pub use watches::WatchKind;
use watches::WatchRegistry;

/// SetWatches batches stay under this, as ZooKeeper's own client does.
const SET_WATCHES_MAX_BYTES: usize = 128 * 1024;

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
    /// A long frame being gathered in pieces (never in `input`).
    long_frame: Option<LongFrame>,
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
    #[cfg(feature = "sasl")]
    sasl_config: Option<SaslConfig>,
    #[cfg(feature = "sasl")]
    sasl: Option<sasl::SaslRound>,
    #[cfg(feature = "sasl")]
    auth_error: Option<SaslError>,
    /// Count only leader-ordered answers as proof of life (on by default).
    leader_check: bool,
    /// What we wrote on this connection, oldest first, at most one per
    /// [`TOUCH_GRAIN`] of the session timeout: each one touched the session
    /// on the server we talk to.
    touches: VecDeque<Touch>,
    /// The newest of our touches known to have reached the leader's session
    /// tracker: the leader cannot expire us before this plus the timeout.
    leader_touch: Option<Instant>,
    /// Send time of the newest of our own liveness `sync`s on this
    /// connection (`None` before the first).
    last_probe: Option<Instant>,
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
            long_frame: None,
            last_heard: None,
            last_sent: now,
            last_answered_send: None,
            pings: VecDeque::new(),
            handshake_sent: now,
            lost_reported: false,
            events: VecDeque::new(),
            #[cfg(feature = "sasl")]
            sasl_config: None,
            #[cfg(feature = "sasl")]
            sasl: None,
            #[cfg(feature = "sasl")]
            auth_error: None,
            leader_check: true,
            touches: VecDeque::new(),
            leader_touch: None,
            last_probe: None,
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
    #[cfg(feature = "sasl")]
    pub fn auth_error(&self) -> Option<&SaslError> {
        self.auth_error.as_ref()
    }

    /// Authenticate every connection with SASL before any request is sent.
    #[cfg(feature = "sasl")]
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

    // ---- outputs ------------------------------------------------------

    /// Bytes waiting to be written.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// The driver wrote `n` bytes of [`Session::output`].
    pub fn consume_output(&mut self, n: usize) {
        self.out.advance(n.min(self.out.len()));
        crate::spare_room::release_drained(&mut self.out);
    }

    /// The next event to deliver, if any.
    pub fn poll_event(&mut self) -> Option<SessionEvent<R, W>> {
        crate::spare_room::pop_front(&mut self.events)
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
}

/// Without the feature `sasl` no connection authenticates: the session
/// opens as soon as the handshake is answered.
#[cfg(not(feature = "sasl"))]
impl<R, W: Clone> Session<R, W> {
    pub(super) fn start_sasl(&mut self, _now: Instant, _resumed: bool) -> bool {
        false
    }

    pub(super) fn sasl_in_progress(&self) -> bool {
        false
    }

    pub(super) fn on_sasl_frame(
        &mut self,
        _now: Instant,
        _frame: &[u8],
    ) -> Option<Result<(), String>> {
        None
    }

    pub(super) fn end_sasl(&mut self) {}
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
