//! The herd count: which waiters each deletion woke, as each client's core
//! reports it to its observer. A stale one-shot watch (left by a waiter
//! that gave up) fires on the server but wakes nobody, so the count is the
//! clients', not the server's notifications.

use std::collections::{BTreeMap, BTreeSet};

use super::client::{lock_path, ELECTION_LOCK, MULTI_LOCKS};
use super::{Violation, World};

/// Per deleted blocker, the waiters it woke so far. A set: one waiter may
/// hear one deletion twice when it reconnects to a follower that has not
/// applied it yet (its re-set watch fires again there), which wakes no one
/// else.
pub(super) type WokenBy = BTreeMap<String, BTreeSet<String>>;

impl World {
    /// Collects every client's wake-ups. In a queue where each waiter waits
    /// for the node right before it (the mutexes, the multi-lock's parts,
    /// the election and its latches) a deletion wakes one waiter at most.
    /// (A reader behind a writer shares its blocker with the writer and the
    /// other readers behind it, and a lease waiter watches the whole queue:
    /// those queues are not counted.)
    pub(super) fn count_wakes(&mut self) -> Result<(), Violation> {
        if self.clients.iter().all(|c| c.wakes.none_woken()) {
            return Ok(());
        }
        let exclusive: Vec<String> = MULTI_LOCKS
            .iter()
            .chain([ELECTION_LOCK].iter())
            .map(|&l| lock_path(l))
            .collect();
        for c in 0..self.clients.len() {
            for (node, blocker) in self.clients[c].wakes.take() {
                self.stats.wakes += 1;
                self.note(|| format!("c{c}: {node} woken by the deletion of {blocker}"));
                let path = node.rsplit_once('/').map_or("", |(p, _)| p);
                // A waiter whose own node a third party deleted does not
                // know yet that it is no longer right behind its blocker:
                // it wakes, reads its node and queues again.
                if !exclusive.iter().any(|e| e == path) || self.admin_deleted.contains_key(&node) {
                    continue;
                }
                let woken = self.woken_by.entry(blocker.clone()).or_default();
                woken.insert(node.clone());
                if woken.len() > 1 {
                    let n = woken.len();
                    return Err(self.violation(format!(
                        "the deletion of {blocker} woke {n} waiters on {path}"
                    )));
                }
            }
        }
        Ok(())
    }
}
