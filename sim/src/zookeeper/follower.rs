//! The ensemble seen from one connection: its server may be a follower
//! silently cut from the leader, which answers pings and nothing else.

use super::*;
use jute::PathWatch;

impl SimZooKeeper {
    /// A follower cut from the leader answers its clients' pings itself
    /// (Learner's connections stay up, FollowerZooKeeperServer handles
    /// pings locally) but reaches the leader with nothing: the session's
    /// touches stay in its LearnerSessionTracker (the leader never renews
    /// the session), and a write or a sync waits for a leader that does
    /// not answer. Reads would be served from a view that no longer moves;
    /// the model holds them too (a client that learns nothing new is the
    /// case that matters), and so it holds notifications.
    pub(super) fn on_request_behind_cut(&mut self, now: Instant, conn: ConnId, frame: &[u8]) {
        let Ok((header, body)) = decode_request_header(frame) else {
            return self.close_conn(conn);
        };
        // A read that sets no watch, while the ensemble has not moved since
        // the cut, is served as the follower would: its view is the
        // leader's then. A client must not take its answer for the
        // leader's word (only leader-ordered answers prove the session).
        let frozen = self.behind_cut.get(&conn).copied().unwrap_or(self.zxid);
        if frozen == self.zxid && !self.is_lagging(conn) {
            if let Ok(
                req @ (Request::Exists(PathWatch { watch: false, .. })
                | Request::GetData(PathWatch { watch: false, .. })
                | Request::GetChildren(PathWatch { watch: false, .. })
                | Request::GetChildren2(PathWatch { watch: false, .. })),
            ) = Request::decode_body(header.op, body)
            {
                let session = self.conns.get(&conn).and_then(|c| c.session).unwrap_or(0);
                let path = match &req {
                    Request::Exists(p) | Request::GetData(p) => p.path.clone(),
                    Request::GetChildren(p) | Request::GetChildren2(p) => p.path.clone(),
                    _ => String::new(),
                };
                let result = self.read(conn, session, req);
                if result.is_ok() {
                    self.last_reads.insert((session, path), now);
                }
                return self.reply(conn, header.xid, self.zxid, result);
            }
        }
        if header.op == OpCode::Ping {
            // The follower stamps replies with its own last applied zxid
            // (FinalRequestProcessor, ZKDatabase.getDataTreeLastProcessedZxid),
            // which stops at the cut, and it would have served this
            // connection's reads and SetWatches from that view first. The
            // model holds those, so a ping reveals no more than the
            // connection has been shown: a client must never learn of a
            // zxid whose changes it could not have seen.
            let frozen = self.behind_cut.get(&conn).copied().unwrap_or(self.zxid);
            let shown = self.conns.get(&conn).map_or(frozen, |c| c.shown_zxid);
            let zxid = frozen.min(shown);
            self.reply(conn, header.xid, zxid, Ok(Response::Empty));
        }
    }

    /// The server of connection `conn` is a follower that the leader no
    /// longer hears (a silent cut between the two): pings are answered,
    /// nothing else, and the session is not renewed, so the leader expires
    /// it after its timeout. End it with [`SimZooKeeper::close_connection`]
    /// (the follower gives up on the leader and drops its clients).
    pub fn cut_from_leader(&mut self, now: Instant, conn: ConnId) {
        if let Some(session) = self.conns.get(&conn).and_then(|c| c.session) {
            self.lose_uncarried_touch(now, session);
        }
        if self.conns.contains_key(&conn) {
            // What a lagging follower still had to answer never comes.
            self.forget_follower_conn(conn);
            self.behind_cut.insert(conn, self.applied_for(conn));
        }
    }

    /// Whether `conn`'s server is cut from the leader (it hears nothing).
    pub fn is_behind_cut(&self, conn: ConnId) -> bool {
        self.behind_cut.contains_key(&conn)
    }
}
