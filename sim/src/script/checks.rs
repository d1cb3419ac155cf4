//! Reading the handles as the application would, and holding each
//! acquisition to the simulator's checker after every step.

use std::collections::BTreeMap;

use zklock::recipes::LockState;
use zklock_proto::lock::sorted_contenders;

use super::{Acquisition, Handle, Script, PATHS};
use crate::world::checker::{check_attempt, exclusive, Attempt, Seen};

impl Script {
    /// Outcomes that came: a guard, or an acquisition that ended.
    pub(super) fn collect(&mut self) {
        let mut i = 0;
        while i < self.acquisitions.len() {
            let outcome = match &self.acquisitions[i].handle {
                Handle::Waiting(p) => p.try_take(),
                Handle::Held(_) => None,
            };
            match outcome {
                Some(Ok(guard)) => {
                    self.reached.grants += 1;
                    let queue = PATHS[self.acquisitions[i].lock];
                    let foreign = sorted_contenders(self.server.children(queue))
                        .iter()
                        .any(|c| {
                            self.server
                                .exists(&format!("{queue}/{}", c.name))
                                .is_some_and(|s| s.ephemeral_owner == 0)
                        });
                    self.reached.grants_past_foreign += usize::from(foreign);
                    self.acquisitions[i].handle = Handle::Held(guard);
                    i += 1;
                }
                Some(Err(e)) => {
                    if self.trace {
                        eprintln!("acquisition failed: {e:?}");
                    }
                    self.reached.failures += 1;
                    self.acquisitions.swap_remove(i);
                }
                None => i += 1,
            }
        }
    }

    /// Every acquisition against the model's tree and sessions, by the
    /// world's checker; then no two holders of one path at once.
    pub(super) fn check(&mut self) {
        let mut holders: BTreeMap<&str, Vec<(String, bool)>> = BTreeMap::new();
        let session = self.core.session_id();
        for (i, a) in self.acquisitions.iter().enumerate() {
            let (guard, seen) = match &a.handle {
                Handle::Waiting(_) => (
                    None,
                    Seen::Waiting {
                        started: a.started,
                        deadline: a.deadline,
                    },
                ),
                Handle::Held(g) => (
                    Some(g),
                    Seen::Held {
                        node: g.node_path(),
                        state: g.state(),
                    },
                ),
            };
            match guard.map(|g| g.state()) {
                Some(LockState::Suspended) => self.reached.suspended += 1,
                Some(LockState::Lost) => self.reached.lost += 1,
                Some(LockState::Held) | None => {}
            }
            let attempt = Attempt {
                now: self.now,
                session,
                linked: self.link.is_some(),
                proof: self.last_answered_send,
                timeout: self.timeout,
                // A real server may expire the session a timeout after it
                // last received anything from it; the model runs a request
                // only when the script lets it, and renews the session
                // then too.
                expiry: self
                    .server
                    .session_deadline(session)
                    .map(|d| d.min(self.heard + self.timeout)),
                guard,
                seen,
                leases: 1,
                passes: None,
            };
            let deleted = |node: &str| self.admin_deleted.contains_key(node);
            match check_attempt(&self.server, &attempt, &deleted) {
                Ok(Some(node)) => holders
                    .entry(PATHS[a.lock])
                    .or_default()
                    .push((format!("{}: {node}", name(i, a)), false)),
                Ok(None) => {}
                Err(what) => panic!("{} {what}", name(i, a)),
            }
        }
        for (path, h) in &holders {
            assert!(exclusive(h), "{path} held by {h:?} at once");
        }
    }
}

/// How a violation names an acquisition.
fn name(i: usize, a: &Acquisition) -> String {
    format!("mutex {} (acquisition {i})", a.lock)
}
