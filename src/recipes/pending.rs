//! An acquisition under way, for callers that do not want to block: one
//! thread can wait on any number of them together with other channels,
//! and async code can await it. One type for whatever it yields: a lock's
//! guard, or a multi-lock's.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::guard::LockGuard;
use super::multi_guard::MultiGuard;
use super::wake::WakeSlot;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError};
use crate::Error;

/// A lock's acquisition under way (see [`Pending`]).
pub type PendingLock = Pending<LockGuard>;

/// A [`MultiLock`](super::MultiLock) acquisition under way, started with
/// [`MultiLock::start_lock`](super::MultiLock::start_lock): every lock, or
/// the first failure, the locks taken so far released as it is sent
/// (whether or not the handle is kept). Dropping it before then withdraws
/// the part awaited and releases the parts taken.
pub type PendingMulti = Pending<MultiGuard>;

/// An acquisition started with a `start_*` call (e.g.
/// [`Mutex::start_lock`](super::Mutex::start_lock)). Its outcome arrives
/// once on [`Pending::receiver`], which can be selected together with
/// other handles and channels. Dropping it before the outcome gives the
/// attempt up and removes its node.
///
/// ```no_run
/// use std::time::{Duration, Instant};
/// use crossbeam_channel::Select;
/// use zklock::{Client, recipes::Mutex};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let deadline = Some(Instant::now() + Duration::from_secs(30));
/// let locks: Vec<Mutex> = (0..100)
///     .map(|i| Mutex::new(&client, &format!("/locks/job-{i}")))
///     .collect::<Result<_, _>>()?;
/// let pending: Vec<_> = locks.iter().map(|m| m.start_lock(deadline)).collect();
/// let mut select = Select::new();
/// for p in &pending {
///     select.recv(p.receiver());
/// }
/// let ready = select.select();
/// let first = ready.index();
/// let guard = ready.recv(pending[first].receiver())??;
/// println!("first lock: {}", guard.node_path());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It is also a [`Future`] of its outcome, for async code on any executor
/// (the crate needs no runtime: the client's I/O thread wakes the task):
///
/// ```no_run
/// # async fn f(mutex: &zklock::recipes::Mutex) -> Result<(), zklock::recipes::LockError> {
/// let guard = mutex.start_lock(None).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the handle gives the acquisition up"]
pub struct Pending<T> {
    outcome: Receiver<Result<T, LockError>>,
    /// The outcome was taken: nothing to give up on drop (and no message
    /// to wake the core's driver for).
    taken: AtomicBool,
    /// The task polling this as a future.
    wake: WakeSlot,
    /// What dropping it before the outcome does.
    give_up: Option<GiveUp>,
}

/// How an acquisition is given up.
pub(crate) enum GiveUp {
    /// One attempt of the core's: cancelled (a guard already on its way
    /// releases itself).
    Attempt(AttemptId, CommandSender),
    /// Steps of the layer that started it (a multi-lock's chain).
    Steps(Box<dyn FnOnce() + Send + Sync>),
}

impl std::fmt::Debug for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GiveUp::Attempt(id, _) => write!(f, "Attempt({id})"),
            GiveUp::Steps(_) => f.write_str("Steps"),
        }
    }
}

impl<T> Pending<T> {
    /// A handle on `outcome`, which the sender wakes `wake` for.
    pub(crate) fn new(
        outcome: Receiver<Result<T, LockError>>,
        wake: WakeSlot,
        give_up: GiveUp,
    ) -> Self {
        Pending {
            outcome,
            taken: AtomicBool::new(false),
            wake,
            give_up: Some(give_up),
        }
    }

    /// A handle on attempt `id` of the core's.
    pub(crate) fn of_attempt(
        id: AttemptId,
        sender: CommandSender,
        outcome: Receiver<Result<T, LockError>>,
        wake: WakeSlot,
    ) -> Self {
        Pending::new(outcome, wake, GiveUp::Attempt(id, sender))
    }

    /// An acquisition that failed before it started.
    pub(crate) fn failed(error: LockError) -> Self {
        let (tx, outcome) = crossbeam_channel::bounded(1);
        let _ = tx.send(Err(error));
        Pending {
            outcome,
            taken: AtomicBool::new(false),
            wake: WakeSlot::default(),
            give_up: None,
        }
    }

    /// Yields the outcome once: the guard, or why there is none. For
    /// `crossbeam_channel::select!` and `Select`.
    pub fn receiver(&self) -> &Receiver<Result<T, LockError>> {
        &self.outcome
    }

    /// The outcome if it has come; `None` before, and after it was taken.
    ///
    /// # Errors
    /// Whatever the acquisition failed with ([`LockError::Timeout`] at its
    /// deadline, [`LockError::SessionExpired`], ...; for a multi-lock,
    /// [`LockError::Lost`] if a lock taken earlier was lost while a later
    /// one was awaited).
    pub fn try_take(&self) -> Option<Result<T, LockError>> {
        if self.taken.load(Ordering::Relaxed) {
            return None;
        }
        match self.outcome.try_recv() {
            Ok(r) => {
                self.mark_taken();
                Some(r)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(LockError::Client(Error::Closed))),
        }
    }

    /// Blocks until the outcome.
    ///
    /// # Errors
    /// Whatever the acquisition failed with.
    pub fn wait(self) -> Result<T, LockError> {
        let outcome = self.outcome.recv();
        self.mark_taken();
        outcome.unwrap_or(Err(LockError::Client(Error::Closed)))
    }

    /// Blocks at most `timeout`; then gives the acquisition up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if no outcome came in time; else whatever the
    /// acquisition failed with.
    pub fn wait_timeout(self, timeout: Duration) -> Result<T, LockError> {
        self.wait_deadline(crate::deadline::from_now(timeout))
    }

    pub(crate) fn wait_deadline(self, deadline: Instant) -> Result<T, LockError> {
        match self.outcome.recv_deadline(deadline) {
            Ok(r) => {
                self.mark_taken();
                r
            }
            Err(RecvTimeoutError::Timeout) => Err(LockError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(LockError::Client(Error::Closed)),
        }
    }
}

impl<T> Pending<T> {
    /// The outcome was received (also through [`Pending::receiver`] by
    /// a caller in this crate): dropping the handle gives nothing up.
    pub(crate) fn mark_taken(&self) {
        self.taken.store(true, Ordering::Relaxed);
    }
}

/// Resolves to the outcome, as [`Pending::wait`] would return it,
/// without blocking a thread. Dropping the future before it resolves gives
/// the acquisition up, as dropping the handle does.
impl<T> Future for Pending<T> {
    type Output = Result<T, LockError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(outcome) = self.try_take() {
            return Poll::Ready(outcome);
        }
        self.wake.register(cx.waker());
        // The outcome may have come between the look and the registration.
        match self.try_take() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        if self.taken.load(Ordering::Relaxed) {
            return;
        }
        // Also harmless if the outcome came unseen: a guard releases itself.
        match self.give_up.take() {
            Some(GiveUp::Attempt(id, sender)) => {
                sender.lock(LockCommand::Cancel(id));
            }
            Some(GiveUp::Steps(steps)) => steps(),
            None => {}
        }
    }
}
