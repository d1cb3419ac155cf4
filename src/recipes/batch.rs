//! A non-fair lock that is still safe: threads of one process waiting on the
//! same path share one ZooKeeper lock node and pass the lock between
//! themselves locally, up to a bounded batch, before it goes to the next
//! process in the queue.
//!
//! (A lock that gets its unfairness from random, non-sequential node names
//! breaks mutual exclusion: a late arrival with a lower name takes a lock
//! that is held. Here the queue is the fair queue; only the local hand-off
//! is unfair.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::batch_guard::{BatchGuard, Shared};
use super::batch_waiter::BatchWaiter;
use super::cancel::CancelToken;
use super::error::LockError;
use super::mutex::{lock_calls, Mutex};
use super::options::MutexOptions;
use super::pending::Pending;
use crate::Client;

/// A lock shared by the threads of one process through a single queue node.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::BatchMutex};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let lock = BatchMutex::new(&client, "/locks/hot", 16)?;
/// let handles: Vec<_> = (0..8).map(|_| {
///     let lock = lock.clone();
///     std::thread::spawn(move || lock.lock().map(|g| g.fencing_token()))
/// }).collect();
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BatchMutex {
    shared: Arc<Shared>,
}

impl BatchMutex {
    /// Up to `max_batch` threads of this process hold the lock in turn
    /// before it goes back to the queue (1: no hand-off at all).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str, max_batch: usize) -> Result<BatchMutex, LockError> {
        BatchMutex::with_options(client, path, max_batch, MutexOptions::default())
    }

    /// Like [`BatchMutex::new`], with options (data, ACLs,
    /// [lock-delay](MutexOptions::lock_delay), a
    /// [max hold](MutexOptions::max_hold) of the process's node, which the
    /// local turns within one hold share); never re-entrant.
    ///
    /// # Errors
    /// As [`BatchMutex::new`]; [`LockError::Client`] with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        path: &str,
        max_batch: usize,
        options: MutexOptions,
    ) -> Result<BatchMutex, LockError> {
        let options = options.reentrant(false);
        Ok(BatchMutex {
            shared: Arc::new(Shared::new(
                Mutex::with_options(client, path, options)?,
                max_batch,
            )),
        })
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        BatchGuard,
        "the lock"
    );

    /// Starts waiting and returns at once: a local waiter, whose turn comes
    /// by a local hand-off or, if none is coming, by the process's turn in
    /// the queue (which the first waiter to need it runs from its own
    /// polls). Awaited, it is woken by either, and at its deadline. Polled
    /// past its deadline, it still takes a local turn that is free, else
    /// it times out; a deadline already past at the first poll makes it a
    /// try (one round trip to queue, as [`BatchMutex::try_lock`]).
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// use zklock::{Client, recipes::BatchMutex};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let lock = BatchMutex::new(&client, "/locks/hot", 16)?;
    /// let waiters: Vec<_> = (0..4)
    ///     .map(|_| lock.start_lock(Some(Instant::now() + Duration::from_secs(5))))
    ///     .collect();
    /// for waiter in waiters {
    ///     let guard = waiter.wait()?; // or `.await`, or `try_take` from a loop
    ///     println!("ours, with token {}", guard.fencing_token());
    /// }
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn start_lock(&self, deadline: Option<Instant>) -> Pending<BatchGuard> {
        Pending::of_steps(BatchWaiter::new(self.shared.clone(), deadline, None))
    }

    /// Like [`BatchMutex::start_lock`]; the waiter gives up with
    /// [`LockError::Cancelled`] at the first poll after `cancel` is
    /// cancelled (awaited, the cancel wakes it).
    pub fn start_lock_cancellable(
        &self,
        deadline: Option<Instant>,
        cancel: CancelToken,
    ) -> Pending<BatchGuard> {
        Pending::of_steps(BatchWaiter::new(
            self.shared.clone(),
            deadline,
            Some(cancel),
        ))
    }

    /// Waits until `deadline` (if any) or cancellation: for a local hand-off,
    /// or, if none is coming, for the process's turn in the queue. It runs
    /// the steps of a [`BatchMutex::start_lock`] waiter on this thread,
    /// waiting between them.
    ///
    /// # Errors
    /// [`LockError::WouldDeadlock`] if this thread holds the lock already;
    /// else as [`Mutex::lock_with`](super::Mutex::lock_with).
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<BatchGuard, LockError> {
        let s = &self.shared;
        {
            let local = s.local();
            if local.hand.busy && local.owner == Some(std::thread::current().id()) {
                return Err(LockError::WouldDeadlock);
            }
        }
        BatchWaiter::new(s.clone(), deadline, cancel.cloned()).run(None)
    }

    /// Threads of this process waiting for the lock (diagnostics).
    ///
    /// **Unstable** (feature `testing`, for this project's tests; no semver
    /// promise).
    #[cfg(feature = "testing")]
    pub fn local_waiters(&self) -> usize {
        self.shared.local().hand.waiting
    }
}
