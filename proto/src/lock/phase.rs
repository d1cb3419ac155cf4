//! An attempt's phase: queueing for the lock (creating our node, listing
//! the queue, waiting our turn, granting), holding it, or removing its
//! nodes. Each phase and step owns the requests and watches it waits for,
//! so that a combination that must never happen (a holder's check in
//! flight while queueing, a blocker's watch on a holder, a create's listing
//! while waiting) cannot be written.

use std::time::Instant;

use crate::id_hash::IdMap;

use super::purpose::Purpose;
use super::state::LockState;
use super::AttemptId;

/// Where an attempt stands.
#[derive(Debug)]
pub(crate) enum Phase {
    /// From the create to the grant (or giving up).
    Queueing(Queueing),
    /// Granted: the holder's state is reported until released.
    Held(Held),
    /// Every node of this attempt is being removed; then it is forgotten.
    Releasing(Releasing),
}

/// Queueing for the lock: what holds from the create to the grant, and the
/// step.
#[derive(Debug)]
pub(crate) struct Queueing {
    /// When to give up with a timeout.
    pub deadline: Option<Instant>,
    /// A try: give up as soon as the queue shows the lock taken.
    pub no_wait: bool,
    /// The watch on our own node (see [`OwnWatch`]): set when we first
    /// wait, it spans the steps after, up to the grant.
    pub own_watch: Option<OwnWatch>,
    /// While waiting on a blocker not alone: the watch on the node below
    /// it (see [`Standing::scout`](super::attempt::Standing)). It lasts
    /// until the next listing or the grant, so it may outlive the wait.
    pub scout: Option<u64>,
    pub step: Step,
}

/// A queueing attempt's step. Each holds `awaits`, the main-line request
/// it waits for (at most one; a reply with another token is stale; `None`:
/// the machine's `step` sends the next).
#[derive(Debug)]
pub(crate) enum Step {
    /// Our node is not known yet.
    Creating(Creating),
    /// Our node is known: the listing that finds our place (our own, or the
    /// one shared behind our create), or first the read of its Stat (a node
    /// found again, or made inside a multi).
    Listing { awaits: Option<u64> },
    /// A watch stands between us and the lock. What is sent while it
    /// stands (a listing on the scout's word or after a stray's reply, our
    /// Stat) is awaited here: the watch still acts until its event, or
    /// until a listing shows it moot.
    Waiting { wait: Wait, awaits: Option<u64> },
    /// Nothing blocks us: the reads before the grant, of our node (its
    /// Stat, or that it outlived the blocker) and lock-delay's (its
    /// sub-machine is the attempt's `delay`).
    Granting { awaits: Option<u64> },
}

/// Making our node, or finding it again.
#[derive(Debug, Default)]
pub(crate) struct Creating {
    /// Creating the lock path's ancestors, from this index on (a create
    /// found one missing).
    pub parents_from: Option<usize>,
    /// A create of ours may have been applied without us hearing of it:
    /// from the moment it leaves until its reply, or, the reply lost, until
    /// a listing looks for the node by attempt id.
    pub maybe_created: bool,
    /// The listing sent behind our create, in the same turn (shared with
    /// the other creates on that path): it answers for us once the create
    /// succeeds.
    pub listing: Option<u64>,
    /// A createContainer, our create (or a requeue's multi), or the
    /// listing that looks for our node after a lost reply.
    pub awaits: Option<u64>,
}

/// What a waiting attempt waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
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
            Wait::Blocker { watch, .. } => *watch,
            Wait::Queue { watch } => Some(*watch),
        }
    }
}

impl Step {
    /// The main-line request awaited.
    pub(crate) fn awaits(&self) -> Option<u64> {
        match self {
            Step::Creating(c) => c.awaits,
            Step::Listing { awaits } | Step::Waiting { awaits, .. } | Step::Granting { awaits } => {
                *awaits
            }
        }
    }

    fn awaits_mut(&mut self) -> &mut Option<u64> {
        match self {
            Step::Creating(c) => &mut c.awaits,
            Step::Listing { awaits } | Step::Waiting { awaits, .. } | Step::Granting { awaits } => {
                awaits
            }
        }
    }

    pub(crate) fn creating(&mut self) -> Option<&mut Creating> {
        match self {
            Step::Creating(c) => Some(c),
            _ => None,
        }
    }

    /// What we wait on, while waiting.
    pub(crate) fn wait(&self) -> Option<&Wait> {
        match self {
            Step::Waiting { wait, .. } => Some(wait),
            _ => None,
        }
    }

    pub(crate) fn wait_mut(&mut self) -> Option<&mut Wait> {
        match self {
            Step::Waiting { wait, .. } => Some(wait),
            _ => None,
        }
    }

    /// The watch we wait on, if set.
    pub(crate) fn wait_watch(&self) -> Option<u64> {
        match self {
            Step::Waiting { wait, .. } => wait.watch(),
            _ => None,
        }
    }
}

impl Queueing {
    /// Our create goes out (again): from this moment it may be applied.
    /// A wait still standing is moot (our node is gone): its watch, if
    /// set, is returned to forget.
    pub(crate) fn create(&mut self) -> Option<u64> {
        let old = std::mem::replace(
            &mut self.step,
            Step::Creating(Creating {
                maybe_created: true,
                ..Creating::default()
            }),
        );
        match old {
            Step::Waiting { wait, .. } => wait.watch(),
            _ => None,
        }
    }

    /// A listing (or the read of our Stat) goes out next: a step of its
    /// own, unless a watch stands, whose wait it then serves.
    pub(crate) fn begin_listing(&mut self) {
        if !matches!(self.step, Step::Waiting { .. }) {
            let awaits = self.step.awaits();
            self.step = Step::Listing { awaits };
        }
    }

    /// A read before the grant goes out next: as [`Queueing::begin_listing`].
    pub(crate) fn begin_granting(&mut self) {
        if !matches!(self.step, Step::Waiting { .. }) {
            let awaits = self.step.awaits();
            self.step = Step::Granting { awaits };
        }
    }

    /// Waits on `wait`, awaiting still what was awaited.
    pub(crate) fn wait_on(&mut self, wait: Wait) {
        let awaits = self.step.awaits();
        self.step = Step::Waiting { wait, awaits };
    }

    /// The wait is over (its watch fired, was never set, or a listing made
    /// it moot): the step turns to what is still awaited, a read before the
    /// grant or a look, or to listing again. Returns the watch it had.
    pub(crate) fn end_wait(&mut self, pending: &IdMap<u64, (AttemptId, Purpose)>) -> Option<u64> {
        let Step::Waiting { wait, awaits } = &self.step else {
            return None;
        };
        let (watch, awaits) = (wait.watch(), *awaits);
        let granting = awaits
            .and_then(|t| pending.get(&t))
            .is_some_and(|(_, p)| matches!(p, Purpose::GrantCheck | Purpose::Delay(_)));
        self.step = match granting {
            true => Step::Granting { awaits },
            false => Step::Listing { awaits },
        };
        watch
    }

    /// Our node is gone: back to creating, whatever was awaited. Returns
    /// the watch waited on and the request awaited, both moot.
    pub(crate) fn start_over(&mut self) -> (Option<u64>, Option<u64>) {
        if let Step::Creating(c) = &mut self.step {
            return (None, c.awaits.take());
        }
        let old = std::mem::replace(&mut self.step, Step::Creating(Creating::default()));
        (old.wait_watch(), old.awaits())
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
    /// With a max hold: when it ends (its timer's key).
    pub max_hold_end: Option<Instant>,
}

/// Removing what is left of the attempt.
#[derive(Debug)]
pub(crate) struct Releasing {
    /// The main-line request awaited: a create whose reply names a node to
    /// delete, a tenure mark in flight, or the cleanup listing.
    pub awaits: Option<u64>,
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
            own_watch: None,
            scout: None,
            step: Step::Creating(Creating::default()),
        })
    }

    /// The main-line request awaited, in whatever phase.
    pub(crate) fn awaited(&self) -> Option<u64> {
        match self {
            Phase::Queueing(q) => q.step.awaits(),
            Phase::Held(h) => h.late,
            Phase::Releasing(r) => r.awaits,
        }
    }

    /// The slot of the main-line request.
    pub(crate) fn awaited_mut(&mut self) -> &mut Option<u64> {
        match self {
            Phase::Queueing(q) => q.step.awaits_mut(),
            Phase::Held(h) => &mut h.late,
            Phase::Releasing(r) => &mut r.awaits,
        }
    }

    /// Whether a create of ours may have been applied unheard: only while
    /// creating, or removing what is left.
    pub(crate) fn maybe_created_mut(&mut self) -> Option<&mut bool> {
        match self {
            Phase::Queueing(q) => q.step.creating().map(|c| &mut c.maybe_created),
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
