//! A granted lock as the core hands it out: the node, its Stat, the state
//! the core keeps current, and the release that happens however it ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use jute::Stat;

use super::error::LockError;
use super::held::HolderState;
use crate::oneshot;
use zklock_proto::lock::AttemptId;

/// Where an acquisition's outcome goes: a function of the layer above,
/// called once on the core's thread, that turns the grant into its own
/// guard and hands it to whoever waits (or drops it, which releases).
pub(crate) type GrantSink = Box<dyn FnOnce(Result<Grant, LockError>) + Send>;

/// Where a grant asks the core to remove its node: the core's command
/// channel, seen from below so that this file does not name it.
pub(crate) trait ReleaseDoor: Send + Sync + std::fmt::Debug {
    /// Asks for the release of `id`; `false` if the core is gone.
    fn release(&self, id: AttemptId, done: Option<oneshot::Sender<Result<(), LockError>>>) -> bool;
}

/// A held lock. Dropping it releases the lock (the core deletes the node,
/// and again after reconnects while the session lives), unless it was
/// released or abandoned first.
#[derive(Debug)]
pub(crate) struct Grant {
    id: AttemptId,
    /// Our node as the server names it.
    path: String,
    stat: Stat,
    state: Arc<HolderState>,
    door: Arc<dyn ReleaseDoor>,
    /// Released, or abandoned: dropping does nothing more.
    released: AtomicBool,
    /// With lock-delay: the holder before ended uncleanly.
    after_unclean_end: bool,
}

impl Grant {
    pub(crate) fn new(
        id: AttemptId,
        path: String,
        stat: Stat,
        state: Arc<HolderState>,
        door: Arc<dyn ReleaseDoor>,
    ) -> Grant {
        Grant {
            id,
            path,
            stat,
            state,
            door,
            released: AtomicBool::new(false),
            after_unclean_end: false,
        }
    }

    /// Says that a holder before this one ended uncleanly (lock-delay).
    pub(crate) fn after_unclean_end(mut self, yes: bool) -> Grant {
        self.after_unclean_end = yes;
        self
    }

    pub(crate) fn follows_unclean_end(&self) -> bool {
        self.after_unclean_end
    }

    /// The acquisition this grant ended.
    pub(crate) fn id(&self) -> AttemptId {
        self.id
    }

    /// Our node's server path.
    pub(crate) fn server_path(&self) -> &str {
        &self.path
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

impl Drop for Grant {
    fn drop(&mut self) {
        self.release(None);
    }
}
