//! The grant: the queueing attempt becomes a holder, and a holder near
//! the end of the counter watches the queue.

use std::time::Instant;

use jute::{PathWatch, Request, Response};

use super::{list, AttemptId, LockEvent, LockMachine};
use crate::lock::attempt::Node;
use crate::lock::phase::{Held, OwnSeen, Phase, Wait};
use crate::lock::purpose::Purpose;
use crate::lock::queue::{past_the_end, Contender, SEQUENCE_WARNING};
use crate::lock::state::{LockState, LossReason};
use crate::session::{RequestError, SessionState};

impl LockMachine {
    /// The lock is ours. `watch`: a watch on our node already left by the
    /// read that proved it exists.
    pub(super) fn grant(&mut self, now: Instant, id: AttemptId, watch: Option<u64>) {
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
            let own = match &a.phase {
                Phase::Queueing(q) if q.step.awaits().is_none() => Some(q.own_watch),
                _ => None,
            };
            return match (&a.node, own) {
                (Some(node), Some(own)) => {
                    let path = a.spec.child(&node.name);
                    let watch = a.spec.watch_node && own.is_none();
                    let request = Request::GetData(PathWatch { path, watch });
                    if let Some(q) = a.phase.as_queueing() {
                        q.begin_granting();
                    }
                    let token = self.send(id, Purpose::GrantCheck, request, watch);
                    if let Some(a) = self.attempts.get_mut(&id) {
                        *a.phase.awaited_mut() = Some(token);
                    }
                }
                _ => self.step(id),
            };
        };
        if a.delay.as_ref().is_some_and(|d| d.stage.marked().is_none()) {
            return self.begin_tenure(id, watch);
        }
        let Phase::Queueing(q) = &mut a.phase else {
            return;
        };
        if let Some(d) = q.deadline {
            self.deadlines.remove(&(d, id));
        }
        // A blocker's or scout's watch left from the queue (granted from a
        // listing) is no holder's watch.
        let blocker = match q.step.wait() {
            Some(Wait::Blocker { watch, .. }) => *watch,
            _ => None,
        };
        for t in [blocker, q.scout.take()].into_iter().flatten() {
            self.watches.remove(&t);
        }
        // The watch on our own node kept while waiting is the holder's
        // watch, if it wants one and it is known to be set (its reply came
        // before whatever granted us); else it is forgotten here, and the
        // server's copy ends when our node is deleted at release.
        let own = q.own_watch.take();
        let watch = watch.or_else(|| {
            own.filter(|o| a.spec.watch_node && o.seen != OwnSeen::Asked)
                .map(|o| o.token)
        });
        if let Some(o) = own.filter(|o| Some(o.token) != watch) {
            self.watches.remove(&o.token);
        }
        // Counted from now: the grant the holder hears of in this turn.
        let max_hold_end = a.spec.max_hold.map(|d| crate::deadline::after(now, d));
        a.phase = Phase::Held(Held {
            state: LockState::Held,
            watch,
            confirming: None,
            end_watch: None,
            late: q.step.awaits(),
            max_hold_end,
        });
        if let Some(end) = max_hold_end {
            self.max_holds.insert((end, id));
        }
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
            max_hold_end,
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
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        let Phase::Held(h) = &a.phase else {
            return;
        };
        if h.end_watch.is_some() {
            return;
        }
        let request = list(&a.spec.parent, true);
        let token = self.send(id, Purpose::EndWatch, request, true);
        if let Some(h) = self.attempts.get_mut(&id).and_then(|a| a.phase.as_held()) {
            h.end_watch = Some(token);
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
        let Some(h) = a.phase.as_held().filter(|h| h.end_watch == Some(token)) else {
            self.watches.remove(&token);
            return;
        };
        match result {
            Ok(Response::Children(children)) => {
                let beyond = children
                    .iter()
                    .any(|n| Contender::classify(n).is_some_and(|(seq, _)| past_the_end(seq)));
                if beyond {
                    h.end_watch = None;
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
                h.end_watch = None;
                self.watches.remove(&token);
                if self.session == Some(SessionState::Connected) {
                    self.watch_queue_end(id);
                }
            }
        }
    }
}
