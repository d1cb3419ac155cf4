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
use crate::lock::delay::{DelayPurpose, Stage};
use crate::lock::error::LockError;
use crate::lock::phase::Phase;
use crate::lock::purpose::Purpose;
use crate::lock::queue::{protected_id, tenure_path};
use crate::session::RequestError;

/// The data a recording write leaves in a mark (its version, 1, is what
/// says the end is recorded; the text is for people reading the tree).
const ENDED: &[u8] = b"ended";

impl LockMachine {
    /// The reply to a lock-delay request, routed to its step.
    pub(super) fn on_delay_reply(
        &mut self,
        now: Instant,
        id: AttemptId,
        token: u64,
        purpose: DelayPurpose,
        result: Result<Response, RequestError>,
    ) {
        match purpose {
            DelayPurpose::Marks => self.on_tenure_marks(id, token, result),
            DelayPurpose::List => self.on_tenure_list(now, id, result),
            DelayPurpose::Read => self.on_tenure_read(now, id, result),
            DelayPurpose::Record => self.on_tenure_record(now, id, result),
            DelayPurpose::Dir => self.on_tenure_dir(id, result),
            DelayPurpose::Mark => self.on_tenure_mark(now, id, result),
            DelayPurpose::Sweep => {}
        }
    }

    fn send_delay(&mut self, id: AttemptId, purpose: DelayPurpose, request: Request) {
        let q = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing());
        if let Some(q) = q {
            q.begin_granting();
        }
        self.send_main(id, Purpose::Delay(purpose), request);
    }

    /// The grant, with lock-delay: list the marks, then the queue, and look
    /// for marks of unclean ends. Watches handed to the grant are dropped;
    /// the holder's own check after the grant sets what it needs.
    pub(super) fn begin_tenure(&mut self, id: AttemptId, watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let own = a.phase.as_queueing().and_then(|q| q.own_watch.take());
        let own = own.map(|o| o.token);
        for t in [watch, own].into_iter().flatten() {
            self.watches.remove(&t);
        }
        let marks = list(&tenure_path(&a.spec.parent), false);
        let queue = list(&a.spec.parent, false);
        let purpose = Purpose::Delay(DelayPurpose::Marks);
        let token = self.send(id, purpose, marks, false);
        if let Some(d) = self.attempts.get_mut(&id).and_then(|a| a.delay.as_mut()) {
            let left = d.stage.leftover();
            d.stage = Stage::Listing {
                marks_token: Some(token),
                marks: None,
                left,
            };
        }
        self.send_delay(id, DelayPurpose::List, queue);
        // Duplicates of our node go now, not after the delay.
        self.send_strays(id);
    }

    /// The marks, listed just before the queue (whose reply comes next).
    fn on_tenure_marks(
        &mut self,
        id: AttemptId,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        let Some(d) = self.attempts.get_mut(&id).and_then(|a| a.delay.as_mut()) else {
            return;
        };
        let Stage::Listing {
            marks_token,
            marks,
            left,
        } = &mut d.stage
        else {
            return;
        };
        if *marks_token != Some(token) {
            return;
        }
        *marks_token = None;
        *marks = match result {
            Ok(Response::Children(names)) => Some(names.iter().map(str::to_owned).collect()),
            // No mark was ever made, or every one is gone (reaped).
            Err(RequestError::Server(ErrorCode::NoNode)) => Some(Vec::new()),
            // Refused (an ACL): it would be refused again at once, and
            // without the marks no grant can be safe.
            Err(RequestError::Server(code)) => {
                left.refused = Some(code);
                None
            }
            // The connection dropped: the queue's listing fails too, and
            // both are sent again.
            _ => None,
        };
    }

    fn on_tenure_list(
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
        let Some(Stage::Listing { marks, left, .. }) = a.delay.as_mut().map(|d| &mut d.stage)
        else {
            return self.step(id);
        };
        if let Some(code) = left.refused.take() {
            let path = tenure_path(&a.spec.parent);
            let error =
                LockError::request(OpCode::GetChildren, Some(path), RequestError::Server(code));
            return self.fail(id, error);
        }
        let Some(marks) = marks.take() else {
            // The marks' listing was lost with the connection: list both
            // again.
            return self.step(id);
        };
        let left = *left;
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
        let Some(d) = a.delay.as_mut() else {
            return;
        };
        if ours {
            // Our mark was made (its reply lost), and only after the delay.
            d.stage = Stage::Marked { name: our_name };
            return self.grant(now, id, None);
        }
        d.stage = Stage::Reading {
            to_read,
            stale: Vec::new(),
            left,
        };
        self.read_next_mark(now, id);
    }

    /// Reads the next mark without a node; once none is left, decides.
    fn read_next_mark(&mut self, now: Instant, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let next = match a.delay.as_ref().map(|d| &d.stage) {
            Some(Stage::Reading { to_read, .. }) => to_read.last(),
            _ => None,
        };
        match next {
            Some(owner) => {
                let path = crate::path::join(&tenure_path(&a.spec.parent), owner);
                let read = Request::GetData(PathWatch { path, watch: false });
                self.send_delay(id, DelayPurpose::Read, read);
            }
            None => self.decide(now, id),
        }
    }

    /// The mark an attempt still acquiring is reading or recording; `None`
    /// (the caller steps the attempt on) when it no longer is.
    fn mark_in_hand(&self, id: AttemptId) -> Option<String> {
        let a = self.attempts.get(&id)?;
        if !a.phase.is_queueing() {
            return None;
        }
        match &a.delay.as_ref()?.stage {
            Stage::Reading { to_read, .. } => to_read.last().cloned(),
            _ => None,
        }
    }

    /// The mark in hand is done with: `recorded`, the server time its end
    /// was recorded at, if known; `unrecorded`, an end we could neither
    /// read nor record (its delay counts from `now`).
    fn mark_done(&mut self, now: Instant, id: AttemptId, recorded: Option<i64>, unrecorded: bool) {
        let Some(d) = self.attempts.get_mut(&id).and_then(|a| a.delay.as_mut()) else {
            return;
        };
        if let Some(at) = recorded {
            // The server's clock had reached the record by this reply.
            d.read_clock(at, now);
        }
        if let Stage::Reading {
            to_read,
            stale,
            left,
        } = &mut d.stage
        {
            if let Some(owner) = to_read.pop() {
                if let Some(at) = recorded {
                    stale.push((owner, at));
                }
            }
            if unrecorded {
                left.unrecorded.get_or_insert(now);
            }
        }
        self.read_next_mark(now, id)
    }

    /// A mark without a node, read: recorded already, or to record now.
    fn on_tenure_read(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(owner) = self.mark_in_hand(id) else {
            return self.step(id);
        };
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let path = crate::path::join(&tenure_path(&a.spec.parent), &owner);
        match result {
            Ok(Response::Data { stat, .. }) if stat.version > 0 => {
                self.mark_done(now, id, Some(stat.mtime), false)
            }
            // Not recorded yet: we are the first to see this end.
            Ok(Response::Data { .. }) => {
                let write = Request::SetData(SetDataRequest {
                    path,
                    data: ENDED.to_vec(),
                    version: 0,
                });
                self.send_delay(id, DelayPurpose::Record, write);
            }
            // Released cleanly since the listing (or swept by a holder
            // granted after the delay): no delay is due for it.
            Err(RequestError::Server(ErrorCode::NoNode)) => self.mark_done(now, id, None, false),
            // The marks' ACL keeps us from reading it: count the delay
            // from now, as if we recorded it now.
            Err(RequestError::Server(ErrorCode::NoAuth)) => self.mark_done(now, id, None, true),
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
    fn on_tenure_record(
        &mut self,
        now: Instant,
        id: AttemptId,
        result: Result<Response, RequestError>,
    ) {
        let Some(owner) = self.mark_in_hand(id) else {
            return self.step(id);
        };
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        match result {
            Ok(Response::Stat(stat)) => self.mark_done(now, id, Some(stat.mtime), false),
            // Recorded by another meanwhile: read its time.
            Err(RequestError::Server(ErrorCode::BadVersion)) => self.read_next_mark(now, id),
            // Gone: as a read that finds it gone.
            Err(RequestError::Server(ErrorCode::NoNode)) => self.mark_done(now, id, None, false),
            // The marks' ACL keeps us from writing: as a read refused.
            Err(RequestError::Server(ErrorCode::NoAuth)) => self.mark_done(now, id, None, true),
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
        let no_wait = matches!(&a.phase, Phase::Queueing(q) if q.no_wait);
        let Some(d) = a.delay.as_mut() else {
            return self.step(id);
        };
        let clock = d.clock;
        let (stale, left) = match std::mem::take(&mut d.stage) {
            Stage::Reading { stale, left, .. } => (stale, left),
            other => (Vec::new(), other.leftover()),
        };
        if let Some(old) = left.timer {
            self.delays.remove(&(old, id));
        }
        let recorded = stale.iter().map(|(_, at)| *at).max();
        let unrecorded = left.unrecorded;
        if recorded.is_none() && unrecorded.is_none() {
            d.stage = Stage::Marking { stale };
            return self.mark(id);
        }
        d.unclean = true;
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
            d.stage = Stage::Marking { stale };
            return self.mark(id);
        }
        if no_wait {
            // A try does not wait out a delay; the record stays for the
            // next one.
            d.stage = Stage::Idle;
            return self.fail(id, LockError::Timeout);
        }
        d.stage = Stage::Serving { until, stale };
        self.delays.insert((until, id));
    }

    /// The delay is served (or none was due): make our mark, proving our
    /// node still exists in the same write.
    pub(super) fn mark(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if !matches!(&a.phase, Phase::Queueing(q) if q.step.awaits().is_none()) {
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
        self.send_delay(id, DelayPurpose::Mark, request);
    }

    /// Deletes the marks of the unclean ends this grant waited out. Only
    /// once granted: an attempt that gives up with its mark in flight
    /// leaves the record, and whoever is granted next is told of the end.
    fn sweep(&mut self, id: AttemptId, stale: Vec<(String, i64)>) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let dir = tenure_path(&a.spec.parent);
        for (owner, _) in stale {
            let path = crate::path::join(&dir, &owner);
            let delete = Request::Delete(PathVersion { path, version: -1 });
            self.send(id, Purpose::Delay(DelayPurpose::Sweep), delete, false);
        }
    }

    fn on_tenure_mark(
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
        let mut stale = Vec::new();
        if made {
            let name = a.node_name().map(str::to_owned);
            if let Some(d) = a.delay.as_mut() {
                if let Stage::Marking { stale: s } = &mut d.stage {
                    stale = std::mem::take(s);
                }
                d.stage = match name {
                    Some(name) => Stage::Marked { name },
                    None => Stage::Idle,
                };
            }
        }
        let Phase::Queueing(q) = &a.phase else {
            // Given up meanwhile: the release removes the mark with the node.
            return self.step(id);
        };
        match refused {
            // Made, or made before by a create whose reply was lost.
            None | Some((1, ErrorCode::NodeExists)) => {
                if let Some(d) = q.deadline {
                    if d <= now {
                        // The caller has given up by now (its own clock
                        // says so too): a grant would go to no one, and
                        // its sweep would hide the unclean end from the
                        // next holder.
                        return self.fail(id, LockError::Timeout);
                    }
                }
                self.sweep(id, stale);
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
                self.send_delay(id, DelayPurpose::Dir, create);
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
    fn on_tenure_dir(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
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
}
