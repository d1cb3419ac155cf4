//! The session's state as the core publishes it for API threads.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::session::SessionState;
use crate::wakers::WakeList;

/// What the I/O thread publishes for API threads to read at any time.
/// Atomics, not a lock: a reader never waits for the I/O thread, nor the
/// I/O thread for a reader.
#[derive(Debug)]
pub(crate) struct Status {
    state: AtomicU8,
    session_id: AtomicI64,
    /// Milliseconds; 0 until a timeout was granted.
    negotiated_ms: AtomicU64,
    last_zxid: AtomicI64,
    /// The instant `valid_until_ns` counts from.
    base: Instant,
    /// Nanoseconds after `base` until which the server cannot have expired
    /// the session (see `Session::valid_until`); 0 for none.
    valid_until_ns: AtomicU64,
    /// Tasks waiting for the state to change (or for a connection to fail:
    /// the driver wakes them too).
    pub(crate) changes: WakeList,
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
    pub(crate) fn new(base: Instant) -> Self {
        Status {
            state: AtomicU8::new(0),
            session_id: AtomicI64::new(0),
            negotiated_ms: AtomicU64::new(0),
            last_zxid: AtomicI64::new(0),
            base,
            valid_until_ns: AtomicU64::new(0),
            changes: WakeList::default(),
        }
    }

    /// Until when the server cannot have expired the session, as last
    /// published; `None` without a proof of life (or after it ended).
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        match self.valid_until_ns.load(Ordering::Acquire) {
            0 => None,
            ns => self.base.checked_add(Duration::from_nanos(ns)),
        }
    }

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

    pub(super) fn store<R, W: Clone>(&self, session: &zklock_proto::Client<R, W>) {
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
        let horizon = session.valid_until().map_or(0, |t| {
            t.saturating_duration_since(self.base).as_nanos().max(1) as u64
        });
        self.valid_until_ns.store(horizon, Ordering::Release);
        // Last: whoever sees the new state sees the rest with it.
        let before = self.state.swap(state as u8, Ordering::AcqRel);
        if before != state as u8 {
            self.changes.wake_all();
        }
    }
}
