//! An acquisition under way, for callers that do not want to block: one
//! thread can wait on any number of them together with other channels.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::guard::LockGuard;
use super::wake::WakeSlot;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError};
use crate::Error;

/// An acquisition started with a `start_*` call (e.g.
/// [`Mutex::start_lock`](super::Mutex::start_lock)). Its outcome arrives
/// once on [`PendingLock::receiver`], which can be selected together with
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
pub struct PendingLock {
    id: AttemptId,
    outcome: Receiver<Result<LockGuard, LockError>>,
    /// `None` for an acquisition that failed before it started.
    sender: Option<CommandSender>,
    /// The outcome was taken: nothing to give up on drop (and no message
    /// to wake the core's driver for).
    taken: AtomicBool,
    /// The task polling this as a future.
    wake: WakeSlot,
}

impl PendingLock {
    pub(crate) fn new(
        id: AttemptId,
        outcome: Receiver<Result<LockGuard, LockError>>,
        sender: CommandSender,
        wake: WakeSlot,
    ) -> Self {
        PendingLock {
            id,
            outcome,
            sender: Some(sender),
            taken: AtomicBool::new(false),
            wake,
        }
    }

    /// Yields the outcome once: the guard, or why there is none. For
    /// `crossbeam_channel::select!` and `Select`.
    pub fn receiver(&self) -> &Receiver<Result<LockGuard, LockError>> {
        &self.outcome
    }

    /// The outcome if it has come.
    ///
    /// # Errors
    /// Whatever the acquisition failed with ([`LockError::Timeout`] at its
    /// deadline, [`LockError::SessionExpired`], ...).
    pub fn try_take(&self) -> Option<Result<LockGuard, LockError>> {
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
    pub fn wait(self) -> Result<LockGuard, LockError> {
        let outcome = self.outcome.recv();
        self.mark_taken();
        outcome.unwrap_or(Err(LockError::Client(Error::Closed)))
    }

    /// Blocks at most `timeout`; then gives the acquisition up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if no outcome came in time; else whatever the
    /// acquisition failed with.
    pub fn wait_timeout(self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.wait_deadline(crate::deadline::from_now(timeout))
    }

    pub(crate) fn wait_deadline(self, deadline: Instant) -> Result<LockGuard, LockError> {
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

impl PendingLock {
    /// The outcome was received (also through [`PendingLock::receiver`] by
    /// a caller in this crate): dropping the handle gives nothing up.
    pub(crate) fn mark_taken(&self) {
        self.taken.store(true, Ordering::Relaxed);
    }
}

/// Resolves to the outcome, as [`PendingLock::wait`] would return it,
/// without blocking a thread. Dropping the future before it resolves gives
/// the acquisition up, as dropping the handle does.
impl Future for PendingLock {
    type Output = Result<LockGuard, LockError>;

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

impl Drop for PendingLock {
    fn drop(&mut self) {
        if self.taken.load(Ordering::Relaxed) {
            return;
        }
        // Also harmless if the outcome came unseen: a guard releases itself.
        if let Some(sender) = &self.sender {
            sender.lock(LockCommand::Cancel(self.id));
        }
    }
}
