//! The client's one error type.

use std::sync::Arc;
use std::time::Duration;

use jute::{ErrorCode, OpCode};
use thiserror::Error;

use crate::session::RequestError;

/// Everything a client call can fail with.
///
/// Errors compare equal when they are the same variant with equal fields;
/// two [`Error::Io`] are equal when their [`std::io::ErrorKind`] and message
/// are.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum Error {
    /// The server refused the request with this code (NoNode, NodeExists,
    /// NoAuth, ...), e.g. `NoAuth on delete /jobs/lock-0000000003`. Match on
    /// `code` (or use [`Error::code`]); `op` and `path` say what was refused,
    /// so that a log line names the culprit.
    #[error("{}", ServerRefusal { code: *code, op: *op, path: path.as_deref() })]
    Server {
        /// Why the server refused it.
        code: ErrorCode,
        /// The refused operation; `None` when the layer that saw the
        /// refusal did not know it.
        op: Option<OpCode>,
        /// The path of the refused operation as the caller names it
        /// (chroot removed); `None` for operations without one or when
        /// unknown.
        path: Option<String>,
    },
    /// A multi failed: the op at `index` was refused with `code`; nothing was applied.
    #[error("multi op {index} ({} {path}) failed with {code:?}; nothing was applied", op_name(*op))]
    MultiFailed {
        /// Position of the refused op in the slice given to `multi`.
        index: usize,
        /// Why the server refused it.
        code: ErrorCode,
        /// What the refused op was.
        op: OpCode,
        /// The refused op's path as the caller named it.
        path: String,
    },
    /// A setting the client cannot work with; refused before anything was
    /// started (e.g. `max_frame(0)`, a zero request timeout).
    #[error("invalid setting {setting}: {reason}")]
    InvalidSetting {
        /// The builder method that took it.
        setting: &'static str,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The connection dropped while the request was in flight: it may or may
    /// not have been applied. The session may still be alive.
    #[error("connection lost; the request may or may not have been applied")]
    ConnectionLoss,
    /// The session expired: its ephemeral nodes and watches are gone. A
    /// client opens a new session by itself (unless built with
    /// [`ClientBuilder::new_session_after_expiry(false)`](crate::ClientBuilder::new_session_after_expiry)):
    /// calls made after that run on the new one.
    #[error("session expired")]
    SessionExpired,
    /// No answer within the call's deadline; the request may still be applied later.
    #[error("timed out")]
    Timeout,
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// The server rejected our credentials.
    #[error("authentication failed")]
    AuthFailed,
    /// The path is not a valid ZooKeeper path; nothing was sent.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as the caller gave it.
        path: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The connect string could not be parsed (no hosts, a bad chroot).
    #[error("invalid connect string: {0}")]
    InvalidConnectString(String),
    /// A host of the connect string could not be resolved.
    #[error("cannot resolve {host:?}")]
    Resolve {
        /// The host as the connect string names it.
        host: String,
        /// The resolver's error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The request exceeds the frame limit; nothing was sent.
    #[error("request of {len} bytes exceeds the frame limit of {max}")]
    TooLarge {
        /// Encoded size of the request body, in bytes.
        len: usize,
        /// The client's frame limit, in bytes.
        max: usize,
    },
    /// The operating system refused us (thread or poll creation). The
    /// `io::Error` is shared, so that the error stays `Clone`; it is also the
    /// [`source`](std::error::Error::source) (downcast to
    /// `Arc<std::io::Error>`).
    #[error("I/O error: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// An argument the server would refuse; nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The server answered with a reply of a shape the request cannot have
    /// (a server bug, or a protocol this client does not speak).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// No session could be established, and the servers said why in a way
    /// a retry cannot cure (TLS refused), or a TLS file could not be loaded.
    #[error(transparent)]
    Connect(ConnectError),
    /// No session within the connect wait, for no reason that rules every
    /// server out (refused, silent, not serving yet): the servers tried,
    /// the time spent and the last failure seen, which is also the
    /// [`source`](std::error::Error::source). Boxed: it is large, and every
    /// `Result` of the crate carries an `Error`'s size.
    #[error(transparent)]
    NoSession(Box<NoSession>),
}

/// What a connect that got no session in time tried: the servers, how long
/// it waited, and the last failure seen. Displays as `no ZooKeeper server
/// reachable at 127.0.0.1:2181 within 3.0s: Connection refused (os error
/// 111)`, naming each server once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NoSession {
    /// The servers of the connect string, as `host:port`, each once, in
    /// the order the connect string names them.
    pub servers: Vec<String>,
    /// The addresses they resolved to: those the connect tried in turn.
    pub addresses: Vec<std::net::SocketAddr>,
    /// How long the connect waited.
    pub waited: Duration,
    /// The last connection failure seen; `None` if no attempt ended within
    /// the wait (a server that took the connection and never answered).
    pub last: Option<ConnectError>,
}

impl std::fmt::Display for NoSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no ZooKeeper server reachable at {} within {:.1?}",
            self.servers.join(","),
            self.waited
        )?;
        match &self.last {
            // One server: its name is already said.
            Some(last) if self.servers.len() == 1 => write!(f, ": {}", last.cause()),
            Some(last) => write!(f, "; last: {last}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for NoSession {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.last.as_ref().map(|e| e as _)
    }
}

/// Why connecting to a server failed before a session was established.
///
/// Errors compare equal when they are the same variant with equal fields;
/// two [`ConnectError::Io`] are equal when their host, [`std::io::ErrorKind`]
/// and message are.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The server closed the connection before answering the ZooKeeper
    /// handshake: a TLS port reached without TLS, or a server that is not
    /// serving yet (an ensemble member without a quorum does the same).
    #[error("{host}: the server closed the connection before answering the handshake (a TLS port reached without TLS, or a server not serving yet?)")]
    ClosedBeforeHandshake {
        /// The server, as `host:port` of the connect string.
        host: String,
    },
    /// TLS with the server failed.
    #[cfg(feature = "tls")]
    #[error("{host}: {source}")]
    Tls {
        /// The server, as `host:port` of the connect string.
        host: String,
        /// What failed.
        #[source]
        source: crate::TlsError,
    },
    /// The socket failed: the connection was refused or reset, or the
    /// network is unreachable. The `io::Error` is shared, so that the error
    /// stays `Clone`; it is also the
    /// [`source`](std::error::Error::source) (downcast to
    /// `Arc<std::io::Error>`).
    #[error("{host}: {source}")]
    Io {
        /// The server, as `host:port` of the connect string.
        host: String,
        /// What the operating system said.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Any other way a connection ended before the session was established
    /// (no answer in time, garbage).
    #[error("{host}: {reason}")]
    Other {
        /// The server, as `host:port` of the connect string.
        host: String,
        /// What happened.
        reason: String,
    },
}

impl ConnectError {
    /// What went wrong, without the server's name.
    fn cause(&self) -> String {
        match self {
            ConnectError::ClosedBeforeHandshake { .. } => {
                "the server closed the connection before answering the handshake (a TLS port reached without TLS, or a server not serving yet?)".into()
            }
            #[cfg(feature = "tls")]
            ConnectError::Tls { source, .. } => source.to_string(),
            ConnectError::Io { source, .. } => source.to_string(),
            ConnectError::Other { reason, .. } => reason.clone(),
        }
    }
}

impl PartialEq for ConnectError {
    fn eq(&self, other: &Self) -> bool {
        use ConnectError::*;
        // By `self`'s variant, so that a new variant must be added here.
        match self {
            ClosedBeforeHandshake { host } => {
                matches!(other, ClosedBeforeHandshake { host: h } if host == h)
            }
            #[cfg(feature = "tls")]
            Tls { host, source } => {
                matches!(other, Tls { host: h, source: s } if host == h && source == s)
            }
            Io { host, source } => matches!(
                other,
                Io { host: h, source: s }
                    if host == h && source.kind() == s.kind() && source.to_string() == s.to_string()
            ),
            Other { host, reason } => {
                matches!(other, Other { host: h, reason: r } if host == h && reason == r)
            }
        }
    }
}

impl Eq for ConnectError {}

/// How [`Error::Server`] displays: `NoAuth on delete /a/b`.
struct ServerRefusal<'a> {
    code: ErrorCode,
    op: Option<OpCode>,
    path: Option<&'a str>,
}

impl std::fmt::Display for ServerRefusal<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.op, self.path) {
            (Some(op), Some(path)) => write!(f, "{:?} on {} {path}", self.code, op_name(op)),
            (Some(op), None) => write!(f, "{:?} on {}", self.code, op_name(op)),
            (None, Some(path)) => write!(f, "{:?} on {path}", self.code),
            (None, None) => write!(f, "ZooKeeper error {:?}", self.code),
        }
    }
}

/// An operation as ZooKeeper's own tools name it (`create`, `getData`, ...).
pub(crate) fn op_name(op: OpCode) -> std::borrow::Cow<'static, str> {
    let name = match op {
        OpCode::Create | OpCode::Create2 => "create",
        OpCode::CreateContainer => "createContainer",
        OpCode::CreateTtl => "createTTL",
        OpCode::Delete => "delete",
        OpCode::Exists => "exists",
        OpCode::GetData => "getData",
        OpCode::SetData => "setData",
        OpCode::GetAcl => "getACL",
        OpCode::SetAcl => "setACL",
        OpCode::GetChildren | OpCode::GetChildren2 => "getChildren",
        OpCode::Sync => "sync",
        OpCode::Check => "check",
        OpCode::Multi => "multi",
        OpCode::Auth => "addAuth",
        OpCode::AddWatch => "addWatch",
        OpCode::RemoveWatches => "removeWatches",
        OpCode::CheckWatches => "checkWatches",
        other => return format!("{other:?}").into(),
    };
    name.into()
}

impl Error {
    /// A refusal whose operation and path are not known here.
    pub(crate) fn server(code: ErrorCode) -> Error {
        Error::Server {
            code,
            op: None,
            path: None,
        }
    }

    /// Names the operation and path of a server refusal; other errors
    /// pass unchanged.
    pub(crate) fn at(self, op: OpCode, path: Option<String>) -> Error {
        match self {
            Error::Server { code, .. } => Error::Server {
                code,
                op: Some(op),
                path,
            },
            other => other,
        }
    }

    /// The server's error code, if the server refused the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server { code, .. } | Error::MultiFailed { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The refused operation, when the server refused one and the client
    /// knows which.
    pub fn op(&self) -> Option<OpCode> {
        match self {
            Error::Server { op, .. } => *op,
            Error::MultiFailed { op, .. } => Some(*op),
            _ => None,
        }
    }

    /// The path of the refused operation (as the caller names it), when
    /// known.
    pub fn path(&self) -> Option<&str> {
        match self {
            Error::Server { path, .. } => path.as_deref(),
            Error::MultiFailed { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The server answered NoNode: the node (or a create's parent) is missing.
    pub fn is_no_node(&self) -> bool {
        self.code() == Some(ErrorCode::NoNode)
    }

    /// The server answered NodeExists: a create found the path taken.
    pub fn is_node_exists(&self) -> bool {
        self.code() == Some(ErrorCode::NodeExists)
    }

    /// The connection dropped with the request in flight.
    pub fn is_connection_loss(&self) -> bool {
        matches!(self, Error::ConnectionLoss)
    }

    /// The outcome is unknown: the request may have been applied (the
    /// connection dropped, or no answer came in time).
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::ConnectionLoss | Error::Timeout)
    }

    /// The session is over for good (a client that opens a new session
    /// after an expiry serves later calls on that one).
    pub fn is_session_ended(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::Closed | Error::AuthFailed
        )
    }
}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Server(ErrorCode::SessionExpired) => Error::SessionExpired,
            RequestError::Server(ErrorCode::ConnectionLoss) => Error::ConnectionLoss,
            RequestError::Server(c) => Error::server(c),
            RequestError::ConnectionLoss => Error::ConnectionLoss,
            RequestError::SessionExpired => Error::SessionExpired,
            RequestError::Closed => Error::Closed,
            RequestError::AuthFailed => Error::AuthFailed,
            RequestError::TooLarge { len, max } => Error::TooLarge { len, max },
            other => Error::Protocol(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        use Error::*;
        // By `self`'s variant, so that a new variant must be added here.
        match self {
            Server { code, op, path } => matches!(
                other,
                Server { code: c, op: o, path: p } if code == c && op == o && path == p
            ),
            MultiFailed {
                index,
                code,
                op,
                path,
            } => matches!(
                other,
                MultiFailed { index: i, code: c, op: o, path: p }
                    if index == i && code == c && op == o && path == p
            ),
            InvalidSetting { setting, reason } => matches!(
                other,
                InvalidSetting { setting: s, reason: r } if setting == s && reason == r
            ),
            ConnectionLoss => matches!(other, ConnectionLoss),
            SessionExpired => matches!(other, SessionExpired),
            Timeout => matches!(other, Timeout),
            Closed => matches!(other, Closed),
            AuthFailed => matches!(other, AuthFailed),
            InvalidPath { path, reason } => {
                matches!(other, InvalidPath { path: p, reason: r } if path == p && reason == r)
            }
            InvalidConnectString(a) => matches!(other, InvalidConnectString(b) if a == b),
            Resolve { host, source } => matches!(
                other,
                Resolve { host: h, source: s } if host == h && source.kind() == s.kind()
            ),
            TooLarge { len, max } => {
                matches!(other, TooLarge { len: l, max: m } if len == l && max == m)
            }
            Io(a) => {
                matches!(other, Io(b) if a.kind() == b.kind() && a.to_string() == b.to_string())
            }
            InvalidArgument(a) => matches!(other, InvalidArgument(b) if a == b),
            Protocol(a) => matches!(other, Protocol(b) if a == b),
            Connect(a) => matches!(other, Connect(b) if a == b),
            NoSession(a) => matches!(other, NoSession(b) if a == b),
        }
    }
}

impl Eq for Error {}

/// `Result` with this crate's [`Error`](enum@Error) as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn io_keeps_its_source_and_stays_clone_and_comparable() {
        let e = Error::from(std::io::Error::other("no threads"));
        let source = e.source().expect("Io keeps its source");
        let io = source
            .downcast_ref::<Arc<std::io::Error>>()
            .expect("the source is the shared io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::Other);
        assert_eq!(e.clone(), e);
        assert_ne!(e, Error::from(std::io::Error::other("other")));
        assert_ne!(e, Error::Closed);
        assert_eq!(
            Error::server(ErrorCode::NoNode),
            Error::server(ErrorCode::NoNode)
        );
        assert_ne!(
            Error::server(ErrorCode::NoNode),
            Error::server(ErrorCode::NodeExists)
        );
    }

    #[test]
    fn a_refusal_names_the_operation_and_the_path() {
        let e = Error::Server {
            code: ErrorCode::NoAuth,
            op: Some(OpCode::Delete),
            path: Some("/jobs/_c_1-lock-0000000003".into()),
        };
        assert_eq!(e.to_string(), "NoAuth on delete /jobs/_c_1-lock-0000000003");
        assert_eq!(e.code(), Some(ErrorCode::NoAuth));
        assert_eq!(e.op(), Some(OpCode::Delete));
        assert_eq!(e.path(), Some("/jobs/_c_1-lock-0000000003"));
        assert_ne!(e, Error::server(ErrorCode::NoAuth));
        assert_eq!(
            Error::server(ErrorCode::NoNode).to_string(),
            "ZooKeeper error NoNode"
        );
        let m = Error::MultiFailed {
            index: 1,
            code: ErrorCode::BadVersion,
            op: OpCode::Check,
            path: "/a".into(),
        };
        assert_eq!(
            m.to_string(),
            "multi op 1 (check /a) failed with BadVersion; nothing was applied"
        );
    }

    /// What a caller branches on: each predicate is true for the errors its
    /// doc names and false for every other kind (a retry loop that asks
    /// `is_outcome_unknown` must not retry a refusal, nor give up on a
    /// timeout), and a failed multi names the op and path that failed.
    ///
    /// Kills: `Error::is_no_node`, `is_node_exists`, `is_connection_loss`,
    /// `is_outcome_unknown`, `is_session_ended` → true/false, their `==` →
    /// `!=`; the `MultiFailed` arms of `Error::op` and `Error::path` deleted
    #[test]
    fn each_predicate_holds_for_its_errors_and_no_other() {
        let multi = Error::MultiFailed {
            index: 0,
            code: ErrorCode::NodeExists,
            op: OpCode::Create,
            path: "/m".into(),
        };
        let all = [
            Error::server(ErrorCode::NoNode),
            Error::server(ErrorCode::NodeExists),
            Error::server(ErrorCode::BadVersion),
            multi.clone(),
            Error::ConnectionLoss,
            Error::Timeout,
            Error::SessionExpired,
            Error::Closed,
            Error::AuthFailed,
            Error::InvalidArgument("x"),
            Error::Protocol("x".into()),
        ];
        let which = |p: fn(&Error) -> bool| {
            all.iter()
                .filter(|e| p(e))
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        };
        let names = |es: &[Error]| es.iter().map(Error::to_string).collect::<Vec<_>>();
        assert_eq!(
            which(Error::is_no_node),
            names(&[Error::server(ErrorCode::NoNode)])
        );
        assert_eq!(
            which(Error::is_node_exists),
            names(&[Error::server(ErrorCode::NodeExists), multi.clone()])
        );
        assert_eq!(
            which(Error::is_connection_loss),
            names(&[Error::ConnectionLoss])
        );
        assert_eq!(
            which(Error::is_outcome_unknown),
            names(&[Error::ConnectionLoss, Error::Timeout])
        );
        assert_eq!(
            which(Error::is_session_ended),
            names(&[Error::SessionExpired, Error::Closed, Error::AuthFailed])
        );
        assert_eq!(multi.op(), Some(OpCode::Create));
        assert_eq!(multi.path(), Some("/m"));
        assert_eq!(multi.code(), Some(ErrorCode::NodeExists));
        assert_eq!(Error::Timeout.op(), None);
        assert_eq!(Error::Timeout.path(), None);
    }

    #[test]
    fn no_session_names_each_server_once_then_the_last_failure() {
        let refused = |host: &str| ConnectError::Io {
            host: host.into(),
            source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        };
        let one = NoSession {
            servers: vec!["127.0.0.1:2999".into()],
            addresses: vec!["127.0.0.1:2999".parse().unwrap()],
            waited: Duration::from_millis(3004),
            last: Some(refused("127.0.0.1:2999")),
        };
        assert_eq!(
            Error::NoSession(Box::new(one.clone())).to_string(),
            "no ZooKeeper server reachable at 127.0.0.1:2999 within 3.0s: connection refused"
        );
        let source = Error::NoSession(Box::new(one.clone()));
        let source = source.source().expect("the last failure");
        assert_eq!(source.to_string(), "127.0.0.1:2999: connection refused");
        let two = NoSession {
            servers: vec!["a:1".into(), "b:2".into()],
            last: Some(refused("b:2")),
            ..one.clone()
        };
        assert_eq!(
            two.to_string(),
            "no ZooKeeper server reachable at a:1,b:2 within 3.0s; last: b:2: connection refused"
        );
        let silent = NoSession { last: None, ..one };
        assert_eq!(
            silent.to_string(),
            "no ZooKeeper server reachable at 127.0.0.1:2999 within 3.0s"
        );
        assert!(silent.source().is_none());
        assert_ne!(Error::NoSession(Box::new(silent)), Error::Timeout);
        assert_eq!(refused("a:1"), refused("a:1"));
        assert_ne!(refused("a:1"), refused("b:2"));
    }

    #[test]
    fn lock_error_passes_the_source_on() {
        let e = crate::recipes::LockError::from(Error::from(std::io::Error::other("spawn")));
        // Transparent: the client error's Display and source.
        assert_eq!(e.to_string(), "I/O error: spawn");
        assert!(std::error::Error::source(&e).is_some());
    }
}
