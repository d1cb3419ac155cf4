//! Availability, checked as strictly as safety: what must happen when
//! nothing is wrong.
//!
//! - A1: once a client's network and the server have been healthy for one
//!   (negotiated) session timeout, its session is never Suspended or
//!   disconnected and none of its holders changes state.
//! - A2: a try, or a timed wait long enough for its round trips, on a lock
//!   that is free and whose lock-delay has run out since the last unclean
//!   end there, as recorded on the server, is granted (a storm of tries:
//!   one of them). The first grant to see an unclean end records it, so a
//!   try that finds an end not yet recorded may be refused; the probe waits
//!   for the record (docs/GUARANTEES.md, "Lock-delay").
//! - A3: once every client has been healthy for its session timeout, a
//!   lock is never left without a holder while contenders queue for longer
//!   than [`World::idle_bound`] (near the sequence counter's end too); a
//!   semaphore with a lease free and contenders queued grants one within
//!   that bound.
//! - A4: no one is granted a lock while a holder that zklock itself told
//!   Lost (at the counter's end, or for want of contact), its session
//!   alive and its node in place, still has its guard, until its max hold
//!   (if any) has ended.
//! - A6: after a holder's max hold ended with contenders queued, on a
//!   network and server healthy since (as A3 judges them), faults or not,
//!   the lock is not left without a holder for longer than A3's bound
//!   while one of those contenders still queues; a semaphore's grant of
//!   another lease since counts as the hand-on, as it counts as progress
//!   in A3.
//!
//! Healthy means: no fault has touched the client's link (cut, stall,
//! follower cut, close) or the server (restart, a third party's writes)
//! since; `unhealthy_until` records when each fault's effect ends (for a
//! stall, a round trip after it lifts, once what it held back has crossed).

use zklock::recipes::LossReason;
use zklock::SessionState;

use super::super::zookeeper::EPOCH_MS;
use super::client::{MULTI_LOCKS, THREADS, THREAD_LOCKS};
use super::*;

/// A6: a max hold's end on a lock with contenders queued.
#[derive(Debug)]
pub(super) struct MaxHoldEnd {
    lock: usize,
    /// The end, counted from the grant its core reported.
    at: Instant,
    /// The node it ended.
    node: String,
    /// The other contenders queued then.
    queued: BTreeSet<String>,
    /// The nodes holding then (a semaphore's other leases).
    held: BTreeSet<String>,
}

/// Why a probe waits.
#[derive(Debug)]
pub(super) enum Blocked {
    Why(String),
    /// Free, not yet for two round trips.
    Unsettled,
}

/// An A2 probe: tries (or one timed wait) started together on a free lock.
#[derive(Debug)]
pub(super) struct Probe {
    pub(super) lock: usize,
    /// Since when the lock was free with no other contender (the probe
    /// started two round trips later).
    pub(super) started: Instant,
    /// The attempts: (client, attempt).
    pub(super) members: Vec<(usize, AttemptId)>,
    /// Members that timed out.
    pub(super) timed_out: usize,
    /// A member was granted, or ended for a reason of its own (its session
    /// ended, the counter's end): the probe proves nothing more.
    pub(super) decided: bool,
    /// The wait of a timed probe (`None`: a storm of tries).
    pub(super) wait: Option<Duration>,
    /// What the world knew of unclean ends on the lock then.
    pub(super) history: String,
}

impl World {
    /// A fault touches client `client` (every client if `None`) until
    /// `until`.
    pub(super) fn mark_unhealthy(&mut self, client: Option<usize>, until: Instant) {
        for (c, u) in self.unhealthy_until.iter_mut().enumerate() {
            if client.is_none_or(|x| x == c) {
                *u = (*u).max(until);
            }
        }
    }

    /// Where a fault's effect ends, and whom it touches.
    pub(super) fn note_fault_health(&mut self, fault: &Fault) {
        let now = self.now;
        let (who, until) = match *fault {
            Fault::Cut { client, .. } | Fault::Close { client } | Fault::Expire { client } => {
                (Some(client), now)
            }
            // Its writes land within the late limit.
            Fault::LateCut { client } => (Some(client), now + Duration::from_secs(1)),
            // What the stall held back (a handshake, a probe) crosses only
            // after it ends: a request answered then took longer than a
            // healthy link's round trip, which docs/GUARANTEES.md's
            // promise does not cover. The effect ends a round trip later.
            Fault::Stall { client, for_ } | Fault::FollowerCut { client, for_ } => {
                let round_trip =
                    2 * (self.steady_latency(client) + MAX_JITTER) + self.ensemble.max_lag;
                (Some(client), now + for_ + round_trip)
            }
            // Armed only: the stall marks when it comes.
            Fault::StallAfterGrant { .. } => return,
            Fault::Restart | Fault::AdminDelete { .. } => (None, now),
            Fault::ForeignTwin { for_, .. } => (None, now + for_),
        };
        self.mark_unhealthy(who, until);
    }

    /// Whether A1 holds client `c` to its promise now: healthy for one
    /// negotiated session timeout.
    pub(super) fn a1_due(&self, c: usize) -> bool {
        self.now >= self.unhealthy_until[c] + self.timeout(c)
    }

    /// A1, for what the core of client `c` reports of its session.
    pub(super) fn a1_session(&self, c: usize, what: &str) -> Result<(), Violation> {
        if !self.a1_due(c) {
            return Ok(());
        }
        Err(self.violation(format!(
            "A1: c{c}: {what} on a link and server healthy for {:?} (negotiated session timeout {:?}, asked {:?}; steady one-way latency {:?})",
            self.now - self.unhealthy_until[c],
            self.timeout(c),
            self.asked_timeout(c),
            self.steady_latency(c)
        )))
    }

    /// A1, for a holder's state read now (`from` before): no change on a
    /// healthy link, but for a loss zklock decides at the counter's end
    /// (A4 holds that one) and a node a third party deleted.
    pub(super) fn a1_holder(
        &self,
        c: usize,
        id: AttemptId,
        from: LockState,
        to: LockState,
        reason: Option<LossReason>,
        node: &str,
    ) -> Result<(), Violation> {
        // (A batch turn's guard says no reason: its hold's loss near the
        // counter's end is that one.)
        let parent = node.rsplit_once('/').map_or("", |(p, _)| p);
        let near_end = self
            .server
            .sequence_counter(parent)
            .is_some_and(|n| !(0..=zklock::recipes::SEQUENCE_WARNING).contains(&n));
        // (Nor a max hold's end, which comes whatever the link does: a
        // batch turn's guard says no reason, its hold's node ended.)
        let max_held = self.max_hold_end(node).is_some_and(|e| self.now >= e);
        if from == to
            || reason == Some(LossReason::SequenceExhausted)
            || (to == LockState::Lost && max_held)
            || (to == LockState::Lost && reason.is_none() && near_end)
            || self.admin_deleted.contains_key(node)
        {
            return Ok(());
        }
        self.a1_session(
            c,
            &format!("#{id} went from {from:?} to {to:?} ({reason:?})"),
        )
    }

    /// The bound of A3: how long a lock may stay without a holder while
    /// contenders queue, on a healthy network: the lock-delay, and ten
    /// round trips (a release's notification, a sync, a listing, the
    /// delay's listing and mark, a holder's check).
    pub(super) fn idle_bound(&self) -> Duration {
        self.options.lock_delay.unwrap_or_default()
            + 10 * self.max_round_trip()
            + Duration::from_millis(200)
    }

    /// The shortest timed wait (or request timeout of a try) A2 holds to
    /// a grant: enough for the round trips of a grant under lock-delay on
    /// a path whose parents must be made again (a semaphore's: three
    /// containers, its lease, a sync, listings, the marks' parent, the
    /// mark), with room.
    pub(super) fn a2_min_wait(&self) -> Duration {
        16 * self.max_round_trip() + Duration::from_millis(100)
    }

    /// After every step: stale tenure marks, quiet locks, A3, A6.
    pub(super) fn check_available(&mut self) -> Result<(), Violation> {
        self.scan_marks();
        self.check_max_hold_ends()?;
        if self.now < self.faults_until {
            return Ok(());
        }
        self.check_idle_locks()
    }

    /// Finds the lock-delay tenure marks that unclean ends left (a mark
    /// whose attempt has no node left in the queue), and the end each
    /// records: the first grant that sees such a mark records the end on
    /// it (a setData), and that write's mtime, on the server's clock, is
    /// the end `E` the delay counts from (docs/GUARANTEES.md, "Lock-delay").
    fn scan_marks(&mut self) {
        if self.options.lock_delay.is_none() || self.server.last_zxid() == self.marks_scanned {
            return;
        }
        self.marks_scanned = self.server.last_zxid();
        let mut stale = BTreeMap::new();
        for l in 0..self.locks {
            let path = queue_path(l);
            let children = self.server.children(&path);
            let marks = zklock_proto::lock::tenure_path(&path);
            for uuid in self.server.children(&marks) {
                let live = children
                    .iter()
                    .any(|n| n.strip_prefix("_c_").is_some_and(|r| r.starts_with(&uuid)));
                if live {
                    continue;
                }
                let full = format!("{marks}/{uuid}");
                let recorded = self
                    .server
                    .exists(&full)
                    .filter(|st| st.version > 0)
                    .map(|st| {
                        let ms = u64::try_from(st.mtime - EPOCH_MS).unwrap_or(0);
                        self.base + Duration::from_millis(ms)
                    });
                stale.insert(full, recorded);
            }
        }
        self.stale_marks = stale;
    }

    /// Why lock `l`'s delay has not run out: unclean ends not yet recorded
    /// (`None`), or recorded at an end `E` with `E + d` still to come.
    fn delay_pending(&self, l: usize) -> Vec<Option<Duration>> {
        let d = self.options.lock_delay.unwrap_or_default();
        let prefix = format!("{}/", zklock_proto::lock::tenure_path(&queue_path(l)));
        self.stale_marks
            .iter()
            .filter(|(p, end)| p.starts_with(&prefix) && end.is_none_or(|e| e + d > self.now))
            .map(|(_, end)| end.map(|e| e - self.base))
            .collect()
    }

    fn history(&self, l: usize) -> String {
        let prefix = format!("{}/", zklock_proto::lock::tenure_path(&queue_path(l)));
        let ends: Vec<String> = self
            .stale_marks
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .map(|(p, end)| match end {
                Some(e) => format!("{p} recorded an end at {:?}", *e - self.base),
                None => format!("{p} (end not recorded yet)"),
            })
            .collect();
        format!(
            "lock-delay {:?}; unclean ends: {}",
            self.options.lock_delay,
            if ends.is_empty() {
                "none".to_owned()
            } else {
                ends.join(", ")
            }
        )
    }

    /// Whether attempt `t` contends for lock `l` (a multi-lock for both of
    /// its locks).
    fn contends(t: &Tracked, l: usize) -> bool {
        t.lock == l || (MULTI_LOCKS.contains(&l) && matches!(t.handle, Handle::Multi(_)))
    }

    /// The contender nodes queued for lock `l` (tenure marks are none).
    fn contender_nodes(&self, l: usize) -> Vec<String> {
        let mut nodes = self.server.children(&queue_path(l));
        nodes.retain(|n| !n.starts_with('~'));
        nodes
    }

    /// A3, after every step once every client has been healthy for its
    /// session timeout.
    fn check_idle_locks(&mut self) -> Result<(), Violation> {
        let healthy = (0..self.clients.len()).all(|c| self.a1_due(c));
        if !healthy {
            self.idle_since.iter_mut().for_each(|i| *i = None);
            return Ok(());
        }
        let key = (
            self.server.last_zxid(),
            self.clients.iter().map(|c| c.wakes.changes()).sum(),
        );
        if key != self.idle_key {
            self.idle_key = key;
            for l in 0..self.locks {
                let now_idle = self.lock_idle(l, None);
                let granted = match (&self.idle_locks[l], &now_idle) {
                    (Some(before), Some(held)) => held.iter().any(|n| !before.contains(n)),
                    _ => false,
                };
                if granted {
                    // A semaphore granted a lease while another waits:
                    // progress, the wait is counted from here.
                    self.idle_since[l] = None;
                }
                self.idle_locks[l] = now_idle;
            }
        }
        for l in 0..self.locks {
            if self.idle_locks[l].is_none() {
                self.idle_since[l] = None;
                continue;
            }
            let since = *self.idle_since[l].get_or_insert(self.now);
            let bound = self.idle_bound();
            if self.now - since > bound {
                let nodes = self.contender_nodes(l);
                return Err(self.violation(format!(
                    "A3: lock {l} has had no holder for {:?} (bound {bound:?}) while contenders queue ({nodes:?}), on a healthy network; {}",
                    self.now - since,
                    self.history(l)
                )));
            }
        }
        Ok(())
    }

    /// Whether lock `l` has contenders queued and fewer holders than it
    /// has room for (one; a semaphore's leases): if so, its holders' nodes.
    /// `ended`: a node that holds no more, whoever keeps it (A6).
    fn lock_idle(&self, l: usize, ended: Option<&str>) -> Option<BTreeSet<String>> {
        let sessions: Vec<i64> = self.clients.iter().map(|c| c.core.session_id()).collect();
        let nodes = self.contender_nodes(l);
        let parent = queue_path(l);
        let held: BTreeSet<String> = nodes
            .iter()
            .filter(|n| {
                let path = format!("{parent}/{n}");
                if ended == Some(path.as_str()) {
                    return false;
                }
                let owner = self.server.exists(&path).map_or(0, |s| s.ephemeral_owner);
                // A node no current session owns (a third party's, a
                // session on its way out) blocks as a holder would.
                !sessions.contains(&owner)
                    || self.clients.iter().any(|c| {
                        c.wakes.holds(&path)
                            || c.attempts.values().any(
                                |t| matches!(&t.phase, Phase::Held { node, .. } if *node == path),
                            )
                    })
            })
            .cloned()
            .collect();
        let room = if l == LEASE_LOCK { LEASES } else { 1 };
        (!nodes.is_empty() && held.len() < room && held.len() < nodes.len()).then_some(held)
    }

    /// A2: starts a probe of lock `l` once it is free, its delay has run
    /// out, and it has stayed free for two round trips since `free_since`
    /// (an attempt given up just before may still have a create on its
    /// way); else looks again a little later (`left` more times).
    pub(super) fn probe(
        &mut self,
        l: usize,
        wait: Option<Duration>,
        tries: usize,
        left: u32,
        free_since: Option<Instant>,
    ) {
        let now = self.now;
        let settle = 2 * self.max_round_trip();
        let blocked = self.probe_blocked(l, free_since);
        let free_since = match &blocked {
            None => free_since,
            Some(Blocked::Unsettled) => Some(free_since.unwrap_or(now)),
            Some(_) => None,
        };
        let ready = blocked.is_none() && free_since.is_some_and(|f| now >= f + settle);
        if !ready {
            if left > 0 {
                let later = now + Duration::from_millis(150).max(settle);
                self.schedule(
                    later,
                    Action::Probe {
                        lock: l,
                        wait,
                        tries,
                        left: left - 1,
                        free_since,
                    },
                );
            }
            self.note(|| format!("probe of lock {l} put off: {blocked:?}"));
            return;
        }
        let since = free_since.unwrap_or(now);
        let index = self.probes.len();
        let mut members = Vec::new();
        for c in 0..self.clients.len() {
            if members.len() >= tries.max(1) {
                break;
            }
            let short = self.request_timeout(c) < self.a2_min_wait();
            let client = &mut self.clients[c];
            let id = client.next_id;
            let (handle, thread, deadline, is_try) = match wait {
                None => {
                    debug_assert!(THREAD_LOCKS.contains(&l));
                    // A try is bounded by the request timeout: one whose
                    // timeout leaves no room for its round trips on this
                    // link proves nothing.
                    if short {
                        continue;
                    }
                    let Some(thread) = (0..THREADS).find(|&t| !client.thread_in_call(t)) else {
                        continue;
                    };
                    let handle = client.thread_call(l, thread, false, Some(now));
                    let bound = self.options.asked_timeouts[c].max(Duration::from_secs(1));
                    (
                        handle,
                        Some(thread),
                        now + bound + Duration::from_millis(50),
                        true,
                    )
                }
                Some(w) => {
                    let deadline = Some(now + w);
                    let handle = match &client.locks[l] {
                        SimLock::Mutex(m) => Handle::Pending(m.start_lock(deadline)),
                        SimLock::Rw(rw) => Handle::Pending(rw.start_write(deadline)),
                        SimLock::Lease(s) => Handle::Pending(s.start_acquire(deadline)),
                        SimLock::Election(e) => Handle::Pending(e.start_campaign(deadline)),
                    };
                    (handle, None, now + w, false)
                }
            };
            client.next_id += 1;
            let hold = Duration::from_millis(50);
            client.attempts.insert(
                id,
                Tracked {
                    thread,
                    is_try,
                    reader: l == LEASE_LOCK,
                    probe: Some(index),
                    ..Tracked::waiting(l, now, Some(deadline), hold, handle)
                },
            );
            self.schedule(deadline, Action::Look);
            members.push((c, id));
        }
        if members.is_empty() {
            return;
        }
        let history = self.history(l);
        let kind = match wait {
            None => format!("{} tries", members.len()),
            Some(w) => format!("a wait of {w:?}"),
        };
        self.note(|| format!("probe {index}: {kind} of free lock {l}: {members:?} ({history})"));
        self.stats.probes += 1;
        self.probes.push(Probe {
            lock: l,
            started: since,
            members,
            timed_out: 0,
            decided: false,
            wait,
            history,
        });
    }

    /// Why lock `l` cannot be probed now, if it cannot (`Unsettled`: it
    /// is free, and has not been for long, or not since `free_since`).
    fn probe_blocked(&self, l: usize, free_since: Option<Instant>) -> Option<Blocked> {
        let settle = 2 * self.max_round_trip();
        if let Some(c) =
            (0..self.clients.len()).find(|&c| self.now < self.unhealthy_until[c] + settle)
        {
            return Some(Blocked::Why(format!("c{c} not healthy yet")));
        }
        if self.server.has_late_writes() {
            return Some(Blocked::Why("late writes to land".into()));
        }
        if let Some(c) = self
            .clients
            .iter()
            .position(|c| c.link.is_none() || c.core.state() != SessionState::Connected)
        {
            return Some(Blocked::Why(format!("c{c} not connected")));
        }
        let busy = self.clients.iter().any(|c| {
            c.attempts.values().any(|t| {
                Self::contends(t, l)
                    && (matches!(t.phase, Phase::Waiting | Phase::Held { .. })
                        || free_since.is_some_and(|f| t.started >= f))
            })
        });
        if busy || !self.contender_nodes(l).is_empty() {
            return Some(Blocked::Why("not free".into()));
        }
        let pending = self.delay_pending(l);
        if !pending.is_empty() {
            return Some(Blocked::Why(format!(
                "delay not run out since the recorded ends {pending:?}"
            )));
        }
        // Past the warning, the queue cannot be ordered for long: tries
        // may fail closed there (A3 bounds the waits).
        let near_end = self
            .server
            .sequence_counter(&queue_path(l))
            .is_some_and(|n| !(0..=zklock::recipes::SEQUENCE_WARNING).contains(&n));
        if near_end {
            return Some(Blocked::Why("near the sequence counter's end".into()));
        }
        free_since.is_none().then_some(Blocked::Unsettled)
    }

    /// A2, as a probe's attempt `id` of client `c` ends: granted (`None`)
    /// or failed with `error`.
    pub(super) fn probe_outcome(
        &mut self,
        c: usize,
        id: AttemptId,
        error: Option<&LockError>,
    ) -> Result<(), Violation> {
        let Some(index) = self.clients[c].attempts.get(&id).and_then(|t| t.probe) else {
            return Ok(());
        };
        let p = &mut self.probes[index];
        match error {
            Some(LockError::Timeout) => p.timed_out += 1,
            _ => p.decided = true,
        }
        if p.decided || p.timed_out < p.members.len() {
            return Ok(());
        }
        let (l, started) = (p.lock, p.started);
        // Another contender that came meanwhile may have been first.
        let other = self.clients.iter().enumerate().any(|(oc, client)| {
            client.attempts.iter().any(|(oid, t)| {
                Self::contends(t, l)
                    && t.started >= started
                    && t.probe != Some(index)
                    && !(oc == c && *oid == id)
            })
        });
        if other {
            return Ok(());
        }
        let p = &self.probes[index];
        let what = match p.wait {
            None => format!("a storm of {} tries", p.members.len()),
            Some(w) => format!("a wait of {w:?}"),
        };
        Err(self.violation(format!(
            "A2: {what} on lock {l}, free and with its lock-delay run out when started {:?} ago, got no grant (all timed out: {:?}); {}",
            self.now - started,
            p.members,
            p.history
        )))
    }

    /// A4, after the holders of each lock are counted: a holder zklock
    /// told Lost itself (the counter's end, no contact), whose session
    /// lives and whose node no third party deleted, still holds while it
    /// has its guard. `shared` says where in `holders` each thread's
    /// holding of a node counts (see `World::check`): its thread's reads
    /// that passed its node (downgrades) are its own, not others'.
    pub(super) fn check_own_losses(
        &self,
        holders: &[Vec<(String, bool)>],
        shared: &BTreeMap<(usize, usize, &str), usize>,
    ) -> Result<(), Violation> {
        for (c, client) in self.clients.iter().enumerate() {
            let sid = client.core.session_id();
            for (id, t) in &client.attempts {
                let Phase::Held {
                    node,
                    state: LockState::Lost,
                    ..
                } = &t.phase
                else {
                    continue;
                };
                // (At its max hold's end its node goes, kept or not.)
                let ended = self.max_hold_end(node).is_some_and(|e| self.now >= e);
                // The guard's own session, not the client's current one:
                // after an expiry the client is on a new session, and the
                // old one's node went with it.
                let owner = t.handle.lock_guard().map_or(sid, |g| g.owner_session());
                if !t.own_loss
                    || ended
                    || !self.server.session_alive(owner)
                    || self.admin_deleted.contains_key(node)
                {
                    continue;
                }
                // A downgraded read counts with its thread's write holding
                // (as in `World::check`): that holding is its own too.
                let counted = client
                    .downgrades
                    .get(node)
                    .map_or(node.as_str(), String::as_str);
                let downgrades = t
                    .thread
                    .and_then(|thread| shared.get(&(c, thread, counted)));
                let others: Vec<&(String, bool)> = (holders[t.lock].iter().enumerate())
                    .filter(|(at, _)| Some(at) != downgrades)
                    .map(|(_, h)| h)
                    .collect();
                let room = if t.lock == LEASE_LOCK { LEASES } else { 1 };
                let clash = if t.lock == LEASE_LOCK {
                    others.len() + 1 > room
                } else {
                    !others.is_empty() && (!t.reader || others.iter().any(|(_, r)| !r))
                };
                if clash {
                    return Err(self.violation(format!(
                        "A4: lock {} granted to {others:?} while c{c}#{id}, told Lost by zklock's own decision with its session alive and its node {node} in place, still has its guard",
                        t.lock
                    )));
                }
            }
        }
        Ok(())
    }
}

impl World {
    /// A holder of lock `lock` by `node` was told its max hold ended: A6
    /// follows the lock from the end, if contenders queue.
    pub(super) fn note_max_hold_end(&mut self, lock: usize, node: &str) {
        let at = self.max_hold_end(node).unwrap_or(self.now);
        let name = node.rsplit('/').next().unwrap_or(node);
        let queued: BTreeSet<String> = self
            .contender_nodes(lock)
            .into_iter()
            .filter(|n| n != name)
            .collect();
        if !queued.is_empty() {
            self.note(|| format!("A6: {node}'s max hold ended with {queued:?} queued"));
            let held = self.lock_idle(lock, Some(node)).unwrap_or_default();
            self.max_hold_ends.push(MaxHoldEnd {
                lock,
                at,
                node: node.to_owned(),
                queued,
                held,
            });
        }
    }

    /// A6, after every step: each max hold's end is followed while every
    /// client is healthy (as A1 judges it), the lock is without a holder
    /// (as A3 judges it, the ended node holding no more, even if kept) and
    /// a contender queued at the end still queues.
    fn check_max_hold_ends(&mut self) -> Result<(), Violation> {
        if self.max_hold_ends.is_empty() {
            return Ok(());
        }
        let healthy = (0..self.clients.len()).all(|c| self.a1_due(c));
        let bound = self.idle_bound();
        let ends = std::mem::take(&mut self.max_hold_ends);
        let mut followed = Vec::with_capacity(ends.len());
        for end in ends {
            let waiting: Vec<String> = self
                .contender_nodes(end.lock)
                .into_iter()
                .filter(|n| end.queued.contains(n))
                .collect();
            if !healthy || waiting.is_empty() {
                continue;
            }
            // Handed on: the lock has a holder, or a semaphore granted a
            // lease since (as A3 counts progress; A3 follows from there).
            let handed_on = self
                .lock_idle(end.lock, Some(&end.node))
                .is_none_or(|held| held.iter().any(|n| !end.held.contains(n)));
            if handed_on {
                self.stats.max_hold_hand_ons += 1;
                continue;
            }
            if self.now > end.at + bound {
                return Err(self.violation(format!(
                    "A6: lock {} has had no holder for {:?} since the max hold of {} ended (bound {bound:?}) while {waiting:?}, queued then, still queue, on a healthy network; {}",
                    end.lock,
                    self.now - end.at,
                    end.node,
                    self.history(end.lock)
                )));
            }
            followed.push(end);
        }
        self.max_hold_ends = followed;
        Ok(())
    }
}
