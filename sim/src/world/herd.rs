//! The herd count: which waiters each deletion woke, as each client's core
//! reports it to its observer. A stale one-shot watch (left by a waiter
//! that gave up) fires on the server but wakes nobody, so the count is the
//! clients', not the server's notifications.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use zklock::machine::Observer;

use super::client::{lock_path, ELECTION_LOCK, MULTI_LOCKS};
use super::{Violation, World};

/// Wake-ups a client's core reported: (the waiter's node, the deleted
/// blocker).
/// And the nodes the core granted and has not yet let go (A3 reads them:
/// a lock is held while one of its nodes is).
#[derive(Debug, Default)]
pub(super) struct Wakes {
    woken: Mutex<Vec<(String, String)>>,
    held: Mutex<BTreeSet<String>>,
    /// Grants and releases so far.
    changes: AtomicU64,
}

impl Observer for Wakes {
    fn waiter_woken(&self, node: &str, blocker: &str) {
        if let Ok(mut w) = self.woken.lock() {
            w.push((node.to_owned(), blocker.to_owned()));
        }
    }

    fn lock_acquired(&self, node: &str, _waited: std::time::Duration) {
        if let Ok(mut h) = self.held.lock() {
            h.insert(node.to_owned());
        }
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    fn lock_released(&self, node: &str, _held: std::time::Duration, _refused: bool) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(node);
        }
        self.changes.fetch_add(1, Ordering::Relaxed);
    }
}

impl Wakes {
    /// Whether no wake-up waits to be collected.
    fn none_woken(&self) -> bool {
        self.woken.lock().map_or(true, |w| w.is_empty())
    }

    /// How many grants and releases the core reported.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Whether the core holds `node` (granted, not let go).
    pub(super) fn holds(&self, node: &str) -> bool {
        self.held.lock().is_ok_and(|h| h.contains(node))
    }

    fn take(&self) -> Vec<(String, String)> {
        self.woken
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }
}

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
