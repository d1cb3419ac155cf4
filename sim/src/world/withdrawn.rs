//! Prompt withdrawal. An acquisition given up (cancelled, timed out, its
//! handle or guard dropped, a set or latch dropped) must take its node off
//! the queue at once, not when the node would have been granted: a node
//! left there blocks every client behind it. The end-of-run check cannot
//! see a late withdrawal (the runner releases what is granted to nobody),
//! so this one looks whenever a client is quiet: connected, nothing on the
//! wire either way, nothing left for its core to do. Then its session's
//! nodes in each queue are at most the acquisitions still open there.

use super::client::MULTI_LOCKS;
use super::*;

impl World {
    /// The check above, for every quiet client; how many were.
    pub(super) fn check_withdrawn(&mut self) -> Result<u64, Violation> {
        // Writes of a dropped connection may still land (late.rs).
        if self.server.has_late_writes() {
            return Ok(0);
        }
        let mut looked = 0;
        let mut seen = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            if !self.quiet(c) {
                continue;
            }
            let sid = client.core.session_id();
            if !self.server.session_alive(sid) {
                continue;
            }
            looked += 1;
            let mut open: BTreeMap<String, usize> = BTreeMap::new();
            for t in client.attempts.values() {
                if !matches!(t.phase, Phase::Waiting | Phase::Held { .. }) {
                    continue;
                }
                *open.entry(queue_path(t.lock)).or_default() += 1;
                // A waiting multi-lock is tracked on its first part only.
                if matches!(t.handle, Handle::Multi(_)) {
                    *open.entry(queue_path(MULTI_LOCKS[1])).or_default() += 1;
                }
            }
            if client.latch.is_some() {
                *open.entry(LATCH_PATH.to_owned()).or_default() += 1;
            }
            // The same tree and the same open acquisitions as at the last
            // look: the same answer.
            let key = (self.server.last_zxid(), sid, open.clone());
            if self.withdrawn_looks.get(c) == Some(&key) {
                continue;
            }
            let mut queued: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            let owned = self.server.ephemerals_of(sid);
            // (Not the nodes its session made for another application.)
            for node in owned.iter().filter(|n| !self.is_session_twin(n)) {
                if let Some((parent, name)) = node.rsplit_once('/') {
                    queued.entry(parent).or_default().push(name);
                }
            }
            for (path, nodes) in queued {
                let allowed = open.get(path).copied().unwrap_or(0);
                if nodes.len() > allowed {
                    return Err(self.violation(format!(
                        "c{c}: quiet with {} nodes of its session under {path} for {allowed} open acquisitions: {nodes:?}",
                        nodes.len()
                    )));
                }
            }
            seen.push((c, key));
        }
        for (c, key) in seen {
            if self.withdrawn_looks.len() <= c {
                self.withdrawn_looks.resize(c + 1, (0, 0, BTreeMap::new()));
            }
            self.withdrawn_looks[c] = key;
        }
        Ok(looked)
    }

    /// Client `c` is connected, nothing it wrote waits for an answer,
    /// nothing is on the wire, and its core has no command or output left.
    fn quiet(&self, c: usize) -> bool {
        let client = &self.clients[c];
        let Some(link) = &client.link else {
            return false;
        };
        // A follower cut from the leader drops writes and answers pings
        // (which the wire takes as answering what came before).
        link.heard_handshake
            && !self.server.is_behind_cut(link.conn)
            && link.unanswered.is_empty()
            && link.up.is_empty()
            && link.down.is_empty()
            && link.stalled_until.is_none_or(|t| t <= self.now)
            && client.partitioned_until <= self.now
            && !client.core.has_commands()
            && client.core.output().is_empty()
            && !client.core.state().is_terminal()
    }
}
