//! The read/write lock: sharing, exclusion, downgrade, and its queue as
//! inspected.

use super::*;
use zklock::recipes::LockGuard;

#[test]
fn readers_share_and_writers_exclude() {
    let p = path("rw");
    let (a, b, c) = (client(), client(), client());
    let ra = RwLock::new(&a, &p).unwrap();
    let rb = RwLock::new(&b, &p).unwrap();
    let rc = RwLock::new(&c, &p).unwrap();
    let r1 = ra.read().unwrap();
    let r2 = rb.read_timeout(BRIEF).expect("readers share");
    assert_eq!(rc.try_write().unwrap().map(|_| ()), None);
    // A writer queues; a reader arriving after it waits for it (no starvation).
    let writer = std::thread::spawn(move || {
        let g = rc.write_timeout(WAIT).unwrap();
        let t = Instant::now();
        g.unlock().unwrap();
        t
    });
    wait_children(&a, &p, 3);
    let late = RwLock::new(&client(), &p).unwrap();
    assert_eq!(late.read_timeout(BRIEF).unwrap_err(), LockError::Timeout);
    drop(r1);
    drop(r2);
    let written = writer.join().unwrap();
    let r3 = late.read_timeout(WAIT).unwrap();
    assert!(Instant::now() >= written);
    let names = children(&a, &p);
    assert!(names
        .iter()
        .all(|n| n.contains("-__READ__") || n.contains("-__WRIT__")));
    drop(r3);
    testkit::wait_no_children(&a, &p, WAIT);
}

#[test]
fn downgrade_allowed_upgrade_refused() {
    let p = path("grade");
    let c = client();
    let rw = RwLock::new(&c, &p).unwrap();
    let w = rw.write().unwrap();
    let r = rw.read().expect("a write holder may read");
    drop(w);
    // Still excluded: the downgraded read keeps the write node.
    let other = RwLock::new(&client(), &p).unwrap();
    assert!(other.try_write().unwrap().is_none());
    // Waits for the delete: a dropped guard's delete may still be on its
    // way when another session looks.
    r.unlock().unwrap();
    assert!(other.try_write().unwrap().is_some());
    let r = rw.read().unwrap();
    assert_eq!(rw.write().unwrap_err(), LockError::UpgradeRefused);
    drop(r);
}

#[test]
fn inspection_lists_kinds_in_order() {
    let p = path("inspect");
    let c = client();
    let rw = RwLock::new(&c, &p).unwrap();
    let _r = rw.read().unwrap();
    let other = RwLock::new(&client(), &p).unwrap();
    let w = std::thread::spawn(move || other.write_timeout(BRIEF).map(|_| ()));
    wait_children(&c, &p, 2);
    let q = rw.queue().unwrap();
    assert_eq!(q[0].kind, NodeKind::Read);
    assert_eq!(q[1].kind, NodeKind::Write);
    assert!(q[0].sequence < q[1].sequence);
    assert_eq!(w.join().unwrap().unwrap_err(), LockError::Timeout);
}

/// A write holder's read holds at once, and once the write guard goes it
/// is a read lock like any other: other readers share it, writers wait for
/// it.
#[test]
fn a_downgraded_read_admits_readers_once_the_write_goes() {
    downgrade("downgrade", |rw| {
        rw.read().expect("a write holder may read")
    });
}

/// The same downgrade, polled for this thread.
#[test]
fn a_polled_downgrade_admits_readers_once_the_write_goes() {
    downgrade("downgrade-polled", |rw| {
        let pending = rw.start_read_for(std::thread::current().id(), None);
        let mut outcome = None;
        wait_until("the polled read", WAIT, || {
            outcome = pending.try_take();
            outcome.is_some()
        });
        outcome.unwrap().expect("a write holder may read")
    });
}

/// A writer that queued while the write lock was held waits for the write
/// node, and a read node behind it could not keep it out: the downgraded
/// read shares the write node instead, and the writer gets in only once
/// both guards are gone.
#[test]
fn a_downgrade_behind_a_waiting_writer_shares_the_write_node() {
    let p = path("downgrade-behind");
    let rw = RwLock::new(&client(), &p).unwrap();
    let w = rw.write().unwrap();
    // Another client's writer queues behind the write node.
    let queued = RwLock::new(&client(), &p).unwrap();
    let writer = std::thread::spawn(move || queued.write_timeout(WAIT).map(LockGuard::unlock));
    wait_until("the writer queued", WAIT, || {
        rw.queue().is_ok_and(|q| q.len() == 2)
    });
    let r = rw
        .read_timeout(WAIT)
        .expect("a write holder may read, a writer waiting or not");
    assert_eq!(r.node_path(), w.node_path());
    assert_eq!(r.fencing_token(), w.fencing_token());
    w.unlock().unwrap();
    let other = RwLock::new(&client(), &p).unwrap();
    assert!(other.try_read().unwrap().is_none());
    assert!(other.try_write().unwrap().is_none());
    r.unlock().unwrap();
    writer
        .join()
        .unwrap()
        .expect("the waiting writer gets in once both guards are gone")
        .unwrap();
}

/// This thread takes the write lock on the path named `name`, then the
/// read lock by `read`; two other clients see what that downgrade leaves.
fn downgrade(name: &str, read: impl FnOnce(&RwLock) -> LockGuard) {
    let p = path(name);
    let rw = RwLock::new(&client(), &p).unwrap();
    let w = rw.write().unwrap();
    let r = read(&rw);
    let reader = RwLock::new(&client(), &p).unwrap();
    let writer = RwLock::new(&client(), &p).unwrap();
    // While the write guard stands, its node below ours keeps everyone out.
    assert!(reader.try_read().unwrap().is_none());
    assert!(writer.try_write().unwrap().is_none());
    let write_node = w.node_path().to_owned();
    let write_token = w.fencing_token();
    w.unlock().unwrap();
    let shared = reader
        .read_timeout(WAIT)
        .expect("another reader shares with the downgraded read");
    shared.unlock().unwrap();
    assert!(
        writer.try_write().unwrap().is_none(),
        "a writer waits for the downgraded read"
    );
    // The read guard is its own node's, and so is its token.
    assert_ne!(r.node_path(), write_node);
    assert!(r.node_path().contains("-__READ__"), "{}", r.node_path());
    assert!(r.fencing_token() > write_token);
    r.unlock().unwrap();
    let w = writer
        .write_timeout(WAIT)
        .expect("the writer gets in once the read goes");
    drop(w);
}
