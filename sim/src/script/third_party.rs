//! Other processes and an operator, writing as the model server's third
//! party (session 0): another process's contender queues or leaves, a
//! node carrying one of our attempts' ids appears, something that is no
//! contender at all appears, or an operator deletes one of our nodes.
//! Their nodes belong to no session (the model's third party owns none):
//! a foreign contender stays until the script takes it away.

use zklock::CreateMode;

use super::{Script, PATHS};

impl Script {
    /// Another process queues or leaves, or an operator deletes one of
    /// our nodes, on the queue `arg` names.
    pub(super) fn third_party(&mut self, arg: u8) {
        let queue = PATHS[usize::from(arg >> 4) % PATHS.len()];
        if self.server.exists(queue).is_none() {
            return;
        }
        let children = self.server.children(queue);
        let pick = |ours: bool| -> Option<String> {
            let matching: Vec<String> = children
                .iter()
                .map(|c| format!("{queue}/{c}"))
                .filter(|path| {
                    self.server
                        .exists(path)
                        .is_some_and(|s| (s.ephemeral_owner != 0) == ours)
                })
                .collect();
            let n = matching.len().max(1);
            matching.into_iter().nth(usize::from(arg >> 2) % n)
        };
        let now = self.now;
        match arg & 3 {
            // A contender of another process.
            0 => {
                self.foreign_count += 1;
                let name = format!(
                    "{queue}/_c_{:08x}-0000-4000-8000-000000000000-lock-",
                    self.foreign_count
                );
                let _ = self.server.create_as_admin(
                    now,
                    &name,
                    b"other",
                    CreateMode::PersistentSequential,
                );
            }
            // Another process's node that carries one of our attempts' ids.
            1 => {
                let ours = pick(true);
                if let Some((prefix, _)) = ours.as_deref().and_then(|p| p.split_once("-lock-")) {
                    let _ = self.server.create_as_admin(
                        now,
                        &format!("{prefix}-lock-"),
                        b"other",
                        CreateMode::PersistentSequential,
                    );
                } else {
                    // Or something that is no contender at all.
                    let _ = self.server.create_as_admin(
                        now,
                        &format!("{queue}/readme"),
                        b"other",
                        CreateMode::Persistent,
                    );
                }
            }
            // A foreign node leaves.
            2 => {
                if let Some(path) = pick(false) {
                    self.server.delete_as_admin(now, &path);
                }
            }
            // An operator deletes one of our nodes.
            _ => {
                if let Some(path) = pick(true) {
                    // What the server has due first (a session expiring
                    // now) goes out before the deletion is numbered.
                    self.server.handle_timeout(now);
                    self.drain_server();
                    let watchers = self.server.deletion_watchers(&path);
                    if self.server.delete_as_admin(now, &path) {
                        self.admin_deleted.insert(path, (self.writes, watchers));
                    }
                }
            }
        }
        self.drain_server();
    }
}
