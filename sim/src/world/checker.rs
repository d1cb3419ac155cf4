//! The invariants, checked after every step (`World::check`), when a
//! holder reads past a third party's deletion, once the faults have
//! stopped (`World::check_end`), and once every client is closed
//! (`World::check_closed`, after close.rs).

use zklock::recipes::{sorted_contenders, LockGuard, NodeKind};

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
            if written > *deleted && watchers.contains(&conn) {
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
                // A holder's horizon never passes the server's expiry.
                // A holder not Lost knows its horizon.
                if let (Some(g), Phase::Held { .. }) = (client.guard(*id), &t.phase) {
                    if g.state() != LockState::Lost && g.valid_until().is_none() {
                        return Err(self.violation(format!(
                            "c{c}: #{id} is {:?} with no valid_until",
                            g.state()
                        )));
                    }
                }
                if let (Some(g), Some(expiry)) =
                    (client.guard(*id), self.server.session_deadline(sid))
                {
                    if let Some(horizon) = g.valid_until() {
                        if horizon > expiry {
                            return Err(self.violation(format!(
                                "c{c}: #{id} valid_until is {:?} past the server's expiry",
                                horizon - expiry
                            )));
                        }
                    }
                }
                if let Phase::Held { state, .. } = &t.phase {
                    // S2: Suspended as soon as the connection is gone...
                    if *state == LockState::Held && client.link.is_none() {
                        return Err(
                            self.violation(format!("c{c}: #{id} says Held with no connection"))
                        );
                    }
                    // ...and Lost within a session timeout of the send
                    // time of the last request the server answered.
                    let proof = client.last_answered_send;
                    if *state != LockState::Lost && self.now > proof + self.timeout(c) {
                        return Err(self.violation(format!(
                            "c{c}: #{id} still {state:?} {:?} after sending the last request the server answered",
                            self.now - proof
                        )));
                    }
                }
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
                if let Some(d) = t.deadline.filter(|_| !unread) {
                    if t.phase == Phase::Waiting && self.now > d {
                        return Err(self.violation(format!(
                            "c{c}: #{id} still waiting past its deadline (started {:?} ago)",
                            self.now - t.started
                        )));
                    }
                }
                let Phase::Held {
                    node,
                    state: LockState::Held,
                    ..
                } = &t.phase
                else {
                    continue;
                };
                if !self.server.session_alive(sid) {
                    return Err(self.violation(format!(
                        "c{c}: #{id} says Held but session {sid:#x} is gone on the server"
                    )));
                }
                // The grant's own record names the client's session.
                if let Some(owner) = client.guard(*id).map(LockGuard::owner_session) {
                    if owner != sid {
                        return Err(self.violation(format!(
                            "c{c}: #{id} says Held for session {owner:#x}, not its client's {sid:#x}"
                        )));
                    }
                }
                if let Some(stat) = self.server.exists(node) {
                    if stat.ephemeral_owner != sid {
                        return Err(self.violation(format!(
                            "c{c}: #{id} says Held by {node}, owned by {:#x}, not by its session {sid:#x}",
                            stat.ephemeral_owner
                        )));
                    }
                }
                if self.server.exists(node).is_none() {
                    // Deleted by a third party: an unwatched holder cannot
                    // know; a watched one is held to it as it reads on
                    // (check_told_of_deletion).
                    if !self.admin_deleted.contains_key(node) {
                        return Err(self.violation(format!(
                            "c{c}: #{id} says Held but its node {node} is gone"
                        )));
                    }
                    continue;
                }
                // S1 read against the whole queue, every session's
                // contenders (a third party's, another client's, the
                // client's own strays) included.
                let leases = if t.lock == LEASE_LOCK { LEASES } else { 1 };
                if let Some(ahead) = queued_ahead(&self.server, node, leases) {
                    return Err(self.violation(format!(
                        "c{c}: #{id} says Held by {node} while {ahead} precedes it"
                    )));
                }
                if let Some(thread) = t.thread {
                    if let Some(&at) = shared.get(&(c, thread, node.as_str())) {
                        let entry: &mut (String, bool) = &mut holders[t.lock][at];
                        entry.1 &= t.reader;
                        continue;
                    }
                    shared.insert((c, thread, node.as_str()), holders[t.lock].len());
                }
                holders[t.lock].push((format!("c{c}#{id}"), t.reader));
            }
        }
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
            if !self.server.session_alive(sid) {
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
        // One writer alone, or any number of readers.
        for (lock, h) in holders.iter().enumerate() {
            let writers = h.iter().filter(|(_, reader)| !reader).count();
            if writers > 1 || (writers == 1 && h.len() > 1) {
                return Err(self.violation(format!("lock {lock} held by {h:?} at once")));
            }
        }
        self.check_own_losses(&holders)
    }

    /// What must hold once every client is closed (close.rs): its core
    /// finished the close and forgets every acquisition, and no node of
    /// its session outlives the close (one asked while disconnected ends
    /// the session here only, and the server expires it later: it must
    /// hold no node meanwhile).
    pub(super) fn check_closed(&self, closed: &[Closing]) -> Result<(), Violation> {
        for one in closed {
            let (c, core) = (one.c, &one.core);
            if !core.is_finished() {
                return Err(self.violation(format!(
                    "c{c}: the core never finished its close (session {:#x} {:?})",
                    core.session_id(),
                    core.state()
                )));
            }
            if core.lock_attempts() != 0 {
                return Err(self.violation(format!(
                    "c{c}: the core still tracks {} attempts after its close",
                    core.lock_attempts()
                )));
            }
            let sid = core.session_id();
            if let Some(path) = self.server.ephemerals_of(sid).first() {
                return Err(self.violation(format!(
                    "c{c}: {path} of session {sid:#x} outlives the close"
                )));
            }
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

/// What stands ahead of `node` in its queue, beyond what its holder may
/// hold past, by the recipes' rules (`zklock::recipes::Rule`) read off
/// the names: for an exclusive holder (a mutex, a writer, an election's
/// candidate) any contender; for a reader, any that excludes readers; for
/// one of `leases` leases, the contenders ahead once they are `leases` or
/// more. `None` when nothing does, or when `node` is no contender there.
fn queued_ahead(server: &SimZooKeeper, node: &str, leases: usize) -> Option<String> {
    let (parent, name) = node.rsplit_once('/')?;
    let queue = sorted_contenders(server.children(parent));
    let at = queue.iter().position(|c| c.name == name)?;
    let ahead = &queue[..at];
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
