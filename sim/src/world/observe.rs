//! Proclaiming and observing the election's leader (`Election::proclaim`,
//! `Election::observe`): a campaign's winner proclaims a value of its own
//! halfway through its hold, and one client looks at the leader through a
//! `LeaderObserver` now and then.
//!
//! O1: an observer shows only a leader (node and value) that headed the
//! election at some moment while its look was under way, or nobody when
//! nobody did. ZooKeeper's reads are the serving server's state at one
//! moment, and nothing more is promised: a follower that lags the leader
//! by up to `max_lag` may serve a head of that long before the look began
//! (FinalRequestProcessor answers from the follower's applied tree)
//! (docs/GUARANTEES.md: observers see each leader and the value it
//! proclaims). O2: on a healthy link a look returns within
//! [`World::observe_bound`].

use zklock::recipes::{Election, Leader};

use super::calls::{Outcome, Purpose, Running};
use super::*;

/// The head of the election (node name, data), or nobody.
pub(super) type Head = Option<(String, Vec<u8>)>;

impl World {
    /// How long a look at the leader may take on a healthy link: a listing
    /// and a read, again when the leader changed in between, with room.
    fn observe_bound(&self) -> Duration {
        10 * self.max_round_trip() + Duration::from_millis(200)
    }

    /// The head of the election (name, data), as the server has it now.
    pub(super) fn election_head(&self) -> Option<(String, Vec<u8>)> {
        let mut children = self.server.children(LATCH_PATH);
        children.sort_by_key(|n| n.rsplit('-').next().and_then(|s| s.parse::<i64>().ok()));
        let head = children.into_iter().next()?;
        let data = self.server.data(&format!("{LATCH_PATH}/{head}"))?;
        Some((head, data))
    }

    /// The last client looks at the leader every 4.5 s, through the faults
    /// and a few seconds past them (no draw: seeds replay as before).
    pub(super) fn plan_observes(&mut self, plan: &Plan) {
        let c = plan.clients - 1;
        let end = plan.fault_window + Duration::from_secs(6);
        let mut at = Duration::from_millis(1500);
        while at < end {
            self.schedule(self.base + at, Action::Observe { client: c });
            at += Duration::from_millis(4500);
        }
    }

    /// The holder `id` of client `c` (a campaign's winner) proclaims.
    pub(super) fn proclaim(&mut self, c: usize, id: AttemptId) {
        let Some(guard) = self.share_guard(c, id) else {
            return;
        };
        let value = format!("c{c}#{id} proclaims").into_bytes();
        let client = self.clients[c].client.clone();
        let said = value.clone();
        let call = move || {
            Outcome::Proclaim(
                Election::new(&client, LATCH_PATH, b"candidate")
                    .and_then(|e| e.proclaim(&guard, &said)),
            )
        };
        if self.start_call(c, Purpose::Proclaim { value }, call) {
            self.stats.proclaims += 1;
            self.note(|| format!("c{c}: #{id} proclaims"));
        }
    }

    /// Keeps the heads a lagging follower may still serve: those of the
    /// last `max_lag`, and the one before them (the head `max_lag` ago).
    pub(super) fn note_recent_head(&mut self) {
        let max_lag = self.ensemble.max_lag;
        if max_lag.is_zero() {
            return;
        }
        let head = self.election_head();
        if self.recent_heads.back().map(|(_, h)| h) != Some(&head) {
            self.recent_heads.push_back((self.now, head));
        }
        let horizon = self.now.checked_sub(max_lag).unwrap_or(self.now);
        while self
            .recent_heads
            .get(1)
            .is_some_and(|(at, _)| *at <= horizon)
        {
            self.recent_heads.pop_front();
        }
    }

    /// Client `c` looks at the leader through an observer.
    pub(super) fn observe(&mut self, c: usize) {
        let client = self.clients[c].client.clone();
        let mut seen: Vec<_> = self.recent_heads.iter().map(|(_, h)| h.clone()).collect();
        seen.push(self.election_head());
        let purpose = Purpose::Observe {
            seen,
            healthy_at_start: self.a1_due(c),
        };
        let call = move || {
            Outcome::Observe(
                Election::new(&client, LATCH_PATH, b"observer")
                    .and_then(|e| e.observe().next(Duration::ZERO)),
            )
        };
        if self.start_call(c, purpose, call) {
            self.stats.observes += 1;
        }
    }

    /// O2, while a look that began on a healthy link is under way (and
    /// the world has kept pace with its thread).
    pub(super) fn observe_bound_check(&self, call: &Running) -> Result<(), Violation> {
        let c = call.client;
        if !call.unpaced && self.a1_due(c) && self.now > call.started + self.observe_bound() {
            return Err(self.violation(format!(
                "O2: c{c}: a look at the leader begun on a healthy link has taken {:?} (bound {:?})",
                self.now - call.started,
                self.observe_bound()
            )));
        }
        Ok(())
    }

    /// O1, once a look returned.
    pub(super) fn observed(
        &mut self,
        c: usize,
        started: Instant,
        seen: &[Option<(String, Vec<u8>)>],
        result: Result<Option<Leader>, LockError>,
    ) -> Result<(), Violation> {
        let shown = match &result {
            Ok(leader) => leader.as_ref().map(|l| (l.node.clone(), l.id.clone())),
            Err(_) => return Ok(()),
        };
        let text = |h: &Option<(String, Vec<u8>)>| {
            h.as_ref()
                .map(|(n, d)| format!("{n} ({})", String::from_utf8_lossy(d)))
        };
        self.note(|| format!("c{c}: observes the leader: {:?}", text(&shown)));
        // Near the sequence counter's end the election fails closed, and
        // the order of its nodes is not their numbers' (not judged).
        let near_end = self
            .server
            .sequence_counter(LATCH_PATH)
            .is_some_and(|n| !(0..=zklock::recipes::SEQUENCE_WARNING).contains(&n));
        // The world looks between steps: inside one, the last candidate
        // may go and another come, so nobody leading is possible whenever
        // the head changed during the look.
        let between_steps = shown.is_none() && seen.len() > 1;
        if !near_end && !between_steps && !seen.contains(&shown) {
            return Err(self.violation(format!(
                "O1: c{c}: an observer shows the leader {:?}, which never headed the election during its look (begun {:?} ago; heads seen: {:?})",
                text(&shown),
                self.now - started,
                seen.iter().map(text).collect::<Vec<_>>()
            )));
        }
        Ok(())
    }
}
