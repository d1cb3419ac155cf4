//! Multi-locks over one set of locks named in different orders (`[0, 2]`
//! and `[2, 0]`), taken by every client at once: a recipe that took each
//! in the order it was given would let two clients each hold one lock and
//! wait for the other for ever. M1: once the network and the server have
//! been healthy for a while, a multi-lock waiting with no deadline is
//! granted within [`World::multi_bound`]; the checker holds every part to
//! exclusion like any holder.

use super::*;

impl World {
    /// How long a multi-lock with no deadline may wait once every client
    /// has been healthy for its session timeout: the holds queued ahead of
    /// it (at most 5 s each, a few per client, and their lock-delay) and
    /// A3's bound for each hand-on, with room. A deadlock waits for ever.
    fn multi_bound(&self) -> Duration {
        let hand_ons = 4 * self.clients.len() as u32;
        hand_ons * (Duration::from_secs(5) + self.idle_bound()) + Duration::from_secs(10)
    }

    /// M1, after every step once the faults have stopped.
    pub(super) fn check_multi_progress(&self) -> Result<(), Violation> {
        if self.now < self.faults_until {
            return Ok(());
        }
        let healthy_since = (0..self.clients.len())
            .map(|c| self.unhealthy_until[c] + self.timeout(c))
            .max()
            .unwrap_or(self.base);
        for (c, client) in self.clients.iter().enumerate() {
            for (id, t) in &client.attempts {
                if t.phase != Phase::Waiting
                    || t.deadline.is_some()
                    || !matches!(t.handle, Handle::Multi(_))
                {
                    continue;
                }
                let since = t.started.max(healthy_since);
                if self.now > since + self.multi_bound() {
                    return Err(self.violation(format!(
                        "M1: c{c}: multi-lock #{id} with no deadline not granted {:?} after the network and server turned healthy (bound {:?}): a deadlock? queues {:?} / {:?}",
                        self.now - since,
                        self.multi_bound(),
                        self.server.children(&queue_path(client::MULTI_LOCKS[0])),
                        self.server.children(&queue_path(client::MULTI_LOCKS[1])),
                    )));
                }
            }
        }
        Ok(())
    }
}
