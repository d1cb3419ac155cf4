use jute::OpCode;
use thiserror::Error;

use crate::session::RequestError;

/// Why an acquisition ended without the lock.
///
/// Every variant but [`LockError::Request`] is the lock machine's own
/// judgement; `Request` carries the session's answer to a request the
/// acquisition could not do without, with the operation and path it was
/// for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LockError {
    /// The deadline passed first. Our queue node is being removed.
    #[error("timed out waiting for the lock")]
    Timeout,
    /// The caller cancelled. Our queue node is being removed.
    #[error("cancelled")]
    Cancelled,
    /// The session expired: nothing this session held is held any more.
    #[error("session expired")]
    SessionExpired,
    /// The session was closed.
    #[error("the session is closed")]
    Closed,
    /// The server refused the session's credentials.
    #[error("authentication failed")]
    AuthFailed,
    /// The nodes under `path` can no longer be put in a safe order:
    /// ZooKeeper's sequence counter for that parent has reached its end
    /// (2147483647; it does not wrap), so new nodes share a suffix or come
    /// out negative. Every acquisition there fails closed until the parent
    /// is deleted and created again (which resets the counter), or the
    /// lock moves to a new path. Our node is being removed.
    #[error("the sequence counter of {path} is exhausted: delete and recreate the lock path (or use a new one)")]
    SequenceExhausted {
        /// The lock path, as the lock's spec names it.
        path: String,
    },
    /// A contender that blocks the attempt waits above the node its spec
    /// lets it pass ([`LockSpec::passes`](crate::lock::LockSpec::passes)),
    /// and so for that node of ours: waiting would be waiting for
    /// ourselves. Our node is being removed.
    #[error("the lock waits for a contender that waits for a node of ours")]
    WouldDeadlock,
    /// The server answered a create with a reply of another kind: a
    /// server or a proxy that does not speak the protocol as it should.
    #[error("the server answered a create with a reply of another kind")]
    UnexpectedReply,
    /// A request the acquisition needed failed.
    #[error("{op:?} {path:?} failed: {error}")]
    Request {
        /// The operation.
        op: OpCode,
        /// The path it was for, as the lock's spec names it.
        path: Option<String>,
        /// The session's answer.
        #[source]
        error: RequestError,
    },
}

impl LockError {
    /// The lock machine's error for a failed request: an expired session
    /// is [`LockError::SessionExpired`] whatever the request was.
    pub(crate) fn request(op: OpCode, path: Option<String>, error: RequestError) -> LockError {
        match error {
            RequestError::SessionExpired
            | RequestError::Server(jute::ErrorCode::SessionExpired) => LockError::SessionExpired,
            error => LockError::Request { op, path, error },
        }
    }
}
