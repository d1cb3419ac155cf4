//! Lock recipes on top of [`Client`](crate::Client): mutex, read/write lock,
//! leader election, semaphore and multi-lock. Every recipe removes its node
//! on every way out, tells holders when they lose what they hold, and offers
//! a fencing token.

mod batch;
mod batch_guard;
mod batch_waiter;
mod cancel;
mod election;
mod guard;
mod handoff;
mod inspect;
mod latch;
mod multi_chain;
mod multi_guard;
mod multilock;
mod mutex;
mod options;
mod outcome;
mod pending;
mod pending_set;
mod queue_lock;
mod registry;
mod revoke;
mod rwlock;
mod semaphore;
mod thread_call;

// The lock protocol's types live in the core below the I/O thread; the
// recipes name them as their own.
pub(crate) use crate::machine::{error, held};
pub(crate) use zklock_proto::lock as attempt;
pub(crate) use zklock_proto::lock as queue;

pub use crate::machine::LockError;
pub use crate::machine::{LockState, LossReason, STATE_CHANNEL_CAPACITY};
pub use crate::machine::{NodeKind, NodeOrigin, SEQUENCE_WARNING};
pub use batch::BatchMutex;
pub use batch_guard::BatchGuard;
pub use cancel::CancelToken;
pub use election::{Election, Leader, LeaderObserver};
pub use guard::LockGuard;
pub use inspect::{inspect, QueueEntry};
pub use latch::{CloseMode, LatchEvent, LeaderLatch};
pub use multi_guard::MultiGuard;
pub use multilock::MultiLock;
pub use mutex::Mutex;
pub use options::MutexOptions;
pub use pending::{Pending, PendingLock, PendingMulti};
pub use pending_set::{PendingSet, SetOutcome};
pub use revoke::{revoke, revoke_holder};
pub use rwlock::RwLock;
pub use semaphore::Semaphore;

/// Handles cross threads: one started here may be awaited on a runtime's
/// worker or polled from a loop elsewhere.
const _: () = {
    const fn send_sync<H: Send + Sync>() {}
    send_sync::<PendingLock>();
    send_sync::<PendingMulti>();
    send_sync::<Pending<BatchGuard>>();
};
