//! The semaphore against Curator.

use super::*;

/// The most `[acquired, released]` intervals that hold at one instant. A
/// release and an acquire stamped in the same millisecond do not overlap:
/// the release stamp is taken before releasing, the acquire stamp after
/// acquiring.
fn max_overlap(intervals: &[(&str, u64, u64)]) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for &(_, acquired, released) in intervals {
        assert!(acquired <= released, "interval {intervals:?}");
        events.push((acquired, 1));
        events.push((released, -1));
    }
    // At equal times, releases (-1) first.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        most = most.max(now);
    }
    most as usize
}

// --------------------------------------------------------------- semaphore

/// zklock `Semaphore` <-> Curator `InterProcessSemaphoreV2`, 2 leases.
#[test]
fn semaphore_with_curator() {
    let path = lock_path("sem");
    let leases_path = format!("{path}/leases");
    let c = client();
    let mut s1 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s1");
    let mut s2 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s2");
    let sem1 = Semaphore::new(&c, &path, 2).unwrap();
    let z1 = Local::spawn("zklock lease 1", move || sem1.acquire());
    let c2 = client();
    let sem2 = Semaphore::new(&c2, &path, 2).unwrap();
    let z2 = Local::spawn("zklock lease 2", move || sem2.acquire());
    let probe = Semaphore::new(&c, &path, 2).unwrap();

    z1.acquire();
    let (z1_node, z1_acq) = z1.acquired();
    assert!(z1_node.contains("-lease-"), "{z1_node}");
    s1.acquire();
    let s1_line = peer_acquired(&mut s1);
    assert!(acquired_node(&s1_line).contains("-lease-"), "{s1_line}");

    // Both leases are taken: Curator's third contender waits ...
    s2.acquire();
    peer_still_waiting(&mut s2);
    wait_for_queue(&c, &leases_path, 3);
    let q = queue(&c, &leases_path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&z1_node)),
        NodeKind::Lease,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&s1_line)),
        NodeKind::Lease,
        NodeOrigin::Protected,
        Some(b"s1"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Lease,
        NodeOrigin::Protected,
        Some(b"s2"),
    );
    // ... holding the gate, which is a Curator mutex under `<path>/locks`.
    let gate = queue(&c, &format!("{path}/locks"));
    assert_eq!(gate.len(), 1, "{}", describe(&gate));
    assert_entry(
        &gate,
        0,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"s2"),
    );
    // ... and so does zklock.
    assert!(probe.try_acquire().unwrap().is_none(), "a third lease");
    assert_eq!(
        probe.lease_count().unwrap(),
        3,
        "{}",
        describe(&queue(&c, &leases_path))
    );

    let z1_rel = z1.release();
    let s2_line = peer_acquired(&mut s2);
    assert_eq!(acquired_node(&s2_line), q[2].name);
    assert_order(
        ("zklock lease 1 released", z1_rel),
        ("Curator s2 acquired", line_millis(&s2_line)),
    );

    // Curator holds both leases now: our second lease waits for one of them.
    z2.acquire();
    z2.still_waiting();
    let s1_rel = s1.release();
    let (_, z2_acq) = z2.acquired();
    assert_order(
        ("Curator s1 released", s1_rel),
        ("zklock lease 2 acquired", z2_acq),
    );
    let s2_rel = s2.release();
    let z2_rel = z2.release();

    let intervals = [
        ("zklock 1", z1_acq, z1_rel),
        ("curator s1", line_millis(&s1_line), s1_rel),
        ("curator s2", line_millis(&s2_line), s2_rel),
        ("zklock 2", z2_acq, z2_rel),
    ];
    eprintln!("semaphore leases: {intervals:?}");
    assert_eq!(max_overlap(&intervals), 2, "{intervals:?}");

    s1.quit();
    s2.quit();
    assert_eq!(
        children(&c, &leases_path),
        Vec::<String>::new(),
        "leases left"
    );
    assert_eq!(
        children(&c, &format!("{path}/locks")),
        Vec::<String>::new(),
        "gate nodes left"
    );
}
