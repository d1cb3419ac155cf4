//! Revocation: another client asks a holder of lock 0 to let go, through
//! `revoke` (its node) or `revoke_holder` (whoever heads the queue then),
//! on revocable and non-revocable locks (the seed's `revocable`). A
//! holder that hears it lets go at once.
//!
//! R1: a holder says `revocation_requested` only on a revocable lock, and
//! only once its node carries the request; `revocation_requests` then
//! yields. R2: a revocable holder whose node carries the request hears of
//! it within [`World::revoke_bound`] on a healthy link. That it let go
//! lets the next contender in is A3's (available.rs).

use zklock::recipes::{revoke, revoke_holder};
use zklock_proto::lock::REVOKE;

use super::calls::{Outcome, Purpose};
use super::*;

/// The lock whose holders are asked to let go.
pub(super) const REVOKED_LOCK: usize = 0;

impl World {
    /// How long a revocable holder on a healthy link may go without
    /// hearing a request its node carries: the notification's way down,
    /// with room.
    fn revoke_bound(&self) -> Duration {
        4 * self.max_round_trip() + Duration::from_millis(100)
    }

    /// Client `by` asks the holder `id` of client `c` (generation
    /// `generation`) to let go: through its node, or (`by_holder`)
    /// whoever holds lock 0 then.
    pub(super) fn revoke(
        &mut self,
        by: usize,
        c: usize,
        generation: u32,
        id: AttemptId,
        by_holder: bool,
    ) {
        if self.clients[c].generation != generation {
            return;
        }
        let Some(Phase::Held { node, .. }) = self.clients[c].attempts.get(&id).map(|t| &t.phase)
        else {
            return;
        };
        let node = node.clone();
        let client = self.clients[by].client.clone();
        let started = if by_holder {
            let path = client::lock_path(REVOKED_LOCK);
            self.start_call(by, Purpose::Revoke { node: None }, move || {
                Outcome::RevokeHolder(revoke_holder(&client, &path))
            })
        } else {
            let target = node.clone();
            self.start_call(by, Purpose::Revoke { node: Some(node) }, move || {
                Outcome::Revoke(revoke(&client, &target))
            })
        };
        if started {
            self.stats.revocations += 1;
            self.note(|| {
                let how = if by_holder { "revoke_holder" } else { "revoke" };
                format!("c{by}: {how} asks c{c}#{id} to let go")
            });
        }
    }

    /// R1 and R2 after every step, and a holder told lets go.
    pub(super) fn check_revocation(&mut self) -> Result<(), Violation> {
        let now = self.now;
        let mut answer = Vec::new();
        for c in 0..self.clients.len() {
            let client = &self.clients[c];
            for (id, t) in &client.attempts {
                let Phase::Held { node, state, .. } = &t.phase else {
                    continue;
                };
                let Some(g) = client.guard(*id) else { continue };
                let told = g.revocation_requested();
                // (Nothing to look at on the server before any request.)
                if !told && (!self.options.revocable || self.stats.revocations == 0) {
                    continue;
                }
                let asked = self.server.data(node).as_deref() == Some(REVOKE)
                    && self
                        .server
                        .exists(node)
                        .is_some_and(|s| s.ephemeral_owner == g.owner_session());
                if told && !self.options.revocable {
                    return Err(self.violation(format!(
                        "R1: c{c}: #{id} on a lock not revocable says a revocation was requested"
                    )));
                }
                let still_ours = self
                    .server
                    .exists(node)
                    .is_some_and(|s| s.ephemeral_owner == g.owner_session());
                if told && !asked && still_ours {
                    return Err(self.violation(format!(
                        "R1: c{c}: #{id} says a revocation was requested, but its node {node} carries none"
                    )));
                }
                if told {
                    if !self.revoke_told.contains(&(c, client.generation, *id)) {
                        if g.revocation_requests().try_recv().is_err() {
                            return Err(self.violation(format!(
                                "R1: c{c}: #{id} says a revocation was requested, but its revocation_requests yields nothing"
                            )));
                        }
                        answer.push((c, client.generation, *id));
                    }
                    continue;
                }
                if !asked || !self.options.revocable || *state != LockState::Held {
                    continue;
                }
                let since = *self.revoke_seen.entry(node.clone()).or_insert(now);
                let healthy_from = self.unhealthy_until[c] + self.timeout(c);
                if since >= healthy_from && now > since + self.revoke_bound() {
                    return Err(self.violation(format!(
                        "R2: c{c}: #{id}'s node {node} has carried a revocation request for {:?} (bound {:?}) on a healthy link, and it was not told",
                        now - since,
                        self.revoke_bound()
                    )));
                }
            }
        }
        for (c, generation, id) in answer {
            self.revoke_told.insert((c, generation, id));
            // A multi-lock's part lets go with the whole.
            let id = match self.clients[c].attempts.get(&id).map(|t| &t.handle) {
                Some(Handle::Member { of, .. }) => *of,
                _ => id,
            };
            self.stats.revocations_heard += 1;
            self.note(|| format!("c{c}: #{id} told to let go: it does"));
            self.act(Action::Release {
                client: c,
                generation,
                id,
            });
        }
        Ok(())
    }
}
