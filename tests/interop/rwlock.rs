//! The read/write lock against Curator, and kazoo's nodes respected.

use super::*;

// -------------------------------------------------------- read/write lock

/// zklock `RwLock` <-> Curator `InterProcessReadWriteLock` on one path.
#[test]
fn read_write_lock_with_curator() {
    let path = lock_path("rw");
    let c = client();
    let mut cr = Peer::start(PeerKind::Curator, &connect(), &path, "read", "cr");
    let mut cw = Peer::start(PeerKind::Curator, &connect(), &path, "write", "cw");
    let rw_r = RwLock::new(&c, &path).unwrap();
    let zr = Local::spawn("zklock reader", move || rw_r.read());
    let rw_w = RwLock::new(&c, &path).unwrap();
    let zw = Local::spawn("zklock writer", move || rw_w.write());
    let probe = RwLock::new(&c, &path).unwrap();

    // Our reader and Curator's reader share.
    zr.acquire();
    let (zr_node, zr_acq) = zr.acquired();
    cr.acquire();
    let cr1 = peer_acquired(&mut cr);
    assert!(acquired_node(&cr1).contains("__READ__"), "{cr1}");

    // Curator's writer waits for both readers.
    cw.acquire();
    peer_still_waiting(&mut cw);
    wait_for_queue(&c, &path, 3);
    let q = queue(&c, &path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&zr_node)),
        NodeKind::Read,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&cr1)),
        NodeKind::Read,
        NodeOrigin::Protected,
        Some(b"cr"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Write,
        NodeOrigin::Protected,
        Some(b"cw"),
    );
    // A reader arriving now queues behind the waiting writer, even though
    // only readers hold: no writer starvation, across implementations.
    let rw_late = RwLock::new(&c, &path).unwrap();
    let late = Local::spawn("late zklock reader", move || rw_late.read());
    late.acquire();
    wait_for_queue(&c, &path, 4);
    late.still_waiting();
    let zr_rel = zr.release();
    peer_still_waiting(&mut cw);
    let cr_rel = cr.release();
    let cw1 = peer_acquired(&mut cw);
    assert_eq!(acquired_node(&cw1), q[2].name);
    assert_order(
        ("zklock reader acquired", zr_acq),
        ("Curator reader acquired", line_millis(&cr1)),
    );
    assert_order(
        ("Curator reader acquired", line_millis(&cr1)),
        ("zklock reader released", zr_rel),
    );
    assert_order(
        ("zklock reader released", zr_rel),
        ("Curator writer acquired", line_millis(&cw1)),
    );
    assert_order(
        ("Curator reader released", cr_rel),
        ("Curator writer acquired", line_millis(&cw1)),
    );

    // Our reader waits for Curator's writer; our try_read and try_write fail.
    assert!(
        probe.try_read().unwrap().is_none(),
        "read while Curator writes"
    );
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while Curator writes"
    );
    zr.acquire();
    zr.still_waiting();
    let cw_rel = cw.release();
    let (_, zr_acq2) = zr.acquired();
    let (_, late_acq) = late.acquired();
    assert_order(
        ("Curator writer released", cw_rel),
        ("zklock reader acquired", zr_acq2),
    );
    assert_order(
        ("Curator writer released", cw_rel),
        ("late zklock reader acquired", late_acq),
    );
    zr.release();
    late.release();

    // Our writer waits for Curator's reader.
    cr.acquire();
    let cr2 = peer_acquired(&mut cr);
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while Curator reads"
    );
    zw.acquire();
    zw.still_waiting();
    let cr_rel2 = cr.release();
    let (zw_node, zw_acq) = zw.acquired();
    assert!(zw_node.contains("__WRIT__"), "{zw_node}");
    assert_order(
        ("Curator reader acquired", line_millis(&cr2)),
        ("Curator reader released", cr_rel2),
    );
    assert_order(
        ("Curator reader released", cr_rel2),
        ("zklock writer acquired", zw_acq),
    );

    // Curator's reader (and writer) wait for our writer.
    cr.acquire();
    peer_still_waiting(&mut cr);
    assert_eq!(
        cw.try_acquire(300),
        None,
        "Curator writer got in while zklock wrote"
    );
    let q = queue(&c, &path);
    assert_eq!(q.len(), 2, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&zw_node)),
        NodeKind::Write,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Read,
        NodeOrigin::Protected,
        Some(b"cr"),
    );
    let zw_rel = zw.release();
    let cr3 = peer_acquired(&mut cr);
    assert_order(
        ("zklock writer released", zw_rel),
        ("Curator reader acquired", line_millis(&cr3)),
    );
    cr.release();

    cr.quit();
    cw.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

/// zklock `RwLock` respects kazoo's native `ReadLock`/`WriteLock` nodes
/// (`__rlock__`/`__lock__`). One way only: kazoo's read/write recipes know
/// nothing of Curator-style `__READ__`/`__WRIT__` nodes, so kazoo is never
/// asked to wait for us here.
#[test]
fn read_write_lock_respects_kazoo_nodes() {
    let path = lock_path("kazoo-rw");
    let c = client();
    let mut kr = Peer::start(PeerKind::Kazoo, &connect(), &path, "read", "kr");
    let mut kw = Peer::start(PeerKind::Kazoo, &connect(), &path, "write", "kw");
    let rw_r = RwLock::new(&c, &path).unwrap();
    let zr = Local::spawn("zklock reader", move || rw_r.read());
    let rw_w = RwLock::new(&c, &path).unwrap();
    let zw = Local::spawn("zklock writer", move || rw_w.write());
    let probe = RwLock::new(&c, &path).unwrap();

    // kazoo writes: we neither read nor write.
    let kw1 = kw.try_acquire(10_000).expect("kazoo writer on a free lock");
    assert!(acquired_node(&kw1).contains("__lock__"), "{kw1}");
    assert!(
        probe.try_read().unwrap().is_none(),
        "read while kazoo writes"
    );
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while kazoo writes"
    );
    let q = queue(&c, &path);
    assert_eq!(q.len(), 1, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(&acquired_node(&kw1)),
        NodeKind::Exclusive,
        NodeOrigin::Kazoo,
        Some(b"kw"),
    );
    zr.acquire();
    zr.still_waiting();
    let kw_rel = kw.release();
    let (_, zr_acq) = zr.acquired();
    assert_order(
        ("kazoo writer released", kw_rel),
        ("zklock reader acquired", zr_acq),
    );

    // kazoo reads alongside our reader; our writer waits for both.
    let kr1 = kr
        .try_acquire(10_000)
        .expect("kazoo reader shares with ours");
    assert!(acquired_node(&kr1).contains("__rlock__"), "{kr1}");
    zw.acquire();
    zw.still_waiting();
    let q = queue(&c, &path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(&q, 0, None, NodeKind::Read, NodeOrigin::Protected, None);
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&kr1)),
        NodeKind::Read,
        NodeOrigin::Kazoo,
        Some(b"kr"),
    );
    assert_entry(&q, 2, None, NodeKind::Write, NodeOrigin::Protected, None);
    let zr_rel = zr.release();
    zw.still_waiting();
    let kr_rel = kr.release();
    let (_, zw_acq) = zw.acquired();
    assert_order(
        ("zklock reader released", zr_rel),
        ("zklock writer acquired", zw_acq),
    );
    assert_order(
        ("kazoo reader released", kr_rel),
        ("zklock writer acquired", zw_acq),
    );
    assert_order(
        ("zklock reader acquired", zr_acq),
        ("kazoo reader acquired", line_millis(&kr1)),
    );
    zw.release();

    kr.quit();
    kw.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}
