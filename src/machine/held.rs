//! What a holder can rely on (held / suspended / lost), and the state a
//! guard shares with the lock machine's runner, which updates it on the
//! I/O thread in the same loop turn as the session change that causes it.
//! Curator and kazoo never tell a holder that it lost its lock; we do.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, TrySendError};

/// What a holder can rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockState {
    /// Our node exists and our session is connected.
    Held,
    /// The connection dropped: the lock is ours only if the session survives.
    /// Stop acting as the holder until `Held` again.
    Suspended,
    /// The session expired or went silent for a whole session timeout, or our
    /// node was deleted. Final: act as if someone else holds the lock.
    Lost,
}

/// Why a lock was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// The server expired our session: its nodes are gone.
    SessionExpired,
    /// No contact with any server for a whole session timeout: the server
    /// has most likely expired the session, and another holder may exist.
    NoContact,
    /// Our lock node was deleted by someone else.
    NodeDeleted,
    /// The client was closed, or its I/O thread ended.
    ClientClosed,
    /// The holder let go, but the server refused to delete the node (see
    /// [`LockError::ReleaseRefused`](super::LockError::ReleaseRefused)):
    /// others stay blocked until the session ends.
    ReleaseRefused,
    /// Nodes past the end of the lock path's sequence counter appeared:
    /// the queue can no longer be ordered, so no one can be sure who holds.
    SequenceExhausted,
}

const HELD: u8 = 0;
const SUSPENDED: u8 = 1;
const LOST: u8 = 2;

fn decode_state(v: u8) -> LockState {
    match v {
        HELD => LockState::Held,
        SUSPENDED => LockState::Suspended,
        _ => LockState::Lost,
    }
}

/// Shared by a guard and the runner that reports on it.
pub(crate) struct HolderState {
    state: AtomicU8,
    released: AtomicBool,
    reason: Mutex<Option<LossReason>>,
    listeners: Mutex<Vec<Sender<LockState>>>,
    /// Functions told of each change, on the thread that makes it (the
    /// core's): for recipes that react without a thread of their own.
    callbacks: Mutex<Vec<StateCallback>>,
    /// Someone asked the holder to let go (revocable locks).
    revocation: AtomicBool,
    revocation_listeners: Mutex<Vec<Sender<()>>>,
}

impl std::fmt::Debug for HolderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HolderState")
            .field("state", &self.current())
            .field("reason", &self.reason())
            .finish_non_exhaustive()
    }
}

/// How many state changes a listener's channel keeps unread (session
/// subscribers and guards' `state_changes` alike). A reader that falls this
/// far behind misses later changes until it reads; the current state is
/// always readable where the channel came from.
pub const STATE_CHANNEL_CAPACITY: usize = 256;

/// Told of a holder's state change.
pub(crate) type StateCallback = Arc<dyn Fn(LockState) + Send + Sync>;

impl HolderState {
    pub(crate) fn new() -> Self {
        HolderState {
            state: AtomicU8::new(HELD),
            released: AtomicBool::new(false),
            reason: Mutex::new(None),
            listeners: Mutex::new(Vec::new()),
            callbacks: Mutex::new(Vec::new()),
            revocation: AtomicBool::new(false),
            revocation_listeners: Mutex::new(Vec::new()),
        }
    }

    /// A revocation request arrived: listeners hear it once each time.
    pub(crate) fn request_revocation(&self) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        self.revocation.store(true, Ordering::SeqCst);
        if let Ok(mut ls) = self.revocation_listeners.lock() {
            // A listener that has not read the last request needs no other.
            ls.retain(|l| !matches!(l.try_send(()), Err(TrySendError::Disconnected(_))));
        }
    }

    /// Whether a revocation request arrived.
    pub(crate) fn revocation_requested(&self) -> bool {
        self.revocation.load(Ordering::SeqCst)
    }

    /// A channel that yields once per revocation request (one already
    /// received: at once).
    pub(crate) fn revocations(&self) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.revocation_requested() {
            let _ = tx.try_send(());
        }
        if let Ok(mut ls) = self.revocation_listeners.lock() {
            ls.push(tx);
        }
        rx
    }

    /// Calls `f` with each later change (not after a release).
    pub(crate) fn on_change(&self, f: StateCallback) {
        if let Ok(mut cs) = self.callbacks.lock() {
            cs.push(f);
        }
    }

    /// The holder let go: no more changes are reported, but for how the
    /// release ends ([`HolderState::finish_release`]).
    pub(crate) fn mark_released(&self) {
        self.released.store(true, Ordering::SeqCst);
        // No change comes any more; a callback may own the guard.
        if let Ok(mut cs) = self.callbacks.lock() {
            cs.clear();
        }
    }

    /// The release finished. If the server refused to delete the node,
    /// listeners hear `Lost` (reason [`LossReason::ReleaseRefused`]): the
    /// lock stays taken for everyone else, and nobody here holds it.
    pub(crate) fn finish_release(&self, refused: bool) {
        if let Ok(mut ls) = self.listeners.lock() {
            if refused {
                if let Ok(mut r) = self.reason.lock() {
                    *r = Some(LossReason::ReleaseRefused);
                }
                self.state.store(LOST, Ordering::SeqCst);
                for l in ls.iter() {
                    let _ = l.send(LockState::Lost);
                }
            }
            ls.clear();
        }
    }

    /// A channel yielding the current state, then every change.
    pub(crate) fn changes(&self) -> Receiver<LockState> {
        let (tx, rx) = crossbeam_channel::bounded(STATE_CHANNEL_CAPACITY);
        if let Ok(mut ls) = self.listeners.lock() {
            let _ = tx.send(self.current());
            if !self.released.load(Ordering::SeqCst) {
                ls.push(tx);
            }
        }
        rx
    }

    /// Marks the lock lost for `reason`; the first reason given stays.
    pub(crate) fn lose(&self, reason: LossReason) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
        self.set(LockState::Lost);
    }

    pub(crate) fn reason(&self) -> Option<LossReason> {
        self.reason.lock().ok().and_then(|r| *r)
    }

    pub(crate) fn current(&self) -> LockState {
        decode_state(self.state.load(Ordering::SeqCst))
    }

    pub(crate) fn set(&self, state: LockState) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        let new = match state {
            LockState::Held => HELD,
            LockState::Suspended => SUSPENDED,
            LockState::Lost => LOST,
        };
        // Lost is final.
        let changed = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                (old != LOST && old != new).then_some(new)
            })
            .is_ok();
        if changed {
            // Outside every lock: a callback may drop the guard, or start
            // another acquisition.
            let callbacks: Vec<StateCallback> = self
                .callbacks
                .lock()
                .map(|cs| cs.clone())
                .unwrap_or_default();
            for f in callbacks {
                f(state);
            }
            if let Ok(mut ls) = self.listeners.lock() {
                // Bounded channels: a reader a whole channel behind misses
                // this change (`LockGuard::state` stays current).
                ls.retain(|l| !matches!(l.try_send(state), Err(TrySendError::Disconnected(_))));
            }
        }
    }
}
