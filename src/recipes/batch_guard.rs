//! What a [`BatchMutex`](super::BatchMutex)'s threads share: the process's
//! hold and its local hand-off, and the guard of one thread's turn. Apart
//! from the recipe so that a waiter (`batch_waiter.rs`) can use them
//! without naming it.

use std::sync::{Arc, Mutex as StdMutex, MutexGuard};

use crossbeam_channel::Receiver;

use super::guard::LockGuard;
use super::handoff::HandOff;
use super::held::LockState;
use super::mutex::Mutex;
use crate::wakers::WakeList;

#[derive(Debug, Default)]
pub(super) struct Local {
    /// The process's hold on the ZooKeeper lock, kept across a batch
    /// (`Some` exactly when `hand.held`).
    pub(super) zk: Option<LockGuard>,
    /// Who uses, waits for and holds it: the decisions, simulated apart.
    pub(super) hand: HandOff,
    /// The thread inside, so it cannot wait for itself.
    pub(super) owner: Option<std::thread::ThreadId>,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) mutex: Mutex,
    max_batch: usize,
    local: StdMutex<Local>,
    /// Woken at every change of `local`: every waiter waiting, blocked or
    /// awaited.
    pub(super) tasks: WakeList,
}

impl Shared {
    pub(super) fn new(mutex: Mutex, max_batch: usize) -> Shared {
        Shared {
            mutex,
            max_batch: max_batch.max(1),
            local: StdMutex::new(Local::default()),
            tasks: WakeList::default(),
        }
    }

    pub(super) fn local(&self) -> MutexGuard<'_, Local> {
        match self.local.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        }
    }
}

/// Held by one thread of the process; passes the lock on when dropped.
#[derive(Debug)]
#[must_use = "the lock is passed on as soon as the guard is dropped"]
pub struct BatchGuard {
    shared: Arc<Shared>,
    token: i64,
    node: String,
}

impl BatchGuard {
    pub(super) fn new(shared: Arc<Shared>, token: i64, node: String) -> BatchGuard {
        BatchGuard {
            shared,
            token,
            node,
        }
    }

    /// The shared lock node's czxid: the same for every thread of one batch.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The lock node the whole batch shares.
    pub fn node_path(&self) -> &str {
        &self.node
    }

    /// Whether the batch's grant came after a holder's unclean end (see
    /// [`LockGuard::follows_unclean_end`](super::LockGuard::follows_unclean_end)).
    pub fn follows_unclean_end(&self) -> bool {
        self.shared
            .local()
            .zk
            .as_ref()
            .is_some_and(|g| g.follows_unclean_end())
    }

    /// The shared node's state; `Lost` once the process lost the lock.
    pub fn state(&self) -> LockState {
        self.shared
            .local()
            .zk
            .as_ref()
            .map_or(LockState::Lost, |g| g.state())
    }

    /// A channel yielding the current state, then every change.
    pub fn state_changes(&self) -> Receiver<LockState> {
        match self.shared.local().zk.as_ref() {
            Some(g) => g.state_changes(),
            None => {
                let (tx, rx) = crossbeam_channel::bounded(1);
                let _ = tx.send(LockState::Lost);
                rx
            }
        }
    }
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        let s = &self.shared;
        let mut local = s.local();
        local.owner = None;
        // Keep the node for a local waiter while the batch lasts; otherwise
        // give the lock back to the queue.
        // The guard's drop releases without blocking, as this one must.
        let given_back = local.hand.exit(s.max_batch).then(|| local.zk.take());
        drop(local);
        s.tasks.wake_all();
        drop(given_back);
    }
}
