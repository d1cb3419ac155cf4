//! Lock recipes on top of [`Client`](crate::Client): mutex, read/write lock,
//! leader election, semaphore and multi-lock. Every recipe removes its node
//! on every way out, tells holders when they lose what they hold, and offers
//! a fencing token.

mod acquire;
mod batch;
mod cancel;
mod election;
mod error;
mod held;
mod inspect;
mod multilock;
mod mutex;
mod queue;
mod registry;
mod rwlock;
mod semaphore;

pub use batch::{BatchGuard, BatchMutex};
pub use cancel::CancelToken;
pub use election::{Election, Leader};
pub use error::LockError;
pub use held::{LockState, LossReason};
pub use inspect::{inspect, QueueEntry};
pub use multilock::{MultiGuard, MultiLock};
pub use mutex::{holder_identity, LockGuard, Mutex, MutexOptions};
pub use queue::{sequence_order, sorted_contenders, Contender, NodeKind, NodeOrigin};
pub use rwlock::RwLock;
pub use semaphore::Semaphore;
