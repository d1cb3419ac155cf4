//! Queueing and the grant: a free lock, a waiter behind the head (the
//! watches it sets, the events and replies that prove it may hold, in
//! whatever order they come), waiters deeper in the queue, several
//! attempts of one client on the same lock.

use jute::{ErrorCode, EventType, Request, Response};
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::lock::{LockState, LossReason};
use zklock_proto::session::{RequestError, WatchEvent};

use crate::support::*;

/// A lock path missing with its folders: each is made as a container, top
/// down; the folders take the ancestors' ACL (shared by every lock below
/// them), the lock path its own, then our node is created again.
#[test]
fn a_missing_lock_path_and_its_folders_are_made_with_their_own_acls() {
    use jute::{Acl, CreateMode};
    let folders = Acl::read_unsafe();
    let lock_path = Acl::creator_all();
    let mut h = Harness::new();
    let spec = std::sync::Arc::new(zklock_proto::lock::LockSpec {
        parent_acl: lock_path.clone(),
        ancestor_acl: folders.clone(),
        ..(*spec_at("/f/g/l", false)).clone()
    });
    h.m.acquire(h.now, 1, spec, UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::Server(ErrorCode::NoNode)));
    h.reply(&sent[1], Err(RequestError::Server(ErrorCode::NoNode)));
    let mut made = Vec::new();
    let again = loop {
        let sent = h.sent();
        match &sent[..] {
            [o] => {
                let Request::CreateContainer(c) = &o.request else {
                    panic!("{o:?}")
                };
                assert_eq!(c.mode, CreateMode::Container);
                made.push((c.path.clone(), c.acl.clone()));
                h.reply(o, Ok(Response::Path(c.path.clone())));
            }
            // Our node's create again, with its listing.
            [create, _] => break create.request.clone(),
            _ => panic!("{sent:?}"),
        }
    };
    assert_eq!(
        made,
        vec![
            ("/f".to_owned(), folders.clone()),
            ("/f/g".to_owned(), folders),
            ("/f/g/l".to_owned(), lock_path),
        ]
    );
    assert!(
        matches!(&again, Request::Create2(c) if c.path.starts_with("/f/g/l/")),
        "{again:?}"
    );
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
    assert_eq!(
        h.woken,
        vec![(format!("/l/{}", ours(5)), format!("/l/{HEAD}"))],
        "one wake-up, told with our node and the blocker"
    );
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

/// A deletion of a held node heard on a watch the machine never set (in
/// the core: an election observer's, the caller's own on the same
/// session) tells the holder, watched or not.
#[test]
fn a_held_node_deleted_as_heard_on_someone_elses_watch_is_lost() {
    let heard = |h: &mut Harness, path: &str| {
        let event = WatchEvent {
            kind: EventType::NodeDeleted,
            path: path.into(),
        };
        h.m.handle_watch(h.now, u64::MAX, Ok(event));
    };
    for watch_node in [false, true] {
        let mut h = Harness::new();
        let node = hold_free(&mut h, 1, "/l", watch_node, 1);
        let _ = h.sent();
        heard(&mut h, "/l/someone-elses-node");
        assert!(h.events().is_empty(), "not ours: nothing changes");
        heard(&mut h, &node);
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
fn every_waiter_watches_its_own_node_once_and_first() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(true), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(
        &sent[1],
        Ok(children(&[&ours(5), HEAD, "_c_a-lock-0000000001"])),
    );
    // Deep in the queue too: own node first, then the one right below,
    // then the scout below that.
    let watches = h.sent();
    assert!(
        matches!(&watches[..], [a, b, c] if reads(a, &ours(5), true) && reads(b, HEAD, true) && reads(c, "_c_a-lock-0000000001", true)),
        "{watches:?}"
    );
    h.reply(&watches[0], data(105));
    h.reply(&watches[1], data(1));
    h.reply(&watches[2], data(1));
    head_deleted(&mut h, &watches[1]);
    let relist = h.sent();
    assert!(matches!(&relist[..], [o] if matches!(o.request, Request::GetChildren(_))));
    // Now alone behind the first: its own watch stands, set once.
    h.reply(
        &relist[0],
        Ok(children(&[&ours(5), "_c_a-lock-0000000001"])),
    );
    let watch = h.sent();
    assert!(
        matches!(&watch[..], [o] if reads(o, "_c_a-lock-0000000001", true)),
        "{watch:?}"
    );
    h.reply(&watch[0], data(2));
    // The blocker's deletion alone grants it: no read in between.
    h.fire(&watch[0], EventType::NodeDeleted, "/l/_c_a-lock-0000000001");
    assert!(acquired(&h.events()));
    assert!(h.sent().is_empty());
}

/// Kills: the own-node watch set only for a waiter whose blocker is alone
/// (a waiter deep in the queue whose node a third party deletes waits, with
/// no node, until its blocker goes; a leader latch, for the leader's term).
#[test]
fn a_waiter_deep_in_the_queue_whose_node_is_deleted_queues_again_at_once() {
    let mut h = Harness::new();
    let (own, _) = queued_deep(&mut h);
    h.fire(&own, EventType::NodeDeleted, &format!("/l/{}", ours(9)));
    // A new node, and the listing that goes with it.
    let again = h.sent();
    assert!(
        matches!(&again[..], [c, l] if matches!(c.request, Request::Create2(_)) && matches!(l.request, Request::GetChildren(_))),
        "{again:?}"
    );
    assert!(h.events().is_empty());
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
    assert!(reads(&watch[0], &ours(5), true), "{watch:?}");
    h.reply(&watch[0], data(105));
    h.reply(&watch[1], Err(RequestError::Server(ErrorCode::NoNode)));
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
    let watches = h.sent();
    assert!(
        matches!(&watches[..], [own, o, scout] if reads(own, &ours(9), true) && matches!(&o.request, Request::GetData(p) if p.watch && p.path.ends_with("0000000007")) && reads(scout, "_c_b-lock-0000000005", true)),
        "{watches:?}"
    );
    h.reply(&watches[0], data(109));
    h.reply(&watches[1], data(1));
    h.reply(&watches[2], data(1));
    // Others were below the one we watched: its deletion is not enough.
    h.fire(
        &watches[1],
        EventType::NodeDeleted,
        "/l/_c_c-lock-0000000007",
    );
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

const BLOCKER: &str = "_c_b-lock-0000000007";
const SCOUT: &str = "_c_a-lock-0000000002";

fn is_listing(sent: &[Outgoing]) -> bool {
    matches!(sent, [o] if matches!(o.request, Request::GetChildren(_)))
}

/// Queued deep (see `queued_deep_with_scout`), then the scout deleted:
/// the blocker's watch, the scout's, and the listing that follows.
fn scout_deleted(h: &mut Harness) -> (Outgoing, Outgoing, Outgoing) {
    let (_, blocker, scout) = queued_deep_with_scout(h);
    h.fire(&scout, EventType::NodeDeleted, &format!("/l/{SCOUT}"));
    let relist = h.sent();
    assert!(is_listing(&relist), "{relist:?}");
    (blocker, scout, relist[0].clone())
}

/// The node below our blocker goes while the blocker holds: we list again
/// then, keep the blocker's watch, and its deletion grants us on the event
/// alone (no listing after it).
#[test]
fn a_scouts_deletion_lists_early_so_the_blockers_alone_grants() {
    let mut h = Harness::new();
    let (own, blocker, scout) = queued_deep_with_scout(&mut h);
    h.fire(&scout, EventType::NodeDeleted, &format!("/l/{SCOUT}"));
    assert!(h.events().is_empty());
    let relist = h.sent();
    assert!(is_listing(&relist), "{relist:?}");
    h.reply(&relist[0], Ok(children(&[&ours(9), BLOCKER])));
    assert!(
        h.sent().is_empty(),
        "the blocker's watch stands: {:?}",
        h.sent()
    );
    assert!(h.m.wants_watch(blocker.token) && h.m.wants_watch(own.token));
    assert!(!h.m.wants_watch(scout.token));
    h.fire(&blocker, EventType::NodeDeleted, &format!("/l/{BLOCKER}"));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 109),
        "{events:?}"
    );
    assert!(h.sent().is_empty(), "held on the event alone");
}

/// A listing made on the scout's word that shows a duplicate of our node
/// (a late create of ours) deletes it, as every listing does.
#[test]
fn a_scouts_listing_deletes_a_duplicate_of_ours() {
    let mut h = Harness::new();
    let (_, _, relist) = scout_deleted(&mut h);
    h.reply(&relist, Ok(children(&[&ours(9), BLOCKER, &ours(11)])));
    let sent = h.sent();
    let next = owned_by_us(&mut h, &sent, &[ours(11)]);
    assert_eq!(deletes(&next), [format!("/l/{}", ours(11))]);
}

/// The scout went but another node is still below the blocker (the scout
/// had given up): a new scout is watched, the blocker's watch kept, and
/// the blocker's deletion still means a listing.
#[test]
fn a_scout_that_gave_up_is_replaced_by_the_next_below() {
    let mut h = Harness::new();
    let (blocker, _, relist) = scout_deleted(&mut h);
    let deeper = "_c_z-lock-0000000001";
    h.reply(&relist, Ok(children(&[deeper, &ours(9), BLOCKER])));
    let sent = h.sent();
    assert!(
        matches!(&sent[..], [o] if reads(o, deeper, true)),
        "only the new scout's watch: {sent:?}"
    );
    h.fire(&blocker, EventType::NodeDeleted, &format!("/l/{BLOCKER}"));
    assert!(h.events().is_empty(), "not alone: no grant on the event");
    assert!(is_listing(&h.sent()));
}

/// The scout's getData finds it already gone: list again at once. Granted
/// from that listing, the blocker's watch is no longer wanted.
#[test]
fn a_scout_found_gone_lists_at_once_and_a_grant_drops_the_queue_watches() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(9)));
    h.reply(&sent[1], Ok(children(&[SCOUT, &ours(9), BLOCKER])));
    let watches = h.sent();
    let [own, blocker, scout] = &watches[..] else {
        panic!("{watches:?}")
    };
    h.reply(own, data(109));
    h.reply(blocker, data(7));
    h.reply(scout, Err(RequestError::Server(ErrorCode::NoNode)));
    let relist = h.sent();
    assert!(is_listing(&relist), "{relist:?}");
    // The listing shows nobody below us (the blocker's event is not played).
    h.reply(&relist[0], Ok(children(&[&ours(9)])));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Acquired { id: 1, .. }]
    ));
    assert!(
        !h.m.wants_watch(blocker.token),
        "no waiter's watch outlives the grant"
    );
    assert!(!h.m.wants_watch(scout.token));
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

/// A hundred acquisitions started at once on one machine: every create's
/// reply and the listing behind them are heard (the table of requests in
/// flight grows past the room it keeps and must lose nothing).
/// Kills: lock/replies.rs:33:36 (`&&`→`||`: the table dropped while full).
#[test]
fn a_hundred_waiters_started_at_once_are_each_answered() {
    const N: u32 = 100;
    let mut h = Harness::new();
    let uuid = |i: u32| format!("00000000-0000-4000-8000-{i:012}");
    for i in 1..=N {
        h.m.acquire(h.now, u64::from(i), spec(false), uuid(i), None, false);
    }
    let sent = h.sent();
    assert_eq!(sent.len(), N as usize + 1, "the creates and one listing");
    let name = |i: u32| format!("_c_{}-lock-{i:010}", uuid(i));
    for (i, create) in (1..=N).zip(&sent) {
        h.reply(
            create,
            Ok(Response::Created {
                path: format!("/l/{}", name(i)),
                stat: stat(100 + i64::from(i)),
            }),
        );
    }
    let names: Vec<String> = (1..=N).map(name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    h.reply(&sent[N as usize], Ok(children(&names)));
    assert!(matches!(
        &h.events()[..],
        [LockEvent::Acquired { id: 1, .. }]
    ));
    // Each of the 99 others watches its own node and its blocker; all but
    // the second watch a scout too.
    assert_eq!(h.sent().len(), 99 * 2 + 98);
}

/// Creates made while a shared listing is out wait for its reply, then
/// share the next one: a session queueing many waiters on one path lists
/// once per round trip, not once per waiter. A create answered before its
/// listing went out waits for that listing (no listing of its own).
#[test]
fn creates_made_while_a_listing_is_out_share_the_next() {
    let mut h = Harness::new();
    let (two, three) = (
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    );
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let first = h.sent();
    let [create1, list1] = &first[..] else {
        panic!("a create and its listing: {first:?}")
    };
    assert!(
        matches!(list1.request, Request::GetChildren(_)),
        "{list1:?}"
    );
    h.m.acquire(h.now, 2, spec(false), two.into(), None, false);
    h.m.acquire(h.now, 3, spec(false), three.into(), None, false);
    let later = h.sent();
    assert!(
        matches!(&later[..], [a, b] if matches!(a.request, Request::Create2(_)) && matches!(b.request, Request::Create2(_))),
        "two creates, no listing while one is out: {later:?}"
    );
    let name = |uuid: &str, seq: u32| format!("_c_{uuid}-lock-{seq:010}");
    let created_as = |uuid: &str, seq: u32| {
        Ok(Response::Created {
            path: format!("/l/{}", name(uuid, seq)),
            stat: stat(100 + i64::from(seq)),
        })
    };
    h.reply(create1, Ok(created(5)));
    h.reply(list1, Ok(children(&[&ours(5)])));
    assert!(acquired_first(&h.events()));
    // The listing for 2 and 3 goes now; 2's create is answered before it
    // is, and 2 waits for it rather than listing alone.
    let next = h.sent();
    let [list2] = &next[..] else {
        panic!("one listing for both: {next:?}")
    };
    assert!(
        matches!(list2.request, Request::GetChildren(_)),
        "{list2:?}"
    );
    h.reply(&later[0], created_as(two, 6));
    h.reply(&later[1], created_as(three, 7));
    assert!(h.sent().is_empty(), "no listing of their own");
    h.reply(
        list2,
        Ok(children(&[&ours(5), &name(two, 6), &name(three, 7)])),
    );
    assert!(h.events().is_empty());
    // Each watches its own node, then the one below it: 2 watches 1's,
    // 3 watches 2's, and 1's as its scout.
    let watches = h.sent();
    let expected = [name(two, 6), ours(5), name(three, 7), name(two, 6), ours(5)];
    assert!(
        watches.len() == expected.len()
            && watches
                .iter()
                .zip(&expected)
                .all(|(o, n)| reads(o, n, true)),
        "{watches:?}"
    );
}

fn acquired_first(events: &[LockEvent]) -> bool {
    matches!(events, [LockEvent::Acquired { id: 1, .. }])
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

#[test]
fn a_waiter_that_gave_up_is_not_woken() {
    // Its watch on the blocker stays on the server (one-shot watches cannot
    // be taken back everywhere) and fires; nobody wakes for it.
    let mut h = Harness::new();
    let (_own, head) = queued_behind_head(&mut h, false);
    h.m.cancel(h.now, 1);
    let delete = h.sent();
    assert_eq!(deletes(&delete), vec![format!("/l/{}", ours(5))]);
    head_deleted(&mut h, &head);
    assert!(h.woken.is_empty(), "{:?}", h.woken);
    assert!(h.sent().is_empty());
}
