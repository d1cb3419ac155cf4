//! A create whose reply was lost: our node found again by its attempt id,
//! and every duplicate of it (late creates) deleted, whether found then or
//! in a later listing.

use jute::{ErrorCode, Request, Response, Stat};
use zklock_proto::lock::{LockEvent, Outgoing};
use zklock_proto::session::RequestError;

use crate::support::*;

/// Attempt 1's create and its listing are lost with the connection: the
/// recovery listing it sends next (after a sync, answered by `sent`).
fn lose_the_create(h: &mut Harness) -> Vec<Outgoing> {
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Err(RequestError::ConnectionLoss));
    h.reply(&sent[1], Err(RequestError::ConnectionLoss));
    let recover = h.sent();
    assert!(matches!(&recover[..], [o] if matches!(o.request, Request::GetChildren(_))));
    assert_eq!(h.synced, vec!["/l".to_owned()]);
    recover
}

#[test]
fn a_recovery_listing_follows_a_sync_of_the_lock_path() {
    // A create whose reply was lost may be committed and not yet applied by
    // the server we reconnected to: a sync first, and the listing behind
    // it on the same connection shows it. Without an answer, a release
    // looks the same way.
    for release in [false, true] {
        let mut h = Harness::new();
        h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
        let sent = h.sent();
        if release {
            h.m.cancel(h.now, 1);
        }
        h.reply(&sent[0], Err(RequestError::ConnectionLoss));
        h.reply(&sent[1], Err(RequestError::ConnectionLoss));
        let raw: Vec<_> = std::iter::from_fn(|| h.m.poll_request()).collect();
        assert!(
            matches!(
                &raw[..],
                [s, l] if s.request == Request::Sync("/l".into())
                    && matches!(&l.request, Request::GetChildren(p) if p.path == "/l")
            ),
            "{raw:?}"
        );
    }
}

#[test]
fn a_create_answered_syncs_nothing() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5)])));
    assert!(h.synced.is_empty());
}

#[test]
fn a_lost_create_is_found_by_its_attempt_id_and_duplicates_deleted() {
    let mut h = Harness::new();
    let recover = lose_the_create(&mut h);
    // Two creates of this attempt made it (a late one too).
    h.reply(&recover[0], Ok(children(&[&ours(9), &ours(7)])));
    let next = h.sent();
    assert!(
        deletes(&next).is_empty(),
        "deleted before its owner is read: {next:?}"
    );
    let gone = owned_by_us(&mut h, &next, &[ours(9)]);
    assert_eq!(deletes(&gone), vec![format!("/l/{}", ours(9))]);
    let exists = next
        .iter()
        .find(|o| matches!(&o.request, Request::Exists(p) if p.path == format!("/l/{}", ours(7))))
        .expect("the kept node's Stat is read");
    h.reply(exists, Ok(Response::Stat(stat(107))));
    let list = h.sent();
    h.reply(&list[0], Ok(children(&[&ours(7)])));
    assert!(matches!(&h.events()[..], [LockEvent::Acquired { stat, .. }] if stat.czxid == 107));
}

/// A node found again after an ambiguous create, gone before its Stat is
/// read: the attempt queues again with a new node, it does not ask for the
/// Stat of a missing node again and again. Kills: on_stat's NoNode arm
/// deleted (queueing.rs:254).
#[test]
fn a_found_node_gone_before_its_stat_is_read_means_queueing_again() {
    let mut h = Harness::new();
    let recover = lose_the_create(&mut h);
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
    let sent = h.sent();
    let next = owned_by_us(&mut h, &sent, &[ours(8)]);
    assert_eq!(deletes(&next), vec![format!("/l/{}", ours(8))], "{next:?}");
    // Waiting: deleted alongside the blocker's watch.
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, spec(false), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(&sent[0], Ok(created(5)));
    h.reply(&sent[1], Ok(children(&[&ours(5), HEAD, &ours(9)])));
    let next = h.sent();
    assert!(next.iter().any(|o| reads(o, HEAD, true)), "{next:?}");
    let next = owned_by_us(&mut h, &next, &[ours(9)]);
    assert_eq!(deletes(&next), vec![format!("/l/{}", ours(9))], "{next:?}");
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
    let mut gone = deletes(&owned_by_us(&mut h, &next, &[ours(9), ours(11)]));
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
        .find(|o| matches!(&o.request, Request::Exists(p) if p.path == format!("/l/{}", ours(7))))
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
    let more = owned_by_us(&mut h, &more, &[ours(12)]);
    assert_eq!(deletes(&more), vec![format!("/l/{}", ours(12))], "{more:?}");
}

/// Nodes with our attempt id that another session owns (another client
/// made them with our id) are not ours: a recovery listing that shows them
/// neither adopts one nor deletes any, and queues again. Before, the found
/// node read as another session's and every other node with our id were
/// deleted as duplicates of ours (the simulator's foreign twins, owned by
/// another client's session).
#[test]
fn nodes_with_our_attempt_id_owned_by_another_session_are_neither_adopted_nor_deleted() {
    let mut h = Harness::new();
    let recover = lose_the_create(&mut h);
    h.reply(&recover[0], Ok(children(&[&ours(9), &ours(7)])));
    let next = h.sent();
    let foreign = Stat {
        ephemeral_owner: SESSION + 1,
        ..stat(107)
    };
    let mut after = Vec::new();
    for o in &next {
        if matches!(o.request, Request::Exists(_)) {
            h.reply(o, Ok(Response::Stat(foreign)));
            after.extend(h.sent());
        }
    }
    let all: Vec<_> = next.iter().chain(&after).cloned().collect();
    assert!(deletes(&all).is_empty(), "{all:?}");
    assert!(queues_again(&after), "{after:?}");
    assert!(h.events().is_empty());
}

/// The node a recovery listing found, given up before its owner was read
/// (the attempt cancelled meanwhile): deleted only once an exists shows
/// that our session owns it, never when another session does. Before, the
/// release deleted the node found, whoever owned it (simulator seed 9708).
#[test]
fn a_found_node_given_up_before_its_owner_is_read_is_not_deleted_if_foreign() {
    for ours_after_all in [false, true] {
        let mut h = Harness::new();
        let recover = lose_the_create(&mut h);
        h.reply(&recover[0], Ok(children(&[&ours(7)])));
        let mut sent = h.sent();
        h.m.cancel(h.now, 1);
        sent.extend(h.sent());
        let owner = if ours_after_all { SESSION } else { SESSION + 1 };
        let mut all = sent.clone();
        // Every read of who owns it is answered, for as long as one comes.
        for _ in 0..4 {
            let reads: Vec<_> = sent
                .iter()
                .filter(|o| matches!(o.request, Request::Exists(_)))
                .cloned()
                .collect();
            sent.clear();
            for o in &reads {
                let st = Stat {
                    ephemeral_owner: owner,
                    ..stat(107)
                };
                h.reply(o, Ok(Response::Stat(st)));
                sent.extend(h.sent());
            }
            all.extend(sent.iter().cloned());
        }
        let gone = deletes(&all);
        if ours_after_all {
            assert_eq!(gone, vec![format!("/l/{}", ours(7))], "{all:?}");
        } else {
            assert!(gone.is_empty(), "{all:?}");
        }
    }
}
