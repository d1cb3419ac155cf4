//! Queueing: creating our node (and finding it again after an ambiguous
//! create), finding our place, watching the blocker, and the grant.

use std::time::Instant;

use jute::{
    CreateMode, CreateRequest, ErrorCode, Names, OpCode, PathVersion, PathWatch, Request, Response,
};

use super::{list, AttemptId, LockEvent, LockMachine};
use crate::lock::attempt::{Blocker, Goal, Node, OwnSeen, OwnWatch, Purpose};
use crate::lock::error::LockError;
use crate::lock::queue::{past_the_end, protected_id, Contender, SEQUENCE_WARNING};
use crate::lock::state::LockState;
use crate::lock::state::LossReason;
use crate::session::{RequestError, SessionState};

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
        if a.busy.is_some() {
            return;
        }
        let spec = a.spec.clone();
        match a.goal {
            Goal::Acquire { .. } => match (&a.node, a.maybe_created, a.parents_from) {
                (None, true, _) => {
                    self.catch_up(id, &spec.parent);
                    let list = list(&spec.parent, false);
                    self.send_main(id, Purpose::Recover, list);
                }
                (None, false, Some(n)) => {
                    let ancestors = crate::path::ancestors(&spec.parent);
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
                    if node.found && node.stat.is_none() {
                        // Ours only if our session owns it: read that first.
                        a.add_suspect(&node.name);
                        return self.send_strays(id);
                    }
                    self.delete(id, node.name);
                } else if a.maybe_created {
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
        let listing = a.listing.take();
        match result {
            Ok(Response::Created { path, stat }) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                self.announce_near_end(id, &path, &name);
                let Some(a) = self.attempts.get_mut(&id) else {
                    return;
                };
                a.maybe_created = false;
                a.node = Some(Node {
                    name,
                    stat: Some(stat),
                    found: false,
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
            // Created, its Stat untold (a create inside a multi): the
            // listing behind it stands, and a read of our node will tell
            // the Stat (`learn_stat`), or `step` asks for it before a grant.
            Ok(Response::Path(path)) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                self.announce_near_end(id, &path, &name);
                let Some(a) = self.attempts.get_mut(&id) else {
                    return;
                };
                a.maybe_created = false;
                a.node = Some(Node {
                    name,
                    stat: None,
                    found: false,
                });
                if matches!(a.goal, Goal::Acquire { .. }) {
                    if let Some(t) = listing.filter(|t| self.shared_listings.contains_key(t)) {
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
                self.fail(id, LockError::UnexpectedReply)
            }
            Err(e) => {
                a.maybe_created = false;
                // Named as the caller would read it: the create, under the
                // lock path (the sink maps it out of the chroot).
                let path = a.spec.parent.clone();
                self.fail(id, LockError::request(OpCode::Create, Some(path), e))
            }
        }
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
        match result {
            Ok(_) | Err(RequestError::Server(ErrorCode::NodeExists)) => {
                a.parents_from = Some(n + 1);
            }
            // An ancestor vanished (an emptied container): from the top.
            Err(RequestError::Server(ErrorCode::NoNode)) => a.parents_from = Some(0),
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
            if matches!(a.goal, Goal::Acquire { .. }) {
                a.node = None;
                let own = a.own_watch.take().map(|o| o.token);
                a.watched = None;
                let watches = [a.watch.take(), a.busy.take(), own, a.scout.take()];
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
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        match a.own_watch {
            Some(OwnWatch {
                seen: OwnSeen::Asked | OwnSeen::Set,
                ..
            }) => return,
            Some(OwnWatch { token, .. }) => {
                // Re-armed by SetWatches: it proves nothing about order
                // any more. A fresh read sets it again on this connection
                // (the server keeps one watch per node and connection).
                a.own_watch = None;
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
        if let Some(a) = self.attempts.get_mut(&id) {
            a.own_watch = Some(OwnWatch {
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
        let Some(a) = self.attempts.get_mut(&id) else {
            self.watches.remove(&token);
            return;
        };
        let current = a.own_watch.is_some_and(|o| o.token == token);
        if !current || !matches!(a.goal, Goal::Acquire { .. }) {
            // Superseded, granted from a listing, or given up: if it was
            // set, it goes when our node does.
            self.watches.remove(&token);
            return;
        }
        match result {
            Ok(_) => {
                a.own_watch = Some(OwnWatch {
                    token,
                    seen: OwnSeen::Set,
                })
            }
            // Our node is gone (a third party deleted it): queue again.
            Err(RequestError::Server(ErrorCode::NoNode)) => self.node_vanished(id),
            // Not set (the connection dropped): the grant falls back to a
            // read, unless it is set again first.
            Err(_) => {
                a.own_watch = None;
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
            if a.busy != Some(token) {
                // Its create failed, or the attempt moved on.
                continue;
            }
            a.busy = None;
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
        for name in children {
            if protected_id(name) == Some(a.uuid.as_str()) && name != our_name {
                a.add_suspect(name);
            }
        }
        let rule = a.spec.rule;
        let Some(standing) = rule.standing(children, &our_name) else {
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
        let (blocker, scout) = (standing.blocker, standing.scout);
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
        // A blocker's watch kept from an earlier listing stands only if
        // that node still blocks us; a scout's is set anew each time.
        let kept = matches!(blocker, Some(Blocker::Node { name, .. })
            if a.watch.is_some() && a.watched.as_deref() == Some(name));
        if !kept && a.watched.take().is_some() {
            if let Some(t) = a.watch.take() {
                self.watches.remove(&t);
            }
        }
        if let Some(t) = a.scout.take() {
            self.watches.remove(&t);
        }
        match blocker {
            None => self.grant(now, id, None),
            // Listed without a watch (with the create): list again with one.
            Some(Blocker::Queue) => self.step(id),
            Some(Blocker::Node { alone, .. }) if kept => {
                // Listed again on the scout's word, the blocker unchanged.
                a.blocker_alone = alone;
                self.watch_own_node(id);
                self.watch_scout(id, scout);
                self.send_strays(id);
            }
            Some(Blocker::Node { name, alone }) => {
                a.blocker_alone = alone;
                a.watched = Some(name.to_owned());
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
                    a.busy = Some(token);
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
        if let Some(a) = self.attempts.get_mut(&id) {
            a.scout = Some(token);
        }
    }

    /// The scout's watch fired, or its getData found it gone: list again
    /// now, if we still wait on a watched blocker and nothing else is on
    /// its way.
    pub(super) fn scout_gone(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if matches!(a.goal, Goal::Acquire { .. }) && a.busy.is_none() && a.watch.is_some() {
            self.step(id);
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

    /// The lock is ours. `watch`: a watch on our node already left by the
    /// read that proved it exists.
    pub(super) fn grant(&mut self, _now: Instant, id: AttemptId, watch: Option<u64>) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Some(Node {
            name,
            stat: Some(stat),
            ..
        }) = a.node.clone()
        else {
            // Our Stat untold (created inside a multi): one read of our
            // node tells it and proves the node is there; it grants then.
            return match (&a.node, a.goal) {
                (Some(node), Goal::Acquire { .. }) if a.busy.is_none() => {
                    let path = a.spec.child(&node.name);
                    let watch = a.spec.watch_node && a.own_watch.is_none();
                    let request = Request::GetData(PathWatch { path, watch });
                    let token = self.send(id, Purpose::GrantCheck, request, watch);
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.busy = Some(token);
                    }
                }
                _ => self.step(id),
            };
        };
        if a.delay.as_ref().is_some_and(|d| d.stage.marked().is_none()) {
            return self.begin_tenure(id, watch);
        }
        if let Goal::Acquire {
            deadline: Some(d), ..
        } = a.goal
        {
            self.deadlines.remove(&(d, id));
        }
        a.goal = Goal::Hold;
        a.state = LockState::Held;
        // A blocker's or scout's watch left from the queue (granted from a
        // listing) is no holder's watch.
        let stale = [
            a.watched.take().and_then(|_| a.watch.take()),
            a.scout.take(),
        ];
        for t in stale.into_iter().flatten() {
            self.watches.remove(&t);
        }
        // The watch on our own node kept while waiting is the holder's
        // watch, if it wants one and it is known to be set (its reply came
        // before whatever granted us); else it is forgotten here, and the
        // server's copy ends when our node is deleted at release.
        let own = a.own_watch.take();
        let watch = watch.or_else(|| {
            own.filter(|o| a.spec.watch_node && o.seen != OwnSeen::Asked)
                .map(|o| o.token)
        });
        if let Some(o) = own.filter(|o| Some(o.token) != watch) {
            self.watches.remove(&o.token);
        }
        a.watch = watch;
        let path = a.spec.child(&name);
        // A revocable holder reads its node once granted: a request written
        // while it waited is heeded too.
        let confirm = (a.spec.watch_node && watch.is_none()) || a.spec.revocable;
        let near_end = Contender::classify(&name).is_some_and(|(seq, _)| seq > SEQUENCE_WARNING);
        self.held_nodes.insert(path.clone(), id);
        let after_unclean_end = a.delay.as_ref().is_some_and(|d| d.unclean);
        self.events.push_back(LockEvent::Acquired {
            id,
            path,
            stat,
            after_unclean_end,
        });
        if confirm {
            self.confirm(id);
        }
        if near_end {
            self.watch_queue_end(id);
        }
        self.send_strays(id);
    }

    /// A holder near the end of the counter lists the queue with a child
    /// watch: once a node past the end shows up, peers that sort suffixes
    /// as text (Curator, kazoo) may take it for the first in line, so this
    /// holder can no longer be sure it is the only one.
    pub(super) fn watch_queue_end(&mut self, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if a.goal != Goal::Hold || a.end_watch.is_some() {
            return;
        }
        let request = list(&a.spec.parent, true);
        let token = self.send(id, Purpose::EndWatch, request, true);
        if let Some(a) = self.attempts.get_mut(&id) {
            a.end_watch = Some(token);
        }
    }

    /// The holder's listing near the counter's end.
    pub(super) fn on_end_listing(
        &mut self,
        id: AttemptId,
        token: u64,
        result: Result<Response, RequestError>,
    ) {
        let Some(a) = self.attempts.get_mut(&id) else {
            self.watches.remove(&token);
            return;
        };
        if a.end_watch != Some(token) {
            self.watches.remove(&token);
            return;
        }
        match result {
            Ok(Response::Children(children)) => {
                let beyond = children
                    .iter()
                    .any(|n| Contender::classify(n).is_some_and(|(seq, _)| past_the_end(seq)));
                if beyond && a.goal == Goal::Hold {
                    a.end_watch = None;
                    self.watches.remove(&token);
                    let path = a.spec.parent.clone();
                    log::error!(
                        "{path}: nodes past the sequence counter's end; the holder is told the \
                         lock is lost, and its node stays until it lets go"
                    );
                    self.lose_keeping_node(id, LossReason::SequenceExhausted);
                }
            }
            Err(_) | Ok(_) => {
                // Not set (the connection dropped): set again once back.
                a.end_watch = None;
                self.watches.remove(&token);
                if self.session == Some(SessionState::Connected) {
                    self.watch_queue_end(id);
                }
            }
        }
    }
}
