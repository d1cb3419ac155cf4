//! Finding our node again: after a create whose reply was lost, a sync of
//! the lock path and a listing look for the node by its attempt id; a node
//! found again (or created inside a multi) has its Stat read before a grant,
//! and one owned by another session is never adopted nor deleted.

use jute::{ErrorCode, Request, Response};

use super::{AttemptId, LockMachine};
use crate::lock::attempt::Node;
use crate::lock::purpose::Purpose;
use crate::lock::queue::sorted_contenders;
use crate::session::RequestError;

impl LockMachine {
    /// A sync of `parent`, for the listing sent right behind it (see
    /// [`Purpose::CatchUp`]); its reply says nothing we act on.
    pub(super) fn catch_up(&mut self, id: AttemptId, parent: &str) {
        self.send(
            id,
            Purpose::CatchUp,
            Request::Sync(parent.to_owned()),
            false,
        );
    }

    pub(super) fn on_recover(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        match result {
            Ok(Response::Children(children)) => {
                let mut ours: Vec<_> = sorted_contenders(&children)
                    .into_iter()
                    .filter(|c| c.protected_id() == Some(a.uuid.as_str()))
                    .collect();
                if let Some(m) = a.phase.maybe_created_mut() {
                    *m = false;
                }
                if !ours.is_empty() {
                    let first = ours.remove(0);
                    a.node = Some(Node {
                        name: first.name,
                        stat: None,
                        found: true,
                    });
                    for extra in ours {
                        a.add_suspect(&extra.name);
                    }
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                if let Some(m) = a.phase.maybe_created_mut() {
                    *m = false;
                }
            }
            _ => {}
        }
        self.step(id)
    }

    pub(super) fn on_stat(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
        let session_id = self.session_id;
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        match result {
            Ok(Response::Stat(stat)) => {
                if let Some(node) = a.node.as_mut() {
                    if stat.ephemeral_owner == session_id {
                        node.stat = Some(stat);
                    } else {
                        // Our attempt id under another owner: not ours to
                        // adopt, nor to delete (another session's node).
                        a.node = None;
                    }
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => a.node = None,
            _ => {}
        }
        self.step(id)
    }

    /// The owner of a node with our attempt id that a listing showed: our
    /// session's (a late create of ours) is deleted; another session's is
    /// left alone.
    pub(super) fn on_stray_stat(
        &mut self,
        id: AttemptId,
        name: &str,
        result: Result<Response, RequestError>,
    ) {
        let session_id = self.session_id;
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.deleting.retain(|n| n != name);
        match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == session_id => {
                a.add_stray(name);
            }
            Ok(_) => {
                let path = a.spec.child(name);
                log::warn!("{path} carries our attempt id but another session owns it: left alone");
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => {}
            // Read again (after the reconnect, while the session lives).
            Err(_) => a.add_suspect(name),
        }
        self.step(id)
    }

    /// The reply to the read that sets our own-node watch.
    /// A read of our own node tells its Stat, if we did not know it (a
    /// node created inside a multi): a grant then needs no read of its own.
    pub(super) fn learn_stat(&mut self, id: AttemptId, result: &Result<Response, RequestError>) {
        let session_id = self.session_id;
        let (Some(a), Ok(Response::Data { stat, .. })) = (self.attempts.get_mut(&id), result)
        else {
            return;
        };
        match a.node.as_mut() {
            Some(node) if node.stat.is_none() && stat.ephemeral_owner == session_id => {
                node.stat = Some(*stat);
            }
            // Our attempt id under another owner: neither adopted nor
            // deleted.
            Some(node) if node.stat.is_none() => a.node = None,
            _ => {}
        }
    }
}
