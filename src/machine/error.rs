use thiserror::Error;

use crate::Error;

/// Why a lock, lease or leadership was not obtained or was lost.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LockError {
    /// The deadline passed first. Our queue node has been removed.
    #[error("timed out waiting for the lock")]
    Timeout,
    /// The caller cancelled. Our queue node has been removed.
    #[error("cancelled")]
    Cancelled,
    /// The session expired: nothing this session held is held any more.
    #[error("session expired")]
    SessionExpired,
    /// This thread already holds the lock and the lock is not re-entrant,
    /// or keeps a guard of it told `Lost` by zklock's own judgement
    /// ([`LossReason::NoContact`](crate::recipes::LossReason::NoContact),
    /// [`LossReason::SequenceExhausted`](crate::recipes::LossReason::SequenceExhausted)),
    /// whose node stays until that guard goes: drop it first.
    #[error("this thread already holds the lock, or keeps a guard of it that says Lost (its node stays until that guard is dropped): drop it first")]
    WouldDeadlock,
    /// A read holder asked for the write lock; that can deadlock, so it is refused.
    #[error("upgrading a read lock to a write lock is not allowed")]
    UpgradeRefused,
    /// The lock is no longer ours (a fenced write was refused).
    #[error("the lock has been lost")]
    Lost,
    /// The semaphore path says another number of leases than asked for:
    /// two kinds of users would admit different numbers of holders.
    #[error("the semaphore allows {stored} leases, not {asked}")]
    MaxLeasesMismatch {
        /// What the semaphore path stores.
        stored: usize,
        /// What this `Semaphore` was created with.
        asked: usize,
    },
    /// The nodes under `path` can no longer be put in a safe order:
    /// ZooKeeper's sequence counter for that parent has reached its end
    /// (2147483647; it does not wrap), so new nodes share a suffix or come
    /// out negative. Every acquisition there fails closed until the parent
    /// is deleted and created again (which resets the counter), or the
    /// lock moves to a new path. Our node has been removed.
    #[error("the sequence counter of {path} is exhausted: delete and recreate the lock path (or use a new one)")]
    SequenceExhausted {
        /// The lock path, as the client names it (chroot not applied).
        path: String,
    },
    /// The server refused to delete our lock node (an ACL that lets us
    /// create under the lock path but not delete there): the node, and so
    /// the lock, stays until this session ends. Close the client to free
    /// it, and give the lock path an ACL with DELETE for its contenders.
    #[error("the server refused to delete lock node {path}: {code:?}; the lock stays taken until the session ends")]
    ReleaseRefused {
        /// Our node, as the client names it.
        path: String,
        /// The server's answer.
        code: jute::ErrorCode,
    },
    /// The client failed in another way.
    #[error(transparent)]
    Client(Error),
}

impl From<zklock_proto::lock::LockError> for LockError {
    fn from(e: zklock_proto::lock::LockError) -> Self {
        use zklock_proto::lock::LockError as Machine;
        match e {
            Machine::Timeout => LockError::Timeout,
            Machine::Cancelled => LockError::Cancelled,
            Machine::SessionExpired => LockError::SessionExpired,
            Machine::Closed => LockError::Client(Error::Closed),
            Machine::AuthFailed => LockError::Client(Error::AuthFailed),
            Machine::SequenceExhausted { path } => LockError::SequenceExhausted { path },
            Machine::WouldDeadlock => LockError::WouldDeadlock,
            Machine::UnexpectedReply => {
                LockError::Client(Error::server(jute::ErrorCode::MarshallingError))
            }
            Machine::Request { op, path, error } => Error::from(error).at(op, path).into(),
            other => LockError::Client(Error::Protocol(other.to_string())),
        }
    }
}

impl From<Error> for LockError {
    fn from(e: Error) -> Self {
        match e {
            Error::SessionExpired => LockError::SessionExpired,
            other => LockError::Client(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn would_deadlock_names_a_lost_guard_still_kept() {
        let text = LockError::WouldDeadlock.to_string();
        assert!(
            text.starts_with("this thread already holds the lock"),
            "{text}"
        );
        assert!(
            text.contains("says Lost") && text.contains("drop it first"),
            "{text}"
        );
    }
}
