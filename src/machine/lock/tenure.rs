//! Lock-delay (Chubby's, Consul's): after a holder ends uncleanly, the
//! next holder waits before it is granted.
//!
//! A holder that ends uncleanly (its session expired or was closed under
//! it) may not know yet, and may still act as the holder for a while. The
//! server says nothing of how a node went, so holders leave a trace that
//! only a clean end removes: with lock-delay, a grant first creates a
//! persistent *tenure mark* `~tenure.<attempt uuid>` beside our node (in
//! one multi with a check that our node still exists), and a release
//! deletes node and mark in one multi. A mark whose attempt has no node in
//! the queue is what an unclean end leaves behind. Whoever is granted next
//! (a waiter or a newcomer) lists the queue, and if it finds such a mark
//! it waits the delay, counted from that listing, then deletes the mark
//! and makes its own.
//!
//! The names fit no contender pattern (a uuid has no `lock`, `lease`,
//! `latch` or `READ`), so zklock and kazoo skip them; Curator sorts them
//! after every sequence, where they block no one.

use std::time::Instant;

use jute::{CreateMode, CreateRequest, ErrorCode, MultiOp, OpCode, PathVersion, Request, Response};

use super::{list, AttemptId, LockMachine};
use crate::machine::attempt::{Goal, Purpose};
use crate::machine::error::LockError;
use crate::machine::queue::{protected_id, TENURE_MARK};
use crate::session::RequestError;
use crate::Error;

/// The tenure mark of the attempt with this protected id.
pub(crate) fn mark_name(uuid: &str) -> String {
    format!("{TENURE_MARK}{uuid}")
}

impl LockMachine {
    /// The grant, with lock-delay: look for marks of unclean ends first.
    /// Watches handed to the grant are dropped; the holder's own check
    /// after the grant sets what it needs.
    pub(super) fn begin_tenure(&mut self, id: AttemptId, watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let own = a.own_watch.take().map(|o| o.token);
        for t in [watch, own].into_iter().flatten() {
            self.watches.remove(&t);
        }
        a.tenure.get_or_insert_with(Box::default);
        let request = list(&a.spec.parent, false);
        self.send_main(id, Purpose::TenureList, request);
        // Duplicates of our node go now, not after the delay.
        self.send_strays(id);
    }

    pub(super) fn on_tenure_list(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let children = match result {
            Ok(Response::Children(children)) => children,
            Err(RequestError::Server(ErrorCode::NoNode)) => return self.node_vanished(id),
            // Listed again (and granted again) by the queue's own steps.
            _ => return self.step(id),
        };
        let Some(our_name) = a.node_name().map(str::to_owned) else {
            return self.step(id);
        };
        if !children.iter().any(|n| n == our_name) {
            return self.node_vanished(id);
        }
        let live: std::collections::HashSet<&str> =
            children.iter().filter_map(protected_id).collect();
        let mut stale = Vec::new();
        let mut ours = false;
        for name in children.iter() {
            let Some(owner) = name.strip_prefix(TENURE_MARK) else {
                continue;
            };
            if owner == a.uuid {
                ours = true;
            } else if !live.contains(owner) {
                stale.push(name.to_owned());
            }
        }
        let delay = a.spec.lock_delay.unwrap_or_default();
        let no_wait = matches!(a.goal, Goal::Acquire { no_wait: true, .. });
        let tenure = a.tenure.get_or_insert_with(Box::default);
        if ours {
            // Our mark was made (its reply lost), and only after the delay.
            tenure.marked = Some(our_name);
            return self.grant(now, id, None);
        }
        if !stale.is_empty() {
            tenure.unclean = true;
            if tenure.until.is_none() {
                let until = crate::deadline::after(now, delay);
                tenure.until = Some(until);
                self.delays.insert((until, id));
            }
        }
        tenure.stale = stale;
        if tenure.until.is_some_and(|u| u > now) {
            if no_wait {
                // A try-lock does not wait out a delay.
                return self.fail(id, LockError::Timeout);
            }
            // handle_timeout marks once the delay is served.
            return;
        }
        self.mark(id);
    }

    /// The delay is served (or none was due): make our mark, proving our
    /// node still exists in the same write, and sweep the stale ones.
    pub(super) fn mark(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.busy.is_some() || !matches!(a.goal, Goal::Acquire { .. }) {
            return;
        }
        let Some(name) = a.node_name() else {
            return self.step(id);
        };
        let node = a.spec.child(name);
        let mark = a.spec.child(&mark_name(&a.uuid));
        let request = Request::Multi(vec![
            MultiOp::Check(PathVersion {
                path: node,
                version: -1,
            }),
            MultiOp::Create(CreateRequest {
                path: mark,
                data: name.as_bytes().to_vec(),
                acl: a.spec.acl.clone(),
                mode: CreateMode::Persistent,
            }),
        ]);
        let stale = a
            .tenure
            .as_mut()
            .map(|t| std::mem::take(&mut t.stale))
            .unwrap_or_default();
        let paths: Vec<String> = stale.iter().map(|s| a.spec.child(s)).collect();
        self.send_main(id, Purpose::TenureMark, request);
        for path in paths {
            let delete = Request::Delete(PathVersion { path, version: -1 });
            self.send(id, Purpose::TenureSweep, delete, false);
        }
    }

    pub(super) fn on_tenure_mark(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let refused = match result {
            Ok(Response::Multi(results)) => crate::error::multi_failure(&results),
            // The connection dropped: list again (our mark may be there).
            _ => return self.step(id),
        };
        let made = matches!(refused, None | Some((1, ErrorCode::NodeExists)));
        if made {
            let name = a.node_name().map(str::to_owned);
            if let Some(t) = a.tenure.as_mut() {
                t.marked = name;
            }
        }
        if !matches!(a.goal, Goal::Acquire { .. }) {
            // Given up meanwhile: the release removes the mark with the node.
            return self.step(id);
        }
        match refused {
            // Made, or made before by a create whose reply was lost.
            None | Some((1, ErrorCode::NodeExists)) => self.grant(now, id, None),
            Some((0, _)) => self.node_vanished(id),
            Some((_, code)) => {
                let path = a.spec.child(&mark_name(&a.uuid));
                let error = Error::server(code).at(OpCode::Create, Some(path));
                self.fail(id, LockError::from(error))
            }
        }
    }

    /// Delays served by `now`: those still waiting make their marks.
    pub(super) fn serve_delays(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.delays.first() {
            if at > now {
                break;
            }
            self.delays.remove(&(at, id));
            self.mark(id);
        }
    }

    /// The release of a marked holder: node and mark in one write, so an
    /// unclean end is the only way a mark outlives its node.
    pub(super) fn release_marked(&mut self, id: AttemptId, name: &str) -> Option<Request> {
        let a = self.attempts.get(&id)?;
        let marked = a.tenure.as_ref()?.marked.as_deref()?;
        if marked != name {
            return None;
        }
        Some(Request::Multi(vec![
            MultiOp::Delete(PathVersion {
                path: a.spec.child(name),
                version: -1,
            }),
            MultiOp::Delete(PathVersion {
                path: a.spec.child(&mark_name(&a.uuid)),
                version: -1,
            }),
        ]))
    }
}
