//! An attempt's end other than the grant, and a holder's release: cancel,
//! deadlines, try_lock's one look, races with a refused create; what each
//! leaves behind (nodes, watches wanted, memory of a held node).

use std::time::Duration;

use jute::{ErrorCode, EventType, Request, Response};
use zklock_proto::lock::LockError;
use zklock_proto::lock::LockEvent;
use zklock_proto::session::RequestError;

use crate::support::*;

#[test]
fn giving_up_while_waiting_leaves_no_watch_wanted_and_deletes_our_node() {
    for how in ["cancel", "timeout", "cancel before our watch is set"] {
        let mut h = Harness::new();
        let deadline = h.now + Duration::from_millis(50);
        h.m.acquire(h.now, 1, spec(true), UUID.into(), Some(deadline), false);
        let sent = h.sent();
        h.reply(&sent[0], Ok(created(5)));
        h.reply(&sent[1], Ok(children(&[&ours(5), HEAD])));
        let watches = h.sent();
        let (own, head) = (&watches[0], &watches[1]);
        if how != "cancel before our watch is set" {
            h.reply(own, data(105));
            h.reply(head, data(1));
        }
        match how {
            "timeout" => {
                h.now = deadline;
                h.m.handle_timeout(h.now);
            }
            _ => h.m.cancel(h.now, 1),
        }
        let error = if how == "timeout" {
            LockError::Timeout
        } else {
            LockError::Cancelled
        };
        assert_eq!(
            h.events(),
            vec![LockEvent::Failed { id: 1, error }],
            "{how}"
        );
        // Our delete goes after the read that set our watch: it fires it,
        // so no watch stays on the server.
        let delete = h.sent();
        assert_eq!(deletes(&delete), vec![format!("/l/{}", ours(5))], "{how}");
        assert!(
            !h.m.wants_watch(own.token) && !h.m.wants_watch(head.token),
            "{how}"
        );
        if how == "cancel before our watch is set" {
            h.reply(own, data(105));
            h.reply(head, data(1));
            assert!(!h.m.wants_watch(own.token) && !h.m.wants_watch(head.token));
        }
        head_deleted(&mut h, head);
        h.fire(own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
        assert!(h.events().is_empty(), "{how}");
        assert!(h.sent().is_empty(), "{how}");
        h.reply(&delete[0], Ok(Response::Empty));
        assert!(h.m.is_empty(), "{how}");
    }
}

#[test]
fn a_deadline_fails_the_attempt_and_its_node_is_deleted() {
    let mut h = Harness::new();
    let deadline = h.now + Duration::from_millis(50);
    h.m.acquire(h.now, 1, spec(false), UUID.into(), Some(deadline), false);
    assert_eq!(h.m.poll_timeout(), Some(deadline));
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(2)));
    h.reply(&sent[1], Ok(children(&[&ours(2), "_c_a-lock-0000000001"])));
    let _watch = h.sent();
    h.now = deadline;
    h.m.handle_timeout(h.now);
    assert_eq!(
        h.events(),
        vec![LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    );
    let delete = h.sent();
    assert!(
        matches!(&delete[..], [o] if matches!(&o.request, Request::Delete(p) if p.path.ends_with(&ours(2))))
    );
    // Lost with the connection: retried, queued for the next one.
    h.reply(&delete[0], Err(RequestError::ConnectionLoss));
    let again = h.sent();
    assert!(matches!(&again[..], [o] if matches!(o.request, Request::Delete(_))));
    h.reply(&again[0], Ok(Response::Empty));
    assert!(h.m.is_empty());
}

#[test]
fn try_lock_gives_up_after_one_look() {
    let mut h = Harness::new();
    let deadline = h.now + Duration::from_secs(10);
    h.m.acquire(h.now, 1, spec(false), UUID.into(), Some(deadline), true);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(2)));
    h.reply(&sent[1], Ok(children(&[&ours(2), "_c_a-lock-0000000001"])));
    assert_eq!(
        h.events(),
        vec![LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    );
    assert!(matches!(&h.sent()[..], [o] if matches!(o.request, Request::Delete(_))));
}

#[test]
fn a_deadline_that_races_a_refused_create_fails_the_attempt_once() {
    for refusal in [ErrorCode::NoAuth, ErrorCode::NodeExists] {
        let mut h = Harness::new();
        let deadline = h.now + Duration::from_millis(10);
        h.m.acquire(h.now, 1, spec(false), UUID.into(), Some(deadline), false);
        let sent = h.sent();
        h.now = deadline;
        h.m.handle_timeout(h.now);
        assert_eq!(
            h.events(),
            vec![LockEvent::Failed {
                id: 1,
                error: LockError::Timeout
            }]
        );
        // The create was refused after all: no second outcome, nothing left.
        h.reply(&sent[0], Err(RequestError::Server(refusal)));
        h.reply(&sent[1], Ok(children(&[])));
        assert_eq!(h.events(), vec![], "{refusal:?}");
        assert!(h.sent().is_empty());
        assert!(h.m.is_empty(), "{refusal:?}: the attempt is forgotten");
    }
}

#[test]
fn a_cancel_that_races_a_refused_create_fails_the_attempt_once() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.m.cancel(h.now, 1);
    assert_eq!(
        h.events(),
        vec![LockEvent::Failed {
            id: 1,
            error: LockError::Cancelled
        }]
    );
    h.reply(&sent[0], Err(RequestError::Server(ErrorCode::NoAuth)));
    assert_eq!(h.events(), vec![]);
    assert!(h.m.is_empty());
}

/// A released holder leaves nothing behind in the machine: its node is no
/// longer remembered as held (a long-lived client would otherwise grow a
/// map entry per lock ever held). Read through the machine's Debug output,
/// the only view of that map. Kills: LockMachine::unhold emptied or its
/// owner check inverted (holding.rs:148, :153).
#[test]
fn a_released_holder_is_no_longer_remembered_as_held() {
    for watch_node in [false, true] {
        let mut h = Harness::new();
        let path = hold_free(&mut h, 1, "/l", watch_node, 4);
        assert!(format!("{:?}", h.m).contains(&path), "held: remembered");
        for o in h.sent() {
            h.reply(&o, data(104));
        }
        h.m.release(h.now, 1, false);
        let delete = h.sent();
        assert_eq!(deletes(&delete), vec![path.clone()]);
        h.reply(&delete[0], Ok(Response::Empty));
        assert!(h.m.is_empty());
        let state = format!("{:?}", h.m);
        assert!(
            !state.contains(&path),
            "watch_node {watch_node}: the released node is still known: {state}"
        );
    }
}

/// An acquisition is tracked from `acquire` until its node is gone:
/// waiting, held and being released it counts; once the delete is
/// answered it does not. Kills: LockMachine::is_empty made `true`
/// (lock/mod.rs:162), under which every "nothing left" check of these
/// tests would pass whatever was left.
#[test]
fn an_acquisition_is_tracked_until_its_node_is_gone() {
    let mut h = Harness::new();
    assert!(h.m.is_empty());
    assert_eq!(h.m.len(), 0);
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    assert!(!h.m.is_empty() && h.m.len() == 1, "waiting");
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, .. }]),
        "{events:?}"
    );
    assert!(!h.m.is_empty() && h.m.len() == 1, "held");
    h.m.release(h.now, 1, false);
    let delete = h.sent();
    assert_eq!(deletes(&delete), vec![format!("/l/{}", ours(3))]);
    assert!(!h.m.is_empty() && h.m.len() == 1, "its node not yet gone");
    h.reply(&delete[0], Ok(Response::Empty));
    assert!(h.m.is_empty(), "forgotten");
    assert_eq!(h.m.len(), 0);
}
