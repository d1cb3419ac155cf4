//! Lock calls made for one of a client's threads (`start_lock_for`):
//! what the thread holds decides whether the call shares a holding
//! (re-entry, a write holder's read), is refused at once, or queues. The
//! checks here hold each call to that, from the guards the harness tracks.

use super::collect::Granted;
use super::*;
use client::{reentrant, ThreadEntry, THREAD_LOCKS};

/// A node of a write (exclusive) holding: every lock's but a read lock's.
fn write_node(node: &str) -> bool {
    !node.contains("__READ__")
}

impl World {
    /// Whether some guard of client `c` on `node` is not Lost: its holding
    /// lives, and may be shared.
    fn live_node(&self, c: usize, node: &str) -> bool {
        let client = &self.clients[c];
        client.attempts.iter().any(|(&id, t)| {
            t.handle.lock_guard().is_some_and(|g| g.node_path() == node)
                && client
                    .held_state(id)
                    .is_some_and(|(s, _)| s != LockState::Lost)
        })
    }

    /// Whether `thread` holds `lock` (its write side if `write`) by a guard
    /// whose node may still stand (not Lost, or Lost by the client's own
    /// judgement) while its session lives: what the process's registry of
    /// holders answers. A guard of a session that expired, the client on a
    /// new one since, holds nothing: its node went with its session.
    fn thread_holds(&self, c: usize, thread: usize, lock: usize, write: bool) -> bool {
        let client = &self.clients[c];
        let sid = client.core.session_id();
        !client.core.state().is_terminal()
            && client.attempts.iter().any(|(&id, t)| {
                t.thread == Some(thread)
                    && t.lock == lock
                    && t.handle.lock_guard().is_some_and(|g| {
                        write_node(g.node_path()) == write && g.owner_session() == sid
                    })
                    && client.held_state(id).is_some_and(|(s, r)| {
                        s != LockState::Lost
                            || matches!(
                                r,
                                Some(
                                    zklock::recipes::LossReason::NoContact
                                        | zklock::recipes::LossReason::SequenceExhausted
                                )
                            )
                    })
            })
    }

    /// The holding `thread` last took from the queue of `lock` (its write
    /// side if `write`), if it still lives: what a call shares.
    fn thread_slot(&self, c: usize, thread: usize, lock: usize, write: bool) -> Option<String> {
        let node = self.clients[c].thread_taken.get(&(thread, lock, write))?;
        self.live_node(c, node).then(|| node.clone())
    }

    /// Notes when each holding a thread's calls share ends (after every
    /// step): a node of the clients' thread slots no longer live.
    pub(super) fn note_ended_holdings(&mut self) {
        let zxid = self.server.last_zxid();
        for c in 0..self.clients.len() {
            let ended: Vec<String> = self.clients[c]
                .thread_taken
                .values()
                .filter(|n| !self.holding_ended.contains_key(*n) && !self.live_node(c, n))
                .cloned()
                .collect();
            for node in ended {
                self.holding_ended.insert(node, zxid);
            }
        }
    }

    /// What the call of attempt `id` must do, from what its thread holds
    /// now (its first poll).
    pub(super) fn thread_entry(&self, c: usize, id: AttemptId) -> ThreadEntry {
        let t = &self.clients[c].attempts[&id];
        let (Some(thread), lock) = (t.thread, t.lock) else {
            return ThreadEntry::Queue;
        };
        debug_assert!(THREAD_LOCKS.contains(&lock));
        let share = |node| ThreadEntry::Share { node };
        // A reader asking to write would wait for itself; one that holds
        // the write lock too (a downgrade) asks for what it holds.
        if lock == 1
            && !t.reader
            && self.thread_holds(c, thread, lock, false)
            && !self.thread_holds(c, thread, lock, true)
        {
            return ThreadEntry::Refuse(LockError::UpgradeRefused);
        }
        // A write holder's read re-enters its read holding (re-entrant
        // only), else is a downgrade; a write node it cannot share (Lost,
        // kept) would make the read wait for itself.
        if lock == 1 && t.reader {
            if let Some(write) = self.thread_slot(c, thread, lock, true) {
                if reentrant(&self.options, lock) {
                    if let Some(node) = self.thread_slot(c, thread, lock, false) {
                        return share(node);
                    }
                }
                return ThreadEntry::Downgrade { write };
            }
            if self.thread_holds(c, thread, lock, true) {
                return ThreadEntry::Refuse(LockError::WouldDeadlock);
            }
        }
        let write = !t.reader;
        if reentrant(&self.options, lock) {
            if let Some(node) = self.thread_slot(c, thread, lock, write) {
                return share(node);
            }
        }
        if self.thread_holds(c, thread, lock, write) {
            return ThreadEntry::Refuse(LockError::WouldDeadlock);
        }
        ThreadEntry::Queue
    }

    /// The first poll of a thread's call: a refusal, and a share of a
    /// watched holding, come at once.
    pub(super) fn first_poll(
        &self,
        c: usize,
        id: AttemptId,
        outcome: Option<&Result<Granted, LockError>>,
    ) -> Result<(), Violation> {
        let t = &self.clients[c].attempts[&id];
        match (&t.entry, outcome) {
            (Some(ThreadEntry::Refuse(e)), Some(Err(got))) if got == e => Ok(()),
            (Some(ThreadEntry::Refuse(e)), got) => Err(self.violation(format!(
                "c{c}: #{id} not refused at once with {e:?} (its thread holds the lock): {:?}",
                got.map(|r| r.as_ref().err())
            ))),
            (Some(ThreadEntry::Share { node }), got) if watched(&self.options, t.lock) => match got
            {
                Some(Ok(Granted::One(g))) if g.node_path() == node => Ok(()),
                _ => Err(self.violation(format!(
                    "c{c}: #{id} did not share its thread's watched holding {node} at once"
                ))),
            },
            _ => Ok(()),
        }
    }

    /// A thread's call handed out `granted`: whether it shares a holding
    /// (then its token is that holding's, not a new one).
    pub(super) fn thread_granted(
        &mut self,
        c: usize,
        id: AttemptId,
        granted: &Granted,
    ) -> Result<bool, Violation> {
        let t = &self.clients[c].attempts[&id];
        let (Some(entry), Some(thread), Granted::One(g)) = (&t.entry, t.thread, granted) else {
            return Ok(false);
        };
        let node = g.node_path();
        let sid = self.clients[c].core.session_id();
        match entry {
            ThreadEntry::Refuse(e) => Err(self.violation(format!(
                "c{c}: #{id} granted {node}, but its thread's call must be refused with {e:?}"
            ))),
            ThreadEntry::Share { node: shared } | ThreadEntry::Downgrade { write: shared }
                if shared == node =>
            {
                if g.state() == LockState::Lost {
                    return Err(self.violation(format!(
                        "c{c}: #{id} shares its thread's holding {node}, already Lost"
                    )));
                }
                // A holder that does not watch its node reads it first.
                let read = self.server.last_read(sid, node);
                if !watched(&self.options, t.lock) && read.is_none_or(|at| at < t.started) {
                    return Err(self.violation(format!(
                        "c{c}: #{id} shares its thread's holding {node} without reading it"
                    )));
                }
                // Shared while Suspended: held to a re-read of the node
                // since the holding's suspension, not since this call.
                if g.state() == LockState::Suspended {
                    let client = &self.clients[c];
                    let since = client
                        .attempts
                        .values()
                        .filter(|o| matches!(&o.phase, Phase::Held { node: n, .. } if n == node))
                        .filter_map(|o| o.suspended_at)
                        .min();
                    let t = self.clients[c].attempts.get_mut(&id).expect("present");
                    t.suspended_at = since;
                }
                self.stats.thread_shares += 1;
                Ok(true)
            }
            ThreadEntry::Share { node: shared } => {
                // The read found the node gone (or the holding Lost by
                // then): the call queued for a node of its own, created
                // after that holding ended.
                let ended = self.holding_ended.get(shared).copied();
                if self.live_node(c, shared) || ended.is_none_or(|z| g.fencing_token() <= z) {
                    let shared = shared.clone();
                    return Err(self.violation(format!(
                        "c{c}: #{id} took {node} (created at {}) while its thread's holding {shared} lived (until {ended:?})",
                        g.fencing_token()
                    )));
                }
                self.took_from_queue(c, id, thread, node)
            }
            ThreadEntry::Downgrade { write } => {
                // A read node of its own, which the machine let pass its
                // thread's write node (S1 and exclusion allow it that node).
                if write_node(node) {
                    let write = write.clone();
                    return Err(self.violation(format!(
                        "c{c}: #{id} a write holder's read (of {write}) took {node}, no read node"
                    )));
                }
                let write = write.clone();
                self.clients[c].downgrades.insert(node.to_owned(), write);
                self.took_from_queue(c, id, thread, node)
            }
            ThreadEntry::Queue => self.took_from_queue(c, id, thread, node),
        }
    }

    /// A thread's call took `node` from the queue: a node no other guard
    /// holds, and now the holding its thread shares.
    fn took_from_queue(
        &mut self,
        c: usize,
        id: AttemptId,
        thread: usize,
        node: &str,
    ) -> Result<bool, Violation> {
        if self.live_node(c, node) {
            return Err(self.violation(format!(
                "c{c}: #{id} shares {node}, which its thread did not hold"
            )));
        }
        let client = &mut self.clients[c];
        let (lock, hold) = (client.attempts[&id].lock, client.attempts[&id].hold);
        let write = write_node(node);
        client
            .thread_taken
            .insert((thread, lock, write), node.to_owned());
        // The thread calls again while it holds (no draw: seeds replay):
        // a write holder writes or reads, a reader reads or asks to write.
        // A write holder's read (a downgrade) is held past the write's
        // end, as a downgrade is used: the write goes, the read stays.
        let generation = client.generation;
        let reader = lock == 1 && if write { id % 4 == 1 } else { id % 4 != 3 };
        let downgraded = client.downgrades.contains_key(node);
        self.schedule(
            self.now + hold / 3,
            Action::ThreadCall {
                client: c,
                generation,
                lock,
                thread,
                reader,
                hold: if write && reader { hold } else { hold / 3 },
            },
        );
        // A downgraded read, once its write has gone (two thirds in, its
        // other calls done by then), asks to write again: refused as an
        // upgrade, from what the thread's registry of holdings remembers.
        if downgraded {
            self.schedule(
                self.now + hold * 5 / 6,
                Action::ThreadCall {
                    client: c,
                    generation,
                    lock,
                    thread,
                    reader: false,
                    hold: hold / 12,
                },
            );
        }
        Ok(false)
    }

    /// A thread's call refused: only as the thread's holdings call for it,
    /// or (after a read found the holding it would share gone) as they do
    /// then.
    pub(super) fn thread_refused(
        &self,
        c: usize,
        id: AttemptId,
        error: &LockError,
    ) -> Result<(), Violation> {
        let t = &self.clients[c].attempts[&id];
        match &t.entry {
            Some(ThreadEntry::Refuse(e)) if e == error => Ok(()),
            Some(ThreadEntry::Share { node } | ThreadEntry::Downgrade { write: node })
                if *error == LockError::WouldDeadlock && !self.live_node(c, node) =>
            {
                Ok(())
            }
            // A write call that would have shared its thread's write
            // holding, found gone, while the thread keeps a downgraded read
            // of its own: a reader asking to write, refused as such.
            Some(ThreadEntry::Share { node })
                if *error == LockError::UpgradeRefused
                    && t.lock == 1
                    && !t.reader
                    && !self.live_node(c, node)
                    && t.thread
                        .is_some_and(|thread| self.thread_holds(c, thread, 1, false)) =>
            {
                Ok(())
            }
            entry => Err(self.violation(format!(
                "c{c}: #{id} refused with {error:?}, but its thread's call must do {entry:?}"
            ))),
        }
    }
}
