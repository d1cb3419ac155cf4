//! The lock protocol as a sans-I/O state machine.
//!
//! It is handed replies, watch events, session state changes and the time,
//! and says which requests to send and what happened to each acquisition.
//! It never touches a socket, a thread or a clock, so the same code runs on
//! the client's I/O thread and in the deterministic simulator.
//!
//! Every acquisition ([`LockMachine::acquire`]) ends in exactly one of
//! [`LockEvent::Acquired`] or [`LockEvent::Failed`]; a granted one then
//! reports [`LockEvent::State`] changes until released. Whatever way an
//! acquisition ends, its nodes are removed (by attempt id, so every create
//! of the attempt is found) for as long as the session lives.
//!
//! Inputs: [`LockMachine::acquire`], [`LockMachine::cancel`],
//! [`LockMachine::release`], [`LockMachine::handle_reply`],
//! [`LockMachine::handle_watch`], [`LockMachine::handle_session`],
//! [`LockMachine::handle_timeout`]. Outputs: [`LockMachine::poll_request`],
//! [`LockMachine::poll_event`], [`LockMachine::poll_timeout`].

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use jute::{
    CreateMode, CreateRequest, ErrorCode, EventType, PathVersion, PathWatch, Request, Response,
    Stat,
};

use super::attempt::{Attempt, Goal, LockSpec, Node, Purpose, Rule};
use super::error::LockError;
use super::held::{LockState, LossReason};
use super::queue::{protected_id, sorted_contenders, Contender};
use crate::session::{RequestError, SessionState, WatchedEvent};
use crate::Error;

/// Names one acquisition; chosen by the caller, unique per machine.
pub type AttemptId = u64;

/// A request the machine wants sent. Its reply goes back through
/// [`LockMachine::handle_reply`] with `token`; if `watch`, the watch it
/// leaves reports through [`LockMachine::handle_watch`] with the same token.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Names the reply (and the watch).
    pub token: u64,
    /// What to send.
    pub request: Request,
    /// Whether the request leaves a watch the machine wants to hear of.
    pub watch: bool,
}

/// What happened to an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockEvent {
    /// The lock is ours: our node's server path and Stat (czxid is the
    /// fencing token).
    Acquired {
        /// The acquisition.
        id: AttemptId,
        /// Our node, as the server names it.
        path: String,
        /// Our node's Stat.
        stat: Stat,
    },
    /// The acquisition ended without the lock; its nodes are being removed.
    Failed {
        /// The acquisition.
        id: AttemptId,
        /// Why.
        error: LockError,
    },
    /// A granted lock's state changed. `Lost` is final.
    State {
        /// The acquisition.
        id: AttemptId,
        /// The new state.
        state: LockState,
        /// Why it was lost, with `Lost`.
        reason: Option<LossReason>,
    },
    /// A release asked with `report` finished: the node is gone (or will go
    /// with the session).
    Released {
        /// The acquisition.
        id: AttemptId,
    },
}

/// Failure shapes of the blocking recipes this machine replaced, re-created
/// on demand so the simulator can show that it finds each one. Never set
/// outside tests.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regression {
    /// Session changes reach holders only once pending re-checks finish
    /// (the one-by-one holder monitor).
    LateHolderState,
    /// A deadline waits for the reply in flight (blocking calls bounded by
    /// the request timeout, not the caller's deadline).
    DeadlineWaitsForReplies,
    /// Cleanup deletes only the node it knows, not every create of the
    /// attempt.
    CleanupKnownNodeOnly,
    /// Holders are not told that the session ended.
    HoldersMissSessionEnd,
    /// The blocker is watched with `exists`, which leaves a watch on a node
    /// that is already gone.
    ExistsWatch,
}

/// The lock protocol for every acquisition of one session. See the module
/// docs.
#[derive(Debug, Default)]
pub struct LockMachine {
    attempts: BTreeMap<AttemptId, Attempt>,
    /// Request token → the attempt and why.
    pending: HashMap<u64, (AttemptId, Purpose)>,
    /// Watch token → the attempt it wakes.
    watches: HashMap<u64, AttemptId>,
    /// Server path of every granted node → its attempt: a deletion heard
    /// through any watch tells its holder at once.
    held_nodes: HashMap<String, AttemptId>,
    /// Lock paths with creates sent this turn and no listing behind them
    /// yet: one listing follows all of them.
    listings_wanted: BTreeMap<String, Vec<AttemptId>>,
    /// A listing's token → the attempts whose creates it follows.
    shared_listings: HashMap<u64, Vec<AttemptId>>,
    deadlines: BTreeSet<(Instant, AttemptId)>,
    outgoing: VecDeque<Outgoing>,
    events: VecDeque<LockEvent>,
    next_token: u64,
    session: Option<SessionState>,
    session_id: i64,
    regression: Option<Regression>,
    /// Session changes held back, and holder checks waiting for the one in
    /// flight (only with [`Regression::LateHolderState`]).
    deferred: Option<SessionState>,
    confirm_queue: VecDeque<AttemptId>,
    /// Attempts whose deadline passed while a reply was awaited (only with
    /// [`Regression::DeadlineWaitsForReplies`]).
    late: BTreeSet<AttemptId>,
}

impl LockMachine {
    /// A machine with no acquisitions.
    pub fn new() -> Self {
        LockMachine::default()
    }

    /// Re-creates an old failure shape (tests of the simulator only).
    #[doc(hidden)]
    pub fn set_regression(&mut self, regression: Option<Regression>) {
        self.regression = regression;
    }

    fn regressed(&self, r: Regression) -> bool {
        self.regression == Some(r)
    }

    /// Acquisitions not yet forgotten (waiting, held, or being cleaned up).
    pub fn len(&self) -> usize {
        self.attempts.len()
    }

    /// Whether nothing is tracked at all.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    // ---- commands -----------------------------------------------------

    /// Starts an acquisition. `uuid` is the attempt's protected id (a fresh
    /// v4 UUID in text form). `deadline`: when to give up with
    /// [`LockError::Timeout`]. `no_wait`: give up with `Timeout` as soon as
    /// the queue shows the lock taken (try-lock: one round trip).
    pub fn acquire(
        &mut self,
        now: Instant,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
    ) {
        if let Some(reason) = self.session.and_then(ended) {
            self.events
                .push_back(LockEvent::Failed { id, error: reason });
            return;
        }
        if let Some(d) = deadline {
            self.deadlines.insert((d, id));
        }
        self.attempts
            .insert(id, Attempt::new(spec, uuid, deadline, no_wait));
        self.handle_timeout(now);
        self.step(id);
    }

    /// The caller gave up waiting (or dropped its handle): fail with
    /// [`LockError::Cancelled`] if still waiting.
    pub fn cancel(&mut self, _now: Instant, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if let Goal::Acquire { .. } = a.goal {
            self.fail(id, LockError::Cancelled);
        }
        // A granted lock's guard exists (sent, or dropped unread): it
        // releases, not the waiter.
    }

    /// The holder lets go. With `report`, [`LockEvent::Released`] says when
    /// the node is gone.
    pub fn release(&mut self, _now: Instant, id: AttemptId, report: bool) {
        let Some(a) = self.attempts.get_mut(&id) else {
            if report {
                self.events.push_back(LockEvent::Released { id });
            }
            return;
        };
        a.report_release |= report;
        match a.goal {
            Goal::Acquire { .. } => self.fail(id, LockError::Cancelled),
            Goal::Hold => self.begin_release(id),
            Goal::Release => {}
        }
    }

    // ---- inputs -------------------------------------------------------

    /// The session changed state; `session_id` is its id (the owner our
    /// nodes must show).
    pub fn handle_session(&mut self, _now: Instant, state: SessionState, session_id: i64) {
        self.session = Some(state);
        if session_id != 0 {
            self.session_id = session_id;
        }
        if let Some(error) = ended(state) {
            let reason = match state {
                SessionState::Expired => LossReason::SessionExpired,
                _ => LossReason::ClientClosed,
            };
            return self.end_all(error, reason);
        }
        if self.regressed(Regression::LateHolderState)
            && self.attempts.values().any(|a| a.confirming.is_some())
        {
            self.deferred = Some(state);
            return;
        }
        let ids: Vec<AttemptId> = self.attempts.keys().copied().collect();
        for id in ids {
            let Some(a) = self.attempts.get_mut(&id) else {
                continue;
            };
            if a.goal != Goal::Hold {
                continue;
            }
            match state {
                // Back from a disconnect: confirm the node before saying
                // Held again. All holders' checks leave in this one turn.
                SessionState::Connected if a.state == LockState::Suspended => self.confirm(id),
                SessionState::Suspended | SessionState::Connecting => {
                    self.set_state(id, LockState::Suspended, None);
                }
                SessionState::Lost => self.lose(id, LossReason::NoContact),
                _ => {}
            }
        }
    }

    /// The reply to the request sent with `token`.
    pub fn handle_reply(
        &mut self,
        now: Instant,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        self.route_reply(now, token, result);
        if self.regression.is_some() {
            self.apply_regressions(now);
        }
    }

    /// What the old failure shapes did once a reply was in.
    fn apply_regressions(&mut self, now: Instant) {
        let late: Vec<AttemptId> = self.late.iter().copied().collect();
        for id in late {
            match self.attempts.get(&id) {
                Some(a) if a.busy.is_some() => {}
                Some(a) if matches!(a.goal, Goal::Acquire { .. }) => {
                    self.late.remove(&id);
                    self.fail(id, LockError::Timeout);
                }
                _ => {
                    self.late.remove(&id);
                }
            }
        }
        if !self.attempts.values().any(|a| a.confirming.is_some()) {
            while let Some(id) = self.confirm_queue.pop_front() {
                if self.attempts.get(&id).is_some_and(|a| a.goal == Goal::Hold) {
                    self.confirm(id);
                    return;
                }
            }
            if let Some(state) = self.deferred.take() {
                let id = self.session_id;
                self.handle_session(now, state, id);
            }
        }
    }

    fn route_reply(&mut self, now: Instant, token: u64, result: Result<Response, RequestError>) {
        if let Some(ids) = self.shared_listings.remove(&token) {
            return self.on_shared_listing(now, token, &ids, result);
        }
        let Some((id, purpose)) = self.pending.remove(&token) else {
            return;
        };
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if purpose.is_main_line() {
            if a.busy != Some(token) {
                // Superseded (a create that failed leaves its listing stale).
                return;
            }
            a.busy = None;
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
            Purpose::Stat => self.on_stat(id, result),
            Purpose::List => match result {
                Ok(Response::Children(children)) => {
                    let watch = (a.spec.rule.is_first_n()).then_some(token);
                    self.evaluate(now, id, &sorted_contenders(&children), watch)
                }
                Err(RequestError::Server(ErrorCode::NoNode)) => self.node_vanished(id),
                Ok(_) | Err(_) => self.step(id),
            },
            Purpose::WatchBlocker => match result {
                Ok(_) => {
                    a.watch = Some(token);
                }
                // Gone between the listing and the watch: look again now.
                Err(_) => {
                    self.watches.remove(&token);
                    self.step(id)
                }
            },
            Purpose::Confirm => self.on_confirm(id, token, result),
            Purpose::GrantCheck => match result {
                Ok(_) => {
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
            Purpose::CleanupList => {
                match result {
                    Ok(Response::Children(children)) => {
                        for name in &children {
                            if protected_id(name) == Some(a.uuid.as_str()) {
                                a.add_stray(name);
                            }
                        }
                        a.maybe_created = false;
                    }
                    Err(RequestError::Server(ErrorCode::NoNode)) => a.maybe_created = false,
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
        _now: Instant,
        token: u64,
        event: Result<WatchedEvent, RequestError>,
    ) {
        if let Ok(e) = &event {
            if e.kind == EventType::NodeDeleted {
                if let Some(&holder) = self.held_nodes.get(&e.path) {
                    // Whichever watch carried it (another attempt's, on the
                    // node it waited for), a holder's node is gone.
                    self.node_deleted_under(holder);
                }
            }
        }
        let Some(id) = self.watches.remove(&token) else {
            return;
        };
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.watch != Some(token) {
            // A watch we stopped caring about (its reply, if an error, says
            // what to do next).
            return;
        }
        a.watch = None;
        match (a.goal, event) {
            (_, Err(_)) => {
                // Never set, or the session ended (handled through the state).
                if self.session == Some(SessionState::Connected) {
                    self.resume(id);
                }
            }
            (Goal::Acquire { .. }, Ok(e)) => {
                if e.kind == EventType::NodeDeleted && a.blocker_alone {
                    // Nothing else was below us (later nodes sort after
                    // ours): the lock is ours if our node still is. One
                    // read, not a listing; it leaves the holder's watch.
                    let Some(name) = a.node_name() else {
                        return self.step(id);
                    };
                    let path = a.spec.child(name);
                    let watch = a.spec.watch_node;
                    let token = self.send(
                        id,
                        Purpose::GrantCheck,
                        Request::GetData(PathWatch { path, watch }),
                        watch,
                    );
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.busy = Some(token);
                    }
                } else {
                    self.step(id);
                }
            }
            (Goal::Hold, Ok(e)) => {
                if e.kind == EventType::NodeDeleted {
                    self.node_deleted_under(id);
                } else {
                    self.confirm(id);
                }
            }
            (Goal::Release, Ok(_)) => {}
        }
    }

    /// Whether the watch left with `token` still matters: one that does not
    /// need not be re-armed after a reconnect.
    pub fn wants_watch(&self, token: u64) -> bool {
        self.watches.contains_key(&token)
    }

    /// Time passed: deadlines.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.remove(&(at, id));
            if let Some(a) = self.attempts.get(&id) {
                if let Goal::Acquire { .. } = a.goal {
                    if self.regression == Some(Regression::DeadlineWaitsForReplies)
                        && a.busy.is_some()
                    {
                        self.late.insert(id);
                        continue;
                    }
                    self.fail(id, LockError::Timeout);
                }
            }
        }
    }

    // ---- outputs ------------------------------------------------------

    /// The next request to send.
    pub fn poll_request(&mut self) -> Option<Outgoing> {
        if let Some(o) = self.outgoing.pop_front() {
            return Some(o);
        }
        // Creates on one lock path sent together share the listing behind
        // them: one reply serves the lot, not one each.
        let (parent, ids) = self.listings_wanted.pop_first()?;
        self.next_token += 1;
        let token = self.next_token;
        for id in &ids {
            if let Some(a) = self.attempts.get_mut(id) {
                a.listing = Some(token);
            }
        }
        self.shared_listings.insert(token, ids);
        Some(Outgoing {
            token,
            request: list(&parent, false),
            watch: false,
        })
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<LockEvent> {
        self.events.pop_front()
    }

    /// When [`LockMachine::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    // ---- the protocol -------------------------------------------------

    /// Sends whatever the attempt needs next, unless a main-line request is
    /// already in flight. Requests sent while disconnected wait in the
    /// session core for the next connection.
    fn step(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.goal == Goal::Release && self.regression == Some(Regression::CleanupKnownNodeOnly) {
            a.maybe_created = false;
            a.strays.clear();
        }
        if !a.strays.is_empty() {
            self.send_strays(id);
        }
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.busy.is_some() {
            return;
        }
        let spec = a.spec.clone();
        match a.goal {
            Goal::Acquire { .. } => match (&a.node, a.maybe_created, a.parents_from) {
                (None, true, _) => {
                    let list = list(&spec.parent, false);
                    self.send_main(id, Purpose::Recover, list);
                }
                (None, false, Some(n)) => {
                    let ancestors = ancestors(&spec.parent);
                    let Some(path) = ancestors.get(n) else {
                        a.parents_from = None;
                        return self.step(id);
                    };
                    let request = Request::CreateContainer(CreateRequest {
                        path: path.clone(),
                        data: Vec::new(),
                        acl: spec.parent_acl.clone(),
                        mode: CreateMode::Container,
                    });
                    self.send_main(id, Purpose::Parent(n), request);
                }
                (None, false, None) => {
                    let prefix = spec.child(&format!("_c_{}{}", a.uuid, spec.marker));
                    let create = Request::Create2(CreateRequest {
                        path: prefix,
                        data: spec.data.clone(),
                        acl: spec.acl.clone(),
                        mode: CreateMode::EphemeralSequential,
                    });
                    // Assume it may be applied from the moment it leaves.
                    a.maybe_created = true;
                    self.send_main(id, Purpose::Create, create);
                    self.listings_wanted
                        .entry(spec.parent.clone())
                        .or_default()
                        .push(id);
                }
                (Some(Node { stat: None, name }), _, _) => {
                    let path = spec.child(name);
                    self.send_main(
                        id,
                        Purpose::Stat,
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
                (Some(_), _, _) => {
                    let watch = spec.rule.is_first_n();
                    let token = self.send(id, Purpose::List, list(&spec.parent, watch), watch);
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.busy = Some(token);
                    }
                }
            },
            Goal::Hold => {}
            Goal::Release => {
                if let Some(node) = a.node.take() {
                    self.delete(id, node.name);
                } else if a.maybe_created {
                    self.send_main(id, Purpose::CleanupList, list(&spec.parent, false));
                } else if a.is_clean() {
                    self.forget(id);
                }
            }
        }
    }

    fn delete(&mut self, id: AttemptId, name: String) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.deleting.contains(&name) {
            return;
        }
        a.deleting.push(name.clone());
        let path = a.spec.child(&name);
        self.send(
            id,
            Purpose::Delete(name),
            Request::Delete(PathVersion { path, version: -1 }),
            false,
        );
    }

    fn on_created(&mut self, id: AttemptId, _token: u64, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let listing = a.listing.take();
        match result {
            Ok(Response::Created { path, stat }) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                a.maybe_created = false;
                a.node = Some(Node {
                    name,
                    stat: Some(stat),
                });
                if matches!(a.goal, Goal::Acquire { .. }) {
                    if let Some(t) = listing.filter(|t| self.shared_listings.contains_key(t)) {
                        // The listing sent with the create answers next.
                        a.busy = Some(t);
                        return;
                    }
                }
                self.step(id)
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                a.maybe_created = false;
                if matches!(a.goal, Goal::Acquire { .. }) {
                    a.parents_from = Some(0);
                }
                self.step(id)
            }
            Err(RequestError::ConnectionLoss) => self.step(id),
            Ok(_) => {
                a.maybe_created = true;
                self.fail(
                    id,
                    LockError::Client(Error::Server(ErrorCode::MarshallingError)),
                )
            }
            Err(e) => {
                a.maybe_created = false;
                self.fail(id, LockError::from(Error::from(e)))
            }
        }
    }

    fn on_parent(&mut self, id: AttemptId, n: usize, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NodeExists)) => {
                a.parents_from = Some(n + 1);
            }
            // An ancestor vanished (an emptied container): from the top.
            Err(RequestError::Server(ErrorCode::NoNode)) => a.parents_from = Some(0),
            Err(RequestError::ConnectionLoss) => {}
            Err(e) => return self.fail(id, LockError::from(Error::from(e))),
        }
        self.step(id)
    }

    fn on_recover(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        match result {
            Ok(Response::Children(children)) => {
                let mut ours: Vec<_> = sorted_contenders(&children)
                    .into_iter()
                    .filter(|c| c.protected_id() == Some(a.uuid.as_str()))
                    .collect();
                a.maybe_created = false;
                if !ours.is_empty() {
                    let first = ours.remove(0);
                    a.node = Some(Node {
                        name: first.name,
                        stat: None,
                    });
                    for extra in ours {
                        a.add_stray(&extra.name);
                    }
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => a.maybe_created = false,
            _ => {}
        }
        self.step(id)
    }

    fn on_stat(&mut self, id: AttemptId, result: Result<Response, RequestError>) {
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
                        // Our attempt id under another owner: never adopt it.
                        let name = node.name.clone();
                        a.node = None;
                        a.add_stray(&name);
                    }
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => a.node = None,
            _ => {}
        }
        self.step(id)
    }

    /// Our node vanished while we queued: someone deleted it. Queue again.
    fn node_vanished(&mut self, id: AttemptId) {
        if let Some(a) = self.attempts.get_mut(&id) {
            if matches!(a.goal, Goal::Acquire { .. }) {
                a.node = None;
            }
        }
        self.step(id)
    }

    /// The listing behind a batch of creates: each attempt whose create
    /// succeeded decides from it.
    fn on_shared_listing(
        &mut self,
        now: Instant,
        token: u64,
        ids: &[AttemptId],
        result: Result<Response, RequestError>,
    ) {
        let queue = match &result {
            Ok(Response::Children(children)) => Some(sorted_contenders(children)),
            _ => None,
        };
        for &id in ids {
            let Some(a) = self.attempts.get_mut(&id) else {
                continue;
            };
            if a.busy != Some(token) {
                // Its create failed, or the attempt moved on.
                continue;
            }
            a.busy = None;
            match &queue {
                Some(queue) => self.evaluate(now, id, queue, None),
                None => self.step(id),
            }
        }
    }

    /// Decides from a listing whether we hold or whom to watch. `watch`:
    /// the token of a child watch the listing left.
    fn evaluate(&mut self, now: Instant, id: AttemptId, queue: &[Contender], watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if !matches!(a.goal, Goal::Acquire { .. }) {
            return self.step(id);
        }
        let Some(our_name) = a.node_name().map(str::to_owned) else {
            return self.step(id);
        };
        // A create whose reply was lost can show up late, after we created
        // again: another node with our attempt id would block us forever.
        for c in queue {
            if c.protected_id() == Some(a.uuid.as_str()) && c.name != our_name {
                a.add_stray(&c.name);
            }
        }
        let Some(me) = queue.iter().position(|c| c.name == our_name) else {
            // Our node is gone: deleted by someone. Queue again.
            a.node = None;
            return self.step(id);
        };
        let rule = a.spec.rule;
        let blocker = rule.blocker(queue, me);
        if blocker.is_some() && matches!(a.goal, Goal::Acquire { no_wait: true, .. }) {
            if let Some(t) = watch {
                self.watches.remove(&t);
            }
            return self.fail(id, LockError::Timeout);
        }
        if let Some(t) = watch {
            if blocker.is_some() {
                // Not among the first n: the child watch wakes us.
                a.watch = Some(t);
                return self.send_strays(id);
            }
            self.watches.remove(&t);
        }
        match blocker {
            None => self.grant(now, id, None),
            // Listed without a watch (with the create): list again with one.
            Some(_) if rule.is_first_n() => self.step(id),
            Some(b) => {
                a.blocker_alone = rule.blocker_is_alone(queue, b);
                let path = a.spec.child(&queue[b].name);
                // getData, not exists: on a node already gone it leaves no
                // watch behind.
                let read = PathWatch { path, watch: true };
                let request = if self.regression == Some(Regression::ExistsWatch) {
                    Request::Exists(read)
                } else {
                    Request::GetData(read)
                };
                let token = self.send(id, Purpose::WatchBlocker, request, true);
                if let Some(a) = self.attempts.get_mut(&id) {
                    a.busy = Some(token);
                }
                // Strays go out alongside.
                self.send_strays(id);
            }
        }
    }

    fn send_strays(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let strays = std::mem::take(&mut a.strays);
        for name in strays {
            self.delete(id, name);
        }
    }

    /// The lock is ours. `watch`: a watch on our node already left by the
    /// read that proved it exists.
    fn grant(&mut self, _now: Instant, id: AttemptId, watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(Node {
            name,
            stat: Some(stat),
        }) = a.node.clone()
        else {
            return self.step(id);
        };
        if let Goal::Acquire {
            deadline: Some(d), ..
        } = a.goal
        {
            self.deadlines.remove(&(d, id));
        }
        a.goal = Goal::Hold;
        a.state = LockState::Held;
        a.watch = watch;
        let path = a.spec.child(&name);
        let confirm = a.spec.watch_node && watch.is_none();
        self.held_nodes.insert(path.clone(), id);
        self.events
            .push_back(LockEvent::Acquired { id, path, stat });
        if confirm {
            self.confirm(id);
        }
        self.send_strays(id);
    }

    /// Reads our held node: it must still exist (and, when watched, leave
    /// a data watch to hear of its deletion at once).
    fn confirm(&mut self, id: AttemptId) {
        let serialised = self.regression == Some(Regression::LateHolderState)
            && self.attempts.values().any(|a| a.confirming.is_some());
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(name) = a.node_name() else {
            return;
        };
        if a.confirming.is_some() {
            return;
        }
        let path = a.spec.child(name);
        if serialised {
            // One check at a time, as the old monitor's blocking calls.
            self.confirm_queue.push_back(id);
            return;
        }
        let watch = a.spec.watch_node && a.watch.is_none();
        let request = Request::GetData(PathWatch { path, watch });
        let token = self.send(id, Purpose::Confirm, request, watch);
        if let Some(a) = self.attempts.get_mut(&id) {
            a.confirming = Some(token);
        }
    }

    fn on_confirm(&mut self, id: AttemptId, token: u64, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.confirming == Some(token) {
            a.confirming = None;
        }
        if a.goal != Goal::Hold {
            self.watches.remove(&token);
            return;
        }
        match result {
            Ok(_) => {
                if self.watches.contains_key(&token) {
                    a.watch = Some(token);
                }
                if self.session == Some(SessionState::Connected) {
                    self.set_state(id, LockState::Held, None);
                }
            }
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                self.watches.remove(&token);
                self.node_deleted_under(id);
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

    fn on_deleted(&mut self, id: AttemptId, name: &str, result: Result<Response, RequestError>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.deleting.retain(|n| n != name);
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NoNode)) => {}
            // Retried; it waits in the session core for the next connection.
            Err(RequestError::ConnectionLoss) => a.strays.push(name.to_owned()),
            Err(e) => {
                log::warn!("cannot delete lock node {name}: {e}; leaving it");
            }
        }
        self.step(id)
    }

    /// Re-sends what a watch that was never set was waiting for.
    fn resume(&mut self, id: AttemptId) {
        match self.attempts.get(&id).map(|a| a.goal) {
            Some(Goal::Acquire { .. }) => self.step(id),
            Some(Goal::Hold) => self.confirm(id),
            _ => {}
        }
    }

    fn fail(&mut self, id: AttemptId, error: LockError) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if let Goal::Acquire {
            deadline: Some(d), ..
        } = a.goal
        {
            self.deadlines.remove(&(d, id));
        }
        self.events.push_back(LockEvent::Failed { id, error });
        self.begin_release(id);
    }

    /// A holder's node is gone: Lost, and nothing left to delete.
    fn node_deleted_under(&mut self, id: AttemptId) {
        if self.attempts.get(&id).map(|a| a.goal) != Some(Goal::Hold) {
            return;
        }
        self.unhold(id);
        if let Some(a) = self.attempts.get_mut(&id) {
            a.node = None;
        }
        self.lose(id, LossReason::NodeDeleted);
    }

    /// The attempt no longer holds: forget its node as a held one.
    fn unhold(&mut self, id: AttemptId) {
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

    fn begin_release(&mut self, id: AttemptId) {
        self.unhold(id);
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.goal = Goal::Release;
        if let Some(t) = a.watch.take() {
            self.watches.remove(&t);
        }
        // A main-line request in flight other than a create is moot; a
        // create's reply still tells us the node to delete.
        if let Some(t) = a.busy {
            if !matches!(self.pending.get(&t), Some((_, Purpose::Create))) {
                a.busy = None;
            }
        }
        self.step(id)
    }

    fn set_state(&mut self, id: AttemptId, state: LockState, reason: Option<LossReason>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.goal != Goal::Hold || a.state == state || a.state == LockState::Lost {
            return;
        }
        a.state = state;
        self.events
            .push_back(LockEvent::State { id, state, reason });
    }

    /// The holder can no longer rely on the lock: tell it (final), then
    /// remove what is left of the node.
    fn lose(&mut self, id: AttemptId, reason: LossReason) {
        self.set_state(id, LockState::Lost, Some(reason));
        self.begin_release(id);
    }

    /// The session is over: every node of it is gone with it.
    fn end_all(&mut self, error: LockError, reason: LossReason) {
        let attempts = std::mem::take(&mut self.attempts);
        for (id, a) in attempts {
            match a.goal {
                Goal::Acquire { .. } => self.events.push_back(LockEvent::Failed {
                    id,
                    error: error.clone(),
                }),
                Goal::Hold if self.regression == Some(Regression::HoldersMissSessionEnd) => {}
                Goal::Hold => {
                    if a.state != LockState::Lost {
                        self.events.push_back(LockEvent::State {
                            id,
                            state: LockState::Lost,
                            reason: Some(reason),
                        });
                    }
                }
                Goal::Release => {}
            }
            if a.report_release {
                self.events.push_back(LockEvent::Released { id });
            }
        }
        self.pending.clear();
        self.watches.clear();
        self.deadlines.clear();
        self.shared_listings.clear();
        self.listings_wanted.clear();
        self.held_nodes.clear();
    }

    fn forget(&mut self, id: AttemptId) {
        if let Some(a) = self.attempts.remove(&id) {
            if a.report_release {
                self.events.push_back(LockEvent::Released { id });
            }
        }
    }

    fn send_main(&mut self, id: AttemptId, purpose: Purpose, request: Request) {
        let token = self.send(id, purpose, request, false);
        if let Some(a) = self.attempts.get_mut(&id) {
            a.busy = Some(token);
        }
    }

    fn send(&mut self, id: AttemptId, purpose: Purpose, request: Request, watch: bool) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        self.pending.insert(token, (id, purpose));
        if watch {
            self.watches.insert(token, id);
        }
        self.outgoing.push_back(Outgoing {
            token,
            request,
            watch,
        });
        token
    }
}

impl Rule {
    fn is_first_n(self) -> bool {
        matches!(self, Rule::FirstN(_))
    }
}

fn list(parent: &str, watch: bool) -> Request {
    Request::GetChildren(PathWatch {
        path: parent.to_owned(),
        watch,
    })
}

/// `/a`, `/a/b`, `/a/b/c` for `/a/b/c`.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = String::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        at.push('/');
        at.push_str(segment);
        out.push(at.clone());
    }
    out
}

/// The error that ends every acquisition in this terminal state.
fn ended(state: SessionState) -> Option<LockError> {
    match state {
        SessionState::Expired => Some(LockError::SessionExpired),
        SessionState::Closed => Some(LockError::Client(Error::Closed)),
        SessionState::AuthFailed => Some(LockError::Client(Error::AuthFailed)),
        _ => None,
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
