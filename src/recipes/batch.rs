//! A non-fair lock that is still safe: threads of one process waiting on the
//! same path share one ZooKeeper lock node and pass the lock between
//! themselves locally, up to a bounded batch, before it goes to the next
//! process in the queue.
//!
//! (A lock that gets its unfairness from random, non-sequential node names
//! breaks mutual exclusion: a late arrival with a lower name takes a lock
//! that is held. Here the queue is the fair queue; only the local hand-off
//! is unfair.)

use std::sync::{Arc, Condvar, Mutex as StdMutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::handoff::{HandOff, Turn};
use super::held::LockState;
use super::mutex::{lock_calls, Mutex, MutexOptions};
use crate::Client;

/// How often a local waiter looks at its cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
struct Local {
    /// The process's hold on the ZooKeeper lock, kept across a batch
    /// (`Some` exactly when `hand.held`).
    zk: Option<LockGuard>,
    /// Who uses, waits for and holds it: the decisions, simulated apart.
    hand: HandOff,
    /// The thread inside, so it cannot wait for itself.
    owner: Option<std::thread::ThreadId>,
}

#[derive(Debug)]
struct Shared {
    mutex: Mutex,
    max_batch: usize,
    local: StdMutex<Local>,
    changed: Condvar,
}

impl Shared {
    fn local(&self) -> MutexGuard<'_, Local> {
        match self.local.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        }
    }
}

/// A lock shared by the threads of one process through a single queue node.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::BatchMutex};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let lock = BatchMutex::new(&client, "/locks/hot", 16)?;
/// let handles: Vec<_> = (0..8).map(|_| {
///     let lock = lock.clone();
///     std::thread::spawn(move || lock.lock().map(|g| g.fencing_token()))
/// }).collect();
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BatchMutex {
    shared: Arc<Shared>,
}

/// Held by one thread of the process; passes the lock on when dropped.
#[derive(Debug)]
#[must_use = "the lock is passed on as soon as the guard is dropped"]
pub struct BatchGuard {
    shared: Arc<Shared>,
    token: i64,
    node: String,
}

impl BatchMutex {
    /// Up to `max_batch` threads of this process hold the lock in turn
    /// before it goes back to the queue (1: no hand-off at all).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str, max_batch: usize) -> Result<BatchMutex, LockError> {
        BatchMutex::with_options(client, path, max_batch, MutexOptions::default())
    }

    /// Like [`BatchMutex::new`], with options (data, ACLs,
    /// [lock-delay](MutexOptions::lock_delay)); never re-entrant.
    ///
    /// # Errors
    /// As [`BatchMutex::new`].
    pub fn with_options(
        client: &Client,
        path: &str,
        max_batch: usize,
        options: MutexOptions,
    ) -> Result<BatchMutex, LockError> {
        let options = options.reentrant(false);
        Ok(BatchMutex {
            shared: Arc::new(Shared {
                mutex: Mutex::with_options(client, path, options)?,
                max_batch: max_batch.max(1),
                local: StdMutex::new(Local::default()),
                changed: Condvar::new(),
            }),
        })
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        BatchGuard,
        "the lock"
    );

    /// Waits until `deadline` (if any) or cancellation: for a local hand-off,
    /// or, if none is coming, for the process's turn in the queue.
    ///
    /// # Errors
    /// [`LockError::WouldDeadlock`] if this thread holds the lock already;
    /// else as [`Mutex::lock_with`](super::Mutex::lock_with).
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<BatchGuard, LockError> {
        let s = &self.shared;
        let mut local = s.local();
        if local.hand.busy && local.owner == Some(std::thread::current().id()) {
            return Err(LockError::WouldDeadlock);
        }
        local.hand.arrive();
        loop {
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(self.leave(local, LockError::Cancelled));
            }
            let usable = local
                .zk
                .as_ref()
                .is_some_and(|zk| zk.state() != LockState::Lost);
            match local.hand.turn(usable) {
                Turn::Take => {
                    let (token, node) = match local.zk.as_ref() {
                        Some(zk) => (zk.fencing_token(), zk.node_path().to_owned()),
                        None => (0, String::new()),
                    };
                    local.owner = Some(std::thread::current().id());
                    return Ok(self.guard(token, node));
                }
                Turn::Acquire => {
                    // A hold lost while idle goes back before queueing again.
                    let lost = local.zk.take();
                    drop(local);
                    drop(lost);
                    let got = s.mutex.lock_with(deadline, cancel);
                    local = s.local();
                    local.hand.acquired(got.is_ok());
                    match got {
                        Ok(g) => {
                            local.zk = Some(g);
                            s.changed.notify_all();
                            continue;
                        }
                        Err(e) => return Err(self.leave(local, e)),
                    }
                }
                Turn::Wait => {}
            }
            let wait = match (deadline, cancel) {
                (Some(d), _) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(self.leave(local, LockError::Timeout));
                    }
                    if cancel.is_some() {
                        left.min(CANCEL_POLL)
                    } else {
                        left
                    }
                }
                (None, Some(_)) => CANCEL_POLL,
                (None, None) => Duration::from_secs(3600),
            };
            local = match s.changed.wait_timeout(local, wait) {
                Ok((l, _)) => l,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// A local waiter leaves without the lock. If it was the last one the
    /// process's hold was kept for, nobody would release it: give it back.
    fn leave(&self, mut local: MutexGuard<'_, Local>, error: LockError) -> LockError {
        let zk = if local.hand.leave() {
            local.zk.take()
        } else {
            None
        };
        drop(local);
        self.shared.changed.notify_all();
        if let Some(g) = zk {
            drop(g);
        }
        error
    }

    /// Threads of this process waiting for the lock (diagnostics).
    pub fn local_waiters(&self) -> usize {
        self.shared.local().hand.waiting
    }

    fn guard(&self, token: i64, node: String) -> BatchGuard {
        BatchGuard {
            shared: self.shared.clone(),
            token,
            node,
        }
    }
}

impl BatchGuard {
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
        if local.hand.exit(s.max_batch) {
            let zk = local.zk.take();
            drop(local);
            if let Some(g) = zk {
                if let Err(e) = g.unlock() {
                    log::warn!("releasing the batch lock: {e}");
                }
            }
            local = s.local();
        }
        drop(local);
        s.changed.notify_all();
    }
}
