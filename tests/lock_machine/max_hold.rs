//! A max hold through the real core: the holder's guard says `Lost` in
//! the turn that ends it, before the delete of its node has left the core,
//! and the next waiter is granted once the delete lands.

use std::time::{Duration, Instant};

use zklock::recipes::{LockGuard, LockState, LossReason, Mutex, MutexOptions, PendingLock};

use zklock_sim::zookeeper as sim_zookeeper;

use crate::support::{pump, Peer};

/// Client A holds `/l` with a max hold of 3 s, taken at `now`; client B
/// waits behind it.
struct Capped {
    max: Duration,
    now: Instant,
    zk: sim_zookeeper::SimZooKeeper,
    a: Peer,
    b: Peer,
    ga: LockGuard,
    pb: PendingLock,
}

fn capped_holder_and_a_waiter() -> Capped {
    let max = Duration::from_secs(3);
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut a = Peer::new(now, 1);
    let mut b = Peer::new(now, 2);
    let capped = MutexOptions::default().max_hold(max);
    let ma = Mutex::with_options(&a.client, "/l", capped).unwrap();
    let mb = Mutex::new(&b.client, "/l").unwrap();
    let pa = ma.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    let ga = pa.try_take().expect("a free lock").unwrap();
    let pb = mb.start_lock(None);
    pump(&mut zk, &mut [&mut a, &mut b], now);
    assert!(pb.try_take().is_none(), "B waits");
    Capped {
        max,
        now,
        zk,
        a,
        b,
        ga,
        pb,
    }
}

#[test]
fn at_its_max_hold_a_holder_is_told_lost_before_its_nodes_delete_leaves() {
    let Capped {
        max,
        now,
        mut zk,
        mut a,
        mut b,
        ga,
        pb,
    } = capped_holder_and_a_waiter();
    assert_eq!(ga.valid_until(), Some(now + max), "never past the max hold");

    let before = now + max - Duration::from_millis(1);
    pump(&mut zk, &mut [&mut a, &mut b], before);
    assert_eq!(ga.state(), LockState::Held, "not early");
    assert!(pb.try_take().is_none(), "B still waits");

    let at = now + max;
    a.core.turn(at);
    assert_eq!(ga.state(), LockState::Lost, "not late");
    assert_eq!(ga.lost_reason(), Some(LossReason::MaxHold));
    assert_eq!(ga.valid_until(), None);
    assert!(!a.core.output().is_empty(), "the delete is written");
    assert!(
        zk.exists(ga.node_path()).is_some(),
        "and has not reached the server: the holder was told first"
    );
    pump(&mut zk, &mut [&mut a, &mut b], at);
    assert!(zk.exists(ga.node_path()).is_none(), "the node is gone");
    let gb = pb.try_take().expect("B is granted").unwrap();
    assert_eq!(gb.state(), LockState::Held);
    drop(ga);
    drop(gb);
    pump(&mut zk, &mut [&mut a, &mut b], at);
    assert!(zk.children("/l").is_empty());
}

/// The connection down at a max hold's end: the holder is told at once,
/// and the delete waits for the next connection.
/// Kills: a delete submitted while disconnected dropped rather than queued
/// for the next connection (the next waiter would then wait for the
/// session's end).
#[test]
fn a_max_hold_that_ends_while_disconnected_deletes_the_node_on_the_next_connection() {
    let Capped {
        max,
        now,
        mut zk,
        mut a,
        mut b,
        ga,
        pb,
    } = capped_holder_and_a_waiter();

    // A's connection drops (its session lives: 30 s) before the max hold.
    let cut = now + max / 2;
    let conn = a.conn.take().expect("A is connected");
    zk.disconnect(cut, conn);
    a.core.handle_disconnected(cut);
    a.online = false;
    pump(&mut zk, &mut [&mut a, &mut b], cut);
    assert_eq!(ga.state(), LockState::Suspended);

    let at = now + max;
    pump(&mut zk, &mut [&mut a, &mut b], at);
    assert_eq!(ga.state(), LockState::Lost, "told at its max hold");
    assert_eq!(ga.lost_reason(), Some(LossReason::MaxHold));
    assert!(
        zk.exists(ga.node_path()).is_some(),
        "no connection: the node stays for now"
    );
    assert!(pb.try_take().is_none(), "B still waits");

    // The next connection, well inside the session's timeout: the delete
    // that waited goes out, and B is granted.
    let back = at + Duration::from_secs(2);
    a.online = true;
    pump(&mut zk, &mut [&mut a, &mut b], back);
    assert!(a.conn.is_some(), "A reconnected");
    assert!(zk.exists(ga.node_path()).is_none(), "the node is gone");
    let gb = pb.try_take().expect("B is granted").unwrap();
    assert_eq!(gb.state(), LockState::Held);
    drop(ga);
    drop(gb);
    pump(&mut zk, &mut [&mut a, &mut b], back);
    assert!(zk.children("/l").is_empty());
}
