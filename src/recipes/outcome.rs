//! Where an acquisition's outcome goes. The core hands out a holding; the
//! sink made here turns it into a guard for whoever waits.

use std::sync::Arc;

use crossbeam_channel::Sender;

use super::guard::LockGuard;
use crate::client::WeakClient;
use crate::machine::{GrantSink, Holding, LockError};
use crate::wakers::WakeSlot;
use crate::Error;

/// Where an acquisition's outcome goes: one type per kind of waiter, so
/// that a program links the delivery of the kinds it uses and no other (a
/// program that takes its locks one at a time needs no
/// [`PendingSet`](super::PendingSet)'s channel).
pub(crate) trait Outcome: Clone + Send + 'static {
    /// Hands the outcome over. If nobody waits any more, it is dropped
    /// here: a guard then releases itself.
    fn send(self, outcome: Result<LockGuard, LockError>);
}

/// The channel of its own [`PendingLock`](super::PendingLock), and its future's task.
#[derive(Clone)]
pub(crate) struct Alone(
    pub(crate) Sender<Result<LockGuard, LockError>>,
    pub(crate) WakeSlot,
);

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
pub(crate) fn into_sink<O: Outcome>(outcome: O, client: WeakClient) -> GrantSink {
    Box::new(move |result: Result<Holding, LockError>| outcome.send(to_caller(result, &client)))
}

/// A holding as the caller's guard, or the error with the caller's paths.
fn to_caller(
    result: Result<Holding, LockError>,
    client: &WeakClient,
) -> Result<LockGuard, LockError> {
    let Some(client) = client.upgrade() else {
        // Every handle went: the holding releases itself as it drops.
        return Err(LockError::Client(Error::Closed));
    };
    match result {
        Ok(holding) => Ok(LockGuard::new(holding, client)),
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
