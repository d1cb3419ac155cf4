//! A5, the reconnect bound: once the network has healed (the faults are
//! over and every link's and the server's last fault has worn off), every
//! client whose session lives is Connected again within
//! [`World::reconnect_bound`] (docs/PARTITION.md, "After the network
//! heals"); a client built after the heal (replacing one whose session
//! ended), within that bound of when it was built.

use zklock::SessionState;

use super::*;

/// What A5 has seen since the network healed.
#[derive(Debug, Default)]
pub(super) struct Reconnect {
    /// When the network healed (the latest fault's effect ended), as last
    /// computed.
    healed: Option<Instant>,
    /// Per client: Connected at some step since then.
    seen: Vec<bool>,
    /// Per client: already held to the bound.
    done: Vec<bool>,
}

impl World {
    /// How long after the network healed client `c` may take to be
    /// Connected: an attempt under way ends by its handshake limit (the
    /// connect timeout; a resumed session's, at most a third of its
    /// timeout); then each further attempt takes the world's 5 ms pause
    /// (the driver's backoff stands there) and a round trip, the lag of a
    /// lagging follower included. Three attempts: a follower that has not
    /// caught up refuses a client that has seen newer zxids (the next
    /// server in its order is an up-to-date one), and a handshake sent
    /// just before the heal may have been dropped with its connection.
    pub(super) fn reconnect_bound(&self, c: usize) -> Duration {
        let connect_timeout = self.asked_timeout(c).max(MIN_SESSION_TIMEOUT) / 3;
        connect_timeout
            + 3 * (self.max_round_trip() + Duration::from_millis(5))
            + Duration::from_millis(100)
    }

    /// A5, after every step once the faults are over.
    pub(super) fn check_reconnected(&mut self) -> Result<(), Violation> {
        if self.now < self.faults_until {
            return Ok(());
        }
        let healed = self
            .unhealthy_until
            .iter()
            .copied()
            .max()
            .unwrap_or(self.faults_until)
            .max(self.faults_until);
        let n = self.clients.len();
        if self.reconnect.healed != Some(healed) {
            self.reconnect = Reconnect {
                healed: Some(healed),
                seen: vec![false; n],
                done: vec![false; n],
            };
        }
        if self.now < healed {
            return Ok(());
        }
        for c in 0..n {
            let state = self.clients[c].core.state();
            if state == SessionState::Connected {
                self.reconnect.seen[c] = true;
            }
            let from = healed.max(self.clients[c].built);
            if self.reconnect.done[c] || self.now < from + self.reconnect_bound(c) {
                continue;
            }
            self.reconnect.done[c] = true;
            let sid = self.clients[c].core.session_id();
            // A session that ended (expired, closed) is replaced by a new
            // client; one the server no longer has is told so at its next
            // handshake.
            let lives = self.server.session_alive(sid) || sid == 0;
            if self.reconnect.seen[c] || state.is_terminal() || !lives {
                continue;
            }
            let bound = self.reconnect_bound(c);
            return Err(self.violation(format!(
                "A5: c{c}: still {state:?} {:?} after the network healed or the client was built (bound {bound:?}; negotiated session timeout {:?}, steady one-way latency {:?}, a follower's lag up to {:?})",
                self.now - from,
                self.timeout(c),
                self.steady_latency(c),
                self.ensemble.max_lag
            )));
        }
        Ok(())
    }
}
