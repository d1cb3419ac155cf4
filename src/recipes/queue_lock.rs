//! The queue lock of one side (the machinery behind every queue recipe),
//! and what a lock call from one thread does before it queues.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::thread::ThreadId;
use std::time::Instant;

use crossbeam_channel::Select;

use super::attempt::{LockSpec, Rule};
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::{Holding, LockGuard};
use super::held::LockState;
use super::inspect::{inspect, QueueEntry};
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::registry::{self, Key, Side};
use super::service::{self, Outcome};
use crate::machine::AttemptId;
use crate::machine::CommandSender;
use crate::{Acl, Client, Error};

/// A queue lock of one side: the machinery behind Mutex, both halves of
/// RwLock, the semaphore and Election.
#[derive(Debug)]
pub(crate) struct QueueLock {
    pub(crate) client: Client,
    /// The lock path as the caller names it.
    pub(crate) path: String,
    spec: Arc<LockSpec>,
    side: Side,
    reentrant: bool,
    /// Per thread, the holding it last took here (for re-entry: readers
    /// of one process hold at once, each re-enters its own).
    taken: StdMutex<Vec<(ThreadId, Weak<Holding>)>>,
}

/// What a lock call from one thread does before (or instead of) queueing.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Shares a live holding of that thread: re-entry, or a write holder's
    /// read.
    Share(Arc<Holding>),
    /// Shares it once a read shows its node still ours: a holder that does
    /// not watch its node cannot know it was deleted.
    Confirm(Arc<Holding>),
    /// Refused: waiting would be waiting for ourselves.
    Refuse(LockError),
    Queue,
}

impl QueueLock {
    pub(crate) fn new(
        client: &Client,
        path: &str,
        marker: &'static str,
        rule: Rule,
        side: Side,
        options: &MutexOptions,
    ) -> Result<QueueLock, LockError> {
        let parent = client.to_server_path(path, false)?;
        Ok(QueueLock {
            client: client.clone(),
            path: path.to_owned(),
            spec: Arc::new(LockSpec {
                parent,
                marker,
                data: options.holder_data(),
                acl: options.acl.clone().unwrap_or_else(Acl::open_unsafe),
                parent_acl: options.parent_acl.clone().unwrap_or_else(Acl::open_unsafe),
                rule,
                watch_node: options.watch_node || options.revocable,
                revocable: options.revocable,
                lock_delay: options.lock_delay,
            }),
            side,
            reentrant: options.reentrant,
            taken: StdMutex::new(Vec::new()),
        })
    }

    pub(crate) fn key(&self, side: Side) -> Key {
        (self.client.session_id(), self.path.clone(), side)
    }

    /// `thread`'s live holding of this lock object, if any. One already
    /// Lost is not shared: the lock is no longer ours to re-enter.
    pub(crate) fn held_by(&self, thread: ThreadId) -> Option<Arc<Holding>> {
        let taken = self.taken.lock().ok()?;
        let (_, weak) = taken.iter().find(|(t, _)| *t == thread)?;
        let holding = weak.upgrade()?;
        (holding.state() != LockState::Lost).then_some(holding)
    }

    /// How a call shares `holding`: at once if the holder watches its node.
    pub(crate) fn share(&self, holding: Arc<Holding>) -> Entry {
        if self.spec.watch_node {
            Entry::Share(holding)
        } else {
            Entry::Confirm(holding)
        }
    }

    /// What a lock call from `thread` does first: re-enter its holding
    /// (when re-entrant), refuse (it holds the lock already), or queue.
    /// Leases are not refused: a thread may hold several.
    pub(crate) fn entry(&self, thread: ThreadId) -> Entry {
        if self.reentrant {
            if let Some(holding) = self.held_by(thread) {
                return self.share(holding);
            }
        }
        if self.side != Side::Lease && self.holds(self.side, thread) {
            return Entry::Refuse(LockError::WouldDeadlock);
        }
        Entry::Queue
    }

    /// Whether `thread` holds `side` of this lock by a holding whose node
    /// may still stand (a guard told Lost by zklock's own judgement
    /// included). Not once the session has ended: its nodes went with it,
    /// and a call fails with the session's own error.
    pub(crate) fn holds(&self, side: Side, thread: ThreadId) -> bool {
        !self.client.state().is_terminal() && registry::held_by(&self.key(side), thread)
    }

    /// Records that `thread` took `guard` from the queue.
    pub(crate) fn record(&self, guard: &mut LockGuard, thread: ThreadId) {
        guard.register_owner(self.key(self.side), thread);
        if let Ok(mut taken) = self.taken.lock() {
            record_taker(&mut taken, thread, Arc::downgrade(guard.holding()));
        }
    }

    /// The deadline a call made at `now` runs to, and whether it is a try:
    /// a deadline already past still gets one round trip, bounded by the
    /// request timeout, rather than timing out before it is sent.
    pub(crate) fn call_deadline(
        &self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> (Option<Instant>, bool) {
        match deadline {
            Some(d) if d <= now => (
                Some(crate::deadline::after(now, self.client.request_timeout())),
                true,
            ),
            _ => (deadline, false),
        }
    }

    /// Starts an acquisition and returns at once.
    pub(crate) fn start(&self, deadline: Option<Instant>) -> PendingLock {
        service::start(&self.client, self.spec.clone(), deadline, false)
    }

    /// Starts an acquisition as `lock_with` would at `now`: a deadline
    /// already past makes it a try (one round trip, bounded by the request
    /// timeout) rather than an attempt that times out before it is sent.
    /// The second value says it is a try: its outcome alone ends it.
    pub(crate) fn start_at(&self, now: Instant, deadline: Option<Instant>) -> (PendingLock, bool) {
        let (deadline, no_wait) = self.call_deadline(now, deadline);
        (self.start_call(deadline, no_wait), no_wait)
    }

    /// Starts an acquisition to `deadline`, as a try if `no_wait` (see
    /// [`QueueLock::call_deadline`]).
    pub(crate) fn start_call(&self, deadline: Option<Instant>, no_wait: bool) -> PendingLock {
        service::start(&self.client, self.spec.clone(), deadline, no_wait)
    }

    /// Releases `guard` and queues again, in one write when `guard` holds
    /// this lock on this client (else it is dropped, which releases it,
    /// and an acquisition starts).
    pub(crate) fn requeue(&self, guard: LockGuard, deadline: Option<Instant>) -> PendingLock {
        let parent = guard.node_path().rsplit_once('/').map(|(p, _)| p);
        let ours = parent == Some(self.path.trim_end_matches('/'))
            && guard.owner_session() == self.client.session_id();
        match ours.then(|| guard.into_requeue()).flatten() {
            Some(old) => service::requeue(&self.client, old, self.spec.clone(), deadline),
            None => self.start(deadline),
        }
    }

    /// Starts an acquisition whose outcome goes to `outcome`; what it
    /// takes to give it up, or the error that stopped it from starting.
    pub(crate) fn start_to<O: Outcome>(
        &self,
        deadline: Option<Instant>,
        outcome: O,
    ) -> Result<(AttemptId, CommandSender), LockError> {
        let id = service::start_to(&self.client, self.spec.clone(), deadline, false, outcome);
        Ok((id, self.client.command_sender()))
    }

    /// An attempt's id (and node GUID) taken ahead of its start, so that
    /// whoever must be able to give it up can know it before any outcome
    /// can come; start it with [`QueueLock::start_reserved`].
    pub(crate) fn reserve(&self) -> Reserved {
        Reserved(self.client.next_attempt())
    }

    /// [`QueueLock::start_to`] for an attempt [reserved](QueueLock::reserve)
    /// on this lock. If it cannot start, `outcome` hears nothing: the
    /// caller is told here, and may hold its own lock across the call.
    pub(crate) fn start_reserved<O: Outcome>(
        &self,
        reserved: Reserved,
        deadline: Option<Instant>,
        outcome: O,
    ) -> Result<(), LockError> {
        let spec = self.spec.clone();
        match service::send_start(&self.client, reserved.0, spec, deadline, false, outcome) {
            true => Ok(()),
            false => Err(LockError::Client(Error::Closed)),
        }
    }

    /// Where commands for this lock's attempts go (a withdrawal).
    pub(crate) fn command_sender(&self) -> CommandSender {
        self.client.command_sender()
    }

    /// Blocks until held, `deadline` (a deadline already past: one round
    /// trip, as a try-lock) or cancellation. The wait is bounded here, by
    /// the caller's clock, whatever the network does.
    ///
    /// Inlined, so that a call without a token (`lock()`, `try_lock()`,
    /// `lock_timeout()`) links only the wait without one.
    #[inline]
    pub(crate) fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        self.lock_entered(|thread| self.entry(thread), deadline, cancel)
    }

    /// [`QueueLock::lock_with`], with `entry` deciding what the calling
    /// thread does before it queues (a read/write lock's sides decide
    /// with each other).
    #[inline]
    pub(crate) fn lock_entered(
        &self,
        entry: impl Fn(ThreadId) -> Entry,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        match cancel {
            None => self.lock_waiting(entry, deadline, |q, deadline, no_wait| {
                q.wait_blocked(deadline, no_wait)
            }),
            Some(c) => self.lock_waiting(entry, deadline, |q, deadline, no_wait| {
                if c.is_cancelled() {
                    return Err(LockError::Cancelled);
                }
                q.wait_cancellable(deadline, no_wait, c)
            }),
        }
    }

    /// [`QueueLock::lock_entered`], waiting with `wait` (called with the
    /// deadline and whether this is a try-lock) once the lock is neither
    /// shared nor refused. The polled form, the same steps without
    /// blocking, is [`PendingThreadLock`](super::PendingThreadLock).
    fn lock_waiting(
        &self,
        entry: impl Fn(ThreadId) -> Entry,
        deadline: Option<Instant>,
        wait: impl FnOnce(&QueueLock, Option<Instant>, bool) -> Result<LockGuard, LockError>,
    ) -> Result<LockGuard, LockError> {
        let me = std::thread::current().id();
        // A try still gets its round trip (the confirming read's too).
        let (deadline, no_wait) = self.call_deadline(Instant::now(), deadline);
        // A confirming read that finds our node gone makes that holding
        // Lost: the second look does not see it.
        for first in [true, false] {
            match entry(me) {
                Entry::Share(holding) => return Ok(LockGuard::from_holding(holding)),
                Entry::Confirm(holding) if first => {
                    if holding.confirm(deadline)? {
                        return Ok(LockGuard::from_holding(holding));
                    }
                }
                Entry::Refuse(e) => return Err(e),
                Entry::Confirm(_) | Entry::Queue => break,
            }
        }
        let mut guard = wait(self, deadline, no_wait)?;
        self.record(&mut guard, me);
        Ok(guard)
    }

    /// The outcome for a thread that only waits: on a oneshot, which parks
    /// at once (see `crate::oneshot`).
    fn wait_blocked(
        &self,
        deadline: Option<Instant>,
        no_wait: bool,
    ) -> Result<LockGuard, LockError> {
        let (id, outcome) =
            service::start_blocking(&self.client, self.spec.clone(), deadline, no_wait);
        let received = match deadline {
            None => outcome.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => outcome.recv_deadline(d),
        };
        match received {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                // Refuse a late guard (it releases itself), then give the
                // attempt up.
                drop(outcome);
                service::cancel(&self.client, id);
                Err(LockError::Timeout)
            }
            Err(RecvTimeoutError::Disconnected) => Err(LockError::Client(Error::Closed)),
        }
    }

    /// The outcome, or `cancel`, or the deadline, whichever comes first.
    fn wait_cancellable(
        &self,
        deadline: Option<Instant>,
        no_wait: bool,
        cancel: &CancelToken,
    ) -> Result<LockGuard, LockError> {
        let pending = service::start(&self.client, self.spec.clone(), deadline, no_wait);
        let mut select = Select::new();
        let outcome = select.recv(pending.receiver());
        select.recv(cancel.receiver());
        let chosen = match deadline {
            Some(d) => select.select_deadline(d),
            None => Ok(select.select()),
        };
        // Dropping `pending` without an outcome taken gives the attempt up.
        match chosen {
            Ok(op) if op.index() == outcome => {
                let r = op.recv(pending.receiver());
                pending.mark_taken();
                r.unwrap_or(Err(LockError::Client(Error::Closed)))
            }
            Ok(op) => {
                let _ = op.recv(cancel.receiver());
                Err(LockError::Cancelled)
            }
            Err(_) => Err(LockError::Timeout),
        }
    }

    pub(crate) fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        inspect(&self.client, &self.path).map_err(LockError::from)
    }
}

/// What a read call from `thread` does first: a write holder reads under
/// its write node (a downgrade); one whose write node stands for a guard
/// it cannot share (told Lost by zklock's own judgement) is refused, as
/// the read would wait for it; else as the read side decides.
pub(crate) fn read_entry(read: &QueueLock, write: &QueueLock, thread: ThreadId) -> Entry {
    match write.held_by(thread) {
        Some(holding) => write.share(holding),
        None if write.holds(Side::Exclusive, thread) => Entry::Refuse(LockError::WouldDeadlock),
        None => read.entry(thread),
    }
}

/// What a write call from `thread` does first: a reader is refused (two
/// readers upgrading would wait for each other forever); else as the
/// write side decides.
pub(crate) fn write_entry(read: &QueueLock, write: &QueueLock, thread: ThreadId) -> Entry {
    if read.holds(Side::Shared, thread) {
        return Entry::Refuse(LockError::UpgradeRefused);
    }
    write.entry(thread)
}

/// An attempt's id and node GUID, taken before its start.
#[derive(Debug)]
pub(crate) struct Reserved((AttemptId, String));

impl Reserved {
    pub(crate) fn id(&self) -> AttemptId {
        self.0 .0
    }
}

/// Makes `holding` `thread`'s entry among `taken`, dropping entries whose
/// holding is gone: threads that locked once and ended leave nothing behind.
fn record_taker<T>(taken: &mut Vec<(ThreadId, Weak<T>)>, thread: ThreadId, holding: Weak<T>) {
    taken.retain(|(t, weak)| *t != thread && weak.strong_count() > 0);
    taken.push((thread, holding));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::record_taker;

    #[test]
    fn a_taker_whose_holding_is_gone_is_forgotten() {
        let here = std::thread::current().id();
        let there = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        let (kept, ended) = (Arc::new(1), Arc::new(2));
        let mut taken = Vec::new();
        record_taker(&mut taken, there, Arc::downgrade(&ended));
        record_taker(&mut taken, here, Arc::downgrade(&kept));
        assert_eq!(taken.len(), 2, "both holdings live");
        drop(ended);
        let again = Arc::new(3);
        record_taker(&mut taken, here, Arc::downgrade(&again));
        assert_eq!(taken.len(), 1, "the ended holding and our old entry go");
        assert_eq!(taken[0].0, here);
        assert_eq!(taken[0].1.upgrade().as_deref(), Some(&3));
    }
}
