//! Queueing: creating our node (and finding it again after an ambiguous
//! create), finding our place, watching the blocker, and the grant.

use std::time::Instant;

use jute::{
    CreateMode, CreateRequest, ErrorCode, Names, OpCode, PathVersion, PathWatch, Request, Response,
    Stat,
};

use super::{list, AttemptId, LockEvent, LockMachine};
use crate::lock::attempt::{Blocker, Node};
use crate::lock::error::LockError;
use crate::lock::phase::{Creating, OwnSeen, OwnWatch, Phase, Queueing, Step, Wait};
use crate::lock::purpose::Purpose;
use crate::lock::queue::{protected_id, Contender, SEQUENCE_WARNING};
use crate::session::RequestError;

impl LockMachine {
    /// Sends whatever the attempt needs next, unless a main-line request is
    /// already in flight. Requests sent while disconnected wait in the
    /// session core for the next connection.
    pub(super) fn step(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if !a.strays.is_empty() || !a.suspects.is_empty() {
            self.send_strays(id);
        }
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if a.phase.awaited().is_some() {
            return;
        }
        let spec = a.spec.clone();
        let (maybe_created, parents_from) = match &a.phase {
            Phase::Queueing(Queueing {
                step: Step::Creating(c),
                ..
            }) => (c.maybe_created, c.parents_from),
            _ => (false, None),
        };
        match &mut a.phase {
            Phase::Queueing(q) => match (&a.node, maybe_created, parents_from) {
                (None, true, _) => {
                    self.catch_up(id, &spec.parent);
                    let list = list(&spec.parent, false);
                    self.send_main(id, Purpose::Recover, list);
                }
                (None, false, Some(n)) => {
                    let ancestors = crate::path::ancestors(&spec.parent);
                    let Some(path) = ancestors.get(n) else {
                        if let Some(c) = q.step.creating() {
                            c.parents_from = None;
                        }
                        return self.step(id);
                    };
                    // The lock path is the last; the folders above it are
                    // shared with other locks.
                    let acl = if n + 1 == ancestors.len() {
                        spec.parent_acl.clone()
                    } else {
                        spec.ancestor_acl.clone()
                    };
                    let request = Request::CreateContainer(CreateRequest {
                        path: path.clone(),
                        data: Vec::new(),
                        acl,
                        mode: CreateMode::Container,
                    });
                    self.send_main(id, Purpose::Parent(n), request);
                }
                (None, false, None) => {
                    let prefix = spec.node_prefix(&a.uuid);
                    let create = Request::Create2(CreateRequest {
                        path: prefix,
                        data: spec.data.clone(),
                        acl: spec.acl.clone(),
                        mode: CreateMode::EphemeralSequential,
                    });
                    // Assume it may be applied from the moment it leaves.
                    if let Some(t) = q.create() {
                        self.watches.remove(&t);
                    }
                    self.send_main(id, Purpose::Create, create);
                    self.want_listing(&spec.parent, id);
                }
                (
                    Some(Node {
                        stat: None, name, ..
                    }),
                    _,
                    _,
                ) => {
                    let path = spec.child(name);
                    q.begin_listing();
                    self.send_main(
                        id,
                        Purpose::Stat,
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
                (Some(_), _, _) => {
                    q.begin_listing();
                    let watch = spec.rule.is_first_n();
                    let token = self.send(id, Purpose::List, list(&spec.parent, watch), watch);
                    if let Some(a) = self.attempts.get_mut(&id) {
                        *a.phase.awaited_mut() = Some(token);
                    }
                }
            },
            Phase::Held(_) => {}
            Phase::Releasing(r) => {
                if let Some(node) = a.node.take() {
                    if node.found && node.stat.is_none() {
                        // Ours only if our session owns it: read that first.
                        a.add_suspect(&node.name);
                        return self.send_strays(id);
                    }
                    self.delete(id, node.name);
                } else if r.maybe_created {
                    self.catch_up(id, &spec.parent);
                    self.send_main(id, Purpose::CleanupList, list(&spec.parent, false));
                } else if a.is_clean() {
                    self.forget(id);
                }
            }
        }
    }

    pub(super) fn delete(&mut self, id: AttemptId, name: String) {
        let Some(path) = self.take_up(id, &name) else {
            return;
        };
        let request = self
            .release_marked(id, &name)
            .unwrap_or(Request::Delete(PathVersion { path, version: -1 }));
        self.send(id, Purpose::Delete(name), request, false);
    }

    pub(super) fn on_created(
        &mut self,
        id: AttemptId,
        _token: u64,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let creating = a.phase.as_queueing().and_then(|q| q.step.creating());
        let listing = creating.and_then(|c| c.listing.take());
        match result {
            Ok(Response::Created { path, stat }) => self.created(id, &path, Some(stat), listing),
            // Created, its Stat untold (a create inside a multi): the
            // listing behind it stands, and a read of our node will tell
            // the Stat (`learn_stat`), or `step` asks for it before a grant.
            Ok(Response::Path(path)) => self.created(id, &path, None, listing),
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                if let Some(m) = a.phase.maybe_created_mut() {
                    *m = false;
                }
                if let Some(c) = a.phase.as_queueing().and_then(|q| q.step.creating()) {
                    c.parents_from = Some(0);
                }
                self.step(id)
            }
            Err(RequestError::ConnectionLoss) => self.step(id),
            Ok(_) => {
                if let Some(m) = a.phase.maybe_created_mut() {
                    *m = true;
                }
                self.fail(id, LockError::UnexpectedReply)
            }
            Err(e) => {
                if let Some(m) = a.phase.maybe_created_mut() {
                    *m = false;
                }
                // Named as the caller would read it: the create, under the
                // lock path (the sink maps it out of the chroot).
                let path = a.spec.parent.clone();
                self.fail(id, LockError::request(OpCode::Create, Some(path), e))
            }
        }
    }

    /// Our create was applied: our node is known. The listing sent with
    /// the create, if it is still to come, answers next; else the next step.
    fn created(&mut self, id: AttemptId, path: &str, stat: Option<Stat>, listing: Option<u64>) {
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        self.announce_near_end(id, path, &name);
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.node = Some(Node {
            name,
            stat,
            found: false,
        });
        if let Some(m) = a.phase.maybe_created_mut() {
            *m = false;
        }
        if let Some(q) = a.phase.as_queueing() {
            if let Some(t) = listing.filter(|t| self.shared_listings.contains_key(t)) {
                q.step = Step::Listing { awaits: Some(t) };
                return;
            }
        }
        self.step(id)
    }

    /// A node of ours was issued past [`SEQUENCE_WARNING`]: log it and
    /// tell the observer, whether its create was answered with a Stat or
    /// (inside a multi, as ZooKeeper 3.8 answers) with the name alone.
    fn announce_near_end(&mut self, id: AttemptId, path: &str, name: &str) {
        let Some((sequence, _)) =
            Contender::classify(name).filter(|(seq, _)| *seq > SEQUENCE_WARNING)
        else {
            return;
        };
        log::warn!(
            "{path}: the parent's sequence counter is near its end (2147483647); \
             delete and recreate the lock path before it runs out"
        );
        self.events.push_back(LockEvent::NearSequenceEnd {
            id,
            node: path.to_owned(),
            sequence,
        });
    }

    pub(super) fn on_parent(
        &mut self,
        id: AttemptId,
        n: usize,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let creating = a.phase.as_queueing().and_then(|q| q.step.creating());
        let parents = creating.map(|c: &mut Creating| &mut c.parents_from);
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NodeExists)) => {
                if let Some(p) = parents {
                    *p = Some(n + 1);
                }
            }
            // An ancestor vanished (an emptied container): from the top.
            Err(RequestError::Server(ErrorCode::NoNode)) => {
                if let Some(p) = parents {
                    *p = Some(0);
                }
            }
            Err(RequestError::ConnectionLoss) => {}
            Err(e) => {
                let path = crate::path::ancestors(&a.spec.parent).get(n).cloned();
                let error = LockError::request(OpCode::CreateContainer, path, e);
                return self.fail(id, error);
            }
        }
        self.step(id)
    }

    /// Our node vanished while we queued: someone deleted it. Queue again,
    /// at once: whatever we waited for (a blocker's watch, a reply) is moot.
    pub(super) fn node_vanished(&mut self, id: AttemptId) {
        if let Some(a) = self.attempts.get_mut(&id) {
            if let Phase::Queueing(q) = &mut a.phase {
                a.node = None;
                let own = q.own_watch.take().map(|o| o.token);
                let (wait, awaited) = q.start_over();
                let watches = [wait, awaited, own, q.scout.take()];
                for t in watches.into_iter().flatten() {
                    self.watches.remove(&t);
                }
            }
        }
        self.step(id)
    }

    /// Sets (or sets again, after a reconnect) the watch on our own node
    /// (see [`OwnWatch`]). Sent before the blocker's watch, so its reply
    /// comes first.
    pub(super) fn watch_own_node(&mut self, id: AttemptId) {
        let Some(q) = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing())
        else {
            return;
        };
        match q.own_watch {
            Some(OwnWatch {
                seen: OwnSeen::Asked | OwnSeen::Set,
                ..
            }) => return,
            Some(OwnWatch { token, .. }) => {
                // Re-armed by SetWatches: it proves nothing about order
                // any more. A fresh read sets it again on this connection
                // (the server keeps one watch per node and connection).
                q.own_watch = None;
                self.watches.remove(&token);
            }
            None => {}
        }
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let Some(name) = a.node_name() else {
            return;
        };
        let path = a.spec.child(name);
        let request = Request::GetData(PathWatch { path, watch: true });
        let token = self.send(id, Purpose::WatchOwn, request, true);
        if let Some(q) = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing())
        {
            q.own_watch = Some(OwnWatch {
                token,
                seen: OwnSeen::Asked,
            });
        }
    }

    pub(super) fn on_own_watch_set(
        &mut self,
        id: AttemptId,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        self.learn_stat(id, &result);
        let q = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing());
        let Some(q) = q.filter(|q| q.own_watch.is_some_and(|o| o.token == token)) else {
            // Superseded, granted from a listing, or given up: if it was
            // set, it goes when our node does.
            self.watches.remove(&token);
            return;
        };
        match result {
            Ok(_) => {
                q.own_watch = Some(OwnWatch {
                    token,
                    seen: OwnSeen::Set,
                })
            }
            // Our node is gone (a third party deleted it): queue again.
            Err(RequestError::Server(ErrorCode::NoNode)) => self.node_vanished(id),
            // Not set (the connection dropped): the grant falls back to a
            // read, unless it is set again first.
            Err(_) => {
                q.own_watch = None;
                self.watches.remove(&token);
            }
        }
    }

    /// The listing behind a batch of creates: each attempt whose create
    /// succeeded decides from it.
    pub(super) fn on_shared_listing(
        &mut self,
        now: Instant,
        token: u64,
        ids: &[AttemptId],
        result: Result<Response, RequestError>,
    ) {
        let children = match &result {
            Ok(Response::Children(children)) => Some(children),
            _ => None,
        };
        for &id in ids {
            let Some(a) = self.attempts.get_mut(&id) else {
                continue;
            };
            if a.phase.awaited() != Some(token) {
                // Its create failed, or the attempt moved on.
                continue;
            }
            *a.phase.awaited_mut() = None;
            match children {
                Some(children) => self.evaluate(now, id, children, None),
                None => self.step(id),
            }
        }
    }

    /// Decides from a listing whether we hold or whom to watch. `watch`:
    /// the token of a child watch the listing left.
    pub(super) fn evaluate(
        &mut self,
        now: Instant,
        id: AttemptId,
        children: &Names,
        watch: Option<u64>,
    ) {
        let passes = self.passes(id);
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        if !a.phase.is_queueing() {
            return self.step(id);
        }
        let Some(our_name) = a.node_name().map(str::to_owned) else {
            return self.step(id);
        };
        // A create whose reply was lost can show up late, after we created
        // again: another node with our attempt id would block us forever.
        for name in children {
            if protected_id(name) == Some(a.uuid.as_str()) && name != our_name {
                a.add_suspect(name);
            }
        }
        let Phase::Queueing(q) = &mut a.phase else {
            return;
        };
        let rule = a.spec.rule;
        let passes = a.spec.passes.as_deref().filter(|_| passes);
        let Some(standing) = rule.standing(children, &our_name, passes) else {
            // Our node is gone: deleted by someone. Queue again.
            return self.node_vanished(id);
        };
        if standing.past_the_end {
            if let Some(t) = watch {
                self.watches.remove(&t);
            }
            let path = a.spec.parent.clone();
            log::error!(
                "{path}: our node {our_name} cannot be ordered (the sequence counter is at its end); failing closed"
            );
            return self.fail(id, LockError::SequenceExhausted { path });
        }
        if standing.behind_passed {
            if let Some(t) = watch {
                self.watches.remove(&t);
            }
            return self.fail(id, LockError::WouldDeadlock);
        }
        let (blocker, scout) = (standing.blocker, standing.scout);
        if blocker.is_some() && q.no_wait {
            if let Some(t) = watch {
                self.watches.remove(&t);
            }
            return self.fail(id, LockError::Timeout);
        }
        if let Some(t) = watch {
            if blocker.is_some() {
                // Not among the first n: the child watch wakes us.
                q.wait_on(Wait::Queue { watch: t });
                return self.send_strays(id);
            }
            self.watches.remove(&t);
        }
        // A blocker's watch kept from an earlier listing stands only if
        // that node still blocks us; a scout's is set anew each time.
        let kept = match (&blocker, q.step.wait()) {
            (
                Some(Blocker::Node { name, .. }),
                Some(Wait::Blocker {
                    name: watched,
                    watch: Some(_),
                    ..
                }),
            ) => watched == name,
            _ => false,
        };
        if !kept && matches!(q.step.wait(), Some(Wait::Blocker { .. })) {
            if let Some(t) = q.end_wait(&self.pending) {
                self.watches.remove(&t);
            }
        }
        if let Some(t) = q.scout.take() {
            self.watches.remove(&t);
        }
        match blocker {
            None => self.grant(now, id, None),
            // Listed without a watch (with the create): list again with one.
            Some(Blocker::Queue) => self.step(id),
            Some(Blocker::Node { alone, .. }) if kept => {
                // Listed again on the scout's word, the blocker unchanged.
                if let Some(Wait::Blocker { alone: a, .. }) = q.step.wait_mut() {
                    *a = alone;
                }
                self.watch_own_node(id);
                self.watch_scout(id, scout);
                self.send_strays(id);
            }
            Some(Blocker::Node { name, alone }) => {
                q.wait_on(Wait::Blocker {
                    name: name.to_owned(),
                    alone,
                    watch: None,
                });
                let path = a.spec.child(name);
                // Watch our own node too, in the same turn (no round trip
                // added on the way to the grant): when the blocker is alone
                // its deletion then grants us the lock on the event alone;
                // and a waiter whose node a third party deletes hears of it
                // and queues again, rather than waiting with no node until
                // the blocker goes (a leader may lead for days).
                self.watch_own_node(id);
                // getData, not exists: on a node already gone it leaves no
                // watch behind.
                let read = PathWatch { path, watch: true };
                let request = Request::GetData(read);
                let token = self.send(id, Purpose::WatchBlocker, request, true);
                if let Some(a) = self.attempts.get_mut(&id) {
                    *a.phase.awaited_mut() = Some(token);
                }
                self.watch_scout(id, scout);
                // Strays go out alongside.
                self.send_strays(id);
            }
        }
    }

    /// Watches `scout`, the node below our blocker (see
    /// [`Standing::scout`](crate::lock::attempt::Standing)): when it
    /// goes, we list again while the blocker holds, so that the blocker's
    /// own deletion finds us knowing it was alone below us, and grants us
    /// the lock on its event without another round trip.
    fn watch_scout(&mut self, id: AttemptId, scout: Option<&str>) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        let Some(name) = scout else {
            return;
        };
        let path = a.spec.child(name);
        let request = Request::GetData(PathWatch { path, watch: true });
        let token = self.send(id, Purpose::WatchScout, request, true);
        if let Some(q) = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing())
        {
            q.scout = Some(token);
        }
    }

    /// The scout's watch fired, or its getData found it gone: list again
    /// now, if we still wait on a watched blocker and nothing else is on
    /// its way.
    pub(super) fn scout_gone(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if let Phase::Queueing(q) = &a.phase {
            if q.step.awaits().is_none() && q.step.wait_watch().is_some() {
                self.step(id);
            }
        }
    }

    pub(super) fn send_strays(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let strays = std::mem::take(&mut a.strays);
        let suspects = std::mem::take(&mut a.suspects);
        for name in strays {
            self.delete(id, name);
        }
        for name in suspects {
            self.read_owner(id, name);
        }
    }

    /// Records that attempt `id` acts on node `name` (deletes it, or reads
    /// its owner first): its path, or `None` if that is under way already
    /// or the attempt is gone. One request per node at a time.
    fn take_up(&mut self, id: AttemptId, name: &str) -> Option<String> {
        let a = self.attempts.get_mut(&id)?;
        if a.deleting.iter().any(|n| n == name) {
            return None;
        }
        a.deleting.push(name.to_owned());
        Some(a.spec.child(name))
    }

    /// Reads who owns `name`, a node with our attempt id from a listing,
    /// before deleting it (see [`Purpose::StrayStat`]).
    fn read_owner(&mut self, id: AttemptId, name: String) {
        let Some(path) = self.take_up(id, &name) else {
            return;
        };
        let request = Request::Exists(PathWatch { path, watch: false });
        self.send(id, Purpose::StrayStat(name), request, false);
    }
}
