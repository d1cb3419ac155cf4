//! The sequence counter's end (docs/SEQUENCE_END.md): nodes issued near
//! it announced, nodes at or past it failing closed, a holder near it
//! watching the queue for nodes past it.

use jute::{EventType, Request, Response};
use zklock_proto::lock::{LockError, LockState, LossReason};
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::session::{RequestError, SessionState};

use crate::support::*;

/// Our node under a name with sequence `seq` (any i32, as ZooKeeper's
/// `%010d` prints it).
fn ours_at(seq: i32) -> String {
    format!("_c_{UUID}-lock-{seq:010}")
}

fn created_at(seq: i32) -> Response {
    Response::Created {
        path: format!("/l/{}", ours_at(seq)),
        stat: stat(7),
    }
}

/// Attempt 1 creates a node with `seq` and lists `others` beside it;
/// returns its events and what it sent next.
fn queue_at(seq: i32, others: &[&str]) -> (Vec<LockEvent>, Vec<Outgoing>, Harness) {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(seq)));
    let me = ours_at(seq);
    let mut names = vec![me.as_str()];
    names.extend_from_slice(others);
    h.reply(&sent[1], Ok(children(&names)));
    // Past SEQUENCE_WARNING every create is announced; tested on its own.
    let events = h
        .events()
        .into_iter()
        .filter(|e| !matches!(e, LockEvent::NearSequenceEnd { .. }))
        .collect();
    (events, h.sent(), h)
}

#[test]
fn a_node_issued_near_the_end_is_announced_once() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(i32::MAX - 3)));
    assert_eq!(
        h.events(),
        vec![LockEvent::NearSequenceEnd {
            id: 1,
            node: format!("/l/{}", ours_at(i32::MAX - 3)),
            sequence: i32::MAX - 3
        }]
    );
    let (events, _, _) = queue_at(5, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
}

fn exhausted(events: &[LockEvent]) -> bool {
    matches!(
        events,
        [LockEvent::Failed { id: 1, error: LockError::SequenceExhausted { path } }] if path == "/l"
    )
}

#[test]
fn a_node_named_at_the_counters_end_fails_closed_and_is_deleted() {
    // Alone in the queue, but on the stuck suffix: a later node (ours or
    // a peer's) would share it, so no grant can be trusted.
    let (events, sent, _) = queue_at(i32::MAX, &[]);
    assert!(exhausted(&events), "{events:?}");
    assert_eq!(deletes(&sent), vec![format!("/l/{}", ours_at(i32::MAX))]);
}

#[test]
fn a_node_named_past_the_end_fails_closed_even_at_the_head() {
    for seq in [i32::MIN, -2_147_483_647, -1] {
        let (events, sent, _) = queue_at(seq, &[]);
        assert!(exhausted(&events), "{seq}: {events:?}");
        assert_eq!(deletes(&sent).len(), 1, "{seq}");
    }
}

#[test]
fn a_shared_suffix_fails_closed_whichever_name_sorts_first() {
    let (events, _, _) = queue_at(2_000, &["_c_aaaaaaaa-lock-0000002000"]);
    assert!(exhausted(&events), "{events:?}");
    let (events, _, _) = queue_at(2_000, &["_c_zzzzzzzz-lock-0000002000"]);
    assert!(exhausted(&events), "{events:?}");
}

#[test]
fn nodes_past_the_end_never_block_one_issued_before_it() {
    // They were issued after our node, whatever their number says.
    let (events, _, _) = queue_at(
        i32::MAX - 3,
        &[
            "_c_p-lock-2147483647",
            "_c_q-lock--2147483648",
            "k__lock__-2147483647",
        ],
    );
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, .. }]),
        "{events:?}"
    );
}

/// The holder is told `Lost(SequenceExhausted)` (peers that sort
/// suffixes as text can no longer be kept out), but its session lives and
/// its node is in place: the node stays until the holder lets go, so no
/// zklock contender is granted while the holder's work still runs.
#[test]
fn a_holder_near_the_end_is_told_when_nodes_past_it_appear() {
    let (events, sent, mut h) = queue_at(i32::MAX - 3, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    // It watches the queue: a listing with a child watch.
    let [watch] = &sent[..] else {
        panic!("one listing expected: {sent:?}")
    };
    assert!(matches!(&watch.request, Request::GetChildren(p) if p.watch && p.path == "/l"));
    let me = ours_at(i32::MAX - 3);
    h.reply(watch, Ok(children(&[&me, "_c_r-lock-2147483646"])));
    assert!(h.events().is_empty(), "an ordinary waiter changes nothing");
    h.fire(watch, EventType::NodeChildrenChanged, "/l");
    let again = h.sent();
    assert!(matches!(&again[..], [o] if matches!(&o.request, Request::GetChildren(p) if p.watch)));
    h.reply(&again[0], Ok(children(&[&me, "_c_s-lock--2147483648"])));
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::SequenceExhausted)
        }]
    );
    assert!(
        h.sent().is_empty(),
        "the node stays until the holder lets go"
    );
    h.m.release(h.now, 1, true);
    let release = h.sent();
    assert_eq!(deletes(&release), vec![format!("/l/{me}")]);
    h.reply(&release[0], Ok(Response::Empty));
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
    assert!(h.m.is_empty());
}

/// A waiter queued behind a holder told `Lost(SequenceExhausted)` (its
/// node issued before the end, so it could be granted) is not granted
/// until the holder lets go: the hazard of deleting the node at once.
#[test]
fn a_waiter_behind_a_holder_told_of_the_end_waits_for_its_release() {
    const OTHER: &str = "00000000-0000-4000-8000-000000000002";
    let (events, sent, mut h) = queue_at(i32::MAX - 3, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { id: 1, .. }]));
    let [end_watch] = &sent[..] else {
        panic!("one listing expected: {sent:?}")
    };
    let me = ours_at(i32::MAX - 3);
    let waiter = format!("_c_{OTHER}-lock-{:010}", i32::MAX - 2);
    // Attempt 2 of the same session queues behind it.
    h.m.acquire(h.now, 2, spec(false), OTHER.into(), None, false);
    let sent = h.sent();
    h.reply(
        &sent[0],
        Ok(Response::Created {
            path: format!("/l/{waiter}"),
            stat: stat(8),
        }),
    );
    h.reply(&sent[1], Ok(children(&[&me, &waiter])));
    let watching = h.sent();
    let blocker = watching
        .iter()
        .find(|o| matches!(&o.request, Request::GetData(p) if p.watch && p.path == format!("/l/{me}")))
        .unwrap_or_else(|| panic!("the waiter watches the holder: {watching:?}"))
        .clone();
    for o in &watching {
        h.reply(o, data(7));
    }
    h.events();
    // A node past the end shows up: the holder is told, its node stays.
    h.reply(
        end_watch,
        Ok(children(&[&me, &waiter, "_c_s-lock--2147483648"])),
    );
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::SequenceExhausted)
        }]
    );
    assert!(deletes(&h.sent()).is_empty(), "the holder's node stays");
    // Only its release frees the waiter.
    h.m.release(h.now, 1, false);
    let release = h.sent();
    assert_eq!(deletes(&release), vec![format!("/l/{me}")]);
    h.reply(&release[0], Ok(Response::Empty));
    h.fire(&blocker, EventType::NodeDeleted, &format!("/l/{me}"));
    let mut events = h.events();
    for o in h.sent() {
        // A listing or a read on the way to the grant.
        match &o.request {
            Request::GetChildren(_) => h.reply(&o, Ok(children(&[&waiter]))),
            _ => h.reply(&o, data(8)),
        }
        events.extend(h.events());
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LockEvent::Acquired { id: 2, .. })),
        "{events:?}"
    );
}

#[test]
fn a_holder_far_from_the_end_watches_nothing_more() {
    let (events, sent, _) = queue_at(5, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    assert!(sent.is_empty(), "{sent:?}");
}

/// The boundary of "near the counter's end": a node issued at
/// SEQUENCE_WARNING (i32::MAX - 1 000 000) itself is not announced and its
/// holder watches nothing more; the next one is and does. Kills: `>` made
/// `>=` in the warning of on_created (queueing.rs:139) and in grant's
/// near-end test.
#[test]
fn the_warning_starts_past_the_warning_sequence_not_at_it() {
    const WARNING: i32 = i32::MAX - 1_000_000;
    let (events, sent, _) = queue_at(WARNING, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    assert!(sent.is_empty(), "at the warning sequence: {sent:?}");
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(WARNING)));
    assert_eq!(
        h.events(),
        vec![],
        "no announcement at the warning sequence"
    );
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created_at(WARNING + 1)));
    assert!(
        matches!(&h.events()[..], [LockEvent::NearSequenceEnd { sequence, .. }] if *sequence == WARNING + 1)
    );
    let (_, sent, _) = queue_at(WARNING + 1, &[]);
    assert!(
        matches!(&sent[..], [o] if matches!(&o.request, Request::GetChildren(p) if p.watch)),
        "past the warning sequence the holder watches the queue: {sent:?}"
    );
}

/// A holder near the counter's end that releases while its queue listing
/// is in flight: the listing failing afterwards sets no new child watch.
/// (Written for watch_queue_end's `||` made `&&`, queueing.rs:531, which
/// turned out equivalent: see docs/MUTANTS.md.)
#[test]
fn a_released_holder_near_the_end_sets_no_new_queue_watch() {
    let (events, sent, mut h) = queue_at(i32::MAX - 3, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    let [watch] = &sent[..] else {
        panic!("one listing expected: {sent:?}")
    };
    h.m.release(h.now, 1, false);
    let delete = h.sent();
    assert_eq!(deletes(&delete).len(), 1, "{delete:?}");
    h.reply(watch, Err(RequestError::ConnectionLoss));
    h.m.handle_watch(h.now, watch.token, Err(RequestError::ConnectionLoss));
    assert!(h.sent().is_empty(), "no listing for a releasing attempt");
    h.reply(&delete[0], Ok(Response::Empty));
    assert!(h.m.is_empty());
}

/// A holder near the counter's end whose queue listing is lost with the
/// connection (the reply comes before the state change, as the session
/// reports them) watches the queue again: nodes past the end still reach
/// it. Kills: on_end_listing's `==` made `!=` (queueing.rs:573).
#[test]
fn a_near_end_holder_watches_the_queue_again_after_a_drop() {
    let (events, sent, mut h) = queue_at(i32::MAX - 3, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    let [watch] = &sent[..] else {
        panic!("one listing expected: {sent:?}")
    };
    drop_connection(&mut h, &[watch]);
    h.m.handle_session(h.now, SessionState::Connected, SESSION);
    let again = h.sent();
    let list = again
        .iter()
        .find(|o| matches!(&o.request, Request::GetChildren(p) if p.watch && p.path == "/l"))
        .unwrap_or_else(|| panic!("the queue is watched again: {again:?}"));
    for o in again.iter().filter(|o| o.token != list.token) {
        h.reply(o, data(7));
    }
    h.events();
    let me = ours_at(i32::MAX - 3);
    h.reply(list, Ok(children(&[&me, "_c_s-lock--2147483648"])));
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::SequenceExhausted)
        }]
    );
}

/// A holder near the counter's end whose queue watch will never fire (the
/// driver says so while connected) lists the queue again with a new watch:
/// nodes past the end still reach it. Kills: handle_watch's "never set:
/// again, once connected" test made `&&` or `!=` (lock/mod.rs:395:35,
/// :395:51), under which the holder stopped watching the queue.
#[test]
fn a_near_end_holder_whose_queue_watch_will_never_fire_watches_again() {
    let (events, sent, mut h) = queue_at(i32::MAX - 3, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    let [watch] = &sent[..] else {
        panic!("one listing expected: {sent:?}")
    };
    let me = ours_at(i32::MAX - 3);
    h.reply(watch, Ok(children(&[&me])));
    assert!(h.sent().is_empty());
    h.m.handle_watch(h.now, watch.token, Err(RequestError::ConnectionLoss));
    let again = h.sent();
    let [list] = &again[..] else {
        panic!("one listing expected: {again:?}")
    };
    assert!(
        matches!(&list.request, Request::GetChildren(p) if p.watch && p.path == "/l"),
        "{again:?}"
    );
    assert!(h.events().is_empty());
    h.reply(list, Ok(children(&[&me, "_c_s-lock--2147483648"])));
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::SequenceExhausted)
        }]
    );
}
