//! Several locks taken together, in one global order, under one deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cancel::CancelToken;
use super::error::LockError;
use super::multi_chain::{self, add_part};
use super::multi_guard::MultiGuard;
use super::mutex::{lock_calls, Mutex};
use super::options::MutexOptions;
use super::pending::PendingMulti;
use crate::Client;

/// Locks every path or none. Paths are taken in sorted order, so two
/// multi-locks over overlapping sets cannot deadlock each other.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::MultiLock};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let both = MultiLock::new(&client, &["/locks/account-7", "/locks/account-3"])?;
/// let guards = both.lock_timeout(Duration::from_secs(5))?;
/// assert_eq!(guards.len(), 2);
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct MultiLock {
    /// Shared with acquisitions under way ([`PendingMulti`]).
    locks: Arc<[Mutex]>,
}

impl MultiLock {
    /// A multi-lock over `paths` (duplicates ignored), with default options.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if a path is not a valid ZooKeeper path.
    pub fn new(client: &Client, paths: &[&str]) -> Result<MultiLock, LockError> {
        MultiLock::with_options(client, paths, MutexOptions::default())
    }

    /// Like [`MultiLock::new`], with options applied to every lock (a
    /// [max hold](MutexOptions::max_hold) counts for each part from its own
    /// grant).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if a path is not a valid ZooKeeper path, or with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        paths: &[&str],
        options: MutexOptions,
    ) -> Result<MultiLock, LockError> {
        let mut sorted: Vec<&str> = paths.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let locks = sorted
            .into_iter()
            .map(|p| Mutex::with_options(client, p, options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MultiLock {
            locks: locks.into(),
        })
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        MultiGuard,
        "every lock"
    );

    /// Starts taking every lock and returns at once; see [`PendingMulti`].
    /// `deadline`: when to give up with [`LockError::Timeout`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::MultiLock};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let both = MultiLock::new(&client, &["/locks/account-7", "/locks/account-3"])?;
    /// let pending = both.start_lock(None);
    /// // ... other work; the locks are taken meanwhile, one after another.
    /// let guards = pending.wait_timeout(Duration::from_secs(30))?;
    /// assert_eq!(guards.len(), 2);
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn start_lock(&self, deadline: Option<Instant>) -> PendingMulti {
        multi_chain::start(self.locks.clone(), deadline)
    }

    /// Takes every lock before `deadline`; on any failure releases those
    /// already taken and returns the error.
    ///
    /// # Errors
    /// The first failure, as [`Mutex::lock_with`](super::Mutex::lock_with);
    /// [`LockError::Lost`] if a lock taken earlier was lost while a later
    /// one was awaited.
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<MultiGuard, LockError> {
        // On an early return the guard releases what was taken, last first.
        let mut taken = MultiGuard::from_parts(Vec::with_capacity(self.locks.len()));
        for lock in self.locks.iter() {
            add_part(&mut taken.guards, lock.lock_with(deadline, cancel)?)?;
        }
        Ok(taken)
    }
}
