//! Release and queue again in one write: a holder that loops over the same
//! lock deletes its node and creates the next one in a single `multi`, one
//! commit on the server instead of two.
//!
//! The multi is all or nothing. If it fails on the delete (our node was
//! already gone), nothing was applied and the new attempt creates its node
//! the usual way; if it fails on the create (an ACL), the old node still
//! exists and is deleted the usual way; if its reply is lost, the old node
//! is deleted by name and the new one found again by attempt id.

use std::sync::Arc;
use std::time::Instant;

use jute::{CreateMode, CreateRequest, MultiOp, MultiResult, PathVersion, Request, Response};

use super::{AttemptId, LockMachine};
use crate::lock::attempt::{Attempt, LockSpec};
use crate::lock::phase::{Phase, Releasing};
use crate::lock::purpose::Purpose;
use crate::session::{RequestError, SessionState};

impl LockMachine {
    /// The holder `old` lets go and a new acquisition `id` of `spec`
    /// queues, in one write when `old` holds a node on the same lock path
    /// (else a release and an acquisition, as if asked one after the
    /// other). `old`'s release is reported ([`super::LockEvent::Released`]).
    pub fn requeue(
        &mut self,
        now: Instant,
        old: AttemptId,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
    ) {
        let together = self.session == Some(SessionState::Connected)
            && self.attempts.get(&old).is_some_and(|a| {
                a.phase.is_held()
                    && a.spec.parent == spec.parent
                    && a.node_name().is_some()
                    && a.delay.is_none()
            });
        if !together {
            self.release(now, old, true);
            return self.acquire(now, id, spec, uuid, deadline, false);
        }
        // The old holder: releasing, its node's delete in the multi.
        self.unhold(old);
        let Some(a) = self.attempts.get_mut(&old) else {
            return;
        };
        let Phase::Held(h) = &a.phase else {
            return;
        };
        // Its listing still out from the queue, if any, is awaited as
        // before; the delete in the multi is its node's.
        let releasing = Releasing {
            awaits: h.late,
            maybe_created: false,
            report: true,
        };
        for t in [h.watch, h.end_watch].into_iter().flatten() {
            self.watches.remove(&t);
        }
        if let Some(end) = h.max_hold_end {
            self.max_holds.remove(&(end, old));
        }
        a.phase = Phase::Releasing(releasing);
        let Some(name) = a.node.take().map(|n| n.name) else {
            return;
        };
        a.deleting.push(name.clone());
        let old_path = a.spec.child(&name);
        // The new attempt: its create may be applied from the moment the
        // multi leaves; the listing behind it goes in the same turn.
        if let Some(d) = deadline {
            self.deadlines.insert((d, id));
        }
        let mut attempt = Attempt::new(spec.clone(), uuid, deadline, false);
        if let Some(q) = attempt.phase.as_queueing() {
            q.create();
        }
        let prefix = spec.node_prefix(&attempt.uuid);
        self.attempts.insert(id, Box::new(attempt));
        let request = Request::Multi(vec![
            MultiOp::Delete(PathVersion {
                path: old_path,
                version: -1,
            }),
            MultiOp::Create2(CreateRequest {
                path: prefix,
                data: spec.data.clone(),
                acl: spec.acl.clone(),
                mode: CreateMode::EphemeralSequential,
            }),
        ]);
        self.send_main(id, Purpose::Requeue { old, name }, request);
        self.want_listing(&spec.parent, id);
        self.handle_timeout(now);
    }

    pub(super) fn on_requeued(
        &mut self,
        id: AttemptId,
        token: u64,
        old: AttemptId,
        name: &str,
        result: Result<Response, RequestError>,
    ) {
        if let Some(a) = self.attempts.get_mut(&old) {
            a.deleting.retain(|n| n != name);
        }
        let (old_gone, created) = match result {
            Ok(Response::Multi(results)) => match jute::MultiResult::first_failure(&results) {
                None => {
                    let created = match results.get(1) {
                        Some(MultiResult::Create2 { path, stat }) => Ok(Response::Created {
                            path: path.clone(),
                            stat: *stat,
                        }),
                        // ZooKeeper 3.8 answers a create2 inside a multi as
                        // a plain create: the name, without the Stat.
                        Some(MultiResult::Create { path }) => Ok(Response::Path(path.clone())),
                        _ => Err(RequestError::ConnectionLoss),
                    };
                    (true, Some(created))
                }
                // Our node was already gone; nothing was applied.
                Some((0, _)) => (true, None),
                // The create was refused; the delete was rolled back.
                Some((_, code)) => (false, Some(Err(RequestError::Server(code)))),
            },
            // Lost on the way: either both happened or neither.
            other => {
                if let Some(a) = self.attempts.get_mut(&old) {
                    a.strays.push(name.to_owned());
                }
                let created = match other {
                    Ok(_) => Err(RequestError::ConnectionLoss),
                    Err(e) => Err(e),
                };
                (true, Some(created))
            }
        };
        if !old_gone {
            if let Some(a) = self.attempts.get_mut(&old) {
                a.strays.push(name.to_owned());
            }
        }
        self.step(old);
        match created {
            Some(result) => self.on_created(id, token, result),
            None => {
                // Create it the usual way; the listing sent behind the
                // multi is stale.
                if let Some(a) = self.attempts.get_mut(&id) {
                    if let Some(m) = a.phase.maybe_created_mut() {
                        *m = false;
                    }
                    if let Some(c) = a.phase.as_queueing().and_then(|q| q.step.creating()) {
                        c.listing = None;
                    }
                }
                self.step(id)
            }
        }
    }
}
