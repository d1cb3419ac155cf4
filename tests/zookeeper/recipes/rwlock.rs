//! The read/write lock: sharing, exclusion, downgrade, and its queue as
//! inspected.

use super::*;

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
