//! The rules other than a mutex's "the first in line": a semaphore's
//! leases, where the first n in the queue hold, and a read that passes
//! its thread's own write node (a downgrade).

use std::sync::Arc;

use jute::{EventType, Request, Response};
use zklock_proto::lock::{LockError, LockEvent};
use zklock_proto::lock::{LockSpec, Rule};

use crate::support::*;

/// A semaphore of `n` leases on `/l`.
fn leases(n: usize) -> Arc<LockSpec> {
    Arc::new(LockSpec {
        marker: "-lease-",
        rule: Rule::FirstN(n),
        ..(*spec(false)).clone()
    })
}

fn our_lease(seq: u32) -> String {
    format!("_c_{UUID}-lease-{seq:010}")
}

/// A lease past the first n waits on the queue itself: its listing leaves
/// a child watch, and when that fires (a lease let go) it lists again and
/// holds. Kills: Rule::is_first_n made `false` (lock/mod.rs:558), under
/// which the waiter listed again and again without a watch.
#[test]
fn a_lease_past_the_first_n_waits_on_a_child_watch_then_holds() {
    let mut h = Harness::new();
    h.m.acquire(h.now, 1, leases(2), UUID.into(), None, false);
    let sent = h.sent();
    h.reply(
        &sent[0],
        Ok(Response::Created {
            path: format!("/l/{}", our_lease(3)),
            stat: stat(103),
        }),
    );
    let taken = ["_c_a-lease-0000000001", "_c_b-lease-0000000002"];
    h.reply(&sent[1], Ok(children(&[taken[0], taken[1], &our_lease(3)])));
    assert!(h.events().is_empty(), "two leases are taken");
    // Listed with the create (no watch): once more, with a child watch.
    let list = h.sent();
    let [list] = &list[..] else {
        panic!("one listing expected: {list:?}")
    };
    assert!(
        matches!(&list.request, Request::GetChildren(p) if p.watch && p.path == "/l"),
        "{list:?}"
    );
    h.reply(list, Ok(children(&[taken[0], taken[1], &our_lease(3)])));
    assert!(h.events().is_empty());
    assert!(h.sent().is_empty(), "it waits for the watch");
    assert!(h.m.wants_watch(list.token));
    h.fire(list, EventType::NodeChildrenChanged, "/l");
    let again = h.sent();
    let [again] = &again[..] else {
        panic!("one listing expected: {again:?}")
    };
    assert!(matches!(&again.request, Request::GetChildren(p) if p.watch));
    h.reply(again, Ok(children(&[taken[1], &our_lease(3)])));
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, stat, .. }] if stat.czxid == 103),
        "{events:?}"
    );
}

/// The read's own attempt id, in its node names (each attempt has its own).
const READER: &str = "00000000-0000-4000-8000-000000000002";

fn write_node(seq: u32) -> String {
    format!("_c_{UUID}-__WRIT__{seq:010}")
}

fn read_node(seq: u32) -> String {
    format!("_c_{READER}-__READ__{seq:010}")
}

/// Attempt `id` (attempt id `uuid`) queues on `/l` by `spec` as `name`
/// (created at `czxid`), and the listing shows `listed` besides. Returns
/// what it sends next.
fn queue_as(
    h: &mut Harness,
    (id, uuid): (u64, &str),
    spec: LockSpec,
    (name, czxid): (&str, i64),
    listed: &[&str],
) -> Vec<zklock_proto::lock::Outgoing> {
    h.m.acquire(h.now, id, Arc::new(spec), uuid.into(), None, false);
    let sent = h.sent();
    let path = format!("/l/{name}");
    let stat = stat(czxid);
    h.reply(&sent[0], Ok(Response::Created { path, stat }));
    let mut listed = listed.to_vec();
    listed.push(name);
    h.reply(&sent[1], Ok(children(&listed)));
    h.sent()
}

/// Attempt 1 takes the write lock on the free `/l` (our node: sequence 1).
fn hold_write(h: &mut Harness) {
    let spec = LockSpec {
        marker: "-__WRIT__",
        ..(*spec(false)).clone()
    };
    queue_as(h, (1, UUID), spec, (&write_node(1), 101), &[]);
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 1, .. }]),
        "{events:?}"
    );
}

/// Attempt 2 reads, passing our write node (sequence 1); its node is
/// sequence 3, listed with `others`. Returns what it sends next.
fn read_passing(h: &mut Harness, others: &[&str]) -> Vec<zklock_proto::lock::Outgoing> {
    let spec = LockSpec {
        marker: "-__READ__",
        rule: Rule::NearestWriter,
        passes: Some(write_node(1)),
        ..(*spec(false)).clone()
    };
    let write = write_node(1);
    let listed = [&[write.as_str()], others].concat();
    queue_as(h, (2, READER), spec, (&read_node(3), 103), &listed)
}

/// Attempt 1 holds the write lock and attempt 2 reads passing its node,
/// listed with `others`: what the read sends next, and what it decided.
fn read_under_held_write(others: &[&str]) -> (Vec<zklock_proto::lock::Outgoing>, Vec<LockEvent>) {
    let mut h = Harness::new();
    hold_write(&mut h);
    let sent = read_passing(&mut h, others);
    (sent, h.events())
}

/// A read under our held write node holds at once, by its own node:
/// nothing below it blocks it but that node, which it passes.
#[test]
fn a_read_passing_our_held_write_node_holds_behind_it() {
    // A reader of another session between the two blocks nobody's read.
    let (sent, events) = read_under_held_write(&["_c_b-__READ__0000000002"]);
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 2, path, stat, .. }]
            if *path == format!("/l/{}", read_node(3)) && stat.czxid == 103),
        "{events:?}"
    );
    assert!(
        !sent.iter().any(|o| reads(o, &write_node(1), true)),
        "{sent:?}"
    );
}

/// A writer that queued between our write node and the read waits for
/// that write node: the read fails at once, its node removed, rather
/// than wait for its own thread.
#[test]
fn a_read_behind_a_writer_waiting_for_our_write_node_fails_rather_than_wait_for_itself() {
    let (sent, events) = read_under_held_write(&["_c_b-__WRIT__0000000002"]);
    assert_eq!(
        events,
        [LockEvent::Failed {
            id: 2,
            error: LockError::WouldDeadlock
        }]
    );
    assert_eq!(deletes(&sent), [format!("/l/{}", read_node(3))]);
}

/// A write node we let go of is passed no more: until its delete is
/// through, the read waits for it as for anyone's.
#[test]
fn a_write_node_let_go_of_blocks_the_read_until_it_is_gone() {
    let mut h = Harness::new();
    hold_write(&mut h);
    h.m.release(h.now, 1, false);
    let delete = h.sent();
    assert_eq!(deletes(&delete), [format!("/l/{}", write_node(1))]);
    let sent = read_passing(&mut h, &[]);
    assert!(h.events().is_empty());
    let [own, blocker] = &sent[..] else {
        panic!("watches on our node and on the write node expected: {sent:?}")
    };
    assert!(reads(own, &read_node(3), true), "{own:?}");
    assert!(reads(blocker, &write_node(1), true), "{blocker:?}");
    h.reply(own, data(103));
    h.reply(blocker, data(101));
    h.reply(&delete[0], Ok(Response::Empty));
    h.fire(
        blocker,
        EventType::NodeDeleted,
        &format!("/l/{}", write_node(1)),
    );
    let events = h.events();
    assert!(
        matches!(&events[..], [LockEvent::Acquired { id: 2, .. }]),
        "{events:?}"
    );
}
