//! One local waiter of a [`BatchMutex`](super::BatchMutex): the whole of a
//! waiter's decisions, as steps, so that the blocking `lock_with` (which
//! only adds the waiting between polls), a handle polled from a loop that
//! drives many waiters (or a simulation, on its own clock) and one awaited
//! as a future run the same code.

use std::sync::{Arc, MutexGuard};
use std::task::Waker;
use std::time::Instant;

use super::batch_guard::{BatchGuard, Local, Shared};
use super::cancel::CancelToken;
use super::error::LockError;
use super::handoff::Turn;
use super::held::LockState;
use super::pending::{PendingLock, Steps};
use crate::wakers::unpark_this_thread;

/// A local waiter, behind the handle of
/// [`BatchMutex::start_lock`](super::BatchMutex::start_lock) or run by a
/// blocked `lock_with`. The waiter whose turn it is to queue for the
/// process in ZooKeeper holds that acquisition. Dropped before the
/// outcome, it gives the wait up (and that acquisition with it).
#[derive(Debug)]
pub(super) struct BatchWaiter {
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
    /// The core wakes the polling task at the deadline: nothing else would.
    timer: bool,
    /// The task the token wakes, forgotten once the wait is over.
    task: Option<Waker>,
}

/// What one poll decided, before the local state is let go.
enum Step {
    Take(BatchGuard),
    Wait,
    Leave(LockError),
}

impl BatchWaiter {
    pub(super) fn new(
        shared: Arc<Shared>,
        deadline: Option<Instant>,
        cancel: Option<CancelToken>,
    ) -> BatchWaiter {
        shared.local().hand.arrive();
        BatchWaiter {
            shared,
            deadline,
            cancel,
            acquiring: None,
            trying: false,
            done: false,
            polled: false,
            timer: false,
            task: None,
        }
    }

    /// Looks on this thread, parked between looks until what can change
    /// the outcome wakes it (a local hand-off, the process's acquisition,
    /// the token) or, by this thread's clock, the deadline passes; until
    /// the outcome or `bound` (then [`LockError::Timeout`]). The thread
    /// that waited owns the guard, for the deadlock check.
    pub(super) fn run(&mut self, bound: Option<Instant>) -> Result<BatchGuard, LockError> {
        let task = unpark_this_thread();
        // This thread keeps the deadline: no timer of the core's.
        self.timer = true;
        let shared = self.shared.clone();
        loop {
            let now = Instant::now();
            let mut local = shared.local();
            if let Some(outcome) = self.look(&mut local, now, Some(&task)) {
                if outcome.is_ok() {
                    local.owner = Some(std::thread::current().id());
                }
                return outcome;
            }
            if bound.is_some_and(|b| now >= b) {
                self.leave(&mut local);
                return Err(LockError::Timeout);
            }
            drop(local);
            // A try's outcome alone ends it, not the deadline.
            let deadline = self
                .deadline
                .filter(|_| !self.trying || self.acquiring.is_none());
            match deadline.into_iter().chain(bound).min() {
                Some(until) => std::thread::park_timeout(until.saturating_duration_since(now)),
                None => std::thread::park(),
            }
        }
    }

    /// One look, under the local state's lock. With a `task`, every change
    /// that can end the wait wakes it: registered under the lock, before
    /// the look, it is woken by a change made after, once the lock is let
    /// go.
    fn look(
        &mut self,
        local: &mut MutexGuard<'_, Local>,
        now: Instant,
        task: Option<&Waker>,
    ) -> Option<Result<BatchGuard, LockError>> {
        if self.done {
            return None;
        }
        if let Some(task) = task {
            self.shared.tasks.register(task);
            match &self.cancel {
                Some(c) if !self.task.as_ref().is_some_and(|t| t.will_wake(task)) => {
                    c.register(task);
                    if let Some(old) = self.task.replace(task.clone()) {
                        c.forget(&old);
                    }
                }
                _ => {}
            }
        }
        let step = self.step(local, now, task);
        self.polled = true;
        match step {
            Step::Take(guard) => {
                self.end();
                Some(Ok(guard))
            }
            Step::Wait => {
                match (task, self.deadline) {
                    (Some(task), Some(deadline)) if !self.timer => {
                        self.timer = true;
                        let client = &self.shared.mutex.queue_lock().client;
                        client.wake_at(deadline, task.clone());
                    }
                    _ => {}
                }
                None
            }
            Step::Leave(error) => {
                self.leave(local);
                Some(Err(error))
            }
        }
    }

    fn step(
        &mut self,
        local: &mut MutexGuard<'_, Local>,
        now: Instant,
        task: Option<&Waker>,
    ) -> Step {
        if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            return Step::Leave(LockError::Cancelled);
        }
        // The process's acquisition, when this waiter runs it. A try's
        // outcome alone ends the try.
        if let Some(pending) = &self.acquiring {
            match pending.take(now, task) {
                None if self.trying => return Step::Wait,
                None => return self.unless_late(now),
                Some(got) => {
                    self.acquiring = None;
                    local.hand.acquired(got.is_ok());
                    match got {
                        Ok(g) => {
                            local.zk = Some(g);
                            self.shared.tasks.wake_all();
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
                // Polled again at once, to wait on it.
                if let Some(task) = task {
                    task.wake_by_ref();
                }
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

    /// The outcome is handed out: the token need not wake anyone for it.
    fn end(&mut self) {
        self.done = true;
        if let (Some(c), Some(task)) = (&self.cancel, self.task.take()) {
            c.forget(&task);
        }
    }

    /// This waiter goes without the lock: the process's acquisition it ran
    /// is given up, and a hold kept only for it goes back to the queue.
    fn leave(&mut self, local: &mut MutexGuard<'_, Local>) {
        self.end();
        if let Some(pending) = self.acquiring.take() {
            local.hand.acquired(false);
            drop(pending);
        }
        if local.hand.leave() {
            drop(local.zk.take());
        }
        self.shared.tasks.wake_all();
    }
}

impl Steps<BatchGuard> for BatchWaiter {
    fn poll(
        &mut self,
        now: Instant,
        task: Option<&Waker>,
    ) -> Option<Result<BatchGuard, LockError>> {
        let shared = self.shared.clone();
        let mut local = shared.local();
        self.look(&mut local, now, task)
    }

    fn run(&mut self, bound: Option<Instant>) -> Result<BatchGuard, LockError> {
        BatchWaiter::run(self, bound)
    }
}

impl Drop for BatchWaiter {
    fn drop(&mut self) {
        if !self.done {
            let shared = self.shared.clone();
            let mut local = shared.local();
            self.leave(&mut local);
        }
    }
}
