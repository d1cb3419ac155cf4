//! Fenced writes (`LockGuard::fenced`): a mutex holder writes halfway
//! through its hold, and a holder whose link a fault is about to cut
//! writes just before it (the write races the loss). Three kinds: a
//! setData of `FENCED_NODE` that succeeds, and two that fail for their own
//! reasons (a create of a node that exists, a setData at a wrong version).
//!
//! F1: a fenced write is applied only while its guard's node is there,
//! owned by the guard's session (the holder the server knows): the world
//! looks after every step whether `FENCED_NODE` now carries the write's
//! unique data, and whether the node was there at the end of the step
//! before. F2: a failure of the write's own op never changes the holder:
//! no `Lost` (nor `LockError::Lost`) while its node is there and ours, and
//! such a write never succeeds.

use std::sync::Arc;

use zklock::recipes::LockGuard;
use zklock::{CreateMode, Error, Op};

use super::calls::{Outcome, Purpose};
use super::*;

/// The resource the holders' fenced writes protect.
pub(super) const FENCED_NODE: &str = "/app/fenced";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FencedKind {
    /// A setData of `FENCED_NODE`: succeeds while the guard's node is there.
    Accepted,
    /// A create of a node that exists: fails with NodeExists.
    CreateExisting,
    /// A setData at a version the node never has: fails with BadVersion.
    WrongVersion,
}

impl World {
    /// Attempt `id` of client `c` shares its guard with a call: the guard.
    pub(super) fn share_guard(&mut self, c: usize, id: AttemptId) -> Option<Arc<LockGuard>> {
        let t = self.clients[c].attempts.get_mut(&id)?;
        if !matches!(t.phase, Phase::Held { .. }) {
            return None;
        }
        if let Handle::Guard(_) = t.handle {
            let Handle::Guard(g) = std::mem::replace(&mut t.handle, Handle::None) else {
                unreachable!("matched above")
            };
            t.handle = Handle::Shared(Arc::new(g));
        }
        match &t.handle {
            Handle::Shared(g) => Some(g.clone()),
            _ => None,
        }
    }

    /// Whether `node` is there, owned by `session`.
    fn is_server_holder(&self, node: &str, session: i64) -> bool {
        self.server
            .exists(node)
            .is_some_and(|s| s.ephemeral_owner == session)
    }

    /// The holder `id` of client `c` makes a fenced write of `kind`.
    pub(super) fn fenced_write(&mut self, c: usize, id: AttemptId, kind: FencedKind) {
        let Some(guard) = self.share_guard(c, id) else {
            return;
        };
        let node = guard.node_path().to_owned();
        let session = guard.owner_session();
        // Numbered by the writes started so far: unique among them, so a
        // write that landed earlier is never taken for this one.
        let data = format!("{node} by c{c}#{id}, write {}", self.stats.fenced_writes).into_bytes();
        let ops = match kind {
            FencedKind::Accepted => vec![Op::set_data(FENCED_NODE, &data, None)],
            FencedKind::CreateExisting => {
                vec![Op::create(
                    writes::APP_NODE,
                    b"again",
                    CreateMode::Persistent,
                )]
            }
            FencedKind::WrongVersion => vec![Op::set_data(
                writes::APP_NODE,
                b"stale",
                Some(writes::STALE_VERSION),
            )],
        };
        let purpose = Purpose::Fenced {
            id,
            node: node.clone(),
            kind,
            holder_before: self.is_server_holder(&node, session),
            guard: guard.clone(),
            data,
            applied: false,
        };
        if self.start_call(c, purpose, move || Outcome::Fenced(guard.fenced(&ops))) {
            self.stats.fenced_writes += 1;
            self.note(|| format!("c{c}: #{id} writes fenced by {node}: {kind:?}"));
        }
    }

    /// Before a fault cuts client `c` off: one of its mutex holders writes,
    /// so that the write is in flight as the link goes.
    pub(super) fn fenced_before_fault(&mut self, fault: &Fault) {
        let c = match *fault {
            Fault::Cut { client, .. }
            | Fault::LateCut { client }
            | Fault::Stall { client, .. }
            | Fault::FollowerCut { client, .. }
            | Fault::Close { client } => client,
            _ => return,
        };
        let holder = self.clients[c].attempts.iter().find_map(|(id, t)| {
            let mutex = matches!(self.clients[c].locks[t.lock], SimLock::Mutex(_));
            (mutex && matches!(t.phase, Phase::Held { .. }) && matches!(t.handle, Handle::Guard(_)))
                .then_some(*id)
        });
        if let Some(id) = holder {
            self.fenced_write(c, id, FencedKind::Accepted);
        }
    }

    /// F1, after every step while call `i` (a fenced write) runs.
    pub(super) fn fenced_look(&mut self, i: usize) -> Result<(), Violation> {
        let c = self.calls[i].client;
        let current = self.server.data(FENCED_NODE);
        let Purpose::Fenced {
            id,
            node,
            holder_before,
            guard,
            data,
            applied,
            ..
        } = &self.calls[i].purpose
        else {
            return Ok(());
        };
        let now_holder = self.is_server_holder(node, guard.owner_session());
        let landed = !*applied && current.as_deref() == Some(data.as_slice());
        if landed && !*holder_before {
            return Err(self.violation(format!(
                "F1: c{c}: #{id}'s fenced write was applied, but its node {node} was not there (or not its session's) before"
            )));
        }
        if let Purpose::Fenced {
            holder_before,
            applied,
            ..
        } = &mut self.calls[i].purpose
        {
            *holder_before = now_holder;
            *applied |= landed;
        }
        Ok(())
    }

    /// F2, once a fenced write returned.
    pub(super) fn fenced_returned(
        &mut self,
        c: usize,
        purpose: Purpose,
        result: Result<Vec<zklock::OpResult>, LockError>,
    ) -> Result<(), Violation> {
        let Purpose::Fenced {
            id,
            node,
            kind,
            guard,
            ..
        } = purpose
        else {
            return Ok(());
        };
        let ours = self.is_server_holder(&node, guard.owner_session());
        self.note(|| format!("c{c}: #{id}'s fenced write ({kind:?}) returned {result:?}"));
        match (&result, kind) {
            (Ok(_), FencedKind::CreateExisting | FencedKind::WrongVersion) => {
                Err(self.violation(format!(
                    "F2: c{c}: #{id}'s fenced write ({kind:?}) succeeded, though its op must fail"
                )))
            }
            (Err(LockError::Lost), _) if ours => Err(self.violation(format!(
                "F2: c{c}: #{id}'s fenced write ({kind:?}) says Lost, but its node {node} is there and ours"
            ))),
            (Err(LockError::Client(Error::MultiFailed { index: 0, .. })), _) => {
                Err(self.violation(format!(
                    "F2: c{c}: #{id}'s fenced write failed on the guard's own check without saying Lost"
                )))
            }
            _ if ours && guard.state() == LockState::Lost
                && guard.lost_reason() == Some(zklock::recipes::LossReason::NodeDeleted) =>
            {
                Err(self.violation(format!(
                    "F2: c{c}: #{id} says Lost (node deleted) after a fenced write ({kind:?}), but its node {node} is there and ours"
                )))
            }
            _ => Ok(()),
        }
    }
}
