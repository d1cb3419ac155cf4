//! What a test does to the server from outside: the process dies and comes
//! back, a third party writes (as session 0), a session is expired at
//! once, ContainerManager's pass runs.

use super::*;

impl SimZooKeeper {
    /// The server process dies: every connection is closed (undelivered
    /// output is lost), every watch is gone; the tree, the sessions and the
    /// zxid survive (they are on disk). Until [`SimZooKeeper::start`], new
    /// connections are refused and no session expires.
    pub fn stop(&mut self, now: Instant) {
        self.handle_timeout(now);
        self.running = false;
        self.in_flight.clear();
        self.follower_catch_up();
        self.out.clear();
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.close_conn(c);
        }
    }

    /// The server is back: every session's expiry clock restarts at `now`.
    pub fn start(&mut self, now: Instant) {
        if self.running {
            return;
        }
        self.running = true;
        let ids: Vec<i64> = self.sessions.keys().copied().collect();
        for id in ids {
            self.touch_at_leader(now, id);
        }
    }

    /// `stop` then `start` at the same instant.
    pub fn restart(&mut self, now: Instant) {
        self.stop(now);
        self.start(now);
    }

    /// Whether the server is up.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// A third party deletes `path` (any version). False if it does not
    /// exist, has children or is a system node. Watches fire.
    pub fn delete_as_admin(&mut self, now: Instant, path: &str) -> bool {
        self.handle_timeout(now);
        let ok = self
            .tree
            .get(path)
            .is_some_and(|n| n.children.is_empty() && !SYSTEM_NODES.contains(&path));
        if !ok {
            return false;
        }
        let zxid = self.next_zxid();
        self.acting = 0;
        let res = self.delete(path, -1, zxid);
        self.commit();
        res.is_ok()
    }

    /// A third party creates a persistent node (open ACL). Returns the
    /// created path (with the suffix for a sequential mode). Watches fire.
    pub fn create_as_admin(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ErrorCode> {
        self.handle_timeout(now);
        self.create_by(now, ADMIN, path, data, mode)
    }

    /// `caller` creates a node with an open ACL, committed at once.
    fn create_by(
        &mut self,
        now: Instant,
        caller: Caller,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ErrorCode> {
        let zxid = self.next_zxid();
        let req = CreateRequest {
            path: path.to_owned(),
            data: data.to_vec(),
            acl: Acl::open_unsafe(),
            mode,
        };
        let res = self.create(now, caller, &req, false, zxid);
        self.commit();
        res.map(|(p, _)| p)
    }

    /// Another client's session `session` creates a node (open ACL), as
    /// that client's application would: an ephemeral one is owned by that
    /// session. Returns the created path. Watches fire.
    pub fn create_as_session(
        &mut self,
        now: Instant,
        session: i64,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ErrorCode> {
        self.handle_timeout(now);
        if !self.running || !self.sessions.contains_key(&session) {
            return Err(ErrorCode::SessionExpired);
        }
        let caller = Caller {
            session,
            authed: true,
        };
        self.create_by(now, caller, path, data, mode)
    }

    /// The session whose request last deleted `path` (its owner when its
    /// session ended, 0 for a third party), if it was ever deleted.
    pub fn deleted_by(&self, path: &str) -> Option<i64> {
        self.deleted_by.get(path).copied()
    }

    /// A third party replaces `path`'s data (any version). Watches fire.
    pub fn set_data_as_admin(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
    ) -> Result<Stat, ErrorCode> {
        self.handle_timeout(now);
        let zxid = self.next_zxid();
        let res = self.set_data(now, path, data, -1, zxid);
        self.commit();
        res
    }

    /// Expires `session_id` now, whatever its deadline: ephemerals deleted,
    /// watches fired, its connection closed. No-op for an unknown session.
    pub fn expire_session(&mut self, now: Instant, session_id: i64) {
        self.handle_timeout(now);
        if self.running && self.sessions.contains_key(&session_id) {
            self.expire(now, session_id);
        }
    }

    /// ZooKeeper's ContainerManager pass: deletes every container node that
    /// has had a child and has none now, in path order (one txn each;
    /// watches fire). Returns how many were deleted.
    pub fn collect_containers(&mut self, now: Instant) -> usize {
        self.handle_timeout(now);
        let empty: Vec<String> = self
            .tree
            .iter()
            .filter(|(_, n)| {
                n.stat.ephemeral_owner == CONTAINER_OWNER && n.had_child && n.children.is_empty()
            })
            .map(|(p, _)| p.clone())
            .collect();
        self.acting = 0;
        for path in &empty {
            let zxid = self.next_zxid();
            self.remove_node(path, zxid);
            self.commit();
        }
        empty.len()
    }
}
