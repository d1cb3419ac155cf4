//! The queue lock of one side (the machinery behind every queue recipe),
//! and what a lock call from one thread does before it queues.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use super::attempt::{LockSpec, Rule};
use super::error::LockError;
use super::guard::LockGuard;
use super::inspect::{inspect, QueueEntry};
use super::options::MutexOptions;
use super::outcome::{into_sink, Alone, Outcome};
use super::pending::{GiveUp, PendingLock};
use super::registry::{self, Key, Side};
use crate::machine::{AttemptId, CommandSender, LockCommand};
use crate::wakers::WakeSlot;
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
    /// This lock object among the process's (see [`registry`]): re-entry
    /// shares what was taken through this object only.
    object: u64,
}

/// How an acquisition starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Start {
    /// When to give up with a timeout.
    pub(crate) deadline: Option<Instant>,
    /// A try: its outcome alone ends it (see [`QueueLock::call_deadline`]).
    pub(crate) no_wait: bool,
    /// A holding of this lock let go in the same write (a requeue).
    pub(crate) replacing: Option<AttemptId>,
    /// The name of a node of ours not to wait for: a downgrade's write
    /// node (see [`LockSpec::passes`]).
    pub(crate) passes: Option<String>,
}

impl Start {
    pub(crate) fn by(deadline: Option<Instant>) -> Start {
        Start {
            deadline,
            ..Start::default()
        }
    }
}

/// What a lock call from one thread does before (or instead of) queueing.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Shares a live holding of that thread: re-entry, or a write holder's
    /// read once a writer was found waiting behind the write node.
    Share(LockGuard),
    /// Shares it once a read shows its node still ours: a holder that does
    /// not watch its node cannot know it was deleted.
    Confirm(LockGuard),
    /// Refused: waiting would be waiting for ourselves.
    Refuse(LockError),
    Queue,
    /// A write holder's read (a downgrade): queues a read node of its own
    /// that does not wait for the thread's write node, named here.
    Downgrade(String),
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
        options.check()?;
        let parent = client.to_server_path(path, false)?;
        Ok(QueueLock {
            client: client.clone(),
            path: path.to_owned(),
            spec: Arc::new(LockSpec {
                parent,
                marker,
                data: options.holder_data(),
                acl: options.acl.clone().unwrap_or_else(Acl::open_unsafe),
                parent_acl: options.parent_acl_or_open(),
                ancestor_acl: options.ancestor_acl_or_open(),
                rule,
                watch_node: options.watch_node || options.revocable,
                revocable: options.revocable,
                lock_delay: options.lock_delay,
                passes: None,
                max_hold: options.max_hold,
            }),
            side,
            reentrant: options.reentrant,
            object: registry::new_object(),
        })
    }

    pub(crate) fn key(&self, side: Side) -> Key {
        (self.client.session_id(), self.path.clone(), side)
    }

    /// A guard on `thread`'s live holding taken through this lock object,
    /// if any. One already Lost is not shared: the lock is no longer ours
    /// to re-enter.
    pub(crate) fn held_by(&self, thread: ThreadId) -> Option<LockGuard> {
        let holding = registry::taken_through(&self.key(self.side), thread, self.object)?;
        Some(LockGuard::share(holding, self.client.clone()))
    }

    /// How a call shares `guard`: at once if the holder watches its node.
    pub(crate) fn share(&self, guard: LockGuard) -> Entry {
        if self.spec.watch_node {
            Entry::Share(guard)
        } else {
            Entry::Confirm(guard)
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
    pub(crate) fn record(&self, guard: &LockGuard, thread: ThreadId) {
        guard.record(self.key(self.side), thread, self.object);
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

    /// Starts an acquisition whose outcome goes where `outcome` says for
    /// its id, and says which attempt it is (to give it up with). If the
    /// core is gone, nothing hears: the caller is told here, and may hold a
    /// lock of its own across the call that the outcome takes.
    pub(crate) fn start<O: Outcome>(
        &self,
        how: Start,
        outcome: impl FnOnce(AttemptId) -> O,
    ) -> Result<AttemptId, LockError> {
        let (id, uuid) = self.client.next_attempt();
        let spec = match how.passes {
            None => self.spec.clone(),
            passes => Arc::new(LockSpec {
                passes,
                ..(*self.spec).clone()
            }),
        };
        let outcome = into_sink(outcome(id), self.client.downgrade());
        let command = match how.replacing {
            None => LockCommand::Acquire {
                id,
                spec,
                uuid,
                deadline: how.deadline,
                no_wait: how.no_wait,
                outcome,
            },
            Some(old) => LockCommand::Requeue {
                old,
                id,
                spec,
                uuid,
                deadline: how.deadline,
                outcome,
            },
        };
        match self.command_sender().lock(command) {
            true => Ok(id),
            false => Err(LockError::Client(Error::Closed)),
        }
    }

    /// [`QueueLock::start`], its outcome on a handle of its own.
    pub(crate) fn pending(&self, how: Start) -> PendingLock {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let wake = WakeSlot::default();
        match self.start(how, |_| Alone(tx, wake.clone())) {
            Ok(id) => PendingLock::new(rx, wake, GiveUp::Attempt(id, self.command_sender())),
            Err(e) => PendingLock::failed(e),
        }
    }

    /// [`QueueLock::pending`] as `lock_with` would start it at `now`: a
    /// deadline already past makes it a try (one round trip, bounded by
    /// the request timeout) rather than an attempt that times out before it
    /// is sent. The second value says it is a try: its outcome alone ends it.
    pub(crate) fn pending_at(
        &self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> (PendingLock, bool) {
        let (deadline, no_wait) = self.call_deadline(now, deadline);
        let how = Start {
            deadline,
            no_wait,
            ..Start::default()
        };
        (self.pending(how), no_wait)
    }

    /// Releases `guard` and queues again, in one write when `guard` holds
    /// this lock on this client (else it is dropped, which releases it,
    /// and an acquisition starts).
    pub(crate) fn requeue(&self, guard: LockGuard, deadline: Option<Instant>) -> PendingLock {
        let parent = guard.node_path().rsplit_once('/').map(|(p, _)| p);
        let ours = parent == Some(self.path.trim_end_matches('/'))
            && guard.owner_session() == self.client.session_id();
        let replacing = ours.then(|| guard.into_requeue()).flatten();
        self.pending(Start {
            replacing,
            ..Start::by(deadline)
        })
    }

    /// Where commands for this lock's attempts go (a withdrawal).
    pub(crate) fn command_sender(&self) -> CommandSender {
        self.client.command_sender()
    }

    pub(crate) fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        inspect(&self.client, &self.path).map_err(LockError::from)
    }
}

/// What a read call from `thread` does first: a write holder re-enters a
/// read it holds (when re-entrant), else downgrades: a read node of its
/// own that passes the write node, or, once that found a writer waiting
/// behind the write node (`share_write`), a share of the write holding.
/// One whose write node stands for a guard it cannot share (told Lost by
/// zklock's own judgement) is refused, as the read would wait for it;
/// else as the read side decides.
pub(crate) fn read_entry(
    read: &QueueLock,
    write: &QueueLock,
    thread: ThreadId,
    share_write: bool,
) -> Entry {
    match write.held_by(thread) {
        Some(holding) if share_write => write.share(holding),
        Some(holding) => match read.entry(thread) {
            Entry::Queue | Entry::Refuse(_) => {
                let path = holding.node_path();
                let name = path.rsplit_once('/').map_or(path, |(_, name)| name);
                Entry::Downgrade(name.to_owned())
            }
            reentered => reentered,
        },
        None if write.holds(Side::Exclusive, thread) => Entry::Refuse(LockError::WouldDeadlock),
        None => read.entry(thread),
    }
}

/// What a write call from `thread` does first: a reader is refused (two
/// readers upgrading would wait for each other forever); else, a write
/// holder with a downgraded read included, as the write side decides.
pub(crate) fn write_entry(read: &QueueLock, write: &QueueLock, thread: ThreadId) -> Entry {
    if read.holds(Side::Shared, thread) && !write.holds(Side::Exclusive, thread) {
        return Entry::Refuse(LockError::UpgradeRefused);
    }
    write.entry(thread)
}
