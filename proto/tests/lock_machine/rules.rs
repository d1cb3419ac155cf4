//! The rules other than a mutex's "the first in line": a semaphore's
//! leases, where the first n in the queue hold.

use std::sync::Arc;

use jute::{EventType, Request, Response};
use zklock_proto::lock::LockEvent;
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
