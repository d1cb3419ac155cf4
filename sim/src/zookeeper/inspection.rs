//! What a test reads of the server without a connection, and the
//! invariants its own bookkeeping keeps.

use super::*;

impl SimZooKeeper {
    /// The node's Stat, if it exists.
    pub fn exists(&self, path: &str) -> Option<Stat> {
        self.tree.get(path).map(Self::stat_of)
    }

    /// The parent's stored sequence counter: the number the next sequential
    /// child gets when no create on it is in flight (not the cversion
    /// clients see, which also counts deletes).
    pub fn sequence_counter(&self, path: &str) -> Option<i32> {
        self.tree.get(path).map(|n| n.stat.cversion)
    }

    /// The node's data, if it exists.
    pub fn data(&self, path: &str) -> Option<Vec<u8>> {
        self.tree.get(path).map(|n| n.data.clone())
    }

    /// Child names, sorted (empty if the node does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.tree
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every node path, sorted (system nodes included).
    pub fn paths(&self) -> Vec<String> {
        self.tree.keys().cloned().collect()
    }

    /// The session is known and not expired or closed.
    pub fn session_alive(&self, session_id: i64) -> bool {
        self.sessions.contains_key(&session_id)
    }

    /// Live session ids, sorted.
    pub fn sessions(&self) -> Vec<i64> {
        self.sessions.keys().copied().collect()
    }

    /// The connection a session is attached to, if any.
    pub fn connection_of(&self, session_id: i64) -> Option<ConnId> {
        self.sessions.get(&session_id).and_then(|s| s.conn)
    }

    /// The negotiated timeout of a live session.
    pub fn session_timeout(&self, session_id: i64) -> Option<Duration> {
        self.sessions
            .get(&session_id)
            .map(|s| Duration::from_millis(s.timeout_ms.max(0) as u64))
    }

    /// When a live session will expire if nothing more is heard from it.
    pub fn session_deadline(&self, session_id: i64) -> Option<Instant> {
        self.sessions.get(&session_id).map(|s| s.expire_at)
    }

    /// Paths of the ephemerals `session_id` owns, sorted.
    pub fn ephemerals_of(&self, session_id: i64) -> Vec<String> {
        self.tree
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == session_id && session_id != 0)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Total one-shot watches registered (data and exist watches share
    /// ZooKeeper's data table; plus child watches), like `wchc` totals
    /// without the persistent ones.
    pub fn watch_count(&self) -> usize {
        count_modes(&self.data_watches, |m| m == Mode::Standard)
            + count_modes(&self.child_watches, |m| m == Mode::Standard)
    }

    /// Persistent and recursive watch entries: an addWatch makes one in
    /// each table, so it counts 2 (until a later add on the same path by
    /// the same connection replaces a mode).
    pub fn persistent_watch_count(&self) -> usize {
        count_modes(&self.data_watches, |m| m != Mode::Standard)
            + count_modes(&self.child_watches, |m| m != Mode::Standard)
    }

    /// One-shot watches held by `session_id`'s current connection (0 if it
    /// has none).
    pub fn watches_of(&self, session_id: i64) -> usize {
        let Some(conn) = self.connection_of(session_id) else {
            return 0;
        };
        let count = |w: &Watches| {
            w.values()
                .filter(|m| m.get(&conn) == Some(&Mode::Standard))
                .count()
        };
        count(&self.data_watches) + count(&self.child_watches)
    }

    /// Standard child watches on `path`, one per connection.
    pub fn child_watch_count(&self, path: &str) -> usize {
        self.child_watches.get(path).map_or(0, |m| {
            m.values().filter(|mode| **mode == Mode::Standard).count()
        })
    }

    /// When `session` last read `path` successfully (see `last_reads`).
    pub fn last_read(&self, session: i64, path: &str) -> Option<Instant> {
        self.last_reads.get(&(session, path.to_owned())).copied()
    }

    /// Connections with a data watch (any mode) on `path`.
    pub fn data_watchers(&self, path: &str) -> Vec<ConnId> {
        self.data_watches
            .get(path)
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Paths with a watch of any mode in either table, sorted, no
    /// duplicates.
    pub fn watched_paths(&self) -> Vec<String> {
        let set: BTreeSet<String> = self
            .data_watches
            .keys()
            .chain(self.child_watches.keys())
            .cloned()
            .collect();
        set.into_iter().collect()
    }

    /// The zxid of the last txn.
    pub fn last_zxid(&self) -> i64 {
        self.zxid
    }

    /// Open connections, sorted.
    pub fn connections(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// The server's own bookkeeping agrees with itself: parents and children
    /// lists match, every ephemeral's owner lives and has no children,
    /// zxids are not from the future, every watch belongs to an open
    /// connection, and sessions and connections point at each other.
    /// Cheap enough to call after every simulation step.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (path, node) in &self.tree {
            if path != "/" {
                let parent = parent_of(path);
                let listed = self
                    .tree
                    .get(parent)
                    .is_some_and(|p| p.children.contains(name_of(path)));
                if !listed {
                    return Err(format!("{path} is not listed by its parent {parent}"));
                }
            }
            for child in &node.children {
                let full = if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                };
                if !self.tree.contains_key(&full) {
                    return Err(format!("{path} lists a missing child {child}"));
                }
            }
            let owner = node.stat.ephemeral_owner;
            if owner != 0 && owner != CONTAINER_OWNER {
                if !self.sessions.contains_key(&owner) {
                    return Err(format!("{path} is owned by dead session {owner:#x}"));
                }
                if !node.children.is_empty() {
                    return Err(format!("ephemeral {path} has children"));
                }
            }
            let st = &node.stat;
            if st.czxid > self.zxid || st.mzxid > self.zxid || st.pzxid > self.zxid {
                return Err(format!("{path} has a zxid above {:#x}", self.zxid));
            }
            if st.mzxid < st.czxid || st.pzxid < st.czxid {
                return Err(format!("{path}: mzxid or pzxid below czxid"));
            }
        }
        for table in [&self.data_watches, &self.child_watches] {
            for (path, conns) in table {
                if conns.is_empty() {
                    return Err(format!("empty watch set left on {path}"));
                }
                if let Some(c) = conns.keys().find(|c| !self.conns.contains_key(c)) {
                    return Err(format!("watch on {path} for closed conn {c}"));
                }
            }
        }
        for (id, s) in &self.sessions {
            if let Some(c) = s.conn {
                if self.conns.get(&c).and_then(|c| c.session) != Some(*id) {
                    return Err(format!("session {id:#x} points at conn {c}, not back"));
                }
            }
        }
        for (c, conn) in &self.conns {
            if let Some(id) = conn.session {
                if self.sessions.get(&id).and_then(|s| s.conn) != Some(*c) {
                    return Err(format!("conn {c} serves {id:#x}, which is elsewhere"));
                }
            }
        }
        if !self.running && !self.conns.is_empty() {
            return Err("connections open on a stopped server".into());
        }
        Ok(())
    }
}
