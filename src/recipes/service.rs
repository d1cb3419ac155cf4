//! Starting acquisitions: the API side's door to the lock machine in the
//! client's core, and where each outcome goes. The core hands out a grant;
//! the sink made here turns it into a guard for whoever waits.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;

use super::guard::LockGuard;
use super::pending::PendingLock;
use super::wake::WakeSlot;
use crate::client::WeakClient;
use crate::machine::{AttemptId, Grant, GrantSink, LockCommand, LockError, LockSpec};
use crate::{oneshot, Client, Error};

/// Where an acquisition's outcome goes: one type per kind of waiter, so
/// that a program links the delivery of the kinds it uses and no other (a
/// thread blocked in `lock()` needs neither a [`PendingLock`]'s channel nor
/// a [`PendingSet`](super::PendingSet)'s).
pub(crate) trait Outcome: Clone + Send + 'static {
    /// Hands the outcome over. If nobody waits any more, it is dropped
    /// here: a guard then releases itself.
    fn send(self, outcome: Result<LockGuard, LockError>);
}

/// The channel of its own [`PendingLock`], and its future's task.
#[derive(Clone)]
pub(crate) struct Alone(Sender<Result<LockGuard, LockError>>, WakeSlot);

impl Outcome for Alone {
    fn send(self, outcome: Result<LockGuard, LockError>) {
        let Alone(tx, wake) = self;
        if tx.send(outcome).is_ok() {
            wake.wake();
        }
    }
}

/// A [`PendingSet`](super::PendingSet)'s channel (outcomes tagged with
/// their keys), the set's key, and the task of a future on the set.
#[derive(Clone)]
pub(crate) struct InSet(
    pub(crate) Sender<(u64, Result<LockGuard, LockError>)>,
    pub(crate) u64,
    pub(crate) WakeSlot,
);

impl Outcome for InSet {
    fn send(self, outcome: Result<LockGuard, LockError>) {
        let InSet(tx, key, wake) = self;
        if tx.send((key, outcome)).is_ok() {
            wake.wake();
        }
    }
}

/// A thread blocked in `lock()`.
#[derive(Clone)]
pub(crate) struct Blocked(oneshot::Sender<Result<LockGuard, LockError>>);

impl Outcome for Blocked {
    fn send(self, outcome: Result<LockGuard, LockError>) {
        let _ = self.0.send(outcome);
    }
}

/// A recipe that reacts on the core's thread (a latch campaigning again):
/// called with the outcome there; it must not block.
#[derive(Clone)]
pub(crate) struct Call(pub(crate) Arc<dyn Fn(Result<LockGuard, LockError>) + Send + Sync>);

impl Outcome for Call {
    fn send(self, outcome: Result<LockGuard, LockError>) {
        (self.0)(outcome)
    }
}

/// What the core calls with the grant or the error: a guard on the
/// client's paths, or the error with the lock path as the caller names
/// it, handed to `outcome`.
fn into_sink<O: Outcome>(outcome: O, client: WeakClient) -> GrantSink {
    Box::new(move |result: Result<Grant, LockError>| outcome.send(to_caller(result, &client)))
}

/// A grant as the caller's guard, or the error with the caller's paths.
fn to_caller(
    result: Result<Grant, LockError>,
    client: &WeakClient,
) -> Result<LockGuard, LockError> {
    let Some(client) = client.upgrade() else {
        // Every handle went: the grant releases itself as it drops.
        return Err(LockError::Client(Error::Closed));
    };
    match result {
        Ok(grant) => Ok(LockGuard::from_grant(grant, client)),
        Err(LockError::SequenceExhausted { path }) => Err(LockError::SequenceExhausted {
            path: client.to_client_path(&path),
        }),
        Err(LockError::Client(Error::Server {
            code,
            op,
            path: Some(path),
        })) => Err(LockError::Client(Error::Server {
            code,
            op,
            path: Some(client.to_client_path(&path)),
        })),
        Err(e) => Err(e),
    }
}

/// Starts an acquisition on the core and returns at once.
pub(crate) fn start(
    client: &Client,
    spec: Arc<LockSpec>,
    deadline: Option<Instant>,
    no_wait: bool,
) -> PendingLock {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let wake = WakeSlot::default();
    let id = start_to(client, spec, deadline, no_wait, Alone(tx, wake.clone()));
    PendingLock::new(id, rx, client.command_sender(), wake)
}

/// Releases the holder `old` and starts an acquisition of `spec`, in one
/// write when the core can; returns at once.
pub(crate) fn requeue(
    client: &Client,
    old: AttemptId,
    spec: Arc<LockSpec>,
    deadline: Option<Instant>,
) -> PendingLock {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let wake = WakeSlot::default();
    let outcome = Alone(tx, wake.clone());
    let (id, uuid) = client.next_attempt();
    let sent = client.command_sender().lock(LockCommand::Requeue {
        old,
        id,
        spec,
        uuid,
        deadline,
        outcome: into_sink(outcome.clone(), client.downgrade()),
    });
    if !sent {
        outcome.send(Err(LockError::Client(Error::Closed)));
    }
    PendingLock::new(id, rx, client.command_sender(), wake)
}

/// Starts an acquisition for a thread that blocks until its outcome.
pub(crate) fn start_blocking(
    client: &Client,
    spec: Arc<LockSpec>,
    deadline: Option<Instant>,
    no_wait: bool,
) -> (AttemptId, oneshot::Receiver<Result<LockGuard, LockError>>) {
    let (tx, rx) = oneshot::channel();
    let id = start_to(client, spec, deadline, no_wait, Blocked(tx));
    (id, rx)
}

/// Gives up an acquisition whose outcome nobody waits for any more (a
/// guard that still comes releases itself).
pub(crate) fn cancel(client: &Client, id: AttemptId) {
    client.command_sender().lock(LockCommand::Cancel(id));
}

/// Starts an acquisition whose outcome goes to `outcome`; if the core is
/// gone, `outcome` hears so at once.
pub(crate) fn start_to<O: Outcome>(
    client: &Client,
    spec: Arc<LockSpec>,
    deadline: Option<Instant>,
    no_wait: bool,
    outcome: O,
) -> AttemptId {
    let reserved = client.next_attempt();
    let id = reserved.0;
    if !send_start(client, reserved, spec, deadline, no_wait, outcome.clone()) {
        outcome.send(Err(LockError::Client(Error::Closed)));
    }
    id
}

/// Sends the start of an attempt whose id was taken before (see
/// [`QueueLock::reserve`](super::queue_lock::QueueLock::reserve)); false if
/// the core is gone, and then `outcome` has heard nothing.
pub(crate) fn send_start<O: Outcome>(
    client: &Client,
    (id, uuid): (AttemptId, String),
    spec: Arc<LockSpec>,
    deadline: Option<Instant>,
    no_wait: bool,
    outcome: O,
) -> bool {
    client.command_sender().lock(LockCommand::Acquire {
        id,
        spec,
        uuid,
        deadline,
        no_wait,
        outcome: into_sink(outcome, client.downgrade()),
    })
}
