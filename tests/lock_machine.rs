//! The lock machine on its own: handed replies, watch events, session
//! changes and the time, no server and no clock. Each test plays the server
//! by answering the requests the machine asks to send.
//!
//! One test at the end runs it inside the real core instead (session,
//! SetWatches), against the simulator's ZooKeeper: the order in which
//! SetWatches fires is the server's, not the test's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jute::{CreateMode, ErrorCode, EventType, MultiOp, MultiResult, Request, Response, Stat};
use zklock::machine::{Core, CoreEvent, LockEvent, LockMachine, Outgoing};
use zklock::recipes::{LockError, LockSpec, LockState, LossReason, Mutex, Rule};
use zklock::session::{RequestError, SessionState, WatchEvent};
use zklock::{Acl, Client};

/// The simulator's ZooKeeper, for the one test here that runs the machine
/// inside the real core (session and SetWatches included) against it.
#[path = "sim/zookeeper/mod.rs"]
mod sim_zookeeper;

const UUID: &str = "00000000-0000-4000-8000-000000000001";
const SESSION: i64 = 0x77;

fn spec(watch_node: bool) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        parent: "/l".into(),
        marker: "-lock-",
        data: b"me".to_vec(),
        acl: Acl::open_unsafe(),
        parent_acl: Acl::open_unsafe(),
        rule: Rule::Predecessor,
        watch_node,
        revocable: false,
        lock_delay: None,
    })
}

struct Harness {
    m: LockMachine,
    now: Instant,
}

impl Harness {
    fn new() -> Harness {
        let now = Instant::now();
        let mut m = LockMachine::new();
        m.handle_session(now, SessionState::Connected, SESSION);
        Harness { m, now }
    }

    fn sent(&mut self) -> Vec<Outgoing> {
        std::iter::from_fn(|| self.m.poll_request()).collect()
    }

    fn events(&mut self) -> Vec<LockEvent> {
        std::iter::from_fn(|| self.m.poll_event()).collect()
    }

    fn reply(&mut self, o: &Outgoing, r: Result<Response, RequestError>) {
        self.m.handle_reply(self.now, o.token, r);
    }

    fn fire(&mut self, o: &Outgoing, kind: EventType, path: &str) {
        self.m.handle_watch(
            self.now,
            o.token,
            Ok(WatchEvent {
                kind,
                path: path.into(),
            }),
        );
    }
}

fn stat(czxid: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: SESSION,
        ..Stat::default()
    }
}

fn ours(seq: u32) -> String {
    format!("_c_{UUID}-lock-{seq:010}")
}

fn created(seq: u32) -> Response {
    Response::Created {
        path: format!("/l/{}", ours(seq)),
        stat: stat(100 + i64::from(seq)),
    }
}

fn children(names: &[&str]) -> Response {
    Response::Children(names.iter().map(|s| s.to_string()).collect())
}

/// A getData reply carrying `czxid`.
fn data(czxid: i64) -> Result<Response, RequestError> {
    Ok(Response::Data {
        data: vec![],
        stat: stat(czxid),
    })
}

const HEAD: &str = "_c_other-lock-0000000004";

/// Whether `o` is a getData of the node named `name`, with a watch or not.
fn reads(o: &Outgoing, name: &str, watch: bool) -> bool {
    matches!(&o.request, Request::GetData(p) if p.watch == watch && p.path == format!("/l/{name}"))
}

/// Attempt 1 (our node, sequence 5) queued behind `HEAD` alone: the
/// watches it sets, on our own node and on `HEAD`, in the order sent,
/// their replies not given yet.
fn queue_behind_head(h: &mut Harness, watch_node: bool) -> (Outgoing, Outgoing) {
    h.m.acquire(h.now, 1, spec(watch_node), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5), HEAD])));
    let watches = h.sent();
    let [own, head] = &watches[..] else {
        panic!("two watches expected: {watches:?}")
    };
    // Our own node's first: its reply comes before anything about the head.
    assert!(reads(own, &ours(5), true), "{own:?}");
    assert!(reads(head, HEAD, true), "{head:?}");
    (own.clone(), head.clone())
}

/// As [`queue_behind_head`], both watches set (replies given in order).
fn queued_behind_head(h: &mut Harness, watch_node: bool) -> (Outgoing, Outgoing) {
    let (own, head) = queue_behind_head(h, watch_node);
    h.reply(&own, data(105));
    h.reply(&head, data(1));
    (own, head)
}

fn head_deleted(h: &mut Harness, head: &Outgoing) {
    h.fire(head, EventType::NodeDeleted, &format!("/l/{HEAD}"));
}

fn acquired(events: &[LockEvent]) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 105)
}

fn lost_node_deleted() -> Vec<LockEvent> {
    vec![LockEvent::State {
        id: 1,
        state: LockState::Lost,
        reason: Some(LossReason::NodeDeleted),
    }]
}

/// A new node and the listing behind it: queueing again.
fn queues_again(sent: &[Outgoing]) -> bool {
    matches!(sent, [c, l] if matches!(c.request, Request::Create2(_)) && matches!(l.request, Request::GetChildren(_)))
}

fn drop_connection(h: &mut Harness, in_flight: &[&Outgoing]) {
    for o in in_flight {
        h.reply(o, Err(RequestError::ConnectionLoss));
        if o.watch {
            h.m.handle_watch(h.now, o.token, Err(RequestError::ConnectionLoss));
        }
    }
    h.m.handle_session(h.now, SessionState::Suspended, SESSION);
}

#[test]
fn a_free_lock_is_one_round_trip_then_a_watch_on_our_node() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    let sent = h.sent();
    assert_eq!(sent.len(), 2, "create2 and getChildren leave together");
    assert!(matches!(sent[0].request, Request::Create2(_)));
    assert!(matches!(sent[1].request, Request::GetChildren(_)));
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 103),
        "{events:?}"
    );
    let confirm = h.sent();
    assert_eq!(confirm.len(), 1);
    assert!(matches!(&confirm[0].request, Request::GetData(p) if p.watch));
    h.reply(&confirm[0], data(103));
    // Someone deletes our node: Lost at once, nothing left to delete.
    h.fire(&confirm[0], EventType::NodeDeleted, "/l/x");
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::NodeDeleted)
        }]
    );
    assert!(h.sent().is_empty());
    assert!(h.m.is_empty());
}

#[test]
fn the_head_leaving_grants_on_the_event_alone() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, false);
    assert!(h.sent().is_empty());
    head_deleted(&mut h, &head);
    // Our own watch was set before the head's deletion was sent and has
    // not fired: our node outlived the head. No read, no listing.
    assert!(acquired(&h.events()));
    assert!(
        h.sent().is_empty(),
        "no read and no watch for an unwatched holder"
    );
    // An unwatched holder does not want its waiting watch re-armed; the
    // server's copy ends with the node at release.
    assert!(!h.m.wants_watch(own.token));
    h.m.release(h.now, 1, true);
    let delete = h.sent();
    assert_eq!(deletes(&delete), vec![format!("/l/{}", ours(5))]);
    h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
    assert!(
        h.events().is_empty(),
        "our own delete fired it: nothing to say"
    );
    h.reply(&delete[0], Ok(Response::Empty));
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
    assert!(h.m.is_empty());
}

#[test]
fn a_watched_holder_keeps_its_waiting_watch_and_reads_nothing_more() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, true);
    head_deleted(&mut h, &head);
    assert!(acquired(&h.events()));
    assert!(h.sent().is_empty(), "no confirm: the waiting watch serves");
    assert!(h.m.wants_watch(own.token));
    // Someone deletes our node: Lost at once, through that watch.
    h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
    assert_eq!(h.events(), lost_node_deleted());
    assert!(h.sent().is_empty());
    assert!(h.m.is_empty());
}

#[test]
fn our_node_deleted_before_the_head_means_queueing_again_at_once() {
    for watch_node in [false, true] {
        let mut h = Harness::new();
        let (own, head) = queued_behind_head(&mut h, watch_node);
        // Deleted by a third party: its event comes first, as ZooKeeper
        // fires watches in the order of the changes.
        h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
        assert!(h.events().is_empty());
        let again = h.sent();
        assert!(queues_again(&again), "{again:?}");
        assert!(!h.m.wants_watch(head.token), "the head no longer matters");
        head_deleted(&mut h, &head);
        assert!(h.events().is_empty(), "never Held without a node");
        assert!(h.sent().is_empty());
    }
}

#[test]
fn our_node_deleted_after_the_head_is_held_then_lost() {
    for watch_node in [false, true] {
        let mut h = Harness::new();
        let (own, head) = queued_behind_head(&mut h, watch_node);
        head_deleted(&mut h, &head);
        assert!(acquired(&h.events()));
        // We held it from the head's deletion to our node's: told at once,
        // watched or not (the event names a held node).
        h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
        assert_eq!(h.events(), lost_node_deleted(), "watch_node {watch_node}");
        assert!(h.sent().is_empty(), "nothing left to delete");
        assert!(h.m.is_empty());
    }
}

#[test]
fn our_own_watch_answered_no_node_means_queueing_again() {
    let mut h = Harness::new();
    let (own, head) = queue_behind_head(&mut h, false);
    h.reply(&own, Err(RequestError::Server(ErrorCode::NoNode)));
    let again = h.sent();
    assert!(queues_again(&again), "{again:?}");
    h.reply(&head, data(1));
    head_deleted(&mut h, &head);
    assert!(h.events().is_empty());
    assert!(h.sent().is_empty());
}

#[test]
fn the_head_leaving_before_our_watch_is_known_set_means_one_read() {
    for watch_node in [false, true] {
        let mut h = Harness::new();
        let (own, head) = queue_behind_head(&mut h, watch_node);
        // Out of order (the machine must not rely on the order it sent):
        // the head's deletion before our own watch's reply.
        h.reply(&head, data(1));
        head_deleted(&mut h, &head);
        assert!(h.events().is_empty(), "not proven: no grant yet");
        let check = h.sent();
        let [check] = &check[..] else {
            panic!("one read expected: {check:?}")
        };
        // Our own watch is on its way: the read need not set another.
        assert!(reads(check, &ours(5), false), "{check:?}");
        h.reply(&own, data(105));
        assert!(h.events().is_empty());
        h.reply(check, data(105));
        assert!(acquired(&h.events()));
        assert!(h.sent().is_empty(), "watch_node {watch_node}: no confirm");
        assert_eq!(h.m.wants_watch(own.token), watch_node);
    }
}

#[test]
fn our_own_watch_fired_otherwise_means_one_read() {
    let mut h = Harness::new();
    let (own, head) = queued_behind_head(&mut h, true);
    // Someone wrote to our node: the one-shot watch is spent.
    h.fire(&own, EventType::NodeDataChanged, &format!("/l/{}", ours(5)));
    head_deleted(&mut h, &head);
    assert!(h.events().is_empty());
    let check = h.sent();
    // It sets the holder's watch this time.
    assert!(
        matches!(&check[..], [o] if reads(o, &ours(5), true)),
        "{check:?}"
    );
    h.reply(&check[0], Err(RequestError::Server(ErrorCode::NoNode)));
    assert!(h.events().is_empty(), "never Held without a node");
    let again = h.sent();
    assert!(matches!(again[0].request, Request::Create2(_)), "{again:?}");
}

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
fn only_a_waiter_whose_blocker_is_alone_watches_its_own_node() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(
        &sent[1],
        Ok(children(&[&ours(5), HEAD, "_c_a-lock-0000000001"])),
    );
    let watch = h.sent();
    assert!(
        matches!(&watch[..], [o] if reads(o, HEAD, true)),
        "{watch:?}"
    );
    h.reply(&watch[0], data(1));
    head_deleted(&mut h, &watch[0]);
    let relist = h.sent();
    assert!(matches!(&relist[..], [o] if matches!(o.request, Request::GetChildren(_))));
    // Now alone behind the first: both watches, own first.
    h.reply(
        &relist[0],
        Ok(children(&[&ours(5), "_c_a-lock-0000000001"])),
    );
    let watches = h.sent();
    assert!(
        matches!(&watches[..], [a, b] if reads(a, &ours(5), true) && reads(b, "_c_a-lock-0000000001", true)),
        "{watches:?}"
    );
}

#[test]
fn a_blocker_gone_before_its_watch_means_listing_again_at_once() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(
        &sent[1],
        Ok(children(&[
            &ours(5),
            "_c_a-lock-0000000001",
            "_c_b-lock-0000000004",
        ])),
    );
    let watch = h.sent();
    h.reply(&watch[0], Err(RequestError::Server(ErrorCode::NoNode)));
    let relist = h.sent();
    assert!(matches!(&relist[..], [o] if matches!(o.request, Request::GetChildren(_))));
}

#[test]
fn deep_in_the_queue_a_deletion_means_one_listing_then_the_lock() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(9)));
    // Listed out of order, as a server may: the nearest below is 7.
    let queue = [
        "_c_c-lock-0000000007",
        &ours(9),
        "_c_a-lock-0000000002",
        "_c_d-lock-0000000010",
        "_c_b-lock-0000000005",
    ];
    h.reply(&sent[1], Ok(children(&queue)));
    let watch = h.sent();
    assert!(
        matches!(&watch[..], [o] if matches!(&o.request, Request::GetData(p) if p.watch && p.path.ends_with("0000000007"))),
        "{watch:?}"
    );
    h.reply(&watch[0], data(1));
    // Others were below the one we watched: its deletion is not enough.
    h.fire(&watch[0], EventType::NodeDeleted, "/l/_c_c-lock-0000000007");
    let relist = h.sent();
    assert!(matches!(&relist[..], [o] if matches!(o.request, Request::GetChildren(_))));
    assert!(h.events().is_empty());
    h.reply(
        &relist[0],
        Ok(children(&["_c_d-lock-0000000010", &ours(9)])),
    );
    // The listing shows our node at the head: held, nothing more to send.
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Acquired { id: 1, .. }]
    ));
    assert!(h.sent().is_empty());
}

#[test]
fn a_lost_create_is_found_by_its_attempt_id_and_duplicates_deleted() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    h.reply(&sent[1], Err(RequestError::ConnectionLoss));
    let recover = h.sent();
    assert!(matches!(&recover[..], [o] if matches!(o.request, Request::GetChildren(_))));
    // Two creates of this attempt made it (a late one too).
    h.reply(&recover[0], Ok(children(&[&ours(9), &ours(7)])));
    let next = h.sent();
    let deletes: Vec<_> = next
        .iter()
        .filter_map(|o| match &o.request {
            Request::Delete(p) => Some(p.path.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, vec![format!("/l/{}", ours(9))]);
    let exists = next
        .iter()
        .find(|o| matches!(o.request, Request::Exists(_)))
        .expect("the kept node's Stat is read");
    h.reply(exists, Ok(Response::Stat(stat(107))));
    let list = h.sent();
    h.reply(&list[0], Ok(children(&[&ours(7)])));
    assert!(matches!(&h.events()[..], [LockEvent::Acquired { stat, .. }] if stat.czxid == 107));
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
    // Its node is removed if the session turns out to live.
    assert!(matches!(&h.sent()[..], [o] if matches!(o.request, Request::Delete(_))));
    h.m.handle_session(h.now, SessionState::Expired, SESSION);
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
fn creates_sent_together_share_one_listing() {
    let mut h = Harness::new();
    let other = "00000000-0000-4000-8000-000000000002";
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    h.m.acquire(h.now, 2, spec(false), other.into(), None, false);
    let sent = h.sent();
    let kinds: Vec<&str> = sent
        .iter()
        .map(|o| match o.request {
            Request::Create2(_) => "create",
            Request::GetChildren(_) => "list",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["create", "create", "list"]);
    let theirs = format!("_c_{other}-lock-0000000006");
    h.reply(&sent[0], Ok(created(5)));
    h.reply(
        &sent[1],
        Ok(Response::Created {
            path: format!("/l/{theirs}"),
            stat: stat(106),
        }),
    );
    h.reply(&sent[2], Ok(children(&[&ours(5), &theirs])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Acquired { id: 1, .. }]
    ));
    // The second waits on the first, from the same listing (and, the
    // first alone below it, watches its own node too).
    let watch = h.sent();
    assert!(
        matches!(&watch[..], [own, o] if reads(own, &theirs, true) && reads(o, &ours(5), true)),
        "{watch:?}"
    );
}

#[test]
fn a_holder_hears_its_node_deleted_through_another_attempts_watch() {
    // Found by simulation seed 1143: attempt 2 waited on attempt 1's node;
    // attempt 2 gave up, attempt 1 was granted from a listing, and the
    // deletion reached the client through attempt 2's old watch first.
    let mut h = Harness::new();
    let other = "00000000-0000-4000-8000-000000000002";
    let theirs = format!("_c_{other}-lock-0000000006");
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    h.m.acquire(h.now, 2, spec(true), other.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(
        &sent[1],
        Ok(Response::Created {
            path: format!("/l/{theirs}"),
            stat: stat(106),
        }),
    );
    // Someone else is at the head: both wait, 2 on 1's node.
    h.reply(
        &sent[2],
        Ok(children(&["_c_x-lock-0000000001", &ours(5), &theirs])),
    );
    let watches = h.sent();
    // Attempt 1 sends its own node's watch and the head's, then attempt 2
    // its watch on attempt 1's node: the last read of that node.
    let on_ours = watches
        .iter()
        .rev()
        .find(|o| reads(o, &ours(5), true))
        .expect("attempt 2 watches attempt 1's node")
        .clone();
    for w in &watches {
        h.reply(w, data(1));
    }
    h.m.cancel(h.now, 2);
    h.events();
    // The head goes; attempt 1 holds on that event alone.
    let head_watch = watches
        .iter()
        .find(|o| matches!(&o.request, Request::GetData(p) if p.path.ends_with("0000000001")))
        .unwrap()
        .clone();
    h.fire(
        &head_watch,
        EventType::NodeDeleted,
        "/l/_c_x-lock-0000000001",
    );
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Acquired { id: 1, .. }]
    ));
    // The deletion arrives on attempt 2's old watch: attempt 1 is told.
    h.fire(&on_ours, EventType::NodeDeleted, &format!("/l/{}", ours(5)));
    assert_eq!(
        h.events(),
        vec![LockEvent::State {
            id: 1,
            state: LockState::Lost,
            reason: Some(LossReason::NodeDeleted)
        }]
    );
}

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

fn deletes(sent: &[Outgoing]) -> Vec<String> {
    sent.iter()
        .filter_map(|o| match &o.request {
            Request::Delete(d) => Some(d.path.clone()),
            _ => None,
        })
        .collect()
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
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{me}")]);
}

#[test]
fn a_holder_far_from_the_end_watches_nothing_more() {
    let (events, sent, _) = queue_at(5, &[]);
    assert!(matches!(&events[..], [LockEvent::Acquired { .. }]));
    assert!(sent.is_empty(), "{sent:?}");
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

// ---- through the real session, against the simulated server -----------

/// One client: its handle, the core its driver runs, and its connection.
struct Peer {
    client: Client,
    core: Core,
    conn: Option<sim_zookeeper::ConnId>,
    online: bool,
}

impl Peer {
    fn new(now: Instant, seed: u128) -> Peer {
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(Duration::from_secs(30))
            .build_manual(now, seed)
            .expect("a manual client");
        Peer {
            client,
            core,
            conn: None,
            online: true,
        }
    }
}

/// Drives the clients and the server, with no latency, until nothing moves.
fn pump(zk: &mut sim_zookeeper::SimZooKeeper, peers: &mut [&mut Peer], now: Instant) {
    loop {
        let mut moved = false;
        for p in peers.iter_mut() {
            p.core.turn(now);
            if p.conn.is_none() && p.online && p.core.wants_connection() {
                p.core.prepare_connection();
                p.conn = Some(zk.connect(now));
                p.core.handle_connected(now);
            }
            while let Some(event) = p.core.poll_event() {
                if let CoreEvent::DropConnection(_) = event {
                    if let Some(conn) = p.conn.take() {
                        zk.disconnect(now, conn);
                        p.core.handle_disconnected(now);
                    }
                }
                moved = true;
            }
            if let Some(conn) = p.conn {
                let out = p.core.output().to_vec();
                if !out.is_empty() {
                    p.core.consume_output(out.len());
                    zk.receive(now, conn, &out);
                    moved = true;
                }
            }
        }
        zk.handle_timeout(now);
        while let Some((conn, bytes)) = zk.poll_output() {
            if let Some(p) = peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.core.handle_input(now, &bytes);
                moved = true;
            }
        }
        while let Some(conn) = zk.poll_closed() {
            if let Some(p) = peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.conn = None;
                p.core.handle_disconnected(now);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

/// The case the in-order argument does not cover, end to end: B waits
/// alone behind A, its own watch set; B is cut off; a third party deletes
/// B's node, then A releases. On B's reconnect SetWatches fires both
/// deletions in the order of its list (by path), A's first when A's node
/// sorts first. B must not take A's deletion for a grant: it queues again
/// with a new node and holds by that one.
#[test]
fn end_to_end_setwatches_firing_the_blocker_first_grants_nothing_stale() {
    let mut covered = 0;
    for seed in 2..40u128 {
        let now = Instant::now();
        let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
        let mut a = Peer::new(now, 1);
        let mut b = Peer::new(now, seed);
        let ma = Mutex::new(&a.client, "/l").unwrap();
        let mb = Mutex::new(&b.client, "/l").unwrap();
        let pa = ma.start_lock(None);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        let ga = pa.try_take().expect("a free lock").unwrap();
        let pb = mb.start_lock(None);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(pb.try_take().is_none(), "B waits");
        let a_path = ga.node_path().to_owned();
        let b_name = zk
            .children("/l")
            .into_iter()
            .find(|n| format!("/l/{n}") != a_path)
            .expect("B's node");
        let b_path = format!("/l/{b_name}");
        let b_conn = b.conn.expect("connected");
        assert!(
            zk.data_watchers(&b_path).contains(&b_conn),
            "B watches its own node while waiting"
        );
        if a_path > b_path {
            // SetWatches would fire B's own deletion first: the easy order.
            continue;
        }
        covered += 1;
        zk.disconnect(now, b_conn);
        b.conn = None;
        b.core.handle_disconnected(now);
        b.online = false;
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(zk.delete_as_admin(now, &b_path));
        drop(ga);
        pump(&mut zk, &mut [&mut a, &mut b], now);
        assert!(zk.children("/l").is_empty(), "A released");
        b.online = true;
        pump(&mut zk, &mut [&mut a, &mut b], now);
        let gb = pb
            .try_take()
            .expect("B holds by a new node")
            .expect("B holds");
        assert_ne!(
            gb.node_path(),
            b_path,
            "seed {seed}: held by a deleted node"
        );
        assert!(zk.exists(gb.node_path()).is_some());
        assert_eq!(gb.state(), LockState::Held);
    }
    assert!(covered > 0, "no seed put A's node first");
}

fn revocable_spec() -> Arc<LockSpec> {
    let mut s = (*spec(true)).clone();
    s.revocable = true;
    Arc::new(s)
}

#[test]
fn a_revocable_holder_hears_a_revocation_written_before_or_after_the_grant() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, revocable_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    assert!(matches!(&h.events()[..], [LockEvent::Acquired { .. }]));
    // Granted: it reads its node, which someone already marked.
    let read = h.sent();
    assert!(matches!(&read[..], [o] if matches!(&o.request, Request::GetData(p) if p.watch)));
    h.reply(
        &read[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![LockEvent::RevocationRequested { id: 1 }]);
    // Asked again later: the data watch fires, the node is read again.
    h.fire(
        &read[0],
        EventType::NodeDataChanged,
        &format!("/l/{}", ours(3)),
    );
    let again = h.sent();
    h.reply(
        &again[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![LockEvent::RevocationRequested { id: 1 }]);
}

#[test]
fn a_holder_that_is_not_revocable_ignores_the_message() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let _ = h.events();
    let read = h.sent();
    h.reply(
        &read[0],
        Ok(Response::Data {
            data: b"__REVOKE__".to_vec(),
            stat: stat(103),
        }),
    );
    assert_eq!(h.events(), vec![]);
}

/// A session listener and a guard's state channel that nobody reads stay
/// bounded however often the connection flaps (600 changes here), and
/// still work afterwards: no growth the server can drive.
#[test]
fn unread_state_channels_stay_bounded_across_many_reconnects() {
    use zklock::machine::STATE_CHANNEL_CAPACITY;
    use zklock::recipes::Mutex;
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 7);
    pump(&mut zk, &mut [&mut p], now);
    let states = p.client.subscribe();
    let m = Mutex::new(&p.client, "/bounded").unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("granted").unwrap();
    let changes = guard.state_changes();
    for _ in 0..300 {
        let conn = p.conn.take().expect("connected");
        zk.disconnect(now, conn);
        p.core.handle_disconnected(now);
        pump(&mut zk, &mut [&mut p], now);
    }
    assert!(states.len() <= STATE_CHANNEL_CAPACITY, "{}", states.len());
    assert!(changes.len() <= STATE_CHANNEL_CAPACITY, "{}", changes.len());
    assert_eq!(
        states.len(),
        STATE_CHANNEL_CAPACITY,
        "it was full: changes were dropped, not queued"
    );
    // Still attached: once read, the next change arrives.
    while states.try_recv().is_ok() {}
    while changes.try_recv().is_ok() {}
    let conn = p.conn.take().expect("connected");
    zk.disconnect(now, conn);
    p.core.handle_disconnected(now);
    pump(&mut zk, &mut [&mut p], now);
    assert!(
        states.try_recv().is_ok(),
        "the listener hears later changes"
    );
    assert!(changes.try_recv().is_ok(), "the guard's channel too");
    assert_eq!(guard.state(), zklock::recipes::LockState::Held);
}

/// The leader check is the builder's to switch: on (the default), an idle
/// session sends its own `sync`s; off, only pings.
#[test]
fn the_builder_switches_the_leader_check() {
    for on in [true, false] {
        let start = Instant::now();
        let mut zk =
            sim_zookeeper::SimZooKeeper::new(start, Duration::from_millis(2000)).with_trace();
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(Duration::from_secs(8))
            .leader_check(on)
            .build_manual(start, 1)
            .unwrap();
        let mut p = Peer {
            client,
            core,
            conn: None,
            online: true,
        };
        // Ten virtual seconds, idle, in 100 ms steps.
        for step in 0..100u32 {
            pump(
                &mut zk,
                &mut [&mut p],
                start + Duration::from_millis(100) * step,
            );
        }
        let syncs = zk
            .take_trace()
            .iter()
            .filter(|l| l.contains("Sync("))
            .count();
        if on {
            assert!(
                syncs >= 5,
                "an idle session proves itself to the leader: {syncs}"
            );
        } else {
            assert_eq!(syncs, 0, "no syncs with the check off");
        }
        assert_eq!(p.client.state(), zklock::SessionState::Connected);
    }
}

// ---- checks added for mutants that both suites missed (docs/MUTANTS.md) ---

/// A spec like [`spec`] on another lock path.
fn spec_at(parent: &str, watch_node: bool) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        parent: parent.into(),
        ..(*spec(watch_node)).clone()
    })
}

/// Attempt `id` takes the free lock at `parent` (our node: sequence `seq`);
/// returns its node's path. The Acquired event is consumed.
fn hold_free(h: &mut Harness, id: u64, parent: &str, watch_node: bool, seq: u32) -> String {
    h.m.acquire(
        h.now,
        id,
        spec_at(parent, watch_node),
        UUID.into(),
        None,
        false,
    );
    let sent = h.sent();
    let name = ours(seq);
    h.reply(
        &sent[0],
        Ok(Response::Created {
            path: format!("{parent}/{name}"),
            stat: stat(100 + i64::from(seq)),
        }),
    );
    h.reply(&sent[1], Ok(children(&[&name])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: i, .. }] if *i == id),
        "{events:?}"
    );
    format!("{parent}/{name}")
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
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(9)));
    h.reply(
        &sent[1],
        Ok(children(&[
            &ours(9),
            "_c_a-lock-0000000002",
            "_c_b-lock-0000000007",
        ])),
    );
    let watch = h.sent();
    let [watch] = &watch[..] else {
        panic!("one watch expected: {watch:?}")
    };
    h.reply(watch, data(1));
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

/// A node found again after an ambiguous create, gone before its Stat is
/// read: the attempt queues again with a new node, it does not ask for the
/// Stat of a missing node again and again. Kills: on_stat's NoNode arm
/// deleted (queueing.rs:254).
#[test]
fn a_found_node_gone_before_its_stat_is_read_means_queueing_again() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    h.reply(&sent[1], Err(RequestError::ConnectionLoss));
    let recover = h.sent();
    assert!(matches!(&recover[..], [o] if matches!(o.request, Request::GetChildren(_))));
    h.reply(&recover[0], Ok(children(&[&ours(7)])));
    let exists = h.sent();
    let [exists] = &exists[..] else {
        panic!("one exists expected: {exists:?}")
    };
    assert!(matches!(exists.request, Request::Exists(_)), "{exists:?}");
    h.reply(exists, Err(RequestError::Server(ErrorCode::NoNode)));
    let again = h.sent();
    assert!(queues_again(&again), "{again:?}");
    assert!(h.events().is_empty());
}

/// The reply to a superseded own-node read (for a node since deleted)
/// sets nothing for the new node: once queued again behind a blocker
/// alone, the new node's own watch is asked for. Replies out of order, as
/// in the_head_leaving_before_our_watch_is_known_set_means_one_read.
/// Kills: on_own_watch_set's `||` made `&&` (queueing.rs:325), which takes
/// the stale reply for the new node's proof of order.
#[test]
fn a_stale_own_watch_reply_proves_nothing_for_a_new_node() {
    let mut h = Harness::new();
    let (own, head) = queue_behind_head(&mut h, false);
    // The head is gone before its watch; the listing then shows our node
    // gone too (deleted by a third party): queue again.
    h.reply(&head, Err(RequestError::Server(ErrorCode::NoNode)));
    let list = h.sent();
    assert!(matches!(&list[..], [o] if matches!(o.request, Request::GetChildren(_))));
    h.reply(&list[0], Ok(children(&[HEAD])));
    let again = h.sent();
    assert!(queues_again(&again), "{again:?}");
    // The old read's reply, late.
    h.reply(&own, data(105));
    h.reply(&again[0], Ok(created(6)));
    h.reply(&again[1], Ok(children(&[&ours(6), HEAD])));
    let watches = h.sent();
    assert!(
        matches!(&watches[..], [a, b] if reads(a, &ours(6), true) && reads(b, HEAD, true)),
        "the new node's own watch is asked for: {watches:?}"
    );
}

/// A listing that shows another node with our attempt id (a late create)
/// beside ours: it is deleted, whether we hold or wait. Kills: the
/// `name != our_name` test of evaluate inverted (queueing.rs:399).
#[test]
fn a_duplicate_of_our_node_in_a_listing_is_deleted() {
    // Held: the duplicate sorts after ours.
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(8), &ours(5)])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, .. }]),
        "{events:?}"
    );
    let next = h.sent();
    assert_eq!(deletes(&next), vec![format!("/l/{}", ours(8))], "{next:?}");
    // Waiting: deleted alongside the blocker's watch.
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5), HEAD, &ours(9)])));
    let next = h.sent();
    assert_eq!(deletes(&next), vec![format!("/l/{}", ours(9))], "{next:?}");
    assert!(next.iter().any(|o| reads(o, HEAD, true)), "{next:?}");
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

/// Every duplicate of our node is deleted, however many there are and
/// whatever deletes are already in flight. Kills: add_stray's `==` made
/// `!=` in either of its "already known" checks (attempt.rs:316, :317),
/// which drop a second duplicate.
#[test]
fn every_duplicate_of_our_node_is_deleted() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    h.reply(&sent[1], Err(RequestError::ConnectionLoss));
    let recover = h.sent();
    // Three creates of this attempt made it: 7 is kept, 9 and 11 go.
    h.reply(&recover[0], Ok(children(&[&ours(9), &ours(7), &ours(11)])));
    let next = h.sent();
    let mut gone = deletes(&next);
    gone.sort();
    assert_eq!(
        gone,
        vec![format!("/l/{}", ours(9)), format!("/l/{}", ours(11))],
        "{next:?}"
    );
    // With a delete still in flight, a listing shows one more (a late
    // create): it is deleted too.
    let exists = next
        .iter()
        .find(|o| matches!(o.request, Request::Exists(_)))
        .expect("the kept node's Stat is read");
    h.reply(exists, Ok(Response::Stat(stat(107))));
    let list = h.sent();
    h.reply(
        &list[0],
        Ok(children(&[&ours(7), &ours(9), &ours(11), &ours(12)])),
    );
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 107),
        "{events:?}"
    );
    let more = h.sent();
    assert_eq!(deletes(&more), vec![format!("/l/{}", ours(12))], "{more:?}");
}

/// A watch the machine no longer wants is not re-armed after a reconnect:
/// B waits on A's node, gives up (its own node goes; its watch on A's
/// node stays on the server, the machine no longer cares), is cut off and
/// comes back: SetWatches leaves A's node unwatched by B. Kills:
/// Locks::wants_watch made `true` (locks.rs:145), which re-arms every
/// watch ever left and leaks them on the server.
#[test]
fn end_to_end_a_watch_given_up_is_not_rearmed_after_a_reconnect() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut a = Peer::new(now, 1);
    let mut b = Peer::new(now, 2);
    let ma = Mutex::new(&a.client, "/l").unwrap();
    let mb = Mutex::new(&b.client, "/l").unwrap();
    let pa = ma.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    let ga = pa.try_take().expect("a free lock").unwrap();
    let pb = mb.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    assert!(pb.try_take().is_none(), "B waits");
    let a_path = ga.node_path();
    let b_conn = b.conn.expect("connected");
    assert!(zk.data_watchers(a_path).contains(&b_conn), "B watches A");
    drop(pb);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    assert_eq!(zk.children("/l").len(), 1, "B's node is gone");
    zk.disconnect(now, b_conn);
    b.conn = None;
    b.core.handle_disconnected(now);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    let b_conn = b.conn.expect("B is back");
    assert!(
        !zk.data_watchers(a_path).contains(&b_conn),
        "a watch B gave up was re-armed"
    );
    drop(ga);
}

/// A waiter whose core goes (the I/O thread ends) hears Closed at once,
/// not never. (Written for Locks' Drop emptied, locks.rs:230; it does not
/// kill it: a Mutex waiter's channel disconnects anyway. See
/// docs/MUTANTS.md.)
#[test]
fn a_waiter_hears_closed_when_the_core_goes() {
    let now = Instant::now();
    let p = Peer::new(now, 1);
    let m = Mutex::new(&p.client, "/l").unwrap();
    let pending = m.start_lock(None);
    let Peer {
        mut core, client, ..
    } = p;
    core.turn(now);
    assert!(pending.try_take().is_none(), "no server: it waits");
    drop(core);
    let outcome = pending.try_take().expect("told at once");
    assert!(
        outcome.is_err(),
        "{:?}",
        outcome.map(|g| g.node_path().to_owned())
    );
    drop(client);
}

// ---- lock-delay: tenure marks (src/machine/lock/tenure.rs) -----------------

const DELAY: Duration = Duration::from_secs(5);
const STALE_MARK: &str = "~tenure.00000000-0000-4000-8000-00000000dead";

fn delayed_spec() -> Arc<LockSpec> {
    Arc::new(LockSpec {
        lock_delay: Some(DELAY),
        ..(*spec(false)).clone()
    })
}

fn our_mark() -> String {
    format!("{}{UUID}", zklock::machine::TENURE_MARK)
}

/// Attempt 1 with lock-delay finds the lock free (our node: sequence 3)
/// beside `others`; returns the tenure listing it sends next.
fn delayed_free(h: &mut Harness, others: &[&str]) -> Outgoing {
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    let mut names = vec![ours(3)];
    names.extend(others.iter().map(|s| s.to_string()));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    h.reply(&sent[1], Ok(children(&names)));
    assert!(h.events().is_empty(), "no grant before the tenure listing");
    let sent = h.sent();
    let [listing] = &sent[..] else {
        panic!("one tenure listing expected: {sent:?}")
    };
    assert!(matches!(&listing.request, Request::GetChildren(p) if p.path == "/l"));
    listing.clone()
}

/// Whether `o` is the multi that checks our node and creates our mark.
fn marks(o: &Outgoing) -> bool {
    let Request::Multi(ops) = &o.request else {
        return false;
    };
    matches!(&ops[..], [MultiOp::Check(c), MultiOp::Create(m)]
        if c.path == format!("/l/{}", ours(3)) && m.path == format!("/l/{}", our_mark())
            && m.mode == CreateMode::Persistent)
}

fn multi_ok(n: usize) -> Result<Response, RequestError> {
    Ok(Response::Multi(vec![MultiResult::Check; n]))
}

fn granted(events: &[LockEvent], unclean: bool) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, after_unclean_end, .. }] if *after_unclean_end == unclean)
}

#[test]
fn lock_delay_after_a_clean_end_marks_then_grants_at_once() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
    assert!(h.m.poll_timeout().is_none(), "no delay is due");
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), false));
    // The release removes node and mark in one multi.
    h.m.release(h.now, 1, true);
    let sent = h.sent();
    let [release] = &sent[..] else {
        panic!("{sent:?}")
    };
    assert!(
        matches!(&release.request, Request::Multi(ops) if matches!(&ops[..],
        [MultiOp::Delete(n), MultiOp::Delete(m)]
            if n.path == format!("/l/{}", ours(3)) && m.path == format!("/l/{}", our_mark())))
    );
    h.reply(release, Ok(Response::Multi(vec![MultiResult::Delete; 2])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Released {
            id: 1,
            refused: None
        }]
    ));
    assert!(h.m.is_empty());
}

#[test]
fn lock_delay_after_an_unclean_end_waits_then_sweeps_and_says_so() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[STALE_MARK]);
    h.reply(&listing, Ok(children(&[&ours(3), STALE_MARK])));
    assert!(h.sent().is_empty(), "nothing before the delay is served");
    assert_eq!(h.m.poll_timeout(), Some(h.now + DELAY));
    h.m.handle_timeout(h.now + DELAY - Duration::from_millis(1));
    assert!(h.sent().is_empty() && h.events().is_empty());
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(marks(&sent[0]), "{sent:?}");
    assert!(
        matches!(&sent[1].request, Request::Delete(d)
            if d.path == format!("/l/{STALE_MARK}") && d.version == -1),
        "the stale mark swept whatever its version: {sent:?}"
    );
    h.reply(&sent[1], Ok(Response::Empty));
    h.reply(&sent[0], multi_ok(2));
    assert!(granted(&h.events(), true));
}

#[test]
fn lock_delay_a_mark_with_a_live_node_is_no_unclean_end() {
    let mut h = Harness::new();
    let reader = "_c_00000000-0000-4000-8000-00000000beef-__READ__0000000001";
    let live = "~tenure.00000000-0000-4000-8000-00000000beef";
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3), reader, live])));
    let sent = h.sent();
    assert!(matches!(&sent[..], [m] if marks(m)), "{sent:?}");
}

#[test]
fn lock_delay_a_try_lock_does_not_wait_out_the_delay() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, true);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3), STALE_MARK])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3), STALE_MARK])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    ));
    // Our node goes; the stale mark stays for whoever comes next.
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
}

#[test]
fn lock_delay_a_mark_whose_reply_was_lost_is_found_and_not_made_twice() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    // Listed again: our mark is there, so the multi was applied.
    let again = h.sent();
    h.reply(&again[0], Ok(children(&[&ours(3), &our_mark()])));
    let tenure = h.sent();
    assert_eq!(tenure.len(), 1, "{tenure:?}");
    h.reply(&tenure[0], Ok(children(&[&ours(3), &our_mark()])));
    let events = h.events();
    assert!(granted(&events, false), "{events:?}");
    assert!(h.sent().is_empty(), "no second mark");
}

#[test]
fn lock_delay_our_node_gone_at_the_mark_means_queueing_again() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(
        &sent[0],
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ])),
    );
    assert!(h.events().is_empty());
    assert!(queues_again(&h.sent()));
}

#[test]
fn lock_delay_a_release_whose_mark_is_gone_deletes_the_node_alone() {
    let mut h = Harness::new();
    let listing = delayed_free(&mut h, &[]);
    h.reply(&listing, Ok(children(&[&ours(3)])));
    let sent = h.sent();
    h.reply(&sent[0], multi_ok(2));
    h.events();
    h.m.release(h.now, 1, false);
    let release = h.sent();
    h.reply(
        &release[0],
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
        ])),
    );
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
}

#[test]
fn lock_delay_given_up_with_the_mark_in_flight_removes_both() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3)])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3)])));
    let mark = h.sent();
    h.m.cancel(h.now, 1);
    assert!(h.sent().is_empty(), "the mark's reply says what to delete");
    h.reply(&mark[0], multi_ok(2));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [r] if matches!(&r.request, Request::Multi(ops) if ops.len() == 2)),
        "{sent:?}"
    );
}

// ---- a holder's check refused by the server ---------------------------------

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

// ---- requeue: release and queue again in one multi (requeue.rs) -------------

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

fn acquired_at(events: &[LockEvent], id: u64) -> bool {
    matches!(events, [LockEvent::Acquired { id: i, .. }] if *i == id)
}

#[test]
fn requeue_is_one_multi_then_the_new_node_queues_as_usual() {
    let mut h = Harness::new();
    let (multi, listing) = requeue_sent(&mut h);
    h.reply(
        &multi,
        Ok(Response::Multi(vec![
            MultiResult::Delete,
            MultiResult::Create2 {
                path: format!("/l/{}", next_node(4)),
                stat: stat(104),
            },
        ])),
    );
    assert_eq!(
        h.events(),
        vec![LockEvent::Released {
            id: 1,
            refused: None
        }]
    );
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
    assert!(queues_again(&h.sent()), "a plain create and its listing");
    // The listing that went behind the multi answers nothing now.
    h.reply(&listing, Ok(children(&[])));
    assert!(h.sent().is_empty());
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

#[test]
fn lock_delay_an_attempt_given_up_during_the_delay_makes_no_mark() {
    let mut h = Harness::new();
    let deadline = h.now + DELAY / 2;
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), Some(deadline), false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    h.reply(&sent[1], Ok(children(&[&ours(3), STALE_MARK])));
    let listing = h.sent();
    h.reply(&listing[0], Ok(children(&[&ours(3), STALE_MARK])));
    h.now = deadline;
    h.m.handle_timeout(h.now);
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Failed {
            id: 1,
            error: LockError::Timeout
        }]
    ));
    assert_eq!(deletes(&h.sent()), vec![format!("/l/{}", ours(3))]);
    // The delay's end finds nothing to mark.
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    let sent = h.sent();
    assert!(
        !sent.iter().any(|o| matches!(o.request, Request::Multi(_))),
        "{sent:?}"
    );
}

#[test]
fn lock_delay_served_while_a_listing_is_in_flight_marks_only_after_it() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, delayed_spec(), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(3)));
    // A duplicate of our attempt (a create whose reply was lost) is found.
    h.reply(&sent[1], Ok(children(&[&ours(3), &ours(9), STALE_MARK])));
    let sent = h.sent();
    let stray = sent
        .iter()
        .find(|o| matches!(&o.request, Request::Delete(d) if d.path == format!("/l/{}", ours(9))))
        .expect("the duplicate deleted")
        .clone();
    let tenure = sent
        .iter()
        .find(|o| matches!(o.request, Request::GetChildren(_)))
        .expect("the tenure listing")
        .clone();
    h.reply(&tenure, Ok(children(&[&ours(3), &ours(9), STALE_MARK])));
    assert!(h.sent().is_empty(), "the delay is being served");
    // The duplicate's delete answers: the attempt lists again meanwhile.
    h.reply(&stray, Ok(Response::Empty));
    let relist = h.sent();
    assert!(matches!(&relist[..], [l] if matches!(l.request, Request::GetChildren(_))));
    h.now += DELAY;
    h.m.handle_timeout(h.now);
    assert!(
        h.sent().is_empty(),
        "no mark while the listing is in flight"
    );
    h.reply(&relist[0], Ok(children(&[&ours(3), STALE_MARK])));
    let tenure = h.sent();
    h.reply(&tenure[0], Ok(children(&[&ours(3), STALE_MARK])));
    let sent = h.sent();
    assert!(marks(&sent[0]), "marked once the listing is in: {sent:?}");
}
