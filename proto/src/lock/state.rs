//! What a holder can rely on (held / suspended / lost) and why a lock was
//! lost: the lock machine reports these, and the layers above show them to
//! the holder. Curator and kazoo never tell a holder that it lost its lock.

/// What a holder can rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockState {
    /// Our node exists and our session is connected.
    Held,
    /// The connection dropped: the lock is ours only if the session survives.
    /// Stop acting as the holder until `Held` again.
    Suspended,
    /// The session expired or went silent for a whole session timeout, or our
    /// node was deleted. Final: act as if someone else holds the lock.
    Lost,
}

/// Why a lock was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// The server expired our session: its nodes are gone.
    SessionExpired,
    /// No contact with any server for a whole session timeout: the server
    /// has most likely expired the session, and another holder may exist.
    /// If the session turns out alive, our node stays until the guard is
    /// released or dropped (or its max hold ends): no zklock contender is
    /// granted before then.
    NoContact,
    /// Our lock node was deleted by someone else.
    NodeDeleted,
    /// The client was closed, or its I/O thread ended.
    ClientClosed,
    /// The holder let go, but the server refused to delete the node (an
    /// ACL without DELETE on the lock path; [`LockEvent::Released`](super::LockEvent::Released)
    /// says so with the code): others stay blocked until the session ends.
    ReleaseRefused,
    /// Nodes past the end of the lock path's sequence counter appeared:
    /// the queue can no longer be ordered, so peers that sort suffixes as
    /// text (Curator, kazoo) may take a node past the end for the first in
    /// line. Our node stays until the guard is released or dropped (or its
    /// max hold ends): no zklock contender is granted before then.
    SequenceExhausted,
    /// The hold reached its max hold ([`LockSpec::max_hold`](super::LockSpec::max_hold)),
    /// counted from the grant: the holder is told first, in the same turn
    /// as the delete of its node is submitted (a driver that hands out
    /// events before it writes the session's output tells the holder
    /// before the delete leaves), and the node goes whether or not the
    /// holder lets go. With lock-delay this is an unclean end: the node
    /// goes without its tenure mark.
    MaxHold,
}
