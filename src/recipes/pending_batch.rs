//! One local waiter of a [`BatchMutex`](super::BatchMutex), as a handle that
//! is polled: the whole of a waiter's decisions, so that the blocking
//! `lock_with` (which only adds the waiting between polls) and a caller that
//! drives many waiters from one thread (or a simulation, on its own clock)
//! run the same code.

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::Select;

use super::batch_guard::{BatchGuard, Local, Shared};
use super::cancel::CancelToken;
use super::error::LockError;
use super::handoff::Turn;
use super::held::LockState;
use super::pending::PendingLock;

/// How often a waiter that blocks looks at its cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// A local waiter for a [`BatchMutex`](super::BatchMutex), started with
/// [`BatchMutex::start_lock`](super::BatchMutex::start_lock). Poll it with
/// [`PendingBatch::try_take`]; the waiter whose turn it is to queue for the
/// process in ZooKeeper holds that acquisition inside its handle. Dropping
/// it before the outcome gives the wait up (and that acquisition with it).
#[derive(Debug)]
#[must_use = "dropping the handle gives the wait up"]
pub struct PendingBatch {
    shared: Arc<Shared>,
    deadline: Option<Instant>,
    cancel: Option<CancelToken>,
    /// This waiter queues in ZooKeeper for the whole process.
    acquiring: Option<PendingLock>,
    /// That acquisition is a try (the deadline had passed when it started):
    /// its outcome, not this waiter's clock, ends it.
    trying: bool,
    /// The outcome was handed out: the waiter is no longer counted.
    done: bool,
    /// Polled before: a deadline already past at the first poll makes a
    /// try; past later, it ends the wait unless a local turn is free.
    polled: bool,
}

/// What one poll decided, before the local state is let go.
enum Step {
    Take(BatchGuard),
    Wait,
    Leave(LockError),
}

impl PendingBatch {
    pub(super) fn new(
        shared: Arc<Shared>,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> PendingBatch {
        shared.local().hand.arrive();
        PendingBatch {
            shared,
            deadline,
            cancel,
            acquiring: None,
            trying: false,
            done: false,
            polled: false,
        }
    }

    /// The outcome if it has come: a guard once this waiter's turn inside
    /// the process comes, or why there is none. `None` while it waits, and
    /// after the outcome was taken.
    ///
    /// # Errors
    /// [`LockError::Timeout`] past the deadline, [`LockError::Cancelled`]
    /// once the token is cancelled, else what the process's acquisition in
    /// ZooKeeper failed with.
    pub fn try_take(&mut self) -> Option<Result<BatchGuard, LockError>> {
        self.try_take_at(Instant::now())
    }

    /// [`PendingBatch::try_take`] with the caller's clock: for a caller that
    /// drives time itself (it read the clock already, or simulates it).
    ///
    /// # Errors
    /// As [`PendingBatch::try_take`].
    pub fn try_take_at(&mut self, now: Instant) -> Option<Result<BatchGuard, LockError>> {
        let shared = self.shared.clone();
        let mut local = shared.local();
        let r = self.poll(&mut local, now);
        drop(local);
        r
    }

    /// Blocks until the outcome.
    ///
    /// # Errors
    /// As [`PendingBatch::try_take`].
    pub fn wait(self) -> Result<BatchGuard, LockError> {
        self.run(None)
    }

    /// Blocks at most `timeout`; then gives the wait up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if no outcome came in time; else as
    /// [`PendingBatch::try_take`].
    pub fn wait_timeout(self, timeout: Duration) -> Result<BatchGuard, LockError> {
        self.run(Some(crate::deadline::from_now(timeout)))
    }

    /// Polls on this thread, waiting between polls for what can change the
    /// outcome (a local hand-off, the process's acquisition, the token),
    /// until the outcome or `bound` (then [`LockError::Timeout`]). The
    /// thread that waited owns the guard, for the deadlock check.
    pub(super) fn run(mut self, bound: Option<Instant>) -> Result<BatchGuard, LockError> {
        let shared = self.shared.clone();
        let cancel = self.cancel.clone();
        let until = match (self.deadline, bound) {
            (Some(d), Some(b)) => Some(d.min(b)),
            (d, b) => d.or(b),
        };
        let mut local = shared.local();
        loop {
            let now = Instant::now();
            if let Some(outcome) = self.poll(&mut local, now) {
                if outcome.is_ok() {
                    local.owner = Some(std::thread::current().id());
                }
                return outcome;
            }
            if bound.is_some_and(|b| now >= b) {
                // Leaving takes the local state's lock.
                drop(local);
                drop(self);
                return Err(LockError::Timeout);
            }
            if let Some((acquiring, trying)) = self.acquiring() {
                // This thread queues for the process: its outcome (or the
                // token, or the deadline) is the next change to look at.
                drop(local);
                let mut select = Select::new();
                select.recv(acquiring.receiver());
                if let Some(c) = &cancel {
                    select.recv(c.receiver());
                }
                let _ = match if trying { bound } else { until } {
                    Some(d) => select.ready_deadline(d).ok(),
                    None => Some(select.ready()),
                };
                local = shared.local();
                continue;
            }
            let wait = match (until, &cancel) {
                (Some(d), _) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if cancel.is_some() {
                        left.min(CANCEL_POLL)
                    } else {
                        left
                    }
                }
                (None, Some(_)) => CANCEL_POLL,
                (None, None) => Duration::from_secs(3600),
            };
            local = match shared.changed.wait_timeout(local, wait) {
                Ok((l, _)) => l,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The process's acquisition in ZooKeeper, when this waiter runs it: a
    /// blocked caller waits on it (its outcome ends this waiter's wait),
    /// until the deadline unless it is a try (`true`), which its outcome
    /// alone ends.
    pub(super) fn acquiring(&self) -> Option<(&PendingLock, bool)> {
        self.acquiring.as_ref().map(|p| (p, self.trying))
    }

    /// One look, under the local state's lock (so a blocked caller can wait
    /// on the condvar with it, missing no change).
    pub(super) fn poll(
        &mut self,
        local: &mut MutexGuard<'_, Local>,
        now: Instant,
    ) -> Option<Result<BatchGuard, LockError>> {
        if self.done {
            return None;
        }
        let step = self.step(local, now);
        self.polled = true;
        match step {
            Step::Take(guard) => {
                self.done = true;
                Some(Ok(guard))
            }
            Step::Wait => None,
            Step::Leave(error) => {
                self.leave(local);
                Some(Err(error))
            }
        }
    }

    fn step(&mut self, local: &mut MutexGuard<'_, Local>, now: Instant) -> Step {
        if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            return Step::Leave(LockError::Cancelled);
        }
        // The process's acquisition, when this waiter runs it. A try's
        // outcome alone ends the try.
        if let Some(pending) = &self.acquiring {
            match pending.try_take() {
                None if self.trying => return Step::Wait,
                None => return self.unless_late(now),
                Some(got) => {
                    self.acquiring = None;
                    local.hand.acquired(got.is_ok());
                    match got {
                        Ok(g) => {
                            local.zk = Some(g);
                            self.shared.changed.notify_all();
                        }
                        Err(e) => return Step::Leave(e),
                    }
                }
            }
        }
        // Past the deadline, a local turn that is free is still taken; and
        // at the first poll, as a try, so is one round trip to queue.
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
                Step::Take(BatchGuard::new(self.shared.clone(), token, node))
            }
            Turn::Acquire if self.polled && self.deadline.is_some_and(|d| now >= d) => {
                local.hand.acquired(false);
                Step::Leave(LockError::Timeout)
            }
            Turn::Acquire => {
                // A hold lost while idle goes back (its guard's drop does
                // not block) before the process queues again.
                drop(local.zk.take());
                let (pending, trying) = self
                    .shared
                    .mutex
                    .queue_lock()
                    .pending_at(now, self.deadline);
                self.acquiring = Some(pending);
                self.trying = trying;
                Step::Wait
            }
            Turn::Wait => self.unless_late(now),
        }
    }

    /// `Leave(Timeout)` once the deadline has passed, else `Wait`.
    fn unless_late(&self, now: Instant) -> Step {
        match self.deadline {
            Some(d) if now >= d => Step::Leave(LockError::Timeout),
            _ => Step::Wait,
        }
    }

    /// This waiter goes without the lock: the process's acquisition it ran
    /// is given up, and a hold kept only for it goes back to the queue.
    fn leave(&mut self, local: &mut MutexGuard<'_, Local>) {
        self.done = true;
        if let Some(pending) = self.acquiring.take() {
            local.hand.acquired(false);
            drop(pending);
        }
        if local.hand.leave() {
            drop(local.zk.take());
        }
        self.shared.changed.notify_all();
    }
}

impl Drop for PendingBatch {
    fn drop(&mut self) {
        if !self.done {
            let shared = self.shared.clone();
            let mut local = shared.local();
            self.leave(&mut local);
        }
    }
}
