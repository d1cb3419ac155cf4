//! Several locks taken together, in one global order, under one deadline.

use std::time::{Duration, Instant};

use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::mutex::{lock_calls, Mutex, MutexOptions};
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
    locks: Vec<Mutex>,
}

/// Holds every lock of a [`MultiLock`]; releases them in reverse order on drop.
#[derive(Debug)]
#[must_use = "every lock is released as soon as the guard is dropped"]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// One guard per path, in lock order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Number of locks held.
    pub fn len(&self) -> usize {
        self.guards.len()
    }

    /// True for a multi-lock over no paths.
    pub fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }

    /// Releases every lock; reports the first failure.
    ///
    /// # Errors
    /// The first error of [`LockGuard::unlock`] (every lock is released all
    /// the same).
    pub fn unlock(mut self) -> Result<(), LockError> {
        let mut first = Ok(());
        while let Some(g) = self.guards.pop() {
            if let Err(e) = g.unlock() {
                first = first.and(Err(e));
            }
        }
        first
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        while let Some(g) = self.guards.pop() {
            drop(g);
        }
    }
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

    /// Like [`MultiLock::new`], with options applied to every lock.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if a path is not a valid ZooKeeper path.
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
            .collect::<Result<_, _>>()?;
        Ok(MultiLock { locks })
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        MultiGuard,
        "every lock"
    );

    /// Takes every lock before `deadline`; on any failure releases those
    /// already taken and returns the error.
    ///
    /// # Errors
    /// The first failure, as [`Mutex::lock_with`](super::Mutex::lock_with).
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<MultiGuard, LockError> {
        let mut taken = MultiGuard {
            guards: Vec::with_capacity(self.locks.len()),
        };
        for lock in &self.locks {
            taken.guards.push(lock.lock_with(deadline, cancel)?);
        }
        Ok(taken)
    }
}
