//! The fair, herd-free exclusive lock (Curator's InterProcessMutex layout),
//! and the guard every recipe hands out.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::inspect::QueueEntry;
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::queue_lock::{QueueLock, Start};
use super::registry::Side;
use super::thread_call::{self, Target};
use crate::Client;

/// Expands the four std-style lock calls over a `*_with(deadline, cancel)`.
macro_rules! lock_calls {
    ($with:ident, $block:ident, $try:ident, $timeout:ident, $guard:ty, $what:literal) => {
        #[doc = concat!("Blocks until ", $what, " is ours.")]
        ///
        /// # Errors
        #[doc = concat!("As [`Self::", stringify!($with), "`], with no deadline and no cancel.")]
        pub fn $block(&self) -> Result<$guard, LockError> {
            self.$with(None, None)
        }

        #[doc = concat!("Takes ", $what, " only if that needs no waiting (one round trip).")]
        ///
        /// # Errors
        #[doc = concat!("As [`Self::", stringify!($with), "`]; where it would have to wait, `Ok(None)`.")]
        pub fn $try(&self) -> Result<Option<$guard>, LockError> {
            match self.$with(Some(Instant::now()), None) {
                Ok(g) => Ok(Some(g)),
                Err(LockError::Timeout) => Ok(None),
                Err(e) => Err(e),
            }
        }

        #[doc = concat!("Waits at most `timeout` for ", $what, " (one deadline for every retry inside).")]
        ///
        /// # Errors
        #[doc = concat!("[`LockError::Timeout`] if `timeout` passes first; else as [`Self::", stringify!($with), "`].")]
        pub fn $timeout(&self, timeout: Duration) -> Result<$guard, LockError> {
            self.$with(Some(crate::deadline::from_now(timeout)), None)
        }
    };
}
pub(crate) use lock_calls;

/// A distributed exclusive lock on a ZooKeeper path.
///
/// Fair (first come, first served), herd-free (each waiter watches only the
/// node before it) and interoperable: its nodes are named like Curator's
/// `InterProcessMutex` (`_c_<uuid>-lock-<seq>`), and Curator's and kazoo's
/// nodes on the same path count as contenders.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::Mutex};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let mutex = Mutex::new(&client, "/locks/nightly-job")?;
/// if let Some(guard) = mutex.try_lock()? {
///     println!("fencing token {}", guard.fencing_token());
///     // ... the work; the lock is released when `guard` drops.
/// }
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct Mutex {
    inner: Arc<QueueLock>,
}

impl Mutex {
    /// A mutex on `path` with default options. Nothing is sent until a lock call.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str) -> Result<Mutex, LockError> {
        Mutex::with_options(client, path, MutexOptions::default())
    }

    /// A mutex on `path` with the given options.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path, or with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        path: &str,
        options: MutexOptions,
    ) -> Result<Mutex, LockError> {
        Ok(Mutex {
            inner: Arc::new(QueueLock::new(
                client,
                path,
                "-lock-",
                Rule::Predecessor,
                Side::Exclusive,
                &options,
            )?),
        })
    }

    /// Releases `guard` and queues for the lock again, in one write: the
    /// delete of our node and the create of the next one go to the server
    /// as one `multi`, one commit where a release and a new acquisition
    /// take two. For a holder that loops over the same lock. Returns at
    /// once; wait on the [`PendingLock`] (or `.await` it).
    ///
    /// Fair: the new node queues behind every waiter, as a release and a
    /// new acquisition would. A guard of another lock, or one re-entrant
    /// guards still share, is released as usual and a plain acquisition
    /// starts. With [lock-delay](MutexOptions::lock_delay), and while
    /// disconnected, the core does the two steps one after the other.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::Mutex};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let lock = Mutex::new(&client, "/locks/batches")?;
    /// let mut guard = lock.lock()?;
    /// for batch in 0..3 {
    ///     println!("batch {batch} under token {}", guard.fencing_token());
    ///     guard = lock.requeue(guard, None).wait()?;
    /// }
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn requeue(&self, guard: LockGuard, deadline: Option<Instant>) -> PendingLock {
        self.inner.requeue(guard, deadline)
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    pub(crate) fn queue_lock(&self) -> &QueueLock {
        &self.inner
    }

    /// Starts taking the lock and returns at once; see [`PendingLock`].
    /// `deadline`: when to give up with [`LockError::Timeout`]. Not
    /// re-entrant: each call queues a node of its own.
    pub fn start_lock(&self, deadline: Option<Instant>) -> PendingLock {
        self.inner.pending(Start::by(deadline))
    }

    /// Starts taking the lock for `thread` and returns at once: for an
    /// event loop that acts for several threads. The call decides as
    /// `thread`'s own [`Mutex::lock_with`] would (the blocking call runs
    /// the same steps): a [re-entrant](MutexOptions::reentrant) lock the
    /// thread holds is shared (after a read of its node, for a holder that
    /// does not [watch](MutexOptions::watch_node) it), a lock it holds
    /// otherwise is refused with [`LockError::WouldDeadlock`], and the guard
    /// it hands out counts as the thread's.
    ///
    /// Nothing is decided or sent until the handle's first poll (or wait):
    /// a deadline already past then makes it a try (one round trip), as
    /// `try_lock` is. Awaited, it is woken by the read's reply (and at its
    /// timeout) and by the I/O thread's outcome.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::{Mutex, MutexOptions}};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let mutex = Mutex::with_options(&client, "/locks/job", MutexOptions::default().reentrant(true))?;
    /// let me = std::thread::current().id();
    /// let outer = mutex.lock()?;
    /// let inner = mutex.start_lock_for(me, None).wait()?;
    /// assert_eq!(inner.node_path(), outer.node_path());
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn start_lock_for(&self, thread: ThreadId, deadline: Option<Instant>) -> PendingLock {
        thread_call::start(Target::One(self.inner.clone()), thread, deadline)
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        LockGuard,
        "the lock"
    );

    /// Waits until `deadline` (if any) or until `cancel` (if any) is cancelled.
    /// A connection lost meanwhile is no error: the wait goes on across
    /// reconnects, for as long as the session lives.
    ///
    /// # Errors
    /// * [`LockError::Timeout`] at `deadline`, [`LockError::Cancelled`] on
    ///   `cancel`: our node has been removed (in the background);
    /// * [`LockError::WouldDeadlock`]: this thread holds the lock already, and
    ///   it is not [re-entrant](MutexOptions::reentrant); or it keeps a guard
    ///   of it told `Lost` by zklock's own judgement
    ///   ([`LossReason::NoContact`](super::LossReason::NoContact),
    ///   [`LossReason::SequenceExhausted`](super::LossReason::SequenceExhausted)),
    ///   whose node stays until that guard goes: drop it, then call again;
    /// * [`LockError::SessionExpired`], or [`LockError::Client`] with
    ///   [`Error::Closed`](crate::Error::Closed) or [`Error::AuthFailed`](crate::Error::AuthFailed): the session ended;
    /// * [`LockError::Client`] with the server's refusal (an ACL:
    ///   [`ErrorCode::NoAuth`](crate::ErrorCode::NoAuth)).
    #[inline]
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        thread_call::lock_with(&self.inner, deadline, cancel)
    }

    /// The queue as it stands: holder first, then waiters in order.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)); a lock path that does not exist
    /// has an empty queue.
    pub fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        self.inner.queue()
    }
}
