//! Liveness of leader latches: a latch on a session that stays connected
//! must come to lead when its node heads the election, and must keep a
//! node in the election while it does not lead. (Safety, at most one
//! leader and only while its session lives, is checked in checker.rs.)

use crossbeam_channel::Receiver;
use zklock::recipes::{CloseMode, LatchEvent};
use zklock::SessionState;

use super::calls::{Outcome, Purpose};
use super::*;

/// The id a latch's node carries (a campaign's carries `candidate`): what
/// tells the two apart on the server.
pub(super) const LATCH_ID: &[u8] = b"latch";

/// How long a latch may head the election, connected, without leading:
/// well over a round trip and a watch event, and over the session timeout
/// (a reconnect in between resets the count); see `World::latch_due`.
const LATCH_DUE: Duration = Duration::from_millis(5000);

impl World {
    /// Whether a third party deleted client `c`'s latch node while it has
    /// none left: a latch that led on it may say so until it reads past
    /// the deletion (`latch_told_of_deletion`). The last such deletion,
    /// with who watched the node: an older one was of a node the latch
    /// has since replaced, and reading past it proves nothing.
    pub(super) fn latch_node_deleted(&self, c: usize) -> Option<(u64, &[ConnId])> {
        let sid = self.clients[c].core.session_id();
        let has_node = self
            .server
            .children(LATCH_PATH)
            .iter()
            .any(|n| self.is_latch_node(c, n));
        if has_node {
            return None;
        }
        self.deleted_latch_nodes
            .iter()
            .filter(|(_, owner)| **owner == sid)
            .filter_map(|(path, _)| self.admin_deleted.get(path))
            .max_by_key(|(deleted, _)| *deleted)
            .map(|(deleted, watchers)| (*deleted, watchers.as_slice()))
    }

    /// S1 for latches: a latch whose node a third party deleted stops
    /// leading once it has read what the server wrote after the deletion.
    pub(super) fn latch_told_of_deletion(&self, c: usize, written: u64) -> Result<(), Violation> {
        let client = &self.clients[c];
        let (Some(latch), Some(conn)) = (&client.latch, client.link.as_ref().map(|l| l.conn))
        else {
            return Ok(());
        };
        if !latch.is_leader() || self.server.is_behind_cut(conn) {
            return Ok(());
        }
        let told = self
            .latch_node_deleted(c)
            .is_some_and(|(deleted, watchers)| written > deleted && watchers.contains(&conn));
        if told {
            return Err(self.violation(format!(
                "c{c}: its latch read past the deletion of its node and still leads"
            )));
        }
        Ok(())
    }

    /// Before a third party deletes `path`: remembers it if it is a latch
    /// node, with its owner.
    pub(super) fn note_latch_node(&mut self, path: &str) {
        if let Some(stat) = self.server.exists(path) {
            if self.server.data(path).as_deref() == Some(LATCH_ID) {
                self.deleted_latch_nodes
                    .insert(path.to_owned(), stat.ephemeral_owner);
            }
        }
    }

    /// Whether `name` under `LATCH_PATH` is a node of client `c`'s latch
    /// (a campaign's carries another id).
    pub(super) fn is_latch_node(&self, c: usize, name: &str) -> bool {
        let path = format!("{LATCH_PATH}/{name}");
        let sid = self.clients[c].core.session_id();
        self.server
            .exists(&path)
            .is_some_and(|s| s.ephemeral_owner == sid)
            && self.server.data(&path).as_deref() == Some(LATCH_ID)
    }

    /// Whether client `c`'s latch is stuck if it does not lead: its node
    /// heads the election, or it has no node there at all.
    fn latch_stuck(&self, c: usize) -> bool {
        let mut children = self.server.children(LATCH_PATH);
        children.sort_by_key(|n| n.rsplit('-').next().and_then(|s| s.parse::<i64>().ok()));
        let latch_node = |name: &String| self.is_latch_node(c, name);
        // Near the sequence counter's end no order is safe: campaigns fail
        // closed there.
        let near_end = self
            .server
            .sequence_counter(LATCH_PATH)
            .is_some_and(|n| !(0..=zklock::recipes::SEQUENCE_WARNING).contains(&n));
        !near_end && (children.first().is_some_and(latch_node) || !children.iter().any(latch_node))
    }

    /// After every step: a latch that has headed the election, connected,
    /// for `LATCH_DUE` without leading breaks liveness.
    pub(super) fn check_latch_liveness(&mut self) -> Result<(), Violation> {
        let now = self.now;
        for c in 0..self.clients.len() {
            let client = &self.clients[c];
            // Curator's `await`, not waiting: what `is_leader` says.
            if let Some(l) = &client.latch {
                if l.await_leadership(Duration::ZERO) != l.is_leader() {
                    return Err(self.violation(format!(
                        "c{c}: its latch's await_leadership disagrees with is_leader ({})",
                        l.is_leader()
                    )));
                }
            }
            let due = client.latch.as_ref().is_some_and(|l| !l.is_leader())
                && client.link.is_some()
                && client.core.state() == SessionState::Connected
                && self.latch_stuck(c);
            let client = &mut self.clients[c];
            if !due {
                client.latch_due_since = None;
                continue;
            }
            let since = *client.latch_due_since.get_or_insert(now);
            let due =
                LATCH_DUE.max(self.timeout(c) + Duration::from_secs(1)) + 4 * self.max_round_trip();
            if now - since > due {
                return Err(self.violation(format!(
                    "c{c}: its latch has headed the election (or had no node there), connected, for {:?} and does not lead",
                    now - since
                )));
            }
        }
        Ok(())
    }
}

impl World {
    /// Client `c` lets its latch go: dropped, or closed in one of the two
    /// modes (by the client's index: no draw).
    pub(super) fn latch_stop(&mut self, c: usize) {
        let Some(latch) = self.clients[c].latch.take() else {
            return;
        };
        let mode = match c % 3 {
            0 => {
                self.note(|| format!("c{c}: latch dropped"));
                return;
            }
            1 => CloseMode::Silent,
            _ => CloseMode::NotifyLeader,
        };
        let purpose = Purpose::Close {
            mode,
            session: self.clients[c].core.session_id(),
            events: latch.events().clone(),
            was_leader: latch.is_leader(),
        };
        // Not connected: it is dropped instead (with the call).
        let closing = self.start_call(c, purpose, move || Outcome::Close(latch.close(mode)));
        if closing {
            self.stats.latch_closes += 1;
        }
        self.note(|| format!("c{c}: latch {}", if closing { "closes" } else { "dropped" }));
    }

    /// L1 and L2, once a latch's close returned: `Ok` only once its node is
    /// gone, `Closed` the last event and only in the mode that tells
    /// readers (after `Lost` if it led), nothing after the close.
    pub(super) fn latch_closed(
        &mut self,
        c: usize,
        mode: CloseMode,
        session: i64,
        events: Receiver<LatchEvent>,
        was_leader: bool,
        result: Result<(), LockError>,
    ) -> Result<(), Violation> {
        self.note(|| format!("c{c}: latch closed ({mode:?}): {result:?}"));
        let left: Vec<String> = self
            .server
            .children(LATCH_PATH)
            .into_iter()
            .filter(|n| {
                let path = format!("{LATCH_PATH}/{n}");
                self.server
                    .exists(&path)
                    .is_some_and(|s| s.ephemeral_owner == session)
                    && self.server.data(&path).as_deref() == Some(LATCH_ID)
            })
            .collect();
        // (A session the application closed meanwhile takes its nodes with
        // it once the server hears its close: the release is answered
        // then, as every request of a closed session is.)
        let open = self.clients[c].core.session_id() == session
            && !self.clients[c].core.state().is_terminal();
        let heard: Vec<LatchEvent> = events.try_iter().collect();
        if result.is_ok() && open && !left.is_empty() {
            return Err(self.violation(format!(
                "L1: c{c}: its latch's close ({mode:?}) returned Ok with its node {left:?} still there; events {heard:?}"
            )));
        }
        let closed_at = heard.iter().position(|e| *e == LatchEvent::Closed);
        // (A channel left full drops the close's events.)
        let full = heard.len() + 2 >= zklock::recipes::STATE_CHANNEL_CAPACITY;
        let wrong = match (mode, closed_at) {
            _ if full => None,
            (CloseMode::Silent, Some(_)) => Some("Closed in the silent mode"),
            (_, Some(i)) if i + 1 != heard.len() => Some("an event after Closed"),
            (_, Some(i))
                if was_leader
                    && (i == 0 || !matches!(heard[i - 1], LatchEvent::Lost { reason: None })) =>
            {
                Some("a leader closed without Lost right before Closed")
            }
            (CloseMode::NotifyLeader, None) if result.is_ok() => Some("no Closed"),
            _ => None,
        };
        if let Some(wrong) = wrong {
            return Err(self.violation(format!(
                "L2: c{c}: its latch closed ({mode:?}, led: {was_leader}): {wrong}; events {heard:?}"
            )));
        }
        self.closed_latches.push((c, events));
        Ok(())
    }

    /// L2 after every step: no event from a closed latch.
    pub(super) fn check_closed_latches(&self) -> Result<(), Violation> {
        for (c, events) in &self.closed_latches {
            if let Ok(e) = events.try_recv() {
                return Err(self.violation(format!(
                    "L2: c{c}: its latch sent {e:?} after its close returned"
                )));
            }
        }
        Ok(())
    }
}
