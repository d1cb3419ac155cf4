//! Connection loss and reconnect: what a waiter must prove again on a new
//! connection (re-armed watches prove nothing about order), a holder
//! Suspended then Held again or Lost, watches that will never fire, a
//! holder's check refused by the server, the session expiring.

use jute::{ErrorCode, EventType, Request};
use zklock_proto::lock::LockEvent;
use zklock_proto::lock::{LockError, LockState, LossReason};
use zklock_proto::session::{RequestError, SessionState};

use crate::support::*;

#[test]
fn after_a_reconnect_the_head_leaving_needs_a_read() {
    // SetWatches fires what changed while we were away in the order of its
    // list, not of the changes: the head's deletion may come before our
    // own node's. Our watch is re-armed, but proves nothing about order.
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, true);
    drop_connection(&mut h, &[]);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    assert!(h.m.wants_watch(own.token) && h.m.wants_watch(head.token));
    assert!(h.sent().is_empty());
    head_deleted(&mut h, &head);
    assert!(h.events().is_empty(), "no grant on a re-armed watch's word");
    let check = h.sent();
    let [check] = &check[..] else {
        panic!("one read expected: {check:?}")
    };
    assert!(reads(check, &ours(5), false), "{check:?}");
    // Our node's deletion, fired next by the same SetWatches.
    h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
    assert!(h.events().is_empty());
    let again = h.sent();
    assert!(queues_again(&again), "{again:?}");
    h.reply(check, Err(RequestError::Server(ErrorCode::NoNode)));
    assert!(h.events().is_empty(), "never Held without a node");
    assert!(h.sent().is_empty(), "the stale read changes nothing");
}

#[test]
fn after_a_reconnect_a_read_grants_and_the_rearmed_watch_serves_the_holder() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, true);
    drop_connection(&mut h, &[]);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    head_deleted(&mut h, &head);
    let check = h.sent();
    h.reply(&check[0], data(105));
    assert!(acquired(&h.events()));
    assert!(h.sent().is_empty(), "no confirm: the re-armed watch serves");
    h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
    assert_eq!(h.events(), lost_node_deleted());
}

#[test]
fn after_a_reconnect_the_next_listing_sets_our_watch_again() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, false);
    drop_connection(&mut h, &[]);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    // The head was rewritten meanwhile: look again.
    h.fire(&head, EventType::NodeDataChanged, &format!("/l/{HEAD}"));
    let list = h.sent();
    h.reply(&list[0], Ok(children(&[&ours(5), HEAD])));
    let watches = h.sent();
    let [own2, head2] = &watches[..] else {
        panic!("two watches expected: {watches:?}")
    };
    assert!(reads(own2, &ours(5), true) && reads(head2, HEAD, true));
    assert!(!h.m.wants_watch(own.token), "the re-armed one is replaced");
    h.reply(own2, data(105));
    h.reply(head2, data(1));
    head_deleted(&mut h, head2);
    assert!(acquired(&h.events()), "proven again on this connection");
    assert!(h.sent().is_empty());
}

#[test]
fn a_connection_lost_with_both_watches_in_flight_sets_both_again() {
    let mut h = Harness::new();
    let (own, head) = queue_behind_head(&mut h, false);
    drop_connection(&mut h, &[&own, &head]);
    assert!(!h.m.wants_watch(own.token) && !h.m.wants_watch(head.token));
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let list = h.sent();
    assert!(matches!(&list[..], [o] if matches!(o.request, Request::GetChildren(_))));
    h.reply(&list[0], Ok(children(&[&ours(5), HEAD])));
    let watches = h.sent();
    assert!(
        matches!(&watches[..], [a, b] if reads(a, &ours(5), true) && reads(b, HEAD, true)),
        "{watches:?}"
    );
    h.reply(&watches[0], data(105));
    h.reply(&watches[1], data(1));
    head_deleted(&mut h, &watches[1]);
    assert!(acquired(&h.events()));
}

#[test]
fn a_session_expired_while_waiting_ends_the_attempt_and_nothing_grants() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, true);
    h.m.handle_session(h.now, SessionState::Expired, SESSION);
    assert_eq!(
        h.events(),
        vec![LockEvent::Failed {
            id: 1,
            error: LockError::SessionExpired
        }]
    );
    assert!(
        h.sent().is_empty(),
        "the server deleted our node with the session"
    );
    assert!(!h.m.wants_watch(own.token) && !h.m.wants_watch(head.token));
    head_deleted(&mut h, &head);
    assert!(h.events().is_empty());
    assert!(h.m.is_empty());
}

#[test]
fn a_holder_is_suspended_at_once_and_lost_with_the_session() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(1)));
    h.reply(&sent[1], Ok(children(&[&ours(1)])));
    h.events();
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let confirm = h.sent();
    assert!(matches!(&confirm[..], [o] if matches!(o.request, Request::GetData(_))));
    h.reply(&confirm[0], data(101));
    assert_eq!(
        h.events(),
        vec![
            LockEvent::State {
                id: 1,
                state: LockState::Suspended,
                reason: None
            },
            LockEvent::State {
                id: 1,
                state: LockState::Held,
                reason: None
            },
        ]
    );
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Lost, SESSION);
    let events = h.events();
    assert_eq!(
        events.last(),
        Some(&LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::NoContact)
        })
    );
    // Our own judgement: the node stays for the guard (no_contact.rs).
    assert!(deletes(&h.sent()).is_empty());
    h.m.handle_session(h.now, SessionState::Expired, SESSION);
    assert!(h.events().is_empty(), "told once");
    assert!(h.m.is_empty());
}

/// Two unwatched holders, cut off twice: every reconnect re-reads both
/// nodes (one read each, in the same turn, no watch asked) and both say
/// Held again once read. Kills: confirm serialised without the regression
/// (holding.rs:16), confirm asking a watch of an unwatched holder
/// (holding.rs:33), a confirm never marked answered (holding.rs:50).
#[test]
fn every_holder_is_re_read_at_each_reconnect_and_held_again() {
    let mut h = Harness::new();
    let a = hold_free(&mut h, 1, "/l", false, 1);
    let b = hold_free(&mut h, 2, "/m", false, 2);
    assert!(h.sent().is_empty(), "unwatched holders read nothing");
    for round in 0..2 {
        h.m.handle_session(h.now, SessionState::Suspended, SESSION);
        assert_eq!(
            h.events(),
            [1, 2].map(|id| LockEvent::State {
                id,
                state: LockState::Suspended,
                reason: None
            }),
            "round {round}"
        );
        h.m.handle_session(h.now, SessionState::Connected, SESSION);
        let reads = h.sent();
        let paths: Vec<(String, bool)> = reads
            .iter()
            .map(|o| match &o.request {
                Request::GetData(p) => (p.path.clone(), p.watch),
                r => panic!("round {round}: a read expected, got {r:?}"),
            })
            .collect();
        assert_eq!(
            paths,
            vec![(a.clone(), false), (b.clone(), false)],
            "round {round}"
        );
        assert!(reads.iter().all(|o| !o.watch), "round {round}");
        for o in &reads {
            h.reply(o, data(1));
        }
        assert_eq!(
            h.events(),
            [1, 2].map(|id| LockEvent::State {
                id,
                state: LockState::Held,
                reason: None
            }),
            "round {round}"
        );
        assert!(h.sent().is_empty(), "round {round}");
    }
}

/// A watch the machine acts on that will never fire (the driver says so
/// while connected) is not waited on: a waiter looks at the queue again, a
/// holder reads its node again. Kills: LockMachine::resume emptied or
/// either of its arms deleted (holding.rs:110-112).
#[test]
fn a_watch_that_will_never_fire_is_replaced_while_connected() {
    // A waiter deep in the queue: its blocker's watch is abandoned.
    let mut h = Harness::new();
    let (_, watch) = queued_deep(&mut h);
    assert!(h.sent().is_empty());
    h.m.handle_watch(h.now, watch.token, Err(RequestError::ConnectionLoss));
    let again = h.sent();
    assert!(
        matches!(&again[..], [o] if matches!(o.request, Request::GetChildren(_))),
        "{again:?}"
    );
    assert!(h.events().is_empty());

    // A watched holder: its node's watch is abandoned.
    let mut h = Harness::new();
    let path = hold_free(&mut h, 1, "/l", true, 3);
    let confirm = h.sent();
    let [confirm] = &confirm[..] else {
        panic!("one confirm expected: {confirm:?}")
    };
    assert!(matches!(&confirm.request, Request::GetData(p) if p.watch && p.path == path));
    h.reply(confirm, data(103));
    assert!(h.sent().is_empty());
    h.m.handle_watch(h.now, confirm.token, Err(RequestError::ConnectionLoss));
    let again = h.sent();
    assert!(
        matches!(&again[..], [o] if matches!(&o.request, Request::GetData(p) if p.watch && p.path == path)),
        "{again:?}"
    );
    assert!(h.events().is_empty(), "still Held: nothing to say");
}

/// A holder back from Suspended whose node read is answered `code`.
fn reconnect_and_refuse(code: ErrorCode) -> Harness {
    let mut h = Harness::new();
    hold_free(&mut h, 1, "/l", false, 1);
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.events();
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [r] if matches!(r.request, Request::GetData(_))),
        "{sent:?}"
    );
    h.reply(&sent[0], Err(RequestError::Server(code)));
    h
}

#[test]
fn a_check_refused_for_want_of_read_permission_means_the_node_exists() {
    let mut h = reconnect_and_refuse(ErrorCode::NoAuth);
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Held,
            reason: None
        }]
    );
    assert!(h.sent().is_empty());
}

#[test]
fn a_check_refused_otherwise_is_not_sent_again_at_once() {
    let mut h = reconnect_and_refuse(ErrorCode::MarshallingError);
    assert!(h.events().is_empty(), "still Suspended");
    assert!(h.sent().is_empty(), "no retry loop while the refusal lasts");
    // The next reconnect checks again.
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    assert_eq!(h.sent().len(), 1);
}

/// A holder whose session ends is told why: Expired says the session
/// expired, Closed that the client was closed; either way nothing is left
/// to delete (the server removed our node with the session). Kills: the
/// Expired arm of handle_session's loss reason deleted (lock/mod.rs:247),
/// which told the holder of an expired session that the client closed.
#[test]
fn a_holder_whose_session_ends_is_told_how_it_ended() {
    for (end, reason) in [
        (SessionState::Expired, LossReason::SessionExpired),
        (SessionState::Closed, LossReason::ClientClosed),
    ] {
        let mut h = Harness::new();
        hold_free(&mut h, 1, "/l", false, 1);
        h.m.handle_session(h.now, end, SESSION);
        assert_eq!(
            h.events(),
            vec![LockEvent::State {
                id: 1,
                state: LockState::Lost,
                reason: Some(reason)
            }],
            "{end:?}"
        );
        assert!(h.sent().is_empty(), "{end:?}");
        assert!(h.m.is_empty(), "{end:?}");
    }
}

/// A session refused for bad credentials ends every acquisition as a
/// closed client does: a waiter fails with AuthFailed, a holder is Lost,
/// and a later acquisition fails at once. Kills: the AuthFailed arm of
/// `ended` deleted (lock/mod.rs:574), under which holders stayed Held and
/// waiters waited on a session that can do nothing more.
#[test]
fn a_session_refused_for_bad_credentials_ends_every_acquisition() {
    let mut h = Harness::new();
    hold_free(&mut h, 1, "/l", false, 1);
    h.m.acquire(h.now, 2, spec_at("/m", false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(7)));
    h.reply(&sent[1], Ok(children(&[HEAD, &ours(7)])));
    h.sent();
    h.m.handle_session(h.now, SessionState::AuthFailed, SESSION);
    let events = h.events();
    assert!(
        events.contains(&LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::ClientClosed)
        }),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(
            e,
            LockEvent::Failed {
                id: 2,
                error: LockError::AuthFailed
            }
        )),
        "{events:?}"
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(h.m.is_empty());
    h.m.acquire(h.now, 3, spec(false), UUID.into(), None, false);
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Failed {
            id: 3,
            error: LockError::AuthFailed
        }]
    ));
    assert!(h.sent().is_empty());
}

/// A reply that says the session is over changes nothing by itself: the
/// state change that follows ends the attempt, once, with SessionExpired,
/// and nothing is sent in between. Kills: ends_session made `false`
/// (lock/mod.rs:581), under which such a reply was taken for a lost
/// create and looked for, on a session that no longer exists.
#[test]
fn a_reply_saying_the_session_expired_waits_for_the_state_change() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::SessionExpired));
    h.reply(&sent[1], Err(RequestError::SessionExpired));
    assert!(h.events().is_empty());
    assert!(h.sent().is_empty(), "nothing sent to an ended session");
    h.m.handle_session(h.now, SessionState::Expired, SESSION);
    assert_eq!(
        h.events(),
        vec![LockEvent::Failed {
            id: 1,
            error: LockError::SessionExpired
        }]
    );
    assert!(h.sent().is_empty());
    assert!(h.m.is_empty());
}
