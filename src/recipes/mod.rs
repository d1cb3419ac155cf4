//! Lock recipes on top of [`Client`](crate::Client): mutex, read/write lock,
//! leader election, semaphore and multi-lock. Every recipe removes its node
//! on every way out, tells holders when they lose what they hold, and offers
//! a fencing token.

mod attempt;
mod batch;
mod cancel;
mod election;
mod error;
mod guard;
mod handoff;
mod held;
mod inspect;
mod latch;
pub mod machine;
mod multilock;
mod mutex;
mod pending;
mod pending_set;
mod queue;
mod registry;
mod runner;
mod rwlock;
mod semaphore;

pub use attempt::{LockSpec, Rule};
pub use batch::{BatchGuard, BatchMutex};
pub use cancel::CancelToken;
pub use election::{Election, Leader};
pub use error::LockError;
pub use guard::LockGuard;
pub use held::{LockState, LossReason};
pub use inspect::{inspect, QueueEntry};
pub use latch::{LatchEvent, LeaderLatch};
pub use multilock::{MultiGuard, MultiLock};
pub use mutex::{holder_identity, Mutex, MutexOptions};
pub use pending::PendingLock;
pub use pending_set::{PendingSet, SetOutcome};
pub use queue::{
    past_the_end, sequence_order, sorted_contenders, Contender, NodeKind, NodeOrigin,
    SEQUENCE_WARNING,
};
pub use rwlock::RwLock;
pub use semaphore::Semaphore;
