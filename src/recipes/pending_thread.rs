//! A lock call made for one thread and polled instead of blocking: the
//! decisions of that thread's blocking call (re-enter, confirm, refuse,
//! queue), taken one poll at a time.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use super::error::LockError;
use super::guard::{unanswered, LockGuard};
use super::pending::PendingLock;
use super::queue_lock::{read_entry, write_entry, Entry, QueueLock, Start};
use crate::client::PendingReply;

/// The lock a call is for. A read/write lock's two sides decide together
/// (a write holder reads under its write node; a reader is refused the
/// write lock).
#[derive(Debug)]
pub(crate) enum Target {
    One(Arc<QueueLock>),
    Read {
        read: Arc<QueueLock>,
        write: Arc<QueueLock>,
    },
    Write {
        read: Arc<QueueLock>,
        write: Arc<QueueLock>,
    },
}

impl Target {
    fn entry(&self, thread: ThreadId) -> Entry {
        match self {
            Target::One(lock) => lock.entry(thread),
            Target::Read { read, write } => read_entry(read, write, thread),
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

/// A lock call made for `thread` (e.g. by
/// [`Mutex::start_lock_for`](super::Mutex::start_lock_for)), read by polling
/// instead of blocking: for an event loop that acts for several threads.
/// It decides as that thread's blocking call would: a
/// [re-entrant](super::MutexOptions::reentrant) lock the thread holds is
/// shared (after a read of its node, for a holder that does not
/// [watch](super::MutexOptions::watch_node) it), a lock it holds otherwise
/// is refused with [`LockError::WouldDeadlock`], and the guard it hands out
/// counts as the thread's.
///
/// Nothing is decided or sent until the first poll: a deadline already
/// past then makes it a try (one round trip), as `try_lock` is. Dropping it
/// before the outcome gives the acquisition up.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::{Mutex, MutexOptions}};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let mutex = Mutex::with_options(&client, "/locks/job", MutexOptions::default().reentrant(true))?;
/// let me = std::thread::current().id();
/// let outer = mutex.lock()?;
/// let mut again = mutex.start_lock_for(me, None);
/// let inner = loop {
///     if let Some(outcome) = again.try_take() {
///         break outcome?;
///     }
///     std::thread::sleep(Duration::from_millis(1));
/// };
/// assert_eq!(inner.node_path(), outer.node_path());
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the handle gives the acquisition up"]
pub struct PendingThreadLock {
    target: Target,
    thread: ThreadId,
    deadline: Option<Instant>,
    step: Step,
}

#[derive(Debug)]
enum Step {
    /// Not polled yet: nothing decided, nothing sent.
    Unstarted,
    /// Reading the shared holding's node before handing it out again.
    Confirming(Confirm),
    Queued(PendingLock),
    /// The outcome was handed out.
    Done,
}

/// The read that confirms a shared holding, and the call's deadline (and
/// whether it is a try) for the look that follows if the node is gone.
#[derive(Debug)]
struct Confirm {
    guard: LockGuard,
    reply: PendingReply,
    /// When the read gives up, as the blocking read would.
    until: Instant,
    deadline: Option<Instant>,
    no_wait: bool,
}

impl PendingThreadLock {
    pub(crate) fn new(target: Target, thread: ThreadId, deadline: Option<Instant>) -> Self {
        PendingThreadLock {
            target,
            thread,
            deadline,
            step: Step::Unstarted,
        }
    }

    /// The outcome if it has come, once; [`PendingThreadLock::try_take_at`]
    /// on the wall clock.
    ///
    /// # Errors
    /// As [`Mutex::lock_with`](super::Mutex::lock_with).
    pub fn try_take(&mut self) -> Option<Result<LockGuard, LockError>> {
        self.try_take_at(Instant::now())
    }

    /// The outcome if it has come, once, with `now` the caller's clock: it
    /// decides whether the deadline has passed, for the first poll (a try)
    /// and for the read that confirms a shared holding. A queued
    /// acquisition's deadline is kept by the client's I/O thread.
    ///
    /// # Errors
    /// As [`Mutex::lock_with`](super::Mutex::lock_with).
    pub fn try_take_at(&mut self, now: Instant) -> Option<Result<LockGuard, LockError>> {
        match std::mem::replace(&mut self.step, Step::Done) {
            Step::Unstarted => {
                let (deadline, no_wait) = self.target.queue().call_deadline(now, self.deadline);
                self.look(now, deadline, no_wait, true)
            }
            Step::Confirming(c) => match c.reply.try_take() {
                Some(read) => match c.guard.confirmed(read) {
                    Ok(true) => Some(Ok(c.guard)),
                    Ok(false) => self.look(now, c.deadline, c.no_wait, false),
                    Err(e) => Some(Err(e)),
                },
                None if now >= c.until => Some(Err(unanswered(now, c.deadline))),
                None => {
                    self.step = Step::Confirming(c);
                    None
                }
            },
            Step::Queued(pending) => match pending.try_take() {
                Some(Ok(guard)) => {
                    self.target.queue().record(&guard, self.thread);
                    Some(Ok(guard))
                }
                Some(Err(e)) => Some(Err(e)),
                None => {
                    self.step = Step::Queued(pending);
                    None
                }
            },
            Step::Done => None,
        }
    }

    /// One look, as the blocking call takes it: share, confirm (on the
    /// first look only: a confirm that failed made that holding Lost),
    /// refuse, or queue.
    fn look(
        &mut self,
        now: Instant,
        deadline: Option<Instant>,
        no_wait: bool,
        first: bool,
    ) -> Option<Result<LockGuard, LockError>> {
        match self.target.entry(self.thread) {
            Entry::Share(guard) => Some(Ok(guard)),
            Entry::Confirm(guard) if first => match guard.start_confirm() {
                Ok(reply) => {
                    let until = self.target.queue().client.reply_deadline(now, deadline);
                    self.step = Step::Confirming(Confirm {
                        guard,
                        reply,
                        until,
                        deadline,
                        no_wait,
                    });
                    None
                }
                Err(e) => Some(Err(e)),
            },
            Entry::Refuse(e) => Some(Err(e)),
            Entry::Confirm(_) | Entry::Queue => {
                let how = Start {
                    deadline,
                    no_wait,
                    replacing: None,
                };
                self.step = Step::Queued(self.target.queue().pending(how));
                self.try_take_at(now)
            }
        }
    }
}
