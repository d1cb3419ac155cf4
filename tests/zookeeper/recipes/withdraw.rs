//! Waiters given up while another client holds withdraw their node at once,
//! not when they would have been granted: a dropped PendingSet, a dropped
//! PendingMulti, a dropped LeaderLatch. And a latch waiting for leadership
//! is woken when it comes, not at its timeout.

use super::*;

use std::sync::mpsc;

/// Waits (bounded) until `p` has exactly `n` children.
fn wait_exactly(c: &Client, p: &str, n: usize) {
    wait_until(&format!("{p} to have {n} children"), WAIT, || {
        children(c, p).len() == n
    });
}

#[test]
fn a_dropped_pending_set_withdraws_its_waiters_while_the_lock_is_held() {
    use zklock::recipes::{Mutex, PendingSet};
    let p = path("withdraw-set");
    let (a, b) = (client(), client());
    let held = Mutex::new(&a, &p).unwrap().lock().unwrap();
    let waiting = Mutex::new(&b, &p).unwrap();
    let mut set = PendingSet::new();
    set.start_lock(&waiting, None);
    wait_children(&a, &p, 2);
    drop(set);
    wait_exactly(&a, &p, 1);
    assert_eq!(held.state(), LockState::Held);
    drop(held);
    testkit::wait_no_children(&a, &p, WAIT);
}

#[test]
fn a_dropped_pending_multi_withdraws_the_part_it_awaits_and_releases_the_rest() {
    let (x, y) = (path("withdraw-multi-x"), path("withdraw-multi-y"));
    let (a, b) = (client(), client());
    let both = MultiLock::new(&a, &[&x, &y]).unwrap();
    let hold_y = zklock::recipes::Mutex::new(&b, &y).unwrap().lock().unwrap();
    let pending = both.start_lock(None);
    wait_children(&a, &y, 2);
    assert_eq!(children(&a, &x).len(), 1, "x is taken while y is awaited");
    drop(pending);
    testkit::wait_no_children(&a, &x, WAIT);
    wait_exactly(&a, &y, 1);
    assert_eq!(hold_y.state(), LockState::Held);
    drop(hold_y);
    testkit::wait_no_children(&a, &y, WAIT);
}

#[test]
fn a_latch_dropped_while_another_leads_withdraws_its_node() {
    let p = path("withdraw-latch");
    let (a, b) = (client(), client());
    let leading = Election::new(&a, &p, b"a")
        .unwrap()
        .campaign_timeout(WAIT)
        .unwrap();
    let latch = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    drop(latch);
    wait_exactly(&a, &p, 1);
    assert_eq!(leading.state(), LockState::Held);
    drop(leading);
    testkit::wait_no_children(&a, &p, WAIT);
}

/// `await_leadership` with a timeout far beyond the test's returns as soon
/// as leadership comes: its wait is woken, not run out.
#[test]
fn awaiting_leadership_wakes_when_it_comes() {
    let p = path("await-latch");
    let (a, b) = (client(), client());
    let leading = Election::new(&a, &p, b"a")
        .unwrap()
        .campaign_timeout(WAIT)
        .unwrap();
    let latch = Arc::new(Election::new(&b, &p, b"b").unwrap().latch());
    wait_children(&a, &p, 2);
    let (tx, rx) = mpsc::channel();
    let waiter = latch.clone();
    std::thread::spawn(move || {
        let _ = tx.send(waiter.await_leadership(Duration::from_secs(3600)));
    });
    assert!(!latch.is_leader());
    drop(leading);
    assert_eq!(rx.recv_timeout(WAIT), Ok(true), "woken when it leads");
    assert!(latch.is_leader());
}
