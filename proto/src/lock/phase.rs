//! An attempt's phase: queueing for the lock, holding it, or removing its
//! nodes. Each phase owns the requests and watches it waits for, so that a
//! combination that must never happen (a holder's check in flight while
//! queueing, a blocker's watch on a holder) cannot be written.

use std::time::Instant;

use super::state::LockState;

/// Where an attempt stands.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Creating our node, finding our place, waiting our turn, until the
    /// grant (or giving up).
    Queueing(Queueing),
    /// Granted: the holder's state is reported until released.
    Held(Held),
    /// Every node of this attempt is being removed; then it is forgotten.
    Releasing(Releasing),
}

/// Queueing for the lock.
#[derive(Debug)]
pub(crate) struct Queueing {
    /// When to give up with a timeout.
    pub deadline: Option<Instant>,
    /// A try: give up as soon as the queue shows the lock taken.
    pub no_wait: bool,
    /// The main-line request awaited (at most one; another reply is stale).
    pub busy: Option<u64>,
    /// A create of ours may have been applied without us hearing of it.
    pub maybe_created: bool,
    /// Creating the lock path's ancestors, from this index on.
    pub parents_from: Option<usize>,
    /// The listing sent behind our create (shared with other creates on
    /// the same path sent in the same turn).
    pub listing: Option<u64>,
    /// The watch we wait on.
    pub wait: Wait,
    /// While waiting on a blocker not alone: the watch on the node below
    /// it (see [`Standing::scout`](super::attempt::Standing)). It may
    /// outlive the blocker's watch until the next listing.
    pub scout: Option<u64>,
    /// The watch on our own node (see [`OwnWatch`]).
    pub own_watch: Option<OwnWatch>,
}

/// What a queueing attempt waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// No watch (a request is on its way, or the next step sends one).
    Nothing,
    /// The node we wait for: its getData is in flight until `watch` is
    /// known set. `alone`: nothing else below us blocks us, so its
    /// deletion grants the lock (later nodes sort after ours).
    Blocker {
        name: String,
        alone: bool,
        watch: Option<u64>,
    },
    /// Not among the first n: the child watch a listing left.
    Queue { watch: u64 },
}

impl Wait {
    /// The watch set, if any.
    pub(crate) fn watch(&self) -> Option<u64> {
        match self {
            Wait::Nothing => None,
            Wait::Blocker { watch, .. } => *watch,
            Wait::Queue { watch } => Some(*watch),
        }
    }
}

/// Holding the lock.
#[derive(Debug)]
pub(crate) struct Held {
    /// What the holder was last told.
    pub state: LockState,
    /// The data watch on our node.
    pub watch: Option<u64>,
    /// The check of our node in flight.
    pub confirming: Option<u64>,
    /// Near the counter's end: the child watch on the queue.
    pub end_watch: Option<u64>,
    /// A listing sent while queueing that was still out when a blocker's
    /// deletion granted the lock: it is awaited like any main-line reply.
    pub late: Option<u64>,
}

/// Removing what is left of the attempt.
#[derive(Debug)]
pub(crate) struct Releasing {
    /// The main-line request awaited: a create whose reply names a node to
    /// delete, a tenure mark in flight, or the cleanup listing.
    pub busy: Option<u64>,
    /// A create of ours may have been applied without us hearing of it: a
    /// listing looks for it before the attempt is forgotten.
    pub maybe_created: bool,
    /// Someone waits to hear that the release finished.
    pub report: bool,
}

impl Phase {
    pub(crate) fn queueing(deadline: Option<Instant>, no_wait: bool) -> Phase {
        Phase::Queueing(Queueing {
            deadline,
            no_wait,
            busy: None,
            maybe_created: false,
            parents_from: None,
            listing: None,
            wait: Wait::Nothing,
            scout: None,
            own_watch: None,
        })
    }

    /// The main-line request awaited, in whatever phase.
    pub(crate) fn busy(&self) -> Option<u64> {
        match self {
            Phase::Queueing(q) => q.busy,
            Phase::Held(h) => h.late,
            Phase::Releasing(r) => r.busy,
        }
    }

    /// The slot of the main-line request.
    pub(crate) fn busy_mut(&mut self) -> &mut Option<u64> {
        match self {
            Phase::Queueing(q) => &mut q.busy,
            Phase::Held(h) => &mut h.late,
            Phase::Releasing(r) => &mut r.busy,
        }
    }

    /// Whether a create of ours may have been applied unheard (never while
    /// held: a holder's node is known).
    pub(crate) fn maybe_created_mut(&mut self) -> Option<&mut bool> {
        match self {
            Phase::Queueing(q) => Some(&mut q.maybe_created),
            Phase::Releasing(r) => Some(&mut r.maybe_created),
            Phase::Held(_) => None,
        }
    }

    pub(crate) fn is_queueing(&self) -> bool {
        matches!(self, Phase::Queueing(_))
    }

    pub(crate) fn is_held(&self) -> bool {
        matches!(self, Phase::Held(_))
    }

    pub(crate) fn as_queueing(&mut self) -> Option<&mut Queueing> {
        match self {
            Phase::Queueing(q) => Some(q),
            _ => None,
        }
    }

    pub(crate) fn as_held(&mut self) -> Option<&mut Held> {
        match self {
            Phase::Held(h) => Some(h),
            _ => None,
        }
    }
}

/// A data watch on our own node, kept while we wait in the queue: a
/// waiter whose node a third party deletes hears of it and queues again
/// (else it would wait, with no node, until its blocker goes), and a
/// blocker's deletion alone can grant the lock:
///
/// ZooKeeper sends a connection its replies and watch events in the order
/// it processed them, and fires watches in the order of the changes that
/// trigger them. So once the reply that set this watch has come in on the
/// current connection, a blocker's NodeDeleted arriving later on that same
/// connection, with no event of this watch before it, proves our node still
/// existed when the blocker went (its own deletion would have been
/// reported first): the lock is ours without another read. After a
/// reconnect that proof is gone: SetWatches fires what happened meanwhile in
/// the order of its list, not of the changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnWatch {
    /// The getData that sets it, and the watch's token.
    pub token: u64,
    pub seen: OwnSeen,
}

/// How far an [`OwnWatch`] is known to be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnSeen {
    /// The getData is in flight (or waits for a connection).
    Asked,
    /// Its reply came on the current connection: the proof holds.
    Set,
    /// Set on a connection since lost; SetWatches re-arms it (or fires it
    /// at once). It still tells of our node's deletion, but proves nothing
    /// about order.
    Rearmed,
}
