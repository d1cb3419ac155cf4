//! Fault injection: cut and stalled connections, server restarts,
//! follower cuts, and third parties creating and deleting nodes.

use super::*;

impl World {
    pub(super) fn fault(&mut self, fault: Fault) {
        let now = self.now;
        self.note_fault_health(&fault);
        match fault {
            Fault::Cut { client, applied } => {
                let Some(mut link) = self.clients[client].link.take() else {
                    return;
                };
                if applied {
                    for (_, bytes) in link.up.drain(..) {
                        self.server.receive(now, link.conn, &bytes);
                    }
                }
                self.server.disconnect(now, link.conn);
                self.server_output();
                self.clients[client].core.handle_disconnected(now);
                self.clients[client].connect_at = now + Duration::from_millis(5);
            }
            Fault::LateCut { client } => {
                let Some(mut link) = self.clients[client].link.take() else {
                    return;
                };
                if let Some((session, authed)) = self.server.conn_session(link.conn) {
                    let bytes: Vec<u8> = link.up.drain(..).flat_map(|(_, b)| b).collect();
                    if !bytes.is_empty() {
                        self.note(|| {
                            format!("c{client}: {} bytes of writes land late", bytes.len())
                        });
                        self.server.hold_late_writes(now, session, authed, bytes);
                    }
                }
                self.server.disconnect(now, link.conn);
                self.server_output();
                self.clients[client].core.handle_disconnected(now);
                self.clients[client].connect_at = now + Duration::from_millis(5);
            }
            Fault::Stall { client, for_ } => {
                let c = &mut self.clients[client];
                c.partitioned_until = c.partitioned_until.max(now + for_);
                if let Some(link) = c.link.as_mut() {
                    link.stalled_until = Some(c.partitioned_until);
                }
            }
            Fault::Restart => {
                self.server.restart(now);
                self.server_output();
            }
            Fault::StallAfterGrant { client, for_ } => {
                self.clients[client].stall_after_grant = Some(for_);
            }
            Fault::Close { client } => {
                let c = &mut self.clients[client];
                if !c.core.state().is_terminal() {
                    c.core.abort(now);
                }
            }
            Fault::Expire { client } => {
                let session = self.clients[client].core.session_id();
                if !self.server.session_alive(session) {
                    return;
                }
                // As for a third party's deletion: what the server has due
                // first goes out before the kill is numbered, and each
                // node of the session is recorded as deleted under the
                // holder, who may say Held on until it reads past that.
                self.server.handle_timeout(now);
                self.server_output();
                let nodes = self.server.ephemerals_of(session);
                let watched: Vec<(String, Vec<ConnId>)> = nodes
                    .into_iter()
                    .map(|n| {
                        let w = self.server.deletion_watchers(&n);
                        (n, w)
                    })
                    .collect();
                for (node, _) in &watched {
                    self.note_latch_node(node);
                }
                self.server.expire_session(now, session);
                self.note(|| format!("c{client}: the server kills session {session:#x}"));
                // Its deletions go out one event a node, then the close: a
                // holder has read past them once it read the last.
                self.server_output();
                let before = self.writes.saturating_sub(1);
                for (node, watchers) in watched {
                    self.admin_deleted.insert(node, (before, watchers));
                }
                self.note_deletion(before);
            }
            Fault::FollowerCut { client, for_ } => {
                if let Some(conn) = self.clients[client].link.as_ref().map(|l| l.conn) {
                    self.server.cut_from_leader(now, conn);
                    self.schedule(now + for_, Action::CloseConn(conn));
                }
            }
            Fault::ForeignTwin { lock, for_ } => {
                let parent = queue_path(lock);
                let children = self.server.children(&parent);
                let protected: Vec<&String> =
                    children.iter().filter(|n| n.starts_with("_c_")).collect();
                if protected.is_empty() {
                    return;
                }
                let pick = protected[self.rng.below(protected.len() as u64) as usize];
                // `_c_` and the 36 characters of the attempt id.
                let Some(prefix) = pick.get(..39) else {
                    return;
                };
                let path = format!("{parent}/{prefix}-lock-");
                let original = format!("{parent}/{pick}");
                let owner = self.server.exists(&original).map(|s| s.ephemeral_owner);
                // Half of the twins are another client's (its session owns
                // the node), half a third party's (owned by no session).
                let other = self
                    .clients
                    .iter()
                    .position(|c| Some(c.core.session_id()) != owner)
                    .filter(|_| self.rng.chance(1, 2));
                let carrier = owner.unwrap_or(0);
                let prefix = prefix.to_owned();
                let by_session =
                    other.is_some_and(|c| self.session_twin(c, &parent, &prefix, carrier, for_));
                if !by_session {
                    if let Ok(twin) = self.server.create_as_admin(
                        now,
                        &path,
                        b"twin",
                        zklock::CreateMode::PersistentSequential,
                    ) {
                        self.note(|| format!("third party creates {twin}"));
                        self.admin_twins.push(twin.clone());
                        self.schedule(now + for_, Action::AdminDeletePath(twin));
                    }
                }
                self.server_output();
                // The worst moment for the original's owner: its node goes,
                // it queues again under the same attempt id, and that
                // create's reply is lost, so it looks for its node by id.
                let watchers = self.server.deletion_watchers(&original);
                self.note_latch_node(&original);
                if self.server.delete_as_admin(now, &original) {
                    self.admin_deleted.insert(original, (self.writes, watchers));
                    self.note_deletion(self.writes);
                    let owner = self
                        .clients
                        .iter()
                        .position(|c| Some(c.core.session_id()) == owner);
                    if let Some(client) = owner {
                        let at = now + Duration::from_millis(1 + self.rng.below(8));
                        self.schedule(
                            at,
                            Action::Fault(Fault::Cut {
                                client,
                                applied: true,
                            }),
                        );
                    }
                }
                self.server_output();
            }
            Fault::AdminDelete { lock, head } => {
                let parent = queue_path(lock);
                let names: Vec<String> =
                    zklock_proto::lock::sorted_contenders(self.server.children(&parent))
                        .into_iter()
                        .map(|c| c.name)
                        .collect();
                let pick = if head {
                    names.first().cloned()
                } else if names.is_empty() {
                    None
                } else {
                    Some(names[self.rng.below(names.len() as u64) as usize].clone())
                };
                if let Some(name) = pick {
                    let path = format!("{parent}/{name}");
                    // What the server has due first (a session expiring
                    // now) goes out before the deletion is numbered: a
                    // client reading it has not read past the deletion.
                    self.server.handle_timeout(now);
                    self.server_output();
                    let watchers = self.server.deletion_watchers(&path);
                    self.note_latch_node(&path);
                    if self.server.delete_as_admin(now, &path) {
                        self.admin_deleted.insert(path, (self.writes, watchers));
                        self.note_deletion(self.writes);
                    }
                    self.server_output();
                }
            }
        }
    }
}
