use jute::ErrorCode;
use thiserror::Error;

/// Why a request submitted to the session core did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server executed the request and refused it.
    #[error("server answered {0:?}")]
    Server(ErrorCode),
    /// The connection dropped with the request in flight: it may or may not
    /// have been applied.
    #[error("connection lost; the request may or may not have been applied")]
    ConnectionLoss,
    /// The session is gone; every ephemeral node it owned has been deleted.
    #[error("session expired")]
    SessionExpired,
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// The server rejected our credentials; the session cannot be used.
    #[error("authentication failed")]
    AuthFailed,
    /// The encoded request exceeds the frame limit; nothing was sent.
    #[error("request of {len} bytes exceeds the frame limit of {max}")]
    TooLarge {
        /// Encoded size of the request body, in bytes.
        len: usize,
        /// The configured frame limit, in bytes.
        max: usize,
    },
}
