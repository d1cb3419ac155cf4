//! Requeue: release and queue again in one multi (proto/src/lock/requeue.rs),
//! and the cases that fall back to the two steps.

use std::sync::Arc;

use jute::{ErrorCode, MultiOp, MultiResult, Request, Response, Stat};
use zklock_proto::lock::LockSpec;
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::session::{RequestError, SessionState};

use crate::lock_delay::{delayed_free, delayed_spec, multi_ok};
use crate::support::*;

const NEXT: &str = "00000000-0000-4000-8000-000000000002";

fn next_node(seq: u32) -> String {
    format!("_c_{NEXT}-lock-{seq:010}")
}

/// Attempt 1 holds the free lock (sequence 3); attempt 2 asks to requeue
/// it. Returns the multi and the listing sent behind it.
fn requeue_sent(h: &mut Harness) -> (Outgoing, Outgoing) {
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    assert!(acquired_at(&h.events(), 1));
    h.m.requeue(h.now, 1, 2, spec(false), NEXT.into(), None);
    let sent = h.sent();
    let [multi, listing] = &sent[..] else {
        panic!("one multi and one listing: {sent:?}")
    };
    let Request::Multi(ops) = &multi.request else {
        panic!("{multi:?}")
    };
    assert!(
        matches!(&ops[..], [MultiOp::Delete(d), MultiOp::Create2(c)]
            if d.path == format!("/l/{}", ours(3)) && c.path == format!("/l/_c_{NEXT}-lock-")),
        "{ops:?}"
    );
    assert!(matches!(listing.request, Request::GetChildren(_)));
    (multi.clone(), listing.clone())
}

/// The multi applied (`created`: its create's result): the old holder
/// hears that its release is done.
fn requeue_applied(h: &mut Harness, multi: &Outgoing, created: MultiResult) {
    h.reply(
        multi,
        Ok(Response::Multi(vec![MultiResult::Delete, created])),
    );
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
}

fn acquired_at(events: &[LockEvent], id: u64) -> bool {
    matches!(events, [LockEvent::Acquired { id: i, .. }] if *i == id)
}

#[test]
fn requeue_is_one_multi_then_the_new_node_queues_as_usual() {
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    let created = MultiResult::Create2 {
        path: format!("/l/{}", next_node(4)),
        stat: stat(104),
    };
    requeue_applied(&mut h, &multi, created);
    h.reply(&listing, Ok(children(&[&next_node(4)])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 2, stat, .. }] if stat.czxid == 104),
        "{events:?}"
    );
    assert!(h.sent().is_empty(), "no delete, no create more");
    assert_eq!(h.m.len(), 1, "the old attempt is forgotten");
}

#[test]
fn requeue_answered_as_zookeeper_3_8_does_reads_our_node_once() {
    // ZooKeeper 3.8 answers a create2 inside a multi as a plain create: the
    // name without a Stat. No recovery: the listing behind the multi
    // stands, and one read of our node tells the Stat at the grant.
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    let created = MultiResult::Create {
        path: format!("/l/{}", next_node(4)),
    };
    requeue_applied(&mut h, &multi, created);
    assert!(h.sent().is_empty(), "no recovery listing");
    h.reply(&listing, Ok(children(&[&next_node(4)])));
    assert!(h.events().is_empty(), "not granted without the Stat");
    let read = h.sent();
    let [get] = &read[..] else {
        panic!("one read of our node: {read:?}")
    };
    assert!(
        matches!(&get.request, Request::GetData(p) if p.path == format!("/l/{}", next_node(4))),
        "{get:?}"
    );
    h.reply(get, data(104));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 2, stat, .. }] if stat.czxid == 104),
        "{events:?}"
    );
    assert!(h.sent().is_empty());
    assert!(h.synced.is_empty(), "nothing was ambiguous");
}

#[test]
fn requeue_of_a_node_already_gone_creates_the_usual_way() {
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    h.reply(
        &multi,
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ])),
    );
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [c] if matches!(c.request, Request::Create2(_))),
        "a plain create, its listing kept until the one out answers: {sent:?}"
    );
    // The listing that went behind the multi answers nothing now; the new
    // create's goes out behind it.
    h.reply(&listing, Ok(children(&[])));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [l] if matches!(l.request, Request::GetChildren(_))),
        "{sent:?}"
    );
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Released { id: 1, .. }]
    ));
}

#[test]
fn requeue_refused_on_the_create_deletes_the_old_node_and_fails_the_new() {
    let mut h = Harness::new();
    let (multi, _listing) = requeue_sent(&mut h);
    h.reply(
        &multi,
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoAuth),
        ])),
    );
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
    let events = h.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LockEvent::Failed { id: 2, .. })),
        "{events:?}"
    );
}

#[test]
fn requeue_whose_reply_is_lost_deletes_the_old_node_and_finds_the_new_by_id() {
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    h.reply(&multi, Err(RequestError::ConnectionLoss));
    h.reply(&listing, Err(RequestError::ConnectionLoss));
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let sent = h.sent();
    assert!(
        deletes(&sent).contains(&format!("/l/{}", ours(3))),
        "the old node deleted by name: {sent:?}"
    );
    let recover = sent
        .iter()
        .find(|o| matches!(o.request, Request::GetChildren(_)))
        .expect("a listing to find the new node by its attempt id");
    h.reply(recover, Ok(children(&[&next_node(4)])));
    let sent = h.sent();
    assert!(
        sent.iter().any(
            |o| matches!(&o.request, Request::Exists(p) if p.path == format!("/l/{}", next_node(4)))
        ),
        "the new node's owner checked: {sent:?}"
    );
}

#[test]
fn requeue_without_a_holding_is_a_release_and_an_acquisition() {
    let mut h = Harness::new();
    h.m.requeue(h.now, 9, 2, spec(false), NEXT.into(), None);
    assert!(queues_again(&h.sent()));
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 9,
            refused: None
        }]
    );
}

/// A requeue that cannot be one write: the two steps, one after the other.
fn requeue_falls_back(h: &mut Harness, spec_new: Arc<LockSpec>) {
    h.m.requeue(h.now, 1, 2, spec_new, NEXT.into(), None);
    let sent = h.sent();
    assert!(
        !sent
            .iter()
            .any(|o| matches!(o.request, Request::Multi(ref ops)
            if ops.iter().any(|op| matches!(op, MultiOp::Create2(_))))),
        "no release-and-create multi: {sent:?}"
    );
    assert!(
        sent.iter()
            .any(|o| matches!(o.request, Request::Create2(_))),
        "a plain create for the new attempt: {sent:?}"
    );
}

#[test]
fn requeue_onto_another_lock_path_is_a_release_and_an_acquisition() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    h.events();
    requeue_falls_back(&mut h, spec_at("/m", false));
}

#[test]
fn requeue_of_an_attempt_still_waiting_is_a_cancel_and_an_acquisition() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5), HEAD])));
    h.sent();
    requeue_falls_back(&mut h, spec(false));
}

#[test]
fn requeue_of_a_holder_with_lock_delay_releases_node_and_mark_first() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let mark = h.sent();
    h.reply(&mark[0], multi_ok(2));
    h.events();
    h.m.requeue(h.now, 1, 2, delayed_spec(), NEXT.into(), None);
    let sent = h.sent();
    assert!(
        sent.iter().any(|o| matches!(&o.request, Request::Multi(ops)
            if matches!(&ops[..], [MultiOp::Delete(_), MultiOp::Delete(_)]))),
        "node and mark deleted together: {sent:?}"
    );
    assert!(sent
        .iter()
        .any(|o| matches!(o.request, Request::Create2(_))));
}

/// The read that tells a requeued node's Stat names another session as its
/// owner: the node is never adopted (no grant), it is deleted as a stray.
/// Kills learn_stat's guards made `true` / `false` (recovery.rs).
#[test]
fn a_requeued_node_read_as_another_sessions_is_not_adopted() {
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    let created = MultiResult::Create {
        path: format!("/l/{}", next_node(4)),
    };
    requeue_applied(&mut h, &multi, created);
    h.reply(&listing, Ok(children(&[&next_node(4)])));
    let read = h.sent();
    let [get] = &read[..] else {
        panic!("one read of our node: {read:?}")
    };
    let foreign = Stat {
        ephemeral_owner: SESSION + 1,
        ..stat(104)
    };
    h.reply(
        get,
        Ok(Response::Data {
            data: vec![],
            stat: foreign,
        }),
    );
    let events = h.events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, LockEvent::Acquired { .. })),
        "{events:?}"
    );
    // Nor deleted: another session's node is not ours to delete.
    let next = h.sent();
    assert!(deletes(&next).is_empty(), "{next:?}");
}

/// A requeue near the counter's end is announced whichever way the server
/// answers the create inside the multi: ZooKeeper 3.8 answers it as a plain
/// create (the name without a Stat), and that answer used to skip the
/// announcement. The sequence is read from the name alone.
#[test]
fn a_requeue_near_the_counters_end_is_announced_however_the_create_is_answered() {
    const NEAR: u32 = i32::MAX as u32 - 3;
    let plain = MultiResult::Create {
        path: format!("/l/{}", next_node(NEAR)),
    };
    let with_stat = MultiResult::Create2 {
        path: format!("/l/{}", next_node(NEAR)),
        stat: stat(104),
    };
    for created in [plain, with_stat] {
        let mut h = Harness::new();
        let (multi, _) = requeue_sent(&mut h);
        h.reply(
            &multi,
            Ok(Response::Multi(vec![MultiResult::Delete, created.clone()])),
        );
        assert_eq!(
            h.events(),
            vec![
                LockEvent::Released {
                    id: 1,
                    refused: None
                },
                LockEvent::NearSequenceEnd {
                    id: 2,
                    node: format!("/l/{}", next_node(NEAR)),
                    sequence: NEAR as i32,
                },
            ],
            "{created:?}"
        );
    }
}
