//! A lock call made for one thread: what that thread's call decides before
//! it queues (re-enter, confirm, refuse, queue), then its outcome. A
//! [`PendingLock`] of [`Mutex::start_lock_for`](super::Mutex::start_lock_for)
//! runs its steps on its polls; the blocking calls (`lock_with` and the
//! calls built on it) run the same steps on their thread, parked between
//! them until what a step awaits wakes it. One set of steps, so the two
//! cannot decide differently.

use std::ops::Deref;
use std::sync::Arc;
use std::task::Waker;
use std::thread::ThreadId;
use std::time::Instant;

use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::{unanswered, LockGuard};
use super::pending::{PendingLock, Steps};
use super::queue_lock::{read_entry, write_entry, Entry, QueueLock, Start};
use crate::client::PendingReply;
use crate::wakers::unpark_this_thread;

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
    /// The acquisition the call queued, and the deadline it runs to.
    Queued(PendingLock, Option<Instant>),
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

/// Who runs the steps: a poll (what a step awaits wakes the task, if any,
/// and the core's timer the read's bound), or a thread blocked on them
/// (`task` unparks it; it keeps the bounds by its own clock, and `cancel`
/// ends its wait in the queue).
#[derive(Debug, Clone, Copy)]
enum Run<'a> {
    Poll(Option<&'a Waker>),
    Block {
        task: &'a Waker,
        cancel: Option<&'a CancelToken>,
    },
}

impl<'a> Run<'a> {
    fn task(self) -> Option<&'a Waker> {
        match self {
            Run::Poll(task) => task,
            Run::Block { task, .. } => Some(task),
        }
    }
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

    /// Runs the call to its end on this thread, until the call's deadline,
    /// `bound` (a timeout, then) or `cancel`.
    pub(crate) fn run(
        &mut self,
        cancel: Option<&CancelToken>,
        bound: Option<Instant>,
    ) -> Result<LockGuard, LockError> {
        let task = unpark_this_thread();
        if let Some(c) = cancel {
            c.register(&task);
        }
        let outcome = self.block(&task, cancel, bound);
        if let Some(c) = cancel {
            c.forget(&task);
        }
        outcome
    }

    /// The steps, this thread parked between them until `task` is woken
    /// or, by its own clock, what it waits for is due.
    fn block(
        &mut self,
        task: &Waker,
        cancel: Option<&CancelToken>,
        bound: Option<Instant>,
    ) -> Result<LockGuard, LockError> {
        loop {
            let now = Instant::now();
            if let Some(outcome) = self.advance(now, Run::Block { task, cancel }) {
                return outcome;
            }
            let (until, queued) = match &self.step {
                // (The look past `until` fails the read.)
                Step::Confirming(c) => (Some(c.until), false),
                Step::Queued(_, deadline) => (*deadline, true),
                _ => (None, false),
            };
            let cancelled = queued && cancel.is_some_and(CancelToken::is_cancelled);
            let late = queued && until.is_some_and(|u| now >= u);
            if cancelled || late || bound.is_some_and(|b| now >= b) {
                // Given up by this wait: dropping the acquisition withdraws
                // it (a late guard releases itself).
                self.step = Step::Done;
                return Err(if cancelled {
                    LockError::Cancelled
                } else {
                    LockError::Timeout
                });
            }
            match until.into_iter().chain(bound).min() {
                Some(due) => std::thread::park_timeout(due.saturating_duration_since(now)),
                None => std::thread::park(),
            }
        }
    }

    fn advance(&mut self, now: Instant, run: Run<'_>) -> Option<Result<LockGuard, LockError>> {
        match std::mem::replace(&mut self.step, Step::Done) {
            Step::Unstarted => {
                let (deadline, no_wait) = self.target.queue().call_deadline(now, self.deadline);
                self.look(now, deadline, no_wait, true, run)
            }
            Step::Confirming(mut c) => match c.reply.take(run.task()) {
                Some(read) => match c.guard.confirmed(read) {
                    Ok(true) => Some(Ok(c.guard)),
                    Ok(false) => self.look(now, c.deadline, c.no_wait, false, run),
                    Err(e) => Some(Err(e)),
                },
                None if now >= c.until => Some(Err(unanswered(now, c.deadline))),
                None => {
                    if let (Run::Poll(Some(task)), false) = (run, c.timer) {
                        c.timer = true;
                        self.target.queue().client.wake_at(c.until, task.clone());
                    }
                    self.step = Step::Confirming(c);
                    None
                }
            },
            Step::Queued(pending, deadline) => match pending.take(now, run.task()) {
                Some(Ok(guard)) => {
                    self.target.queue().record(&guard, self.thread);
                    Some(Ok(guard))
                }
                Some(Err(LockError::WouldDeadlock)) => {
                    let Downgrade::Queued { deadline, no_wait } = self.downgrade else {
                        return Some(Err(LockError::WouldDeadlock));
                    };
                    self.downgrade = Downgrade::SharesWrite;
                    self.look(now, deadline, no_wait, true, run)
                }
                Some(Err(e)) => Some(Err(e)),
                None => {
                    self.step = Step::Queued(pending, deadline);
                    None
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
        run: Run<'_>,
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
                        // Looked at once: the task waits on the reply.
                        self.advance(now, run)
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
        if let Run::Block {
            cancel: Some(c), ..
        } = run
        {
            if c.is_cancelled() {
                return Some(Err(LockError::Cancelled));
            }
        }
        let how = Start {
            deadline,
            no_wait,
            replacing: None,
            passes,
        };
        self.step = Step::Queued(self.target.queue().pending(how), deadline);
        self.advance(now, run)
    }
}

/// The steps of a [`PendingLock`] of
/// [`Mutex::start_lock_for`](super::Mutex::start_lock_for) and the
/// `RwLock`'s calls for a thread.
impl Steps<LockGuard> for ThreadCall<Arc<QueueLock>> {
    fn poll(&mut self, now: Instant, task: Option<&Waker>) -> Option<Result<LockGuard, LockError>> {
        self.advance(now, Run::Poll(task))
    }

    fn run(&mut self, bound: Option<Instant>) -> Result<LockGuard, LockError> {
        ThreadCall::run(self, None, bound)
    }
}
