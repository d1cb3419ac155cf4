//! Reading a client's handles as its application would: the outcomes of
//! pending acquisitions (one lock, a multi-lock, or a key of the client's
//! `PendingSet`) and the states of its guards, each checked as it is read.

use zklock::recipes::{BatchGuard, LockGuard, MultiGuard};

use super::*;
use client::MULTI_LOCKS;

/// What an acquisition handed out.
pub(super) enum Granted {
    One(LockGuard),
    Multi(MultiGuard),
    /// A local turn inside the client's batch hold.
    Batch(BatchGuard),
}

/// One lock of a grant: the lock, our node, its token and state.
struct Part {
    lock: usize,
    node: String,
    czxid: i64,
    state: LockState,
}

impl Granted {
    fn parts(&self, lock: usize) -> Vec<Part> {
        let part = |lock, g: &LockGuard| Part {
            lock,
            node: g.node_path().to_owned(),
            czxid: g.fencing_token(),
            state: g.state(),
        };
        match self {
            Granted::One(g) => vec![part(lock, g)],
            Granted::Multi(m) => MULTI_LOCKS
                .iter()
                .zip(m.guards())
                .map(|(&l, g)| part(l, g))
                .collect(),
            Granted::Batch(g) => vec![Part {
                lock,
                node: g.node_path().to_owned(),
                czxid: g.fencing_token(),
                state: g.state(),
            }],
        }
    }
}

impl World {
    /// Reads every handle of client `c`: outcomes of pending acquisitions,
    /// and the states of guards.
    pub(super) fn collect(&mut self, c: usize, read_set: bool) -> Result<(), Violation> {
        let now = self.now;
        // The application reads its PendingSet now and then, so a key can
        // be cancelled while its guard waits unread in the set; and only
        // while it waits for one of its keys, as an application would.
        let mut from_set = BTreeMap::new();
        let waits = self.clients[c]
            .attempts
            .values()
            .any(|t| matches!(t.handle, Handle::InSet(_)));
        let drained = waits && (read_set || self.rng.chance(1, 3));
        if drained {
            while let Some((key, outcome)) = self.clients[c].set.try_recv() {
                from_set.insert(key, outcome);
            }
        }
        let ids: Vec<AttemptId> = self.clients[c].attempts.keys().copied().collect();
        for id in ids {
            // A thread's call polled for the first time: what its thread
            // holds now decides what it must do.
            let first = {
                let t = &self.clients[c].attempts[&id];
                t.entry.is_none() && matches!(t.handle, Handle::Thread(_))
            };
            if first {
                let entry = self.thread_entry(c, id);
                self.clients[c]
                    .attempts
                    .get_mut(&id)
                    .expect("present")
                    .entry = Some(entry);
            }
            let read = self.clients[c].held_state(id);
            let t = self.clients[c].attempts.get_mut(&id).expect("present");
            let outcome = match &mut t.handle {
                Handle::Pending(p) => p.try_take().map(|r| r.map(Granted::One)),
                Handle::InSet(key) => from_set.remove(key).map(|r| r.map(Granted::One)),
                Handle::Multi(p) => p.try_take().map(|r| r.map(Granted::Multi)),
                // On the world's clock: its deadline is this waiter's own.
                Handle::Batch(p, _) => p.try_take_at(now).map(|r| r.map(Granted::Batch)),
                // So is the deadline of the read that confirms a holding.
                Handle::Thread(p) => p.try_take_at(now).map(|r| r.map(Granted::One)),
                _ => None,
            };
            let waiting = matches!(
                t.handle,
                Handle::Pending(_)
                    | Handle::InSet(_)
                    | Handle::Multi(_)
                    | Handle::Batch(..)
                    | Handle::Thread(_)
            );
            if first {
                self.first_poll(c, id, outcome.as_ref())?;
            }
            match read {
                _ if waiting => match outcome {
                    None => {}
                    Some(Ok(granted)) => self.granted(c, id, granted)?,
                    Some(Err(error)) => self.failed(c, id, error)?,
                },
                Some((state, reason)) => self.read_state(c, id, state, reason)?,
                None => {}
            }
        }
        if let Some(key) = from_set.keys().next() {
            return Err(self.violation(format!(
                "c{c}: the PendingSet handed out key {key}, which no attempt waits on"
            )));
        }
        if drained {
            self.check_set_drained(c)?;
        }
        Ok(())
    }

    /// After the application read every outcome its PendingSet had: the
    /// set counts exactly the keys still waiting, and none of them is past
    /// its deadline (its outcome, a timeout at the latest, came by then).
    fn check_set_drained(&self, c: usize) -> Result<(), Violation> {
        let client = &self.clients[c];
        let open: Vec<(AttemptId, Option<Instant>)> = client
            .attempts
            .iter()
            .filter(|(_, t)| matches!(t.handle, Handle::InSet(_)))
            .map(|(id, t)| (*id, t.deadline))
            .collect();
        if client.set.len() != open.len() || client.set.is_empty() != open.is_empty() {
            return Err(self.violation(format!(
                "c{c}: the PendingSet counts {} open keys, {} waiting in it",
                client.set.len(),
                open.len()
            )));
        }
        if let Some((id, _)) = open.iter().find(|(_, d)| d.is_some_and(|d| self.now > d)) {
            return Err(self.violation(format!(
                "c{c}: #{id} not handed out by the PendingSet past its deadline"
            )));
        }
        Ok(())
    }

    /// Attempt `id` of client `c` ended without a guard.
    fn failed(&mut self, c: usize, id: AttemptId, error: LockError) -> Result<(), Violation> {
        let now = self.now;
        let t = &self.clients[c].attempts[&id];
        let by_token = t.token_cancelled;
        if error == LockError::Cancelled && !by_token {
            return Err(self.violation(format!(
                "c{c}: #{id} says Cancelled, but nothing cancelled it"
            )));
        }
        if error == LockError::Cancelled {
            self.stats.token_cancels += 1;
        }
        if error == LockError::Timeout {
            self.stats.timeouts += 1;
            if !t.is_try && t.deadline.is_none_or(|d| now < d) {
                return Err(self.violation(format!("c{c}: #{id} timed out off its deadline")));
            }
        }
        // The client's own timeout: a request unanswered for the request
        // timeout (the session timeout here), never sooner.
        if error == LockError::Client(zklock::Error::Timeout)
            && now < t.started + self.request_timeout(c)
        {
            return Err(self.violation(format!(
                "c{c}: #{id} failed with the request timeout {:?} after it started",
                now - t.started
            )));
        }
        // A refusal comes at once (first_poll), and only as its thread's
        // holdings call for it.
        if matches!(error, LockError::WouldDeadlock | LockError::UpgradeRefused) {
            self.thread_refused(c, id, &error)?;
            self.stats.thread_refusals += 1;
        }
        self.probe_outcome(c, id, Some(&error))?;
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        t.phase = Phase::Failed(error.clone());
        t.handle = Handle::None;
        self.note(|| format!("c{c}: #{id} failed: {error:?}"));
        Ok(())
    }

    /// Attempt `id` of client `c` was granted: its parts are checked and
    /// tracked (a multi-lock's later parts as attempts of their own), and
    /// its release is planned.
    fn granted(&mut self, c: usize, id: AttemptId, granted: Granted) -> Result<(), Violation> {
        let now = self.now;
        let generation = self.clients[c].generation;
        self.probe_outcome(c, id, None)?;
        // A thread's call may share its thread's holding, token and all.
        let shared = self.thread_granted(c, id, &granted)?;
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        let read_late = matches!(t.handle, Handle::InSet(_));
        // A batch waiter polled past its deadline acts as a try: a local
        // turn that needs no waiting is still handed out (its own check:
        // no other local turn inside, which exclusion below holds it to).
        let batch = matches!(granted, Granted::Batch(_));
        if t.token_cancelled {
            return Err(self.violation(format!(
                "c{c}: #{id} handed out a batch turn after its token was cancelled"
            )));
        }
        if let Some(d) = t.deadline.filter(|_| !read_late && !batch) {
            if now > d {
                return Err(self.violation(format!("c{c}: #{id} granted after its deadline")));
            }
        }
        let (lock, hold, reader) = (t.lock, t.hold, t.reader);
        let parts = granted.parts(lock);
        // A multi-lock is all or nothing: a part lost while a later one was
        // awaited fails the whole.
        let multi = matches!(granted, Granted::Multi(_));
        if let Some(lost) = parts.iter().find(|p| multi && p.state == LockState::Lost) {
            return Err(self.violation(format!(
                "c{c}: #{id} handed out a multi-lock whose part {} is Lost",
                lost.node
            )));
        }
        if let Granted::Multi(m) = &granted {
            self.stats.multi_grants += 1;
            if m.len() != MULTI_LOCKS.len() || m.is_empty() {
                return Err(self.violation(format!(
                    "c{c}: #{id} a multi-lock of {} locks says it has {} parts",
                    MULTI_LOCKS.len(),
                    m.len()
                )));
            }
        }
        t.handle = match granted {
            Granted::One(g) => Handle::Guard(g),
            Granted::Multi(m) => Handle::MultiHeld(m),
            Granted::Batch(g) => Handle::BatchHeld(g),
        };
        for (index, part) in parts.into_iter().enumerate() {
            let part_id = if index == 0 {
                id
            } else {
                let client = &mut self.clients[c];
                let member = client.next_id;
                client.next_id += 1;
                let handle = Handle::Member { of: id, index };
                client
                    .attempts
                    .insert(member, Tracked::waiting(part.lock, now, None, hold, handle));
                member
            };
            // Local turns of one hold share its node and token.
            let shared_hold =
                batch && self.clients[c].last_batch_node.as_deref() == Some(part.node.as_str());
            if batch {
                // A turn is never handed out on a hold already Lost, and
                // one hold serves at most MAX_BATCH turns.
                if part.state == LockState::Lost {
                    return Err(self.violation(format!(
                        "c{c}: #{id} handed out a batch turn on a Lost hold ({})",
                        part.node
                    )));
                }
                let client = &mut self.clients[c];
                client.batch_run = if shared_hold { client.batch_run + 1 } else { 1 };
                if client.batch_run > client::MAX_BATCH {
                    let run = client.batch_run;
                    return Err(self.violation(format!(
                        "c{c}: #{id} is turn {run} inside one hold of {} (at most {})",
                        part.node,
                        client::MAX_BATCH
                    )));
                }
                client.last_batch_node = Some(part.node.clone());
                if shared_hold && part.state == LockState::Suspended {
                    let since = client.batch_suspended_at;
                    if let Some(t) = client.attempts.get_mut(&part_id) {
                        t.suspended_at = since;
                    }
                }
                self.stats.batch_turns += 1;
                self.stats.batch_handoffs += u64::from(shared_hold);
            }
            self.granted_part(c, part_id, part, reader, read_late || shared_hold || shared)?;
        }
        // (Only while faults happen: the tail stays healthy.)
        if let Some(for_) = self.clients[c].stall_after_grant.take() {
            if now < self.faults_until {
                self.fault(Fault::Stall { client: c, for_ });
            }
        }
        self.schedule(
            now + hold,
            Action::Release {
                client: c,
                generation,
                id,
            },
        );
        self.plan_holder_calls(c, id, hold);
        Ok(())
    }

    /// One lock of a grant: now Held, with a fencing token above every
    /// earlier holder's.
    fn granted_part(
        &mut self,
        c: usize,
        id: AttemptId,
        part: Part,
        reader: bool,
        read_late: bool,
    ) -> Result<(), Violation> {
        let Part {
            lock,
            node,
            czxid,
            state,
        } = part;
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        t.phase = Phase::Held {
            node: node.clone(),
            czxid,
            state,
        };
        self.stats.grants += 1;
        self.stats.lock_grants[lock] += 1;
        // A third party deleted the node after the listing that granted it
        // was taken: the grant is stale (found out one read later), and its
        // token may be old. A PendingSet read late may hand out a grant
        // after later ones (even already Lost): its place in the order of
        // tokens is not the reading's. Tokens are checked on the other two
        // thirds; a late guard still Held is held to S1 and to exclusion
        // from this step on.
        let stale = self.admin_deleted.contains_key(&node) || read_late;
        let floor = if reader {
            self.last_writer_token[lock]
        } else {
            self.last_token[lock]
        };
        if !stale && czxid <= floor {
            return Err(self.violation(format!(
                "c{c}: #{id} fencing token {czxid} not above {floor} (holding {node}; queue {:?})",
                self.server.children(&queue_path(lock))
            )));
        }
        if !stale {
            self.last_token[lock] = self.last_token[lock].max(czxid);
            if !reader {
                self.last_writer_token[lock] = czxid;
            }
        }
        self.note(|| format!("c{c}: #{id} holds lock {lock} as {node} (token {czxid})"));
        Ok(())
    }

    /// A guard's state as read now, against what was read before.
    fn read_state(
        &mut self,
        c: usize,
        id: AttemptId,
        state: LockState,
        reason: Option<zklock::recipes::LossReason>,
    ) -> Result<(), Violation> {
        let now = self.now;
        let sid = self.clients[c].core.session_id();
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        let Phase::Held { state: s, node, .. } = &mut t.phase else {
            return Ok(());
        };
        // Lost, and why: a node said deleted is gone (or not ours).
        if state == LockState::Lost && *s != LockState::Lost {
            let node = node.clone();
            let reason = reason.or_else(|| self.clients[c].held_state(id).and_then(|(_, r)| r));
            let batch = matches!(self.clients[c].attempts[&id].handle, Handle::BatchHeld(_));
            if reason.is_none() && !batch {
                return Err(self.violation(format!("c{c}: #{id} Lost with no reason")));
            }
            let ours = self
                .server
                .exists(&node)
                .is_some_and(|st| st.ephemeral_owner == sid);
            if reason == Some(zklock::recipes::LossReason::NodeDeleted) && ours {
                return Err(self.violation(format!(
                    "c{c}: #{id} Lost as deleted, but its node {node} is there and ours"
                )));
            }
        }
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        let Phase::Held { state: s, node, .. } = &mut t.phase else {
            return Ok(());
        };
        if *s == state {
            return Ok(());
        }
        if *s == LockState::Lost {
            return Err(self.violation(format!("c{c}: #{id} back from Lost")));
        }
        let (from, node) = (*s, node.clone());
        self.a1_holder(c, id, from, state, reason, &node)?;
        if state == LockState::Lost && reason == Some(zklock::recipes::LossReason::MaxHold) {
            self.stats.max_hold_ends += 1;
            let lock = self.clients[c].attempts[&id].lock;
            self.note_max_hold_end(lock, &node);
        }
        // A loss zklock decides itself (the counter's end, no contact for
        // a session timeout), the session alive and the node in place: A4
        // counts the guard a holder until it goes.
        let decided = matches!(
            reason,
            Some(
                zklock::recipes::LossReason::SequenceExhausted
                    | zklock::recipes::LossReason::NoContact
            )
        );
        if state == LockState::Lost && decided {
            let own = self.server.session_alive(sid)
                && self
                    .server
                    .exists(&node)
                    .is_some_and(|st| st.ephemeral_owner == sid);
            let t = self.clients[c].attempts.get_mut(&id).expect("present");
            t.own_loss = own;
        }
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        let Phase::Held { state: s, node, .. } = &mut t.phase else {
            return Ok(());
        };
        // S3: back to Held only after reading the node again.
        if (*s, state) == (LockState::Suspended, LockState::Held) {
            let since = t.suspended_at.unwrap_or(t.started);
            let parent = node.rsplit_once('/').map_or("", |(p, _)| p);
            let read = [node.as_str(), parent]
                .iter()
                .filter_map(|p| self.server.last_read(sid, p))
                .any(|at| at >= since);
            if !read {
                let node = node.clone();
                return Err(self.violation(format!(
                    "c{c}: #{id} Held again after Suspended without reading {node}"
                )));
            }
        }
        let t = self.clients[c].attempts.get_mut(&id).expect("present");
        let Phase::Held { state: s, .. } = &mut t.phase else {
            return Ok(());
        };
        let batch = matches!(t.handle, Handle::BatchHeld(_));
        if state == LockState::Suspended {
            t.suspended_at = Some(now);
        }
        // (Only the guard the thread took from the queue: a guard that
        // shares it turns Suspended with it, and would call again too.)
        let took = matches!(t.entry, Some(ThreadEntry::Queue));
        let call_again = (state == LockState::Suspended && t.lock == 1 && took)
            .then_some(t.thread)
            .flatten()
            .map(|thread| (thread, t.reader));
        *s = state;
        if batch && state == LockState::Suspended {
            self.clients[c].batch_suspended_at = Some(now);
        }
        if state == LockState::Lost {
            self.stats.lost += 1;
        }
        self.note(|| format!("c{c}: #{id} {state:?} {reason:?}"));
        if let Some((thread, reader)) = call_again {
            // The thread calls again while its unwatched holding is
            // Suspended: the read that must come first may be answered
            // only after the holding turned Lost (a reconnect in the last
            // margin of the session), and then it must not share it.
            self.schedule(
                now,
                Action::ThreadCall {
                    client: c,
                    generation: self.clients[c].generation,
                    lock: 1,
                    thread,
                    reader,
                    hold: self.timeout(c),
                },
            );
        }
        Ok(())
    }
}
