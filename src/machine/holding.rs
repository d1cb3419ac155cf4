//! A held lock, one acquisition: the node, its Stat, the state the core
//! keeps current, and the release that happens however it ends. The core
//! hands it out; re-entrant guards share it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use jute::Stat;

use super::error::LockError;
use super::held::HolderState;
use crate::oneshot;
use zklock_proto::lock::AttemptId;

/// Where an acquisition's outcome goes: a function of the layer above,
/// called once on the core's thread, that hands the holding to whoever
/// waits (or drops it, which releases).
pub(crate) type GrantSink = Box<dyn FnOnce(Result<Holding, LockError>) + Send>;

/// Where a holding asks the core to remove its node: the core's command
/// channel, seen from below so that this file does not name it.
pub(crate) trait ReleaseDoor: Send + Sync + std::fmt::Debug {
    /// Asks for the release of `id`; `false` if the core is gone.
    fn release(&self, id: AttemptId, done: Option<oneshot::Sender<Result<(), LockError>>>) -> bool;
}

/// A held lock. Dropping it releases the lock (the core deletes the node,
/// and again after reconnects while the session lives), unless it was
/// released or abandoned first.
#[derive(Debug)]
pub(crate) struct Holding {
    id: AttemptId,
    /// Our node as the server names it.
    path: String,
    /// Our node as the caller names it (under a chroot, without it).
    client_path: String,
    stat: Stat,
    state: Arc<HolderState>,
    door: Arc<dyn ReleaseDoor>,
    /// Released, or abandoned: dropping does nothing more.
    released: AtomicBool,
    /// With lock-delay: the holder before ended uncleanly.
    after_unclean_end: bool,
    /// With a max hold: when the core lets go of it.
    max_hold_end: Option<Instant>,
}

impl Holding {
    pub(crate) fn new(
        id: AttemptId,
        path: String,
        stat: Stat,
        state: Arc<HolderState>,
        door: Arc<dyn ReleaseDoor>,
    ) -> Holding {
        Holding {
            id,
            client_path: path.clone(),
            path,
            stat,
            state,
            door,
            released: AtomicBool::new(false),
            after_unclean_end: false,
            max_hold_end: None,
        }
    }

    /// Says that a holder before this one ended uncleanly (lock-delay).
    pub(crate) fn after_unclean_end(mut self, yes: bool) -> Holding {
        self.after_unclean_end = yes;
        self
    }

    /// Says when the max hold ends, if there is one.
    pub(crate) fn with_max_hold_end(mut self, end: Option<Instant>) -> Holding {
        self.max_hold_end = end;
        self
    }

    /// When the core tells the holder Lost and deletes the node, if the
    /// lock has a max hold.
    pub(crate) fn max_hold_end(&self) -> Option<Instant> {
        self.max_hold_end
    }

    /// Names our node as the caller does (see [`Holding::client_path`]).
    pub(crate) fn named(mut self, client_path: String) -> Holding {
        self.client_path = client_path;
        self
    }

    pub(crate) fn follows_unclean_end(&self) -> bool {
        self.after_unclean_end
    }

    /// The acquisition that took it.
    pub(crate) fn id(&self) -> AttemptId {
        self.id
    }

    /// Our node's server path.
    pub(crate) fn server_path(&self) -> &str {
        &self.path
    }

    /// Our node as the caller names it.
    pub(crate) fn client_path(&self) -> &str {
        &self.client_path
    }

    pub(crate) fn stat(&self) -> &Stat {
        &self.stat
    }

    pub(crate) fn state(&self) -> &Arc<HolderState> {
        &self.state
    }

    /// Asks the core to remove our node; `done` hears how that went.
    /// `false` if already released (or the core is gone).
    pub(crate) fn release(&self, done: Option<oneshot::Sender<Result<(), LockError>>>) -> bool {
        if self.released.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.state.mark_released();
        self.door.release(self.id, done)
    }

    /// Gives up releasing: nothing asks the core to remove our node.
    pub(crate) fn abandon(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.release(None);
    }
}
