//! A lock call made for one thread: what that thread's call decides before
//! it queues (re-enter, confirm, refuse, queue), then its outcome. The
//! blocking calls (`lock_with` and the calls built on it) run it on their
//! thread, waiting between its steps; a [`PendingLock`] of
//! [`Mutex::start_lock_for`](super::Mutex::start_lock_for) runs it on its
//! polls. One set of steps, so the two cannot decide differently.

use std::ops::Deref;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::task::Waker;
use std::thread::ThreadId;
use std::time::Instant;

use crossbeam_channel::Select;

use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::{unanswered, LockGuard};
use super::outcome::Blocked;
use super::pending::{PendingLock, Steps};
use super::queue_lock::{read_entry, write_entry, Entry, QueueLock, Start};
use crate::client::PendingReply;
use crate::machine::{AttemptId, LockCommand};
use crate::{oneshot, Error};

/// The lock a call is for. A read/write lock's two sides decide together
/// (a write holder's read passes its write node; a reader is refused the
/// write lock).
#[derive(Debug)]
pub(crate) enum Target<Q> {
    One(Q),
    Read { read: Q, write: Q },
    Write { read: Q, write: Q },
}

impl<Q: Deref<Target = QueueLock>> Target<Q> {
    /// `share_write`: a downgrade found a writer waiting behind the write
    /// node (see [`read_entry`]).
    fn entry(&self, thread: ThreadId, share_write: bool) -> Entry {
        match self {
            Target::One(lock) => lock.entry(thread),
            Target::Read { read, write } => read_entry(read, write, thread, share_write),
            Target::Write { read, write } => write_entry(read, write, thread),
        }
    }

    /// The side that queues, and records the guard it hands out.
    fn queue(&self) -> &QueueLock {
        match self {
            Target::One(lock)
            | Target::Read { read: lock, .. }
            | Target::Write { write: lock, .. } => lock,
        }
    }
}

/// A blocking call on `lock` from this thread: until held, `deadline` (a
/// deadline already past: one round trip, as a try-lock) or cancellation.
/// The wait is bounded here, by the caller's clock, whatever the network
/// does.
pub(crate) fn lock_with(
    lock: &QueueLock,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
) -> Result<LockGuard, LockError> {
    let me = std::thread::current().id();
    ThreadCall::new(Target::One(lock), me, deadline).run(cancel, None)
}

/// A call for `thread` whose steps run on its handle's polls.
pub(crate) fn start(
    target: Target<Arc<QueueLock>>,
    thread: ThreadId,
    deadline: Option<Instant>,
) -> PendingLock {
    PendingLock::of_steps(ThreadCall::new(target, thread, deadline))
}

/// One lock call for `thread`, step by step.
#[derive(Debug)]
pub(crate) struct ThreadCall<Q> {
    target: Target<Q>,
    thread: ThreadId,
    deadline: Option<Instant>,
    step: Step,
    downgrade: Downgrade,
}

/// A write holder's read (a downgrade), as far as it went.
#[derive(Debug, Clone, Copy)]
enum Downgrade {
    /// None queued.
    No,
    /// A read node passing the write node queued, by the call's deadline
    /// (and whether it is a try), kept for the look that shares the write
    /// holding instead if the machine finds a writer waiting between.
    Queued {
        deadline: Option<Instant>,
        no_wait: bool,
    },
    /// A writer waits between: the read shares the write holding, which
    /// keeps that writer out as a read node behind it could not.
    SharesWrite,
}

#[derive(Debug)]
enum Step {
    /// Not looked at yet: nothing decided, nothing sent.
    Unstarted,
    /// Reading the shared holding's node before handing it out again.
    Confirming(Confirm),
    Queued(Queued),
    /// The outcome was handed out.
    Done,
}

/// The read that confirms a shared holding, and the call's deadline (and
/// whether it is a try) for the look that follows if the node is gone.
#[derive(Debug)]
struct Confirm {
    guard: LockGuard,
    reply: PendingReply,
    /// When the read gives up.
    until: Instant,
    /// The core wakes the polling task then: nothing else would.
    timer: bool,
    deadline: Option<Instant>,
    no_wait: bool,
}

/// The acquisition the call queued, and the deadline it runs to.
enum Queued {
    /// Polled, or waited on beside a cancel token.
    Handle(PendingLock, Option<Instant>),
    /// A thread that only waits parks on a oneshot, which parks at once
    /// (see `crate::oneshot`).
    Parked {
        id: AttemptId,
        outcome: oneshot::Receiver<Result<LockGuard, LockError>>,
        deadline: Option<Instant>,
    },
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Queued::Handle(pending, _) => f.debug_tuple("Handle").field(pending).finish(),
            Queued::Parked { id, .. } => f.debug_struct("Parked").field("id", id).finish(),
        }
    }
}

/// How a step waits for what it awaits: not at all (polled; what it
/// awaits wakes the task, if any), or blocking this thread until it comes,
/// `bound` passes (then the call times out) or the token is cancelled.
#[derive(Debug, Clone, Copy)]
enum Wait<'a> {
    Poll(Option<&'a Waker>),
    Block {
        cancel: Option<&'a CancelToken>,
        bound: Option<Instant>,
    },
}

impl<Q: Deref<Target = QueueLock>> ThreadCall<Q> {
    pub(crate) fn new(target: Target<Q>, thread: ThreadId, deadline: Option<Instant>) -> Self {
        ThreadCall {
            target,
            thread,
            deadline,
            step: Step::Unstarted,
            downgrade: Downgrade::No,
        }
    }

    /// Runs the call to its end on this thread, waiting between steps until
    /// the call's deadline, `bound` (a timeout, then) or `cancel`.
    pub(crate) fn run(
        &mut self,
        cancel: Option<&CancelToken>,
        bound: Option<Instant>,
    ) -> Result<LockGuard, LockError> {
        let wait = Wait::Block { cancel, bound };
        loop {
            if let Some(outcome) = self.advance(Instant::now(), wait) {
                return outcome;
            }
        }
    }

    fn advance(&mut self, now: Instant, wait: Wait<'_>) -> Option<Result<LockGuard, LockError>> {
        match std::mem::replace(&mut self.step, Step::Done) {
            Step::Unstarted => {
                let (deadline, no_wait) = self.target.queue().call_deadline(now, self.deadline);
                self.look(now, deadline, no_wait, true, wait)
            }
            Step::Confirming(mut c) => {
                let (read, now) = match wait {
                    Wait::Poll(task) => {
                        let read = c.reply.take(task);
                        if let (None, Some(task), false) = (&read, task, c.timer) {
                            c.timer = true;
                            self.target.queue().client.wake_at(c.until, task.clone());
                        }
                        (read, now)
                    }
                    Wait::Block { bound, .. } => {
                        let until = bound.map_or(c.until, |b| b.min(c.until));
                        (c.reply.wait_until(until), Instant::now())
                    }
                };
                match read {
                    Some(read) => match c.guard.confirmed(read) {
                        Ok(true) => Some(Ok(c.guard)),
                        Ok(false) => self.look(now, c.deadline, c.no_wait, false, wait),
                        Err(e) => Some(Err(e)),
                    },
                    None if now >= c.until => Some(Err(unanswered(now, c.deadline))),
                    None if past(wait, now) => Some(Err(LockError::Timeout)),
                    None => {
                        self.step = Step::Confirming(c);
                        None
                    }
                }
            }
            Step::Queued(queued) => match queued.take(now, wait) {
                Ok(Some(Ok(guard))) => {
                    self.target.queue().record(&guard, self.thread);
                    Some(Ok(guard))
                }
                Ok(Some(Err(LockError::WouldDeadlock))) => {
                    let Downgrade::Queued { deadline, no_wait } = self.downgrade else {
                        return Some(Err(LockError::WouldDeadlock));
                    };
                    self.downgrade = Downgrade::SharesWrite;
                    let now = match wait {
                        Wait::Poll(_) => now,
                        Wait::Block { .. } => Instant::now(),
                    };
                    self.look(now, deadline, no_wait, true, wait)
                }
                Ok(Some(Err(e))) => Some(Err(e)),
                Ok(None) => {
                    self.step = Step::Queued(queued);
                    None
                }
                Err(()) => {
                    // Given up by this wait: dropping it withdraws it.
                    queued.give_up(self.target.queue());
                    Some(Err(match wait {
                        Wait::Block {
                            cancel: Some(c), ..
                        } if c.is_cancelled() => LockError::Cancelled,
                        _ => LockError::Timeout,
                    }))
                }
            },
            Step::Done => None,
        }
    }

    /// One look, as the thread's call takes it: share, confirm (on the
    /// first look only: a confirm that failed made that holding Lost),
    /// refuse, or queue (passing the write node, for a downgrade).
    fn look(
        &mut self,
        now: Instant,
        deadline: Option<Instant>,
        no_wait: bool,
        first: bool,
        wait: Wait<'_>,
    ) -> Option<Result<LockGuard, LockError>> {
        let share_write = matches!(self.downgrade, Downgrade::SharesWrite);
        let passes = match self.target.entry(self.thread, share_write) {
            Entry::Share(guard) => return Some(Ok(guard)),
            Entry::Confirm(guard) if first => {
                return match guard.start_confirm() {
                    Ok(reply) => {
                        let until = self.target.queue().client.reply_deadline(now, deadline);
                        self.step = Step::Confirming(Confirm {
                            guard,
                            reply,
                            until,
                            timer: false,
                            deadline,
                            no_wait,
                        });
                        // Looked at once: a task waits on the reply.
                        self.advance(now, wait)
                    }
                    Err(e) => Some(Err(e)),
                };
            }
            Entry::Refuse(e) => return Some(Err(e)),
            Entry::Confirm(_) | Entry::Queue => None,
            Entry::Downgrade(node) => {
                self.downgrade = Downgrade::Queued { deadline, no_wait };
                Some(node)
            }
        };
        let how = Start {
            deadline,
            no_wait,
            replacing: None,
            passes,
        };
        let queue = self.target.queue();
        let queued = match wait {
            Wait::Block {
                cancel: Some(c), ..
            } if c.is_cancelled() => return Some(Err(LockError::Cancelled)),
            Wait::Block { cancel: None, .. } => {
                let (tx, outcome) = oneshot::channel();
                match queue.start(how, |_| Blocked(tx)) {
                    Ok(id) => Queued::Parked {
                        id,
                        outcome,
                        deadline,
                    },
                    Err(e) => return Some(Err(e)),
                }
            }
            _ => Queued::Handle(queue.pending(how), deadline),
        };
        self.step = Step::Queued(queued);
        self.advance(now, wait)
    }
}

/// Whether a blocking wait's bound has passed at `now`.
fn past(wait: Wait<'_>, now: Instant) -> bool {
    matches!(wait, Wait::Block { bound: Some(b), .. } if now >= b)
}

impl Queued {
    /// The outcome if it has come (`Ok(None)`: not yet, waiting on); with
    /// [`Wait::Block`], waits for it. `Err` if this wait gives the
    /// acquisition up (cancelled, or past its bound or deadline).
    fn take(
        &self,
        now: Instant,
        wait: Wait<'_>,
    ) -> Result<Option<Result<LockGuard, LockError>>, ()> {
        let (cancel, bound) = match wait {
            Wait::Block { cancel, bound } => (cancel, bound),
            Wait::Poll(task) => {
                return Ok(match self {
                    Queued::Handle(pending, _) => pending.take(now, task),
                    Queued::Parked { outcome, .. } => match outcome.try_recv() {
                        Ok(r) => Some(r),
                        Err(TryRecvError::Empty) => None,
                        Err(TryRecvError::Disconnected) => {
                            Some(Err(LockError::Client(Error::Closed)))
                        }
                    },
                })
            }
        };
        let until = |deadline: Option<Instant>| match (deadline, bound) {
            (Some(d), Some(b)) => Some(d.min(b)),
            (d, b) => d.or(b),
        };
        match self {
            Queued::Parked {
                outcome, deadline, ..
            } => {
                let received = match until(*deadline) {
                    None => outcome.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some(d) => outcome.recv_deadline(d),
                };
                match received {
                    Ok(r) => Ok(Some(r)),
                    Err(RecvTimeoutError::Timeout) => Err(()),
                    Err(RecvTimeoutError::Disconnected) => {
                        Ok(Some(Err(LockError::Client(Error::Closed))))
                    }
                }
            }
            Queued::Handle(pending, deadline) => {
                // (Always there: a queued attempt's outcome is sent.)
                let Some(receiver) = pending.receiver() else {
                    return Err(());
                };
                let mut select = Select::new();
                let outcome = select.recv(receiver);
                if let Some(c) = cancel {
                    select.recv(c.receiver());
                }
                let chosen = match until(*deadline) {
                    Some(d) => select.select_deadline(d),
                    None => Ok(select.select()),
                };
                match chosen {
                    Ok(op) if op.index() == outcome => {
                        let r = op.recv(receiver);
                        pending.mark_taken();
                        Ok(Some(r.unwrap_or(Err(LockError::Client(Error::Closed)))))
                    }
                    Ok(op) => {
                        if let Some(c) = cancel {
                            let _ = op.recv(c.receiver());
                        }
                        Err(())
                    }
                    Err(_) => Err(()),
                }
            }
        }
    }

    /// Gives the acquisition up: a late guard releases itself.
    fn give_up(self, queue: &QueueLock) {
        match self {
            // Dropping the handle without an outcome taken gives it up.
            Queued::Handle(pending, _) => drop(pending),
            Queued::Parked { id, outcome, .. } => {
                // Refuse a late guard (it releases itself), then withdraw.
                drop(outcome);
                queue.command_sender().lock(LockCommand::Cancel(id));
            }
        }
    }
}

/// The steps of a [`PendingLock`] of
/// [`Mutex::start_lock_for`](super::Mutex::start_lock_for) and the
/// `RwLock`'s calls for a thread.
impl Steps<LockGuard> for ThreadCall<Arc<QueueLock>> {
    fn poll(&mut self, now: Instant, task: Option<&Waker>) -> Option<Result<LockGuard, LockError>> {
        self.advance(now, Wait::Poll(task))
    }

    fn run(&mut self, bound: Option<Instant>) -> Result<LockGuard, LockError> {
        ThreadCall::run(self, None, bound)
    }
}
