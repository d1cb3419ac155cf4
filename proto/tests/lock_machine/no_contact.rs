//! A holder told `Lost(NoContact)`: the client's own judgement (no word
//! from the leader for a whole session timeout), not the server's. If the
//! session turns out alive, its node still stands for a holder whose work
//! may still run: it stays until the guard lets go, and only then may the
//! next waiter be granted. If the server expired the session instead, the
//! node went with it and nothing is left to do.

use jute::{ErrorCode, EventType, Request, Response};
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::lock::{LockState, LossReason};
use zklock_proto::session::{RequestError, SessionState};

use crate::support::*;

const OTHER: &str = "00000000-0000-4000-8000-000000000002";

fn lost_no_contact(id: u64) -> LockEvent {
    LockEvent::State {
        id,
        state: LockState::Lost,
        reason: Some(LossReason::NoContact),
    }
}

fn suspended(id: u64) -> LockEvent {
    LockEvent::State {
        id,
        state: LockState::Suspended,
        reason: None,
    }
}

/// Cut off, then silent for a whole session timeout: Suspended, then Lost.
fn silent_for_a_session_timeout(h: &mut Harness) {
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Lost, SESSION);
}

/// The lock path's children as the server keeps them (czxid each), and
/// the data watches left on them: enough of a server to answer what the
/// machine sends while one holder and one waiter share `/l`.
struct Tree {
    nodes: Vec<(String, i64)>,
    watchers: Vec<(String, Outgoing)>,
}

impl Tree {
    fn czxid(&self, path: &str) -> Option<i64> {
        self.nodes.iter().find(|(p, _)| p == path).map(|(_, c)| *c)
    }

    fn answer(&mut self, h: &mut Harness, o: &Outgoing) {
        match &o.request {
            Request::GetChildren(p) => {
                let prefix = format!("{}/", p.path);
                let names: Vec<&str> = self
                    .nodes
                    .iter()
                    .filter_map(|(n, _)| n.strip_prefix(&prefix))
                    .collect();
                h.reply(o, Ok(children(&names)));
            }
            Request::GetData(p) => match self.czxid(&p.path) {
                Some(czxid) => {
                    if o.watch {
                        self.watchers.push((p.path.clone(), o.clone()));
                    }
                    h.reply(o, data(czxid));
                }
                None => h.reply(o, Err(RequestError::Server(ErrorCode::NoNode))),
            },
            Request::Exists(p) => match self.czxid(&p.path) {
                Some(czxid) => h.reply(o, Ok(Response::Stat(stat(czxid)))),
                None => h.reply(o, Err(RequestError::Server(ErrorCode::NoNode))),
            },
            Request::Delete(d) => {
                let before = self.nodes.len();
                self.nodes.retain(|(n, _)| *n != d.path);
                if self.nodes.len() == before {
                    return h.reply(o, Err(RequestError::Server(ErrorCode::NoNode)));
                }
                h.reply(o, Ok(Response::Empty));
                let (fired, kept) = std::mem::take(&mut self.watchers)
                    .into_iter()
                    .partition(|(p, _)| *p == d.path);
                self.watchers = kept;
                for (path, w) in fired {
                    h.fire(&w, EventType::NodeDeleted, &path);
                }
            }
            r => panic!("not expected here: {r:?}"),
        }
    }

    /// Answers everything the machine sends until it sends nothing more;
    /// the events meanwhile.
    fn serve(&mut self, h: &mut Harness) -> Vec<LockEvent> {
        let mut events = Vec::new();
        for _ in 0..100 {
            events.extend(h.events());
            let sent = h.sent();
            if sent.is_empty() {
                return events;
            }
            for o in &sent {
                self.answer(h, o);
            }
        }
        panic!("the machine never settles: {events:?}");
    }
}

/// The hazard itself: attempt 2 waits behind holder 1 (the same session,
/// as two threads of one process would). The session hears nothing for a
/// whole session timeout, holder 1 is told Lost, then the session comes
/// back alive. Deleting 1's node then would grant 2 while 1's guard (and
/// its work) still runs. Only 1's release may free 2. Fails on the old
/// rule (the node deleted as soon as the holder is told).
#[test]
fn a_waiter_behind_a_holder_lost_for_no_contact_waits_for_its_release() {
    let mut h = Harness::new();
    let holder = hold_free(&mut h, 1, "/l", false, 1);
    let waiter = format!("/l/_c_{OTHER}-lock-0000000002");
    let mut tree = Tree {
        nodes: vec![(holder.clone(), 101), (waiter.clone(), 102)],
        watchers: Vec::new(),
    };
    h.m.acquire(h.now, 2, spec(false), OTHER.into(), None, false);
    let sent = h.sent();
    let [create, _listing] = &sent[..] else {
        panic!("a create and a listing expected: {sent:?}")
    };
    h.reply(
        create,
        Ok(Response::Created {
            path: waiter.clone(),
            stat: stat(102),
        }),
    );
    tree.answer(&mut h, &sent[1]);
    assert!(tree.serve(&mut h).is_empty(), "2 waits behind 1");
    assert!(
        tree.watchers.iter().any(|(p, _)| *p == holder),
        "2 watches 1's node"
    );

    silent_for_a_session_timeout(&mut h);
    assert_eq!(h.events(), vec![suspended(1), lost_no_contact(1)]);
    // Alive after all: the same session, connected again.
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let events = tree.serve(&mut h);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, LockEvent::Acquired { id: 2, .. })),
        "2 granted while holder 1, told Lost, still has its guard: {events:?}"
    );
    assert!(events.is_empty(), "1 is never Held again: {events:?}");
    assert!(tree.czxid(&holder).is_some(), "1's node stays");

    // 1 lets go: its node goes, and 2 is granted.
    h.m.release(h.now, 1, true);
    let events = tree.serve(&mut h);
    assert!(tree.czxid(&holder).is_none());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LockEvent::Acquired { id: 2, .. })),
        "{events:?}"
    );
    assert!(
        events.contains(&LockEvent::Released {
            id: 1,
            refused: None
        }),
        "{events:?}"
    );
}

/// A holder told Lost for want of contact whose session comes back: no
/// delete, no read, never Held again; its guard's release deletes the
/// node (that attempt's node, by its attempt id) and says when it is gone.
#[test]
fn a_holder_lost_for_no_contact_keeps_its_node_until_released() {
    let mut h = Harness::new();
    let node = hold_free(&mut h, 1, "/l", false, 1);
    silent_for_a_session_timeout(&mut h);
    assert_eq!(h.events(), vec![suspended(1), lost_no_contact(1)]);
    assert!(h.sent().is_empty(), "nothing sent: the node stays");
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    assert!(
        h.sent().is_empty(),
        "no delete, and no read to say Held again"
    );
    assert!(h.events().is_empty());
    // Cut off and back again: still nothing.
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    assert!(h.sent().is_empty() && h.events().is_empty());
    assert_eq!(h.m.len(), 1, "kept for its guard");
    h.m.release(h.now, 1, true);
    let sent = h.sent();
    assert_eq!(deletes(&sent), vec![node]);
    assert!(h.events().is_empty(), "not gone before the server says so");
    h.reply(&sent[0], Ok(Response::Empty));
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
    assert!(h.m.is_empty());
}

/// The server had expired the session after all: the node went with it.
/// Nothing is sent, the holder is not told twice, and its guard's release
/// later finishes at once.
#[test]
fn a_holder_lost_for_no_contact_whose_session_expired_has_nothing_to_delete() {
    let mut h = Harness::new();
    hold_free(&mut h, 1, "/l", false, 1);
    silent_for_a_session_timeout(&mut h);
    h.events();
    h.m.handle_session(h.now, SessionState::Expired, SESSION);
    assert!(h.events().is_empty(), "told once");
    assert!(h.sent().is_empty());
    assert!(h.m.is_empty());
    h.m.release(h.now, 1, true);
    assert!(h.sent().is_empty());
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
}

/// A guard released while the connection is still down: its delete waits
/// for the next connection, and one lost with a connection is sent again,
/// for as long as the session lives (a leaked node blocks everyone).
#[test]
fn the_release_after_a_no_contact_loss_is_retried_until_the_node_is_gone() {
    let mut h = Harness::new();
    let node = hold_free(&mut h, 1, "/l", false, 1);
    silent_for_a_session_timeout(&mut h);
    h.events();
    h.m.release(h.now, 1, true);
    let first = h.sent();
    assert_eq!(deletes(&first), vec![node.clone()]);
    h.reply(&first[0], Err(RequestError::ConnectionLoss));
    let again = h.sent();
    assert_eq!(deletes(&again), vec![node], "sent again");
    assert!(h.events().is_empty());
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    h.reply(&again[0], Ok(Response::Empty));
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
    assert!(h.m.is_empty());
}

/// A holder that watches its node (revocable, or `watch_node`) stays Lost
/// whatever its node's watch says after the session is back: a change
/// (a revocation request) reads the node but never says Held; a deletion
/// by a third party leaves nothing to delete.
#[test]
fn a_watched_holder_lost_for_no_contact_is_never_held_again() {
    let mut h = Harness::new();
    let node = hold_free(&mut h, 1, "/l", true, 1);
    let confirm = h.sent();
    let [confirm] = &confirm[..] else {
        panic!("one watched read expected: {confirm:?}")
    };
    h.reply(confirm, data(101));
    silent_for_a_session_timeout(&mut h);
    assert_eq!(h.events(), vec![suspended(1), lost_no_contact(1)]);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    assert!(h.sent().is_empty());
    // The re-armed watch fires: the node was written.
    h.fire(confirm, EventType::NodeDataChanged, &node);
    for o in h.sent() {
        assert!(!matches!(o.request, Request::Delete(_)), "{o:?}");
        h.reply(&o, data(101));
    }
    let events: Vec<LockEvent> = h
        .events()
        .into_iter()
        .filter(|e| !matches!(e, LockEvent::RevocationRequested { .. }))
        .collect();
    assert!(events.is_empty(), "never Held again: {events:?}");
    // Deleted by a third party: gone, nothing to delete, not told again.
    h.fire(confirm, EventType::NodeDeleted, &node);
    for o in h.sent() {
        assert!(!matches!(o.request, Request::Delete(_)), "{o:?}");
        h.reply(&o, Err(RequestError::Server(ErrorCode::NoNode)));
    }
    assert!(h.events().is_empty());
    h.m.release(h.now, 1, true);
    assert!(deletes(&h.sent()).is_empty());
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
}
