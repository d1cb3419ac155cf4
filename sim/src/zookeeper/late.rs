//! Writes that land late. A client's connection drops with writes on their
//! way: its server forwards them to the leader, which commits them (they
//! reach the leader before the session moves; ZooKeeper refuses writes
//! from the old server after that, PrepRequestProcessor.checkSession). The
//! client, reconnected to another server, never saw their zxids, so that
//! server may serve it before it has applied them. They become visible
//! there after the client's first request (a read may miss them), at once
//! for a `sync` (it waits for everything the leader committed before it),
//! and in any case within [`LATE_LIMIT`].

use super::*;

/// How long a committed write may stay out of a lagging server's view.
pub(super) const LATE_LIMIT: Duration = Duration::from_millis(1000);

/// A session's committed writes, not yet visible where it reads.
#[derive(Debug)]
pub(super) struct LateWrites {
    authed: bool,
    bytes: Vec<u8>,
    visible_by: Instant,
}

impl SimZooKeeper {
    /// The writes in `bytes` (whole frames, as the client sent them on a
    /// connection that just dropped) will land late for `session`; see the
    /// module docs. Reads and a handshake among them are dropped.
    pub fn hold_late_writes(&mut self, now: Instant, session: i64, authed: bool, bytes: Vec<u8>) {
        self.land_late_writes(now, session);
        self.late.insert(
            session,
            LateWrites {
                authed,
                bytes,
                visible_by: now + LATE_LIMIT,
            },
        );
    }

    /// `session`'s late writes, if any, land now.
    pub(super) fn land_late_writes(&mut self, now: Instant, session: i64) {
        if let Some(late) = self.late.remove(&session) {
            self.apply_late_writes(now, session, late.authed, &late.bytes);
        }
    }

    /// Late writes past [`LATE_LIMIT`] land.
    pub(super) fn land_due_late_writes(&mut self, now: Instant) {
        let due: Vec<i64> = self
            .late
            .iter()
            .filter(|(_, l)| l.visible_by <= now)
            .map(|(s, _)| *s)
            .collect();
        for session in due {
            self.land_late_writes(now, session);
        }
    }

    /// Whether some session's writes are still to land.
    pub fn has_late_writes(&self) -> bool {
        !self.late.is_empty()
    }

    /// When the next late writes land at the latest.
    pub(super) fn late_timeout(&self) -> Option<Instant> {
        self.late.values().map(|l| l.visible_by).min()
    }
}
