//! What the core hands its driver through [`Session::poll_event`]: the
//! events, and what they carry (the session's state, a watch notification,
//! why the connection must drop). The crate re-exports the state and the
//! watch event at its root.

use super::*;

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

/// A change of state and the session it happened to: after an expiry a
/// client may open a new session ([`crate::Client::set_new_session_after_expiry`]),
/// and the id tells the old session's `Expired` from the new one's
/// `Connected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionChange {
    /// The state it is in now.
    pub state: SessionState,
    /// The session's id: 0 until the server has granted one (the first
    /// `Connecting`, a new session's `Connecting`, a refusal before any).
    pub session_id: i64,
}

/// A watch notification: what happened, and to which node. zklock's
/// blocking client hands out the same type (`zklock::WatchEvent`).
///
/// Where it comes from says which path it carries: from the session core
/// ([`SessionEvent::Watch`]) and the lock machine, the server's path (chroot
/// included); from zklock's `Watch` or `PersistentWatch`, the path as the
/// caller names it (chroot removed).
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
