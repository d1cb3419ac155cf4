//! The session's state as the core publishes it for API threads.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use crate::session::{Session, SessionState};

/// What the I/O thread publishes for API threads to read at any time.
/// Atomics, not a lock: a reader never waits for the I/O thread, nor the
/// I/O thread for a reader.
#[derive(Debug, Default)]
pub(crate) struct Status {
    state: AtomicU8,
    session_id: AtomicI64,
    /// Milliseconds; 0 until a timeout was granted.
    negotiated_ms: AtomicU64,
    last_zxid: AtomicI64,
}

const STATES: [SessionState; 7] = [
    SessionState::Connecting,
    SessionState::Connected,
    SessionState::Suspended,
    SessionState::Lost,
    SessionState::Expired,
    SessionState::AuthFailed,
    SessionState::Closed,
];

impl Status {
    pub(crate) fn state(&self) -> SessionState {
        STATES[usize::from(self.state.load(Ordering::Acquire)) % STATES.len()]
    }

    pub(crate) fn session_id(&self) -> i64 {
        self.session_id.load(Ordering::Acquire)
    }

    pub(crate) fn negotiated(&self) -> Option<Duration> {
        match self.negotiated_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub(crate) fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Acquire)
    }

    pub(super) fn set_last_zxid(&self, zxid: i64) {
        self.last_zxid.store(zxid, Ordering::Release);
    }

    pub(super) fn store<R, W: Clone>(&self, session: &Session<R, W>) {
        let state = STATES
            .iter()
            .position(|s| *s == session.state())
            .unwrap_or(0);
        self.session_id
            .store(session.session_id(), Ordering::Release);
        self.negotiated_ms.store(
            session
                .negotiated_timeout()
                .map_or(0, |t| t.as_millis().max(1) as u64),
            Ordering::Release,
        );
        self.last_zxid.store(session.last_zxid(), Ordering::Release);
        // Last: whoever sees the new state sees the rest with it.
        self.state.store(state as u8, Ordering::Release);
    }
}
