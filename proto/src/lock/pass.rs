//! A downgrade's pass: a read taken while its thread holds the write lock
//! queues behind that write node and holds as though it were gone, but
//! only while the write is held by us.

use super::{AttemptId, LockMachine, LockState};
use crate::lock::phase::Phase;

impl LockMachine {
    /// Whether attempt `id` may pass the node its spec names
    /// ([`LockSpec::passes`](crate::lock::LockSpec::passes)): only while
    /// another attempt of ours holds that node, not Lost. A node we let go
    /// of, or lost, blocks as anyone's would.
    pub(super) fn passes(&self, id: AttemptId) -> bool {
        let Some(a) = self.attempts.get(&id) else {
            return false;
        };
        let Some(name) = a.spec.passes.as_deref() else {
            return false;
        };
        self.held_nodes
            .get(&a.spec.child(name))
            .filter(|&&holder| holder != id)
            .and_then(|holder| self.attempts.get(holder))
            .is_some_and(|h| matches!(&h.phase, Phase::Held(h) if h.state != LockState::Lost))
    }
}
