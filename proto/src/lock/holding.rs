//! Holding and letting go: a holder's checks and state, loss, release,
//! and the removal of every node an attempt left.

use std::time::Instant;

use jute::{ErrorCode, PathWatch, Request, Response};

use super::{AttemptId, LockEvent, LockMachine, REVOKE};
use crate::lock::delay::DelayPurpose;
use crate::lock::error::LockError;
use crate::lock::phase::{Phase, Releasing};
use crate::lock::purpose::Purpose;
use crate::lock::state::{LockState, LossReason};
use crate::session::{RequestError, SessionState};

impl LockMachine {
    /// Reads our held node: it must still exist (and, when watched, leave
    /// a data watch to hear of its deletion at once).
    pub(super) fn confirm(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(name) = a.node_name() else {
            return;
        };
        let Phase::Held(h) = &a.phase else {
            return;
        };
        if h.confirming.is_some() {
            return;
        }
        let path = a.spec.child(name);
        let watch = a.spec.watch_node && h.watch.is_none();
        let request = Request::GetData(PathWatch { path, watch });
        let token = self.send(id, Purpose::Confirm, request, watch);
        if let Some(h) = self.attempts.get_mut(&id).and_then(|a| a.phase.as_held()) {
            h.confirming = Some(token);
        }
    }

    pub(super) fn on_confirm(
        &mut self,
        id: AttemptId,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Phase::Held(h) = &mut a.phase else {
            self.watches.remove(&token);
            return;
        };
        if h.confirming == Some(token) {
            h.confirming = None;
        }
        match result {
            Ok(response) => {
                if self.watches.contains_key(&token) {
                    h.watch = Some(token);
                }
                let revoke = matches!(&response, Response::Data { data, .. } if data == REVOKE);
                if a.spec.revocable && revoke {
                    self.events.push_back(LockEvent::RevocationRequested { id });
                }
                if self.session == Some(SessionState::Connected) {
                    self.set_state(id, LockState::Held, None);
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                self.watches.remove(&token);
                self.node_deleted_under(id);
            }
            // The server looks the node up before it checks the ACL: a
            // node we may not read exists (and no watch was left).
            Err(RequestError::Server(ErrorCode::NoAuth)) => {
                self.watches.remove(&token);
                if self.session == Some(SessionState::Connected) {
                    self.set_state(id, LockState::Held, None);
                }
            }
            Err(RequestError::Server(code)) => {
                // Any other refusal would come again at once: no retry
                // loop. The holder keeps its state; a reconnect or a watch
                // event checks again.
                self.watches.remove(&token);
                let path = a.node_name().map(|n| a.spec.child(n)).unwrap_or_default();
                log::error!("the server refused to read held lock node {path}: {code:?}");
            }
            Err(_) => {
                // The connection dropped first: confirmed after the reconnect.
                self.watches.remove(&token);
                if self.session == Some(SessionState::Connected) {
                    self.confirm(id);
                }
            }
        }
    }

    pub(super) fn on_deleted(
        &mut self,
        id: AttemptId,
        name: &str,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.deleting.retain(|n| n != name);
        let result = match result {
            // Node and tenure mark together (lock-delay).
            Ok(Response::Multi(results)) => match jute::MultiResult::first_failure(&results) {
                None => Ok(Response::Empty),
                // Our node was already gone: its mark stays, as an unclean
                // end's would.
                Some((0, code)) => Err(RequestError::Server(code)),
                // The mark was gone (deleted by a third party): delete the
                // node alone.
                Some(_) => {
                    a.strays.push(name.to_owned());
                    self.forget_mark(id);
                    return self.step(id);
                }
            },
            other => other,
        };
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NoNode)) => {}
            // Retried; it waits in the session core for the next connection.
            Err(RequestError::ConnectionLoss) => a.strays.push(name.to_owned()),
            Err(e) => {
                let path = a.spec.child(name);
                log::error!(
                    "the server refused to delete lock node {path}: {e}; it stays, and the lock \
                     stays taken, until this session ends (close the client to free it)"
                );
                if let RequestError::Server(code) = e {
                    a.release_refused = Some(code);
                }
            }
        }
        self.step(id)
    }

    /// Re-sends what a watch that was never set was waiting for.
    pub(super) fn resume(&mut self, id: AttemptId) {
        match self.attempts.get(&id).map(|a| &a.phase) {
            Some(Phase::Queueing(_)) => self.step(id),
            Some(Phase::Held(_)) => self.confirm(id),
            _ => {}
        }
    }

    /// Ends a waiting attempt with `error`, once: an attempt already given
    /// up (a timeout or cancel that raced a create that then failed) only
    /// goes on removing its nodes.
    pub(super) fn fail(&mut self, id: AttemptId, error: LockError) {
        self.give_up(id, error, false)
    }

    /// [`LockMachine::fail`], `report`ing the end of the release.
    pub(super) fn give_up(&mut self, id: AttemptId, error: LockError, report: bool) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Phase::Queueing(q) = &a.phase else {
            return self.step(id);
        };
        if let Some(d) = q.deadline {
            self.deadlines.remove(&(d, id));
        }
        self.events.push_back(LockEvent::Failed { id, error });
        self.begin_release(id, report);
    }

    /// A holder's node is gone: Lost, and nothing left to delete.
    pub(super) fn node_deleted_under(&mut self, id: AttemptId) {
        if !self.attempts.get(&id).is_some_and(|a| a.phase.is_held()) {
            return;
        }
        self.unhold(id);
        if let Some(a) = self.attempts.get_mut(&id) {
            a.node = None;
        }
        self.lose(id, LossReason::NodeDeleted);
    }

    /// The attempt no longer holds: forget its node as a held one.
    pub(super) fn unhold(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if let Some(name) = a.node_name() {
            let path = a.spec.child(name);
            if self.held_nodes.get(&path) == Some(&id) {
                self.held_nodes.remove(&path);
            }
        }
    }

    /// The attempt turns to removing its nodes, whatever phase it was in.
    /// `report`: someone waits to hear when that is done.
    pub(super) fn begin_release(&mut self, id: AttemptId, report: bool) {
        self.unhold(id);
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let releasing = Releasing {
            awaits: None,
            maybe_created: false,
            report,
        };
        let (mut awaits, maybe_created, report, watches) =
            match std::mem::replace(&mut a.phase, Phase::Releasing(releasing)) {
                Phase::Queueing(mut q) => {
                    let own = q.own_watch.map(|o| o.token);
                    let watches = [q.step.wait_watch(), None, own, q.scout];
                    let maybe_created = q.step.creating().is_some_and(|c| c.maybe_created);
                    (q.step.awaits(), maybe_created, report, watches)
                }
                Phase::Held(h) => {
                    if let Some(end) = h.max_hold_end {
                        self.max_holds.remove(&(end, id));
                    }
                    (h.late, false, report, [h.watch, h.end_watch, None, None])
                }
                Phase::Releasing(r) => (r.awaits, r.maybe_created, r.report || report, [None; 4]),
            };
        for t in watches.into_iter().flatten() {
            self.watches.remove(&t);
        }
        // A main-line request in flight other than a create is moot (and
        // so is the watch it may set); a create's reply still tells us the
        // node to delete.
        if let Some(t) = awaits {
            // Nor is a tenure mark's: a mark made must go with the node.
            if !matches!(
                self.pending.get(&t),
                Some((
                    _,
                    Purpose::Create | Purpose::Delay(DelayPurpose::Mark) | Purpose::Requeue { .. }
                ))
            ) {
                awaits = None;
                self.watches.remove(&t);
            }
        }
        a.phase = Phase::Releasing(Releasing {
            awaits,
            maybe_created,
            report,
        });
        self.step(id)
    }

    pub(super) fn set_state(
        &mut self,
        id: AttemptId,
        state: LockState,
        reason: Option<LossReason>,
    ) {
        let Some(h) = self.attempts.get_mut(&id).and_then(|a| a.phase.as_held()) else {
            return;
        };
        if h.state == state || h.state == LockState::Lost {
            return;
        }
        h.state = state;
        self.events
            .push_back(LockEvent::State { id, state, reason });
    }

    /// The holder can no longer rely on the lock: tell it (final), then
    /// remove what is left of the node.
    pub(super) fn lose(&mut self, id: AttemptId, reason: LossReason) {
        self.set_state(id, LockState::Lost, Some(reason));
        self.begin_release(id, false);
    }

    /// The holder can no longer rely on the lock, by our own judgement
    /// while the session may live and the node be in place (no contact
    /// for a whole session timeout, or the queue ran past the counter's
    /// end): tell it (final), but keep the node until it lets go. Deleting
    /// it now would hand the lock to the next waiter while the holder's
    /// work still runs; kept, it still blocks every zklock contender
    /// (their nodes queue behind it, or fail closed at the counter's end),
    /// though peers that sort suffixes as text may not heed it there. If
    /// the server expired the session instead, the node went with it and
    /// there is nothing to keep.
    pub(super) fn lose_keeping_node(&mut self, id: AttemptId, reason: LossReason) {
        self.set_state(id, LockState::Lost, Some(reason));
    }

    /// Max holds ended by `now`: each holder is told Lost, then its node
    /// goes, whatever it was told before (a holder told Lost for no contact
    /// keeps its node only until its max hold: a thread that hangs never
    /// lets go). With lock-delay the node goes without its mark: the end
    /// is an unclean one for the next holder, who serves the delay.
    pub(super) fn end_max_holds(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.max_holds.first() {
            if at > now {
                break;
            }
            self.max_holds.remove(&(at, id));
            let due = self
                .attempts
                .get_mut(&id)
                .and_then(|a| a.phase.as_held())
                .is_some_and(|h| h.max_hold_end == Some(at));
            if due {
                self.forget_mark(id);
                self.lose(id, LossReason::MaxHold);
            }
        }
    }

    /// The session is over: every node of it is gone with it.
    pub(super) fn end_all(&mut self, error: LockError, reason: LossReason) {
        let attempts = std::mem::take(&mut self.attempts);
        for (id, a) in attempts {
            match &a.phase {
                Phase::Queueing(_) => self.events.push_back(LockEvent::Failed {
                    id,
                    error: error.clone(),
                }),
                Phase::Held(h) => {
                    if h.state != LockState::Lost {
                        self.events.push_back(LockEvent::State {
                            id,
                            state: LockState::Lost,
                            reason: Some(reason),
                        });
                    }
                }
                Phase::Releasing(_) => {}
            }
            if matches!(a.phase, Phase::Releasing(Releasing { report: true, .. })) {
                self.events.push_back(LockEvent::Released {
                    id,
                    refused: a.release_refused,
                });
            }
        }
        self.pending.clear();
        self.watches.clear();
        self.deadlines.clear();
        self.delays.clear();
        self.max_holds.clear();
        self.shared_listings.clear();
        self.listings_wanted.clear();
        self.listings_out.clear();
        self.held_nodes.clear();
    }

    pub(super) fn forget(&mut self, id: AttemptId) {
        if let Some(a) = self.attempts.remove(&id) {
            if matches!(a.phase, Phase::Releasing(Releasing { report: true, .. })) {
                self.events.push_back(LockEvent::Released {
                    id,
                    refused: a.release_refused,
                });
            }
        }
    }
}
