//! Lock-delay (Chubby's, Consul's): after a holder ends uncleanly, no one
//! is granted before the delay has passed, counted on the server from the
//! end as first recorded there.
//!
//! A holder that ends uncleanly (its session expired or was closed under
//! it, or a third party deleted its node) may not know yet, and may still
//! act as the holder for a while. The server says nothing of how a node
//! went, so holders leave a trace that only a clean end removes: with
//! lock-delay, a grant first creates a persistent *tenure mark*
//! `<lock path>~tenure/<attempt uuid>` (data: our node's name), in one
//! multi with a check that our node still exists, and a release deletes
//! node and mark in one multi. A mark whose attempt has no node in the
//! queue is what an unclean end leaves behind.
//!
//! **Where the marks live.** Not among the lock path's children: Curator
//! counts every child there (`LockInternals.getParticipantNodes`, behind
//! `InterProcessMutex.getParticipantNodes` and `LeaderLatch` /
//! `LeaderSelector.getParticipants`, lists them as participants, and its
//! semaphore counts each as a lease). Nor in the lock path's own data: the
//! lock path is most often a container (Curator and zklock create it so),
//! and
//! the server's reaper deletes a container without children, within about
//! a minute, taking any record in its data with it — after the unclean end
//! of the only holder, its record could go before anyone saw it, and the
//! next holder would skip the delay. A sibling container,
//! `<lock path>~tenure` ([`tenure_path`](crate::lock::tenure_path)),
//! holds one mark per holder: a stale mark keeps it from the reaper for as
//! long as the record is needed, and once every mark is gone (clean
//! releases, sweeps) the reaper may take it, which loses nothing. A grant
//! that finds it gone creates it again. A record is lost only if a third
//! party deletes a stale mark (or the sibling) by hand.
//!
//! **When the delay ends.** The end is recorded on the server by the first
//! grant that sees it: a mark at version 0 without its node gets a setData
//! at version 0, and that write's mtime — stamped by the leader's clock,
//! the same for every client — is the recorded end. Later grants read it.
//! The delay ends when the server's clock reaches record + delay. A grant
//! learns the server's clock from the times the server stamps on writes:
//! its node's ctime (create2's Stat) with the local instant its reply came
//! in, the mtime of its own recording write, and the mtime of each
//! recorded end it reads (a node found again after a reconnect may be
//! far older than the record). Each such reading gives a local instant by
//! which the server's time has reached the end ([`ServerClock`]): only the
//! time since a reading is measured locally (the monotonic clock, off by
//! its drift from the leader's over the delay), no client's wall clock is
//! trusted, and nothing depends on when each caller first looked:
//!
//! - a try (`no_wait`) is granted at once when its node was created (on
//!   the server's clock) at or after record + delay, and refused
//!   otherwise, leaving the record for the next try;
//! - a timed or blocking wait is granted once the server's clock has
//!   passed record + delay, however long ago its node was made;
//! - after a clean end there is no mark without a node, and no delay.
//!
//! Why not count the delay from each caller's own look at a stale mark:
//! every try would start a delay of its own and give up, and every timed
//! wait shorter than the delay too, so callers that only try would be
//! locked out for good after one unclean end.
//!
//! The order of the reads matters: the marks are listed before the queue.
//! A mark listed was made while its node existed; if the queue listed
//! after has no node of its attempt, that node went before then. A clean
//! release takes the mark with the node, so the read (or the recording
//! write at version 0) that follows finds no mark: no unclean end is
//! recorded for a clean one. The delay is the leader's wall clock: a leader
//! change to a server whose clock is behind (or a clock stepped back)
//! lengthens it by that much, one ahead shortens it by that much.

use std::time::Instant;

use jute::{
    CreateMode, CreateRequest, ErrorCode, MultiOp, OpCode, PathVersion, PathWatch, Request,
    Response, SetDataRequest,
};

use super::{list, AttemptId, LockMachine};
use crate::lock::attempt::{Goal, Purpose, ServerClock};
use crate::lock::error::LockError;
use crate::lock::queue::{protected_id, tenure_path};
use crate::session::RequestError;

/// The data a recording write leaves in a mark (its version, 1, is what
/// says the end is recorded; the text is for people reading the tree).
const ENDED: &[u8] = b"ended";

impl LockMachine {
    /// The grant, with lock-delay: list the marks, then the queue, and look
    /// for marks of unclean ends. Watches handed to the grant are dropped;
    /// the holder's own check after the grant sets what it needs.
    pub(super) fn begin_tenure(&mut self, id: AttemptId, watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let own = a.own_watch.take().map(|o| o.token);
        for t in [watch, own].into_iter().flatten() {
            self.watches.remove(&t);
        }
        let marks = list(&tenure_path(&a.spec.parent), false);
        let queue = list(&a.spec.parent, false);
        let token = self.send(id, Purpose::TenureMarks, marks, false);
        if let Some(a) = self.attempts.get_mut(&id) {
            let t = a.tenure.get_or_insert_with(Box::default);
            t.marks_token = Some(token);
            t.marks = None;
        }
        self.send_main(id, Purpose::TenureList, queue);
        // Duplicates of our node go now, not after the delay.
        self.send_strays(id);
    }

    /// The marks, listed just before the queue (whose reply comes next).
    pub(super) fn on_tenure_marks(
        &mut self,
        id: AttemptId,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        let Some(t) = self.attempts.get_mut(&id).and_then(|a| a.tenure.as_mut()) else {
            return;
        };
        if t.marks_token != Some(token) {
            return;
        }
        t.marks_token = None;
        t.marks = match result {
            Ok(Response::Children(names)) => Some(names.iter().map(str::to_owned).collect()),
            // No mark was ever made, or every one is gone (reaped).
            Err(RequestError::Server(ErrorCode::NoNode)) => Some(Vec::new()),
            // Refused (an ACL): it would be refused again at once, and
            // without the marks no grant can be safe.
            Err(RequestError::Server(code)) => {
                t.marks_refused = Some(code);
                None
            }
            // The connection dropped: the queue's listing fails too, and
            // both are sent again.
            _ => None,
        };
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
        if let Some(code) = a.tenure.as_mut().and_then(|t| t.marks_refused.take()) {
            let path = tenure_path(&a.spec.parent);
            let error =
                LockError::request(OpCode::GetChildren, Some(path), RequestError::Server(code));
            return self.fail(id, error);
        }
        let Some(marks) = a.tenure.as_mut().and_then(|t| t.marks.take()) else {
            // The marks' listing was lost with the connection: list both
            // again.
            return self.step(id);
        };
        let live: std::collections::HashSet<&str> =
            children.iter().filter_map(protected_id).collect();
        let mut ours = false;
        let mut to_read = Vec::new();
        for owner in marks {
            if owner == a.uuid {
                ours = true;
            } else if !live.contains(owner.as_str()) {
                to_read.push(owner);
            }
        }
        let tenure = a.tenure.get_or_insert_with(Box::default);
        if ours {
            // Our mark was made (its reply lost), and only after the delay.
            tenure.marked = Some(our_name);
            return self.grant(now, id, None);
        }
        tenure.to_read = to_read;
        tenure.stale.clear();
        self.read_next_mark(now, id);
    }

    /// Reads the next mark without a node; once none is left, decides.
    fn read_next_mark(&mut self, now: Instant, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let next = a.tenure.as_ref().and_then(|t| t.to_read.last());
        match next {
            Some(owner) => {
                let path = crate::path::join(&tenure_path(&a.spec.parent), owner);
                let read = Request::GetData(PathWatch { path, watch: false });
                self.send_main(id, Purpose::TenureRead, read);
            }
            None => self.decide(now, id),
        }
    }

    /// The mark an attempt still acquiring is reading or recording; `None`
    /// (the caller steps the attempt on) when it no longer is.
    fn mark_in_hand(&self, id: AttemptId) -> Option<String> {
        let a = self.attempts.get(&id)?;
        if !matches!(a.goal, Goal::Acquire { .. }) {
            return None;
        }
        a.tenure.as_ref()?.to_read.last().cloned()
    }

    /// A mark without a node, read: recorded already, or to record now.
    pub(super) fn on_tenure_read(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(owner) = self.mark_in_hand(id) else {
            return self.step(id);
        };
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(t) = a.tenure.as_mut() else {
            return;
        };
        let path = crate::path::join(&tenure_path(&a.spec.parent), &owner);
        match result {
            Ok(Response::Data { stat, .. }) if stat.version > 0 => {
                t.to_read.pop();
                t.stale.push((owner, stat.mtime));
                // The server's clock had reached the record by this reply.
                let reading = ServerClock {
                    server_ms: stat.mtime,
                    local: now,
                };
                a.server_clock = Some(reading.best(a.server_clock));
                self.read_next_mark(now, id)
            }
            // Not recorded yet: we are the first to see this end.
            Ok(Response::Data { .. }) => {
                let write = Request::SetData(SetDataRequest {
                    path,
                    data: ENDED.to_vec(),
                    version: 0,
                });
                self.send_main(id, Purpose::TenureRecord, write);
            }
            // Released cleanly since the listing (or swept by a holder
            // granted after the delay): no delay is due for it.
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                t.to_read.pop();
                self.read_next_mark(now, id)
            }
            // The marks' ACL keeps us from reading it: count the delay
            // from now, as if we recorded it now.
            Err(RequestError::Server(ErrorCode::NoAuth)) => {
                t.to_read.pop();
                t.unrecorded.get_or_insert(now);
                self.read_next_mark(now, id)
            }
            Err(RequestError::Server(code)) => {
                let error =
                    LockError::request(OpCode::GetData, Some(path), RequestError::Server(code));
                self.fail(id, error)
            }
            // The connection dropped: list again.
            _ => self.step(id),
        }
    }

    /// Our recording write: its mtime is the recorded end, and a fresh
    /// reading of the server's clock.
    pub(super) fn on_tenure_record(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(owner) = self.mark_in_hand(id) else {
            return self.step(id);
        };
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(t) = a.tenure.as_mut() else {
            return;
        };
        match result {
            Ok(Response::Stat(stat)) => {
                t.to_read.pop();
                t.stale.push((owner, stat.mtime));
                let reading = ServerClock {
                    server_ms: stat.mtime,
                    local: now,
                };
                a.server_clock = Some(reading.best(a.server_clock));
                self.read_next_mark(now, id)
            }
            // Recorded by another meanwhile: read its time. Gone: as a read
            // that finds it gone.
            Err(RequestError::Server(ErrorCode::BadVersion | ErrorCode::NoNode)) => {
                if matches!(result, Err(RequestError::Server(ErrorCode::NoNode))) {
                    t.to_read.pop();
                }
                self.read_next_mark(now, id)
            }
            // The marks' ACL keeps us from writing: as a read refused.
            Err(RequestError::Server(ErrorCode::NoAuth)) => {
                t.to_read.pop();
                t.unrecorded.get_or_insert(now);
                self.read_next_mark(now, id)
            }
            Err(RequestError::Server(code)) => {
                let path = crate::path::join(&tenure_path(&a.spec.parent), &owner);
                let error =
                    LockError::request(OpCode::SetData, Some(path), RequestError::Server(code));
                self.fail(id, error)
            }
            // The connection dropped (the write may be in): list again; a
            // write that was applied is read back as recorded.
            _ => self.step(id),
        }
    }

    /// Every mark without a node is read: mark now, wait, or (a try)
    /// give up.
    fn decide(&mut self, now: Instant, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let delay = a.spec.lock_delay.unwrap_or_default();
        let no_wait = matches!(a.goal, Goal::Acquire { no_wait: true, .. });
        let clock = a.server_clock;
        let Some(t) = a.tenure.as_mut() else {
            return self.step(id);
        };
        if let Some(old) = t.until.take() {
            self.delays.remove(&(old, id));
        }
        let recorded = t.stale.iter().map(|(_, at)| *at).max();
        let unrecorded = t.unrecorded.take();
        if recorded.is_none() && unrecorded.is_none() {
            return self.mark(id);
        }
        t.unclean = true;
        let delay_ms = i64::try_from(delay.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX);
        // The server's time has reached `recorded` before the read that
        // told it came in: with no reading of our own, wait the whole delay.
        let by_record = recorded.map(|at| match clock {
            Some(c) => c.reaches(at.saturating_add(delay_ms)),
            None => crate::deadline::after(now, delay),
        });
        // An end we could neither read nor record: the whole delay from
        // when we saw it (the server's clock was past the end by then).
        let by_sight = unrecorded.map(|seen| crate::deadline::after(seen, delay));
        let until = by_record.max(by_sight).unwrap_or(now);
        if until <= now {
            return self.mark(id);
        }
        if no_wait {
            // A try does not wait out a delay; the record stays for the
            // next one.
            return self.fail(id, LockError::Timeout);
        }
        t.until = Some(until);
        self.delays.insert((until, id));
    }

    /// The delay is served (or none was due): make our mark, proving our
    /// node still exists in the same write.
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
        let dir = tenure_path(&a.spec.parent);
        let node = a.spec.child(name);
        let mark = crate::path::join(&dir, &a.uuid);
        let request = Request::Multi(vec![
            MultiOp::Check(PathVersion {
                path: node,
                version: -1,
            }),
            MultiOp::Create(CreateRequest {
                path: mark,
                data: name.as_bytes().to_vec(),
                // Every contender reads it and records an end on it: the
                // lock path's ACL, not our node's (which may be the
                // creator's alone).
                acl: a.spec.parent_acl.clone(),
                mode: CreateMode::Persistent,
            }),
        ]);
        self.send_main(id, Purpose::TenureMark, request);
    }

    /// Deletes the marks of the unclean ends this grant waited out. Only
    /// once granted: an attempt that gives up with its mark in flight
    /// leaves the record, and whoever is granted next is told of the end.
    fn sweep(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let dir = tenure_path(&a.spec.parent);
        let stale = a
            .tenure
            .as_mut()
            .map(|t| std::mem::take(&mut t.stale))
            .unwrap_or_default();
        for (owner, _) in stale {
            let path = crate::path::join(&dir, &owner);
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
            Ok(Response::Multi(results)) => jute::MultiResult::first_failure(&results),
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
            None | Some((1, ErrorCode::NodeExists)) => {
                if let Goal::Acquire {
                    deadline: Some(d), ..
                } = a.goal
                {
                    if d <= now {
                        // The caller has given up by now (its own clock
                        // says so too): a grant would go to no one, and
                        // its sweep would hide the unclean end from the
                        // next holder.
                        return self.fail(id, LockError::Timeout);
                    }
                }
                self.sweep(id);
                self.grant(now, id, None)
            }
            Some((0, _)) => self.node_vanished(id),
            // The marks' parent is gone (never made, or reaped once
            // empty): make it, then mark again.
            Some((1, ErrorCode::NoNode)) => {
                let create = Request::CreateContainer(CreateRequest {
                    path: tenure_path(&a.spec.parent),
                    data: Vec::new(),
                    acl: a.spec.parent_acl.clone(),
                    mode: CreateMode::Container,
                });
                self.send_main(id, Purpose::TenureDir, create);
            }
            Some((_, code)) => {
                let path = crate::path::join(&tenure_path(&a.spec.parent), &a.uuid);
                let error =
                    LockError::request(OpCode::Create, Some(path), RequestError::Server(code));
                self.fail(id, error)
            }
        }
    }

    /// The marks' parent, created (or found made by another).
    pub(super) fn on_tenure_dir(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NodeExists)) => self.mark(id),
            Err(RequestError::Server(code)) if code != ErrorCode::NoNode => {
                let path = tenure_path(&a.spec.parent);
                let error = LockError::request(
                    OpCode::CreateContainer,
                    Some(path),
                    RequestError::Server(code),
                );
                self.fail(id, error)
            }
            // The lock path's parent went, or the connection dropped.
            _ => self.step(id),
        }
    }

    /// Delays served by `now`: those still waiting make their marks.
    pub(super) fn serve_delays(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.delays.first() {
            if at > now {
                break;
            }
            self.delays.remove(&(at, id));
            let current = self
                .attempts
                .get_mut(&id)
                .and_then(|a| a.tenure.as_mut())
                .filter(|t| t.until == Some(at));
            if let Some(t) = current {
                t.until = None;
                self.mark(id);
            }
        }
    }

    /// Takes a reading of the server's clock from our node's ctime, with
    /// `now`, the instant a reply about the attempt came in (the node's
    /// Stat came in then or before).
    pub(super) fn read_server_clock(&mut self, id: AttemptId, now: Instant) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.spec.lock_delay.is_none() {
            return;
        }
        let Some(stat) = a.node.as_ref().and_then(|n| n.stat) else {
            return;
        };
        let reading = ServerClock {
            server_ms: stat.ctime,
            local: now,
        };
        a.server_clock = Some(reading.best(a.server_clock));
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
                path: crate::path::join(&tenure_path(&a.spec.parent), &a.uuid),
                version: -1,
            }),
        ]))
    }
}
