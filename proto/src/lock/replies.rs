//! What the server says: each reply and watch event, routed by its token
//! to the attempt it concerns and to the step that reads it.

use std::time::Instant;

use jute::{ErrorCode, EventType, PathWatch, Request, Response};

use super::{AttemptId, LockEvent, LockMachine};
use crate::lock::phase::{OwnSeen, Phase, Wait};
use crate::lock::purpose::Purpose;
use crate::lock::queue::protected_id;
use crate::session::{RequestError, SessionState, WatchEvent};

impl LockMachine {
    /// The reply to the request sent with `token`.
    pub fn handle_reply(
        &mut self,
        now: Instant,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        let id = self.pending.get(&token).map(|(id, _)| *id);
        self.route_reply(now, token, result);
        if let Some(id) = id {
            // With lock-delay: our node's ctime, with when we knew it.
            self.read_server_clock(id, now);
        }
    }

    fn route_reply(&mut self, now: Instant, token: u64, result: Result<Response, RequestError>) {
        if let Some(ids) = self.shared_listings.remove(&token) {
            self.listings_out.remove(&token);
            return self.on_shared_listing(now, token, &ids, result);
        }
        let Some((id, purpose)) = self.pending.remove(&token) else {
            return;
        };
        crate::spare_room::release_drained_table(&mut self.pending);
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if purpose.is_main_line() {
            if a.phase.awaited() != Some(token) {
                // Superseded (a create that failed leaves its listing stale).
                return;
            }
            *a.phase.awaited_mut() = None;
        }
        if result.as_ref().is_err_and(ends_session) {
            // The session is over, and its nodes with it: the state change
            // that says so ends every attempt.
            return;
        }
        match purpose {
            Purpose::Create => self.on_created(id, token, result),
            Purpose::Parent(n) => self.on_parent(id, n, result),
            Purpose::Recover => self.on_recover(id, result),
            Purpose::CatchUp => {}
            Purpose::Stat => self.on_stat(id, result),
            Purpose::List => match result {
                Ok(Response::Children(children)) => {
                    let watch = (a.spec.rule.is_first_n()).then_some(token);
                    self.evaluate(now, id, &children, watch)
                }
                Err(RequestError::Server(ErrorCode::NoNode)) => self.node_vanished(id),
                Ok(_) | Err(_) => self.step(id),
            },
            Purpose::WatchBlocker => match (a.phase.as_queueing(), result) {
                (Some(q), Ok(_)) => match q.step.wait_mut() {
                    Some(Wait::Blocker { watch, .. }) => *watch = Some(token),
                    _ => q.wait_on(Wait::Queue { watch: token }),
                },
                (None, Ok(_)) => {}
                // Gone between the listing and the watch: look again now.
                (q, Err(_)) => {
                    if let Some(q) =
                        q.filter(|q| matches!(q.step.wait(), Some(Wait::Blocker { .. })))
                    {
                        q.end_wait(&self.pending);
                    }
                    self.watches.remove(&token);
                    self.step(id)
                }
            },
            Purpose::WatchScout => {
                let Some(q) = a.phase.as_queueing().filter(|q| q.scout == Some(token)) else {
                    // Superseded: its event, if any, is ignored.
                    self.watches.remove(&token);
                    return;
                };
                if result.is_ok() {
                    // Set.
                    return;
                }
                q.scout = None;
                self.watches.remove(&token);
                if matches!(result, Err(RequestError::Server(ErrorCode::NoNode))) {
                    self.scout_gone(id);
                }
            }
            Purpose::WatchOwn => self.on_own_watch_set(id, token, result),
            Purpose::Confirm => self.on_confirm(id, token, result),
            Purpose::GrantCheck => match result {
                Ok(_) => {
                    self.learn_stat(id, &result);
                    let watch = self.watches.contains_key(&token).then_some(token);
                    self.grant(now, id, watch)
                }
                Err(RequestError::Server(ErrorCode::NoNode)) => {
                    self.watches.remove(&token);
                    self.node_vanished(id)
                }
                Err(_) => {
                    self.watches.remove(&token);
                    self.step(id)
                }
            },
            Purpose::Delete(name) => self.on_deleted(id, &name, result),
            Purpose::StrayStat(name) => self.on_stray_stat(id, &name, result),
            Purpose::Delay(p) => self.on_delay_reply(now, id, token, p, result),
            Purpose::Requeue { old, name } => self.on_requeued(id, token, old, &name, result),
            Purpose::EndWatch => self.on_end_listing(id, token, result),
            Purpose::CleanupList => {
                match result {
                    Ok(Response::Children(children)) => {
                        for name in &children {
                            if protected_id(name) == Some(a.uuid.as_str()) {
                                a.add_suspect(name);
                            }
                        }
                        if let Some(m) = a.phase.maybe_created_mut() {
                            *m = false;
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
        }
    }

    /// The watch left by the request sent with `token` fired, or will never
    /// fire.
    pub fn handle_watch(
        &mut self,
        now: Instant,
        token: u64,
        event: Result<WatchEvent, RequestError>,
    ) {
        if let Ok(e) = &event {
            if e.kind == EventType::NodeDeleted {
                // Whichever watch carried it (another attempt's, on the
                // node it waited for), a holder's node is gone.
                self.handle_deletion(&e.path);
            }
        }
        let Some(id) = self.watches.remove(&token) else {
            return;
        };
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let now_connected = self.session == Some(SessionState::Connected);
        match &mut a.phase {
            Phase::Held(h) if h.end_watch == Some(token) => {
                h.end_watch = None;
                // Fired: list again. Never set: again, once connected.
                if event.is_ok() || now_connected {
                    self.watch_queue_end(id);
                }
            }
            Phase::Held(h) if h.watch == Some(token) => {
                h.watch = None;
                match event {
                    // Never set, or the session ended (handled through the
                    // state).
                    Err(_) if now_connected => self.resume(id),
                    Err(_) => {}
                    Ok(e) if e.kind == EventType::NodeDeleted => self.node_deleted_under(id),
                    Ok(_) => self.confirm(id),
                }
            }
            Phase::Queueing(q) if q.own_watch.is_some_and(|o| o.token == token) => {
                q.own_watch = None;
                match event {
                    // Our node went while we waited: queue again now.
                    Ok(e) if e.kind == EventType::NodeDeleted => self.node_vanished(id),
                    // Fired otherwise (one-shot: gone now), or never set: it
                    // proves nothing any more; the grant falls back to a read.
                    _ => {}
                }
            }
            Phase::Queueing(q) if q.scout == Some(token) => {
                q.scout = None;
                if event.is_ok() {
                    self.scout_gone(id);
                }
            }
            Phase::Queueing(q) if q.step.wait_watch() == Some(token) => {
                let alone = matches!(q.step.wait(), Some(Wait::Blocker { alone: true, .. }));
                q.end_wait(&self.pending);
                match event {
                    Err(_) if now_connected => self.resume(id),
                    Err(_) => {}
                    Ok(e) => self.blocker_changed(now, id, &e, alone),
                }
            }
            // A watch we stopped caring about (its reply, if an error, says
            // what to do next).
            _ => {}
        }
    }

    /// The watch a queueing attempt waited on fired. `alone`: it was on a
    /// blocker with nothing else below us.
    fn blocker_changed(&mut self, now: Instant, id: AttemptId, e: &WatchEvent, alone: bool) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if let (EventType::NodeDeleted, Some(name)) = (e.kind, a.node_name()) {
            let node = a.spec.child(name);
            self.events.push_back(LockEvent::Woken {
                id,
                node,
                blocker: e.path.clone(),
            });
        }
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Phase::Queueing(q) = &a.phase else {
            return;
        };
        if e.kind != EventType::NodeDeleted || !alone {
            return self.step(id);
        }
        // Nothing else was below us (later nodes sort after ours): the lock
        // is ours if our node still is.
        let proven = q.own_watch.is_some_and(|o| o.seen == OwnSeen::Set);
        if proven && self.session == Some(SessionState::Connected) {
            // Our own watch was set before this event was sent and has not
            // fired: our node outlived the blocker (see OwnWatch). Held on
            // the event alone.
            return self.grant(now, id, None);
        }
        // Not proven: one read, not a listing; it leaves the holder's watch
        // unless our own watch will serve.
        let Some(name) = a.node_name() else {
            return self.step(id);
        };
        let path = a.spec.child(name);
        let watch = a.spec.watch_node && q.own_watch.is_none();
        if let Some(q) = a.phase.as_queueing() {
            q.begin_granting();
        }
        let token = self.send(
            id,
            Purpose::GrantCheck,
            Request::GetData(PathWatch { path, watch }),
            watch,
        );
        if let Some(a) = self.attempts.get_mut(&id) {
            *a.phase.awaited_mut() = Some(token);
        }
    }

    /// The session heard that `path` was deleted, on a watch of anyone's
    /// (the caller's own, an election observer's): if a holder's node, the
    /// holder is told now. A sequential name is never made again, so the
    /// deletion is of our node. A driver that routes watches of its own
    /// callers calls this before handing such a deletion on, so that no
    /// caller hears of it while the holder still says `Held`.
    pub fn handle_deletion(&mut self, path: &str) {
        if let Some(&holder) = self.held_nodes.get(path) {
            self.node_deleted_under(holder);
        }
    }

    /// Whether the watch left with `token` still matters: one that does not
    /// need not be re-armed after a reconnect.
    pub fn wants_watch(&self, token: u64) -> bool {
        self.watches.contains_key(&token)
    }
}

/// A request error that means the session is over.
fn ends_session(e: &RequestError) -> bool {
    matches!(
        e,
        RequestError::SessionExpired
            | RequestError::Server(ErrorCode::SessionExpired)
            | RequestError::Closed
            | RequestError::AuthFailed
    )
}
