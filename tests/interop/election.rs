//! Election against Curator's LeaderLatch.

use super::*;

// ---------------------------------------------------------------- election

/// zklock `Election` <-> Curator `LeaderLatch`: first come leads, and
/// `Election::leader` names a Curator leader.
#[test]
fn election_with_curator_leader_latch() {
    let path = lock_path("election");
    let c = client();
    let mut cl = Peer::start(PeerKind::Curator, &connect(), &path, "leader", "curator-1");

    // Curator came first: it leads.
    let l1 = cl
        .try_acquire(10_000)
        .expect("Curator leads an empty election");
    let cur_node = acquired_node(&l1);
    assert!(cur_node.contains("-latch-"), "{l1}");
    let probe = Election::new(&c, &path, b"probe").unwrap();
    assert!(probe.try_campaign().unwrap().is_none(), "two leaders");
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, cur_node);
    assert_eq!(leader.id, b"curator-1");
    assert_ne!(leader.session, c.session_id());

    let e = Election::new(&c, &path, b"zklock-1").unwrap();
    let ze = Local::spawn("zklock candidate", move || e.campaign());
    ze.acquire();
    ze.still_waiting();
    wait_for_queue(&c, &path, 2);
    let q = queue(&c, &path);
    assert_entry(
        &q,
        0,
        Some(&cur_node),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"curator-1"),
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"zklock-1"),
    );
    assert_eq!(probe.leader().unwrap().expect("a leader").node, cur_node);

    // Curator steps down: we lead.
    let cl_rel = cl.release();
    let (our_node, our_acq) = ze.acquired();
    assert_order(("Curator stepped down", cl_rel), ("zklock leads", our_acq));
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, last_segment(&our_node));
    assert_eq!(leader.id, b"zklock-1");
    assert_eq!(leader.session, c.session_id());

    // Now Curator waits for us.
    cl.acquire();
    peer_still_waiting(&mut cl);
    let our_rel = ze.release();
    let l2 = peer_acquired(&mut cl);
    assert_order(
        ("zklock stepped down", our_rel),
        ("Curator leads", line_millis(&l2)),
    );
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, acquired_node(&l2));
    assert_eq!(leader.id, b"curator-1");
    cl.release();
    cl.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}
