//! An acquisition under way, for callers that do not want to block: async
//! code awaits it, a loop polls it, a thread waits on it. One type for
//! whatever it yields (a lock's guard, a multi-lock's, a batch turn) and
//! however its outcome comes: sent by the client's I/O thread, or decided
//! by steps that run on the handle's own polls (a thread's call, a batch
//! waiter), which wake the task as what they wait for comes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex as StdMutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::guard::LockGuard;
use super::multi_guard::MultiGuard;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError};
use crate::wakers::WakeSlot;
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
/// [`Mutex::start_lock`](super::Mutex::start_lock)): a [`Future`] of its
/// outcome for async code on any executor (the crate needs no runtime: the
/// client's I/O thread wakes the task), polled with [`Pending::try_take`],
/// or waited for with [`Pending::wait`]. Dropping it before the outcome
/// gives the acquisition up and removes its node.
///
/// ```no_run
/// # async fn f(mutex: &zklock::recipes::Mutex) -> Result<(), zklock::recipes::LockError> {
/// let guard = mutex.start_lock(None).await?;
/// # Ok(()) }
/// ```
///
/// An outcome the I/O thread sends also arrives on
/// [`Pending::receiver`], which can be selected together with other
/// handles and channels:
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
/// let receivers: Vec<_> = pending.iter().filter_map(|p| p.receiver()).collect();
/// let mut select = Select::new();
/// for r in &receivers {
///     select.recv(r);
/// }
/// let ready = select.select();
/// let first = ready.index();
/// let guard = ready.recv(receivers[first])??;
/// println!("first lock: {}", guard.node_path());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the handle gives the acquisition up"]
pub struct Pending<T> {
    source: Source<T>,
    /// The outcome was taken: nothing to give up on drop (and no message
    /// to wake the core's driver for).
    taken: AtomicBool,
}

/// Where the outcome comes from.
#[derive(Debug)]
enum Source<T> {
    /// Sent by the I/O thread, which wakes the task in `wake`.
    Sent {
        outcome: Receiver<Result<T, LockError>>,
        wake: WakeSlot,
        /// What dropping the handle before the outcome does.
        give_up: Option<GiveUp>,
    },
    /// Decided by steps run on the handle's polls and waits (behind a
    /// lock: a poll needs only `&self`).
    Steps(StdMutex<Box<dyn Steps<T>>>),
}

/// How an acquisition whose outcome is sent is given up.
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

/// The steps of an acquisition that the handle's own caller runs (a
/// thread's call, a batch waiter): the same for a poll and for a blocking
/// wait, so the two cannot decide differently. Dropped before their
/// outcome, they give the acquisition up.
pub(crate) trait Steps<T>: Send + std::fmt::Debug {
    /// The steps that need no waiting, with `now` the caller's clock. With
    /// a `task`, whatever the next step waits for wakes it.
    fn poll(&mut self, now: Instant, task: Option<&Waker>) -> Option<Result<T, LockError>>;

    /// The steps to the outcome, this thread waiting between them, until
    /// `bound` at most (then [`LockError::Timeout`], the acquisition given
    /// up).
    fn run(&mut self, bound: Option<Instant>) -> Result<T, LockError>;
}

impl<T> Pending<T> {
    fn of(source: Source<T>) -> Self {
        Pending {
            source,
            taken: AtomicBool::new(false),
        }
    }

    /// A handle on `outcome`, which the sender wakes `wake` for.
    pub(crate) fn new(
        outcome: Receiver<Result<T, LockError>>,
        wake: WakeSlot,
        give_up: GiveUp,
    ) -> Self {
        Pending::of(Source::Sent {
            outcome,
            wake,
            give_up: Some(give_up),
        })
    }

    /// A handle whose steps run on its polls: nothing is decided or sent
    /// until the first.
    pub(crate) fn of_steps(steps: impl Steps<T> + 'static) -> Self {
        Pending::of(Source::Steps(StdMutex::new(Box::new(steps))))
    }

    /// An acquisition that failed before it started.
    pub(crate) fn failed(error: LockError) -> Self {
        let (tx, outcome) = crossbeam_channel::bounded(1);
        let _ = tx.send(Err(error));
        Pending::of(Source::Sent {
            outcome,
            wake: WakeSlot::default(),
            give_up: None,
        })
    }

    /// Yields the outcome once, for `crossbeam_channel::select!` and
    /// `Select`: the guard, or why there is none. `None` for a handle whose
    /// steps run on its polls (a call made for a thread, a
    /// [`BatchMutex`](super::BatchMutex) waiter): no channel could carry
    /// an outcome that nobody decides.
    pub fn receiver(&self) -> Option<&Receiver<Result<T, LockError>>> {
        match &self.source {
            Source::Sent { outcome, .. } => Some(outcome),
            Source::Steps(_) => None,
        }
    }

    /// The outcome if it has come; `None` before, and after it was taken.
    /// A handle whose steps run on its polls takes the next of them here.
    ///
    /// # Errors
    /// Whatever the acquisition failed with ([`LockError::Timeout`] at its
    /// deadline, [`LockError::SessionExpired`], ...; for a multi-lock,
    /// [`LockError::Lost`] if a lock taken earlier was lost while a later
    /// one was awaited).
    pub fn try_take(&self) -> Option<Result<T, LockError>> {
        self.take(Instant::now(), None)
    }

    /// [`Pending::try_take`] on the caller's clock, for a caller that
    /// drives time itself: `now` decides whether a deadline the handle's
    /// steps keep has passed (a queued acquisition's deadline is kept by
    /// the client's core).
    ///
    /// **Unstable** (feature `testing`, for this project's simulator; no
    /// semver promise).
    ///
    /// # Errors
    /// As [`Pending::try_take`].
    #[cfg(feature = "testing")]
    pub fn try_take_at(&self, now: Instant) -> Option<Result<T, LockError>> {
        self.take(now, None)
    }

    /// Blocks until the outcome.
    ///
    /// # Errors
    /// Whatever the acquisition failed with; [`LockError::Client`] with
    /// [`Error::Closed`] if the outcome was taken already.
    pub fn wait(self) -> Result<T, LockError> {
        self.block(None)
    }

    /// Blocks at most `timeout`; then gives the acquisition up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if no outcome came in time; else as
    /// [`Pending::wait`].
    pub fn wait_timeout(self, timeout: Duration) -> Result<T, LockError> {
        self.block(Some(crate::deadline::from_now(timeout)))
    }

    /// The outcome if it has come, once; else `task`, if any, is woken
    /// when it may have.
    pub(crate) fn take(&self, now: Instant, task: Option<&Waker>) -> Option<Result<T, LockError>> {
        if self.taken.load(Ordering::Relaxed) {
            return None;
        }
        let outcome = match &self.source {
            Source::Sent { outcome, wake, .. } => {
                // Registered before the look: an outcome after it wakes.
                if let Some(task) = task {
                    wake.register(task);
                }
                match outcome.try_recv() {
                    Ok(r) => Some(r),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => Some(Err(LockError::Client(Error::Closed))),
                }
            }
            Source::Steps(steps) => steps
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .poll(now, task),
        };
        if outcome.is_some() {
            self.mark_taken();
        }
        outcome
    }

    /// Waits on this thread for the outcome, until `bound` at most.
    fn block(mut self, bound: Option<Instant>) -> Result<T, LockError> {
        if self.taken.load(Ordering::Relaxed) {
            return Err(LockError::Client(Error::Closed));
        }
        let outcome = match &mut self.source {
            Source::Sent { outcome, .. } => {
                let got = match bound {
                    None => outcome.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some(bound) => outcome.recv_deadline(bound),
                };
                match got {
                    Ok(r) => r,
                    // Dropping the handle gives the acquisition up.
                    Err(RecvTimeoutError::Timeout) => return Err(LockError::Timeout),
                    Err(RecvTimeoutError::Disconnected) => Err(LockError::Client(Error::Closed)),
                }
            }
            Source::Steps(steps) => steps
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .run(bound),
        };
        self.mark_taken();
        outcome
    }

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
        match self.take(Instant::now(), Some(cx.waker())) {
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
        // Steps give themselves up as they drop. A sent outcome that came
        // unseen is harmless too: a guard releases itself.
        if let Source::Sent { give_up, .. } = &mut self.source {
            match give_up.take() {
                Some(GiveUp::Attempt(id, sender)) => {
                    sender.lock(LockCommand::Cancel(id));
                }
                Some(GiveUp::Steps(steps)) => steps(),
                None => {}
            }
        }
    }
}
