//! A hook for metrics and logs: what a client's core sees, as it happens.

use std::time::Duration;

use super::error::LockError;
use super::held::LockState;
use crate::session::{DropReason, SessionState};

/// Told what a client sees, on its I/O thread, in the same turn as the
/// event: session changes, dropped connections, and each lock
/// acquisition's wait, outcome, holder states and hold time. Every method
/// has an empty default; a client without an observer pays nothing.
///
/// Methods run on the I/O thread: keep them quick (count, log, send on a
/// channel) and never block there. Paths are as the server names them
/// (with the client's chroot, if any).
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Duration;
/// use zklock::Observer;
///
/// #[derive(Default)]
/// struct Acquisitions(AtomicU64);
///
/// impl Observer for Acquisitions {
///     fn lock_acquired(&self, _node: &str, _waited: Duration) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// ```
pub trait Observer: Send + Sync {
    /// The session changed state.
    fn session_state(&self, state: SessionState) {
        let _ = state;
    }

    /// The connection was dropped (the session may live on).
    fn connection_dropped(&self, reason: &DropReason) {
        let _ = reason;
    }

    /// A lock (or lease, or leadership) was granted: our node, and how long
    /// the acquisition waited.
    fn lock_acquired(&self, node: &str, waited: Duration) {
        let _ = (node, waited);
    }

    /// An acquisition on `lock_path` ended without the lock.
    fn lock_failed(&self, lock_path: &str, error: &LockError, waited: Duration) {
        let _ = (lock_path, error, waited);
    }

    /// A holder's state changed (Suspended, Held again, Lost).
    fn holder_state(&self, node: &str, state: LockState) {
        let _ = (node, state);
    }

    /// A node of ours was issued near the end of its lock path's sequence
    /// counter (past [`SEQUENCE_WARNING`](crate::recipes::SEQUENCE_WARNING)):
    /// recreate the path, or move to a new one, before acquisitions there
    /// fail closed with [`LockError::SequenceExhausted`].
    fn sequence_near_end(&self, node: &str, sequence: i32) {
        let _ = (node, sequence);
    }

    /// The waiter queued as `node` was woken by the deletion of `blocker`,
    /// the node it waited for, and looks again. In a herd-free queue one
    /// deletion wakes one waiter (readers behind a writer excepted); count
    /// these per blocker to see a herd.
    fn waiter_woken(&self, node: &str, blocker: &str) {
        let _ = (node, blocker);
    }

    /// A holder let go (or was told it lost the lock), after holding
    /// `held`; `refused` if the server refused to delete the node.
    fn lock_released(&self, node: &str, held: Duration, refused: bool) {
        let _ = (node, held, refused);
    }
}
