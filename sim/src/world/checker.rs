//! The invariants, checked after every step (`World::check`), when a
//! holder reads past a third party's deletion, once the faults have
//! stopped (`World::check_end`), and once every client is closed
//! (`World::check_closed`, after close.rs).

use zklock::recipes::{LockGuard, NodeKind};
use zklock::testing::Core;
use zklock_proto::lock::sorted_contenders;

use super::close::Closing;
use super::*;

impl World {
    /// S1 for watched holders: a holder whose node a third party deleted
    /// says so once it has read what the server wrote after the deletion
    /// (the notification came first).
    pub(super) fn check_told_of_deletion(&self, c: usize, written: u64) -> Result<(), Violation> {
        let Some(conn) = self.clients[c].link.as_ref().map(|l| l.conn) else {
            return Ok(());
        };
        // A follower cut from the leader never hears of the deletion.
        if self.server.is_behind_cut(conn) {
            return Ok(());
        }
        for (id, t) in &self.clients[c].attempts {
            let Phase::Held { node, .. } = &t.phase else {
                continue;
            };
            if !watched(&self.options, t.lock) {
                continue;
            }
            let Some((deleted, watchers)) = self.admin_deleted.get(node) else {
                continue;
            };
            if read_past_deletion((*deleted, watchers), written, conn) {
                if let Some((state, _)) = self.clients[c].held_state(*id) {
                    if state == LockState::Held {
                        return Err(self.violation(format!(
                            "c{c}: #{id} read past the deletion of its node {node} and still says Held"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Invariants after every step.
    pub(super) fn check(&self) -> Result<(), Violation> {
        let mut holders: Vec<Vec<(String, bool)>> = vec![Vec::new(); self.locks];
        // Guards one thread shares (re-entry, a write holder's read) count
        // once, as their one node: (client, thread, node) → where in
        // `holders`.
        let mut shared: BTreeMap<(usize, usize, &str), usize> = BTreeMap::new();
        for (c, client) in self.clients.iter().enumerate() {
            let sid = client.core.session_id();
            for (id, t) in &client.attempts {
                // A batch waiter reads its token at every poll.
                if let (Phase::Waiting, Handle::Batch(..)) = (&t.phase, &t.handle) {
                    if t.token_cancelled {
                        return Err(self.violation(format!(
                            "c{c}: #{id} still waiting after its token was cancelled"
                        )));
                    }
                }
                // (A PendingSet's outcomes are read late on purpose.)
                let unread = matches!(t.handle, Handle::InSet(_));
                let seen = match &t.phase {
                    Phase::Waiting => Seen::Waiting {
                        started: t.started,
                        deadline: t.deadline.filter(|_| !unread),
                    },
                    Phase::Held { node, state, .. } => Seen::Held {
                        node,
                        state: *state,
                    },
                    Phase::Released | Phase::Failed(_) => Seen::Ended,
                };
                let attempt = Attempt {
                    now: self.now,
                    session: sid,
                    linked: client.link.is_some(),
                    proof: client.last_answered_send,
                    timeout: self.timeout(c),
                    expiry: self.server.session_deadline(sid),
                    guard: client.guard(*id),
                    seen,
                    leases: if t.lock == LEASE_LOCK { LEASES } else { 1 },
                    passes: match &t.phase {
                        Phase::Held { node, .. } => client.downgrades.get(node).map(String::as_str),
                        _ => None,
                    },
                };
                let deleted = |node: &str| self.admin_deleted.contains_key(node);
                let holding = check_attempt(&self.server, &attempt, &deleted)
                    .map_err(|what| self.violation(format!("c{c}: #{id} {what}")))?;
                let Some(node) = holding else {
                    continue;
                };
                if let Some(thread) = t.thread {
                    // A downgraded read counts with its thread's write
                    // holding, as a read sharing the write node would.
                    let node = client.downgrades.get(node).map_or(node, String::as_str);
                    if let Some(&at) = shared.get(&(c, thread, node)) {
                        let entry: &mut (String, bool) = &mut holders[t.lock][at];
                        entry.1 &= t.reader;
                        continue;
                    }
                    shared.insert((c, thread, node), holders[t.lock].len());
                }
                holders[t.lock].push((format!("c{c}#{id}"), t.reader));
            }
        }
        self.check_max_holds()?;
        // At most one latch leads, and only while its session lives. A
        // latch whose node a third party deleted may lead on until it
        // hears of it (latch_told_of_deletion holds it to that).
        let all_leaders: Vec<usize> = self
            .clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.latch.as_ref().is_some_and(LeaderLatch::is_leader))
            .map(|(i, _)| i)
            .collect();
        let leaders: Vec<usize> = all_leaders
            .iter()
            .copied()
            .filter(|&c| self.latch_node_deleted(c).is_none())
            .collect();
        if leaders.len() > 1 {
            return Err(self.violation(format!("latches of {leaders:?} lead at once")));
        }
        // A campaign won in the same election is a leader too.
        if let (Some(c), [campaign, ..]) = (leaders.first(), &holders[ELECTION_LOCK][..]) {
            return Err(self.violation(format!(
                "c{c}'s latch leads while {} holds the election",
                campaign.0
            )));
        }
        for &c in &all_leaders {
            let sid = self.clients[c].core.session_id();
            // (Killed by the server at once: as a deletion, it leads on
            // until it reads of it; latch_told_of_deletion holds it to that.)
            if !self.server.session_alive(sid) && self.latch_node_deleted(c).is_none() {
                return Err(self.violation(format!(
                    "c{c}: its latch leads but session {sid:#x} is gone on the server"
                )));
            }
            if self.clients[c].link.is_none() {
                return Err(self.violation(format!("c{c}: its latch leads with no connection")));
            }
        }
        // At most LEASES lease holders.
        if let Some(h) = holders.get(LEASE_LOCK).filter(|h| h.len() > LEASES) {
            return Err(self.violation(format!(
                "lock {LEASE_LOCK} ({LEASES} leases) held by {h:?} at once"
            )));
        }
        for (lock, h) in holders.iter().enumerate() {
            if !exclusive(h) {
                return Err(self.violation(format!("lock {lock} held by {h:?} at once")));
            }
        }
        self.check_own_losses(&holders, &shared)
    }

    /// The grants each core reported in this step, stamped with the time.
    pub(super) fn note_grants(&mut self) {
        for c in 0..self.clients.len() {
            for node in self.clients[c].wakes.take_granted() {
                self.grants.insert(node, self.now);
            }
        }
    }

    /// When `node`'s max hold ends: its grant, as its core reported it,
    /// and the run's max hold.
    pub(super) fn max_hold_end(&self, node: &str) -> Option<Instant> {
        Some(*self.grants.get(node)? + self.options.max_hold?)
    }

    /// S6: no guard says Held, and no latch leads, at or past the max
    /// hold's end of its node (no tolerance: the core is on virtual time),
    /// and no guard's `valid_until` passes it.
    fn check_max_holds(&self) -> Result<(), Violation> {
        if self.options.max_hold.is_none() {
            return Ok(());
        }
        for (c, client) in self.clients.iter().enumerate() {
            for (id, t) in &client.attempts {
                let Phase::Held { node, .. } = &t.phase else {
                    continue;
                };
                let Some(end) = self.max_hold_end(node) else {
                    continue;
                };
                if let Some((LockState::Held, _)) = client.held_state(*id) {
                    if self.now >= end {
                        return Err(self.violation(format!(
                            "c{c}: #{id} says Held {:?} past the max hold's end of {node}",
                            self.now - end
                        )));
                    }
                }
                let until = client.guard(*id).and_then(LockGuard::valid_until);
                if let Some(until) = until.filter(|u| *u > end) {
                    return Err(self.violation(format!(
                        "c{c}: #{id} has valid_until {:?} past the max hold's end of {node}",
                        until - end
                    )));
                }
            }
            if !client.latch.as_ref().is_some_and(LeaderLatch::is_leader) {
                continue;
            }
            // Its newest node is the one it may lead by.
            let newest = self
                .server
                .children(LATCH_PATH)
                .iter()
                .filter(|n| self.is_latch_node(c, n))
                .filter_map(|n| self.max_hold_end(&format!("{LATCH_PATH}/{n}")))
                .max();
            if let Some(end) = newest.filter(|e| self.now >= *e) {
                return Err(self.violation(format!(
                    "c{c}: its latch leads {:?} past the max hold's end of its newest node",
                    self.now - end
                )));
            }
        }
        Ok(())
    }

    /// What must hold once every client is closed (close.rs): its core
    /// finished the close and forgets every acquisition, and no node of
    /// its session outlives the close (one asked while disconnected ends
    /// the session here only, and the server expires it later: it must
    /// hold no node meanwhile).
    pub(super) fn check_closed(&self, closed: &[Closing]) -> Result<(), Violation> {
        for one in closed {
            check_closed(&self.server, &one.core)
                .map_err(|what| self.violation(format!("c{}: {what}", one.c)))?;
        }
        Ok(())
    }

    /// What must hold once the world has settled.
    pub(super) fn check_end(&self) -> Result<(), Violation> {
        for (c, client) in self.clients.iter().enumerate() {
            for (id, t) in &client.attempts {
                match &t.phase {
                    Phase::Waiting => {
                        return Err(self.violation(format!(
                            "c{c}: #{id} never served after the faults stopped (queue {:?}; watches {:?})",
                            self.server.children(&queue_path(t.lock)),
                            self.server.watched_paths()
                        )))
                    }
                    Phase::Held { node, state, .. } if *state != LockState::Lost => {
                        return Err(self.violation(format!(
                            "c{c}: #{id} still {state:?} on {node} at the end"
                        )))
                    }
                    _ => {}
                }
            }
            if client.core.lock_attempts() != 0 {
                return Err(self.violation(format!(
                    "c{c}: the core still tracks {} attempts",
                    client.core.lock_attempts()
                )));
            }
        }
        let latch_left = self.server.children(LATCH_PATH);
        if !latch_left.is_empty() {
            return Err(self.violation(format!("nodes left under {LATCH_PATH}: {latch_left:?}")));
        }
        // (Lock-delay's tenure marks live beside the lock path: none is
        // ever a child of it.)
        for l in 0..self.locks {
            let left = self.server.children(&queue_path(l));
            if !left.is_empty() {
                return Err(self.violation(format!("nodes left under {}: {left:?}", queue_path(l))));
            }
        }
        // A holder near the counter's end keeps a child watch on its lock
        // path; if a third party deleted its node, its own delete changes
        // nothing and that watch stays on the server (one per connection
        // and path, gone at the next change there).
        let near_end = |p: &String| {
            (0..self.locks).any(|l| &queue_path(l) == p)
                && self
                    .server
                    .sequence_counter(p)
                    .is_some_and(|c| !(0..=zklock::recipes::SEQUENCE_WARNING).contains(&c))
        };
        // Semaphore waiters list the lease queue with a child watch; one
        // queued while disconnected leaves when the connection is back,
        // even if its attempt was given up meanwhile, and its watch then
        // waits for a change that may never come. Bounded the same way:
        // one per connection, gone at the next change.
        let lease_queue = |p: &String| *p == queue_path(LEASE_LOCK);
        // An observer's last look leaves a watch on the election (its
        // children, or the path while it has none) that fires only at the
        // next change there, which may never come.
        let observed = self.stats.observes > 0;
        let latch_watches = if observed {
            self.server.child_watch_count(LATCH_PATH) + self.server.data_watchers(LATCH_PATH).len()
        } else {
            0
        };
        let left = self.server.watched_paths();
        let excused: usize = left
            .iter()
            .filter(|p| near_end(p) || lease_queue(p))
            .map(|p| self.server.child_watch_count(p))
            .sum();
        let watches = self
            .server
            .watch_count()
            .saturating_sub(excused + latch_watches);
        if watches != 0 {
            return Err(self.violation(format!(
                "{watches} watches left on the server: {:?}",
                self.server.watched_paths()
            )));
        }
        Ok(())
    }
}

// ---- the checks every driver shares -------------------------------------
//
// The world above and the byte-script driver (crate::script) both read
// their clients through these: one checker, whoever drives the core.

/// One acquisition as a driver sees it, for [`check_attempt`].
pub(crate) struct Attempt<'a> {
    pub(crate) now: Instant,
    /// Its client's session (the core's), and whether the client has a
    /// connection.
    pub(crate) session: i64,
    pub(crate) linked: bool,
    /// When the newest request the server answered was sent (the
    /// handshake's included), and the session timeout the server grants:
    /// the server may have heard nothing later, and expire the session a
    /// timeout after it.
    pub(crate) proof: Instant,
    pub(crate) timeout: Duration,
    /// The earliest moment the server may expire the session, while it
    /// lives there (the model's deadline, or sooner where the driver knows
    /// a real server could): a holder's horizon never passes it.
    pub(crate) expiry: Option<Instant>,
    /// Its guard, when it holds through one (a batch turn holds through
    /// its process's).
    pub(crate) guard: Option<&'a LockGuard>,
    pub(crate) seen: Seen<'a>,
    /// How many may hold its lock at once: a semaphore's leases, else 1.
    pub(crate) leases: usize,
    /// A node of its session it may hold past: for a write holder's read
    /// (a downgrade), its thread's write node.
    pub(crate) passes: Option<&'a str>,
}

/// What the driver last read of an acquisition's handle.
pub(crate) enum Seen<'a> {
    /// Still waiting, since `started`; `deadline`: the moment by which its
    /// outcome must have come, if the driver holds it to one.
    Waiting {
        started: Instant,
        deadline: Option<Instant>,
    },
    /// Handed out: its node, and the state its guard said.
    Held { node: &'a str, state: LockState },
    /// Ended (released, or failed).
    Ended,
}

/// The invariants of one acquisition after a step (S1, S2 and the
/// horizon), against the server's tree and sessions. `deleted`: whether
/// a third party deleted a node (its holder may say Held on until it
/// reads of it). `Ok(Some(node))` when it holds by a node that is there,
/// which the driver then counts among the lock's holders; `Err` says
/// what broke, to follow the attempt's name.
pub(crate) fn check_attempt<'a>(
    server: &SimZooKeeper,
    a: &Attempt<'a>,
    deleted: &dyn Fn(&str) -> bool,
) -> Result<Option<&'a str>, String> {
    let sid = a.session;
    if let Some(g) = a.guard {
        // S5: a guard of a session its client has moved on from (the
        // session expired and a new one is being opened, or is open) is
        // Lost, for good: the new session is never opened under it.
        let owner = g.owner_session();
        if owner != sid && g.state() != LockState::Lost {
            return Err(format!(
                "S5: says {:?} for session {owner:#x}, but its client has moved on to {sid:#x}",
                g.state()
            ));
        }
        // A holder not Lost knows its horizon.
        if matches!(a.seen, Seen::Held { .. })
            && g.state() != LockState::Lost
            && g.valid_until().is_none()
        {
            return Err(format!("is {:?} with no valid_until", g.state()));
        }
        // A holder's horizon never passes the server's expiry.
        if let (Some(horizon), Some(expiry)) = (g.valid_until(), a.expiry) {
            if horizon > expiry {
                return Err(format!(
                    "valid_until is {:?} past the server's expiry",
                    horizon - expiry
                ));
            }
        }
    }
    let (node, state) = match a.seen {
        Seen::Waiting {
            started,
            deadline: Some(d),
        } if a.now > d => {
            return Err(format!(
                "still waiting past its deadline (started {:?} ago)",
                a.now - started
            ));
        }
        Seen::Held { node, state } => (node, state),
        Seen::Waiting { .. } | Seen::Ended => return Ok(None),
    };
    // S2: Suspended as soon as the connection is gone...
    if state == LockState::Held && !a.linked {
        return Err("says Held with no connection".into());
    }
    // ...and Lost within a session timeout of the send time of the last
    // request the server answered.
    if state != LockState::Lost && a.now > a.proof + a.timeout {
        return Err(format!(
            "still {state:?} {:?} after sending the last request the server answered",
            a.now - a.proof
        ));
    }
    if state != LockState::Held {
        return Ok(None);
    }
    // (A session the server killed at once takes its nodes with it: as
    // with a third party's deletion, its holder cannot know before it
    // reads of it.)
    if !server.session_alive(sid) && !deleted(node) {
        return Err(format!(
            "says Held but session {sid:#x} is gone on the server"
        ));
    }
    // The grant's own record names the client's session.
    if let Some(owner) = a.guard.map(LockGuard::owner_session) {
        if owner != sid {
            return Err(format!(
                "says Held for session {owner:#x}, not its client's {sid:#x}"
            ));
        }
    }
    let Some(stat) = server.exists(node) else {
        // Deleted by a third party: an unwatched holder cannot know; a
        // watched one is held to it as it reads on (read_past_deletion).
        if !deleted(node) {
            return Err(format!("says Held but its node {node} is gone"));
        }
        return Ok(None);
    };
    if stat.ephemeral_owner != sid {
        return Err(format!(
            "says Held by {node}, owned by {:#x}, not by its session {sid:#x}",
            stat.ephemeral_owner
        ));
    }
    // S1 read against the whole queue, every session's contenders (a
    // third party's, another client's, the client's own strays) included.
    let passes = a
        .passes
        .filter(|p| server.exists(p).is_some_and(|s| s.ephemeral_owner == sid));
    if let Some(ahead) = queued_ahead(server, node, a.leases, passes) {
        return Err(format!("says Held by {node} while {ahead} precedes it"));
    }
    Ok(Some(node))
}

/// The holders of one lock at once, each named and said a reader (or a
/// lease's) or not: one writer alone, or any number of readers.
pub(crate) fn exclusive(holders: &[(String, bool)]) -> bool {
    let writers = holders.iter().filter(|(_, reader)| !reader).count();
    writers == 0 || (writers == 1 && holders.len() == 1)
}

/// S1 for watched holders: whether a holder on connection `conn` that
/// has read the server's write number `written` has read past a third
/// party's deletion of its node, recorded as the number of the server's
/// last write before it and the connections that had a data watch on the
/// node then. (Numbers count the frames the server wrote, in order.)
pub(crate) fn read_past_deletion(
    (before, watchers): (u64, &[ConnId]),
    written: u64,
    conn: ConnId,
) -> bool {
    written > before && watchers.contains(&conn)
}

/// What must hold of a client's core once its application let go of
/// everything and the core had its time: it finished its close, it
/// forgets every acquisition, and no node of its session outlives the
/// close (a close asked while disconnected ends the session here only,
/// and the server expires it later: it must hold no node meanwhile).
pub(crate) fn check_closed(server: &SimZooKeeper, core: &Core) -> Result<(), String> {
    if !core.is_finished() {
        return Err(format!(
            "the core never finished its close (session {:#x} {:?})",
            core.session_id(),
            core.state()
        ));
    }
    if core.lock_attempts() != 0 {
        return Err(format!(
            "the core still tracks {} attempts after its close",
            core.lock_attempts()
        ));
    }
    let sid = core.session_id();
    if let Some(path) = server.ephemerals_of(sid).first() {
        return Err(format!("{path} of session {sid:#x} outlives the close"));
    }
    Ok(())
}

/// What stands ahead of `node` in its queue, beyond what its holder may
/// hold past, by the recipes' rules (`zklock::recipes::Rule`) read off
/// the names: for an exclusive holder (a mutex, a writer, an election's
/// candidate) any contender; for a reader, any that excludes readers; for
/// one of `leases` leases, the contenders ahead once they are `leases` or
/// more; `passes` (a node of the holder's session) never stands in its
/// way. `None` when nothing does, or when `node` is no contender there.
fn queued_ahead(
    server: &SimZooKeeper,
    node: &str,
    leases: usize,
    passes: Option<&str>,
) -> Option<String> {
    let (parent, name) = node.rsplit_once('/')?;
    let queue = sorted_contenders(server.children(parent));
    let at = queue.iter().position(|c| c.name == name)?;
    let passed = passes.and_then(|p| p.strip_prefix(parent)?.strip_prefix('/'));
    let ahead: Vec<_> = queue[..at]
        .iter()
        .filter(|c| Some(c.name.as_str()) != passed)
        .collect();
    let blocking: Vec<&str> = match queue[at].kind {
        NodeKind::Read => ahead
            .iter()
            .filter(|c| c.kind.blocks_readers())
            .map(|c| c.name.as_str())
            .collect(),
        NodeKind::Lease if ahead.len() < leases.max(1) => Vec::new(),
        _ => ahead.iter().map(|c| c.name.as_str()).collect(),
    };
    let nearest = blocking.last()?;
    Some(if blocking.len() == 1 {
        format!("{parent}/{nearest}")
    } else {
        format!("{parent}/{nearest} (and {} more)", blocking.len() - 1)
    })
}
