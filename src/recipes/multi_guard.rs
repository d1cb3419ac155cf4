//! What a [`MultiLock`](super::MultiLock) hands out: every lock of it,
//! held together. Apart from the multi-lock so that the acquisition under
//! way ([`PendingMulti`](super::PendingMulti)) can build one without
//! naming the recipe.

use super::error::LockError;
use super::guard::LockGuard;

/// Holds every lock of a [`MultiLock`](super::MultiLock); releases them in reverse order on drop.
#[derive(Debug)]
#[must_use = "every lock is released as soon as the guard is dropped"]
pub struct MultiGuard {
    pub(super) guards: Vec<LockGuard>,
}

impl MultiGuard {
    pub(super) fn from_parts(guards: Vec<LockGuard>) -> MultiGuard {
        MultiGuard { guards }
    }

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

#[cfg(test)]
mod tests {
    use super::MultiGuard;

    #[test]
    fn a_multi_guard_over_no_locks_is_empty() {
        let none = MultiGuard::from_parts(Vec::new());
        assert!(none.is_empty());
        assert_eq!(none.len(), 0);
        assert_eq!(none.unlock(), Ok(()));
    }
}
