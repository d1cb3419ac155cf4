//! Nodes that carry an attempt's id but belong to another session: a
//! third party's (owned by no session) or another client's (its session
//! owns it), both made by the `ForeignTwin` fault. The attempt whose id
//! they carry must never take one for its own: never hold the lock by it
//! (S1 checks the owner of every held node) and never delete it
//! (checked here, from who deleted it on the server).

use super::*;

/// A twin owned by another client's session.
#[derive(Debug)]
pub(super) struct Twin {
    path: String,
    /// The session that owns it.
    owner: i64,
    /// The session of the attempt whose id it carries.
    carrier: i64,
}

impl World {
    /// Client `c`'s session creates a node carrying the attempt id
    /// `prefix` (of `carrier`'s attempt) under `parent`, as another
    /// application on that client would; it deletes it after `for_`.
    pub(super) fn session_twin(
        &mut self,
        c: usize,
        parent: &str,
        prefix: &str,
        carrier: i64,
        for_: Duration,
    ) -> bool {
        let owner = self.clients[c].core.session_id();
        let path = format!("{parent}/{prefix}-lock-");
        let Ok(twin) = self.server.create_as_session(
            self.now,
            owner,
            &path,
            b"twin",
            zklock::CreateMode::EphemeralSequential,
        ) else {
            return false;
        };
        self.note(|| format!("c{c}'s session {owner:#x} creates {twin}"));
        self.admin_twins.push(twin.clone());
        self.schedule(self.now + for_, Action::AdminDeletePath(twin.clone()));
        self.foreign_twins.push(Twin {
            path: twin,
            owner,
            carrier,
        });
        true
    }

    /// Whether `path` is a twin owned by some client's session (its own
    /// application's node, not an acquisition of the client's).
    pub(super) fn is_session_twin(&self, path: &str) -> bool {
        self.foreign_twins.iter().any(|t| t.path == path)
    }

    /// After every step: a twin that is gone was deleted by its owner, its
    /// session's end, or the third party that stands for its owner's
    /// application, never by the session whose attempt id it carries.
    pub(super) fn check_twins(&mut self) -> Result<(), Violation> {
        if self.foreign_twins.is_empty() {
            return Ok(());
        }
        let mut gone = Vec::new();
        for (i, t) in self.foreign_twins.iter().enumerate() {
            if self.server.exists(&t.path).is_some() {
                continue;
            }
            gone.push(i);
            let by = self.server.deleted_by(&t.path);
            if by != Some(t.owner) && by != Some(0) {
                let who = if by == Some(t.carrier) {
                    "the session whose attempt id it carries".to_owned()
                } else {
                    format!("{by:#x?}")
                };
                return Err(self.violation(format!(
                    "{} (owned by session {:#x}, carrying the attempt id of session {:#x}) deleted by {who}",
                    t.path, t.owner, t.carrier
                )));
            }
        }
        for i in gone.into_iter().rev() {
            self.foreign_twins.remove(i);
        }
        Ok(())
    }
}
