//! What each client's core tells its observer: the waiters it woke (the
//! herd count, herd.rs), the nodes it holds (A3, available.rs) and those
//! it granted since the world last looked (when each hold began: its max
//! hold counts from then, checker.rs). Apart
//! from both so that the client, which installs it, and the herd count,
//! which reads it, do not import each other.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use zklock::Observer;

/// Wake-ups a client's core reported: (the waiter's node, the deleted
/// blocker).
/// And the nodes the core granted and has not yet let go (A3 reads them:
/// a lock is held while one of its nodes is).
#[derive(Debug, Default)]
pub(super) struct Wakes {
    woken: Mutex<Vec<(String, String)>>,
    held: Mutex<BTreeSet<String>>,
    /// Nodes granted since the last [`Wakes::take_granted`].
    granted: Mutex<Vec<String>>,
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
        if let Ok(mut g) = self.granted.lock() {
            g.push(node.to_owned());
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
    pub(super) fn none_woken(&self) -> bool {
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

    /// The nodes granted since the last look.
    pub(super) fn take_granted(&self) -> Vec<String> {
        self.granted
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default()
    }

    pub(super) fn take(&self) -> Vec<(String, String)> {
        self.woken
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }
}
