//! The mutex against Curator and kazoo, both ways, and one FIFO queue across
//! all three implementations.

use super::*;

// ------------------------------------------------------------------ mutex

/// Both directions between a zklock `Mutex` and one peer's exclusive lock.
/// The peer's node must show up in `inspect` as `origin` with the peer id
/// as data, and zklock must count it as a contender.
fn mutex_both_ways(name: &str, kind: PeerKind, peer_kind: &str, marker: &str, origin: NodeOrigin) {
    let path = lock_path(name);
    let c = client();
    let mut peer = Peer::start(kind, &connect(), &path, peer_kind, "peer-1");

    // zklock holds -> the peer waits.
    let m = Mutex::new(&c, &path).unwrap();
    let ours = m.lock().unwrap();
    let our_acq = now_millis();
    let ours_token = ours.fencing_token();
    assert_eq!(
        peer.try_acquire(300),
        None,
        "{kind} acquired while zklock held"
    );
    peer.acquire();
    peer_still_waiting(&mut peer);
    wait_for_queue(&c, &path, 2);
    let q = queue(&c, &path);
    assert_eq!(q.len(), 2, "{}", describe(&q));
    let our_name = last_segment(ours.node_path()).to_string();
    assert_entry(
        &q,
        0,
        Some(&our_name),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(&q, 1, None, NodeKind::Exclusive, origin, Some(b"peer-1"));
    assert!(q[1].name.contains(marker), "{}", describe(&q));
    assert_eq!(m.queue().unwrap(), q, "Mutex::queue and inspect disagree");
    assert!(q[0].czxid < q[1].czxid);

    let our_rel = now_millis();
    ours.unlock().unwrap();
    let p1 = peer_acquired(&mut peer);
    assert_eq!(acquired_node(&p1), q[1].name, "{p1}");
    assert_order(("zklock acquired", our_acq), ("zklock released", our_rel));
    assert_order(
        ("zklock released", our_rel),
        (&format!("{kind} acquired"), line_millis(&p1)),
    );

    // The peer holds -> zklock can't get in, and its failed tries leave nothing behind.
    assert!(
        m.try_lock().unwrap().is_none(),
        "zklock try_lock got the lock while {kind} held it: {}",
        describe(&queue(&c, &path))
    );
    match m.lock_timeout(Duration::from_millis(500)) {
        Err(LockError::Timeout) => {}
        Ok(g) => panic!(
            "zklock lock_timeout got {} while {kind} held the lock",
            g.node_path()
        ),
        Err(e) => panic!("lock_timeout: {e:?}"),
    }
    assert_eq!(
        children(&c, &path),
        vec![q[1].name.clone()],
        "failed tries left nodes"
    );

    // A blocking lock waits for the peer's release.
    let m2 = Mutex::new(&c, &path).unwrap();
    let local = Local::spawn("zklock mutex", move || m2.lock());
    local.acquire();
    local.still_waiting();
    wait_for_queue(&c, &path, 2);
    let p_rel = peer.release();
    let (node, l_acq) = local.acquired();
    assert_order(
        (&format!("{kind} acquired"), line_millis(&p1)),
        (&format!("{kind} released"), p_rel),
    );
    assert_order(
        (&format!("{kind} released"), p_rel),
        ("zklock acquired", l_acq),
    );
    assert_eq!(children(&c, &path), vec![last_segment(&node).to_string()]);
    assert!(
        local.token() > q[1].czxid && q[1].czxid > ours_token,
        "fencing tokens not increasing across holders: {ours_token}, {}, {}",
        q[1].czxid,
        local.token()
    );

    // ... and the peer waits again for us.
    peer.acquire();
    peer_still_waiting(&mut peer);
    let l_rel = local.release();
    let p2 = peer_acquired(&mut peer);
    assert_order(
        ("zklock released", l_rel),
        (&format!("{kind} acquired"), line_millis(&p2)),
    );
    peer.release();
    peer.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

/// zklock `Mutex` <-> Curator `InterProcessMutex`, both directions.
#[test]
fn mutex_with_curator() {
    mutex_both_ways(
        "curator-mutex",
        PeerKind::Curator,
        "mutex",
        "-lock-",
        NodeOrigin::Protected,
    );
}

/// zklock `Mutex` <-> kazoo `Lock` with kazoo's own `<uuid>__lock__<seq>`
/// names (kazoo sees our `-lock-` nodes through its extra pattern; we must
/// count its `__lock__` nodes).
#[test]
fn mutex_with_kazoo_native_names() {
    mutex_both_ways(
        "kazoo-mutex",
        PeerKind::Kazoo,
        "mutex",
        "__lock__",
        NodeOrigin::Kazoo,
    );
}

/// One queue, four contenders of three implementations: they get the lock
/// in arrival order, one at a time.
#[test]
fn fifo_across_implementations() {
    let path = lock_path("fifo");
    let c = client();
    let mut cur = Peer::start(PeerKind::Curator, &connect(), &path, "mutex", "cur");
    let mut kaz = Peer::start(PeerKind::Kazoo, &connect(), &path, "mutex-curator", "kaz");

    let a = Mutex::new(&c, &path).unwrap();
    let a_guard = a.lock().unwrap();
    let a_acq = now_millis();
    wait_for_queue(&c, &path, 1);

    cur.acquire();
    wait_for_queue(&c, &path, 2);
    kaz.acquire();
    wait_for_queue(&c, &path, 3);
    let c_b = client();
    let b = Mutex::new(&c_b, &path).unwrap();
    let local_b = Local::spawn("zklock B", move || b.lock());
    local_b.acquire();
    wait_for_queue(&c, &path, 4);

    peer_still_waiting(&mut cur);
    peer_still_waiting(&mut kaz);
    local_b.still_waiting();

    let q = queue(&c, &path);
    assert_eq!(q.len(), 4, "{}", describe(&q));
    let a_name = last_segment(a_guard.node_path()).to_string();
    assert_entry(
        &q,
        0,
        Some(&a_name),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"cur"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Other,
        Some(b"kaz"),
    );
    assert!(
        q[2].name.contains("-lock-") && !q[2].name.starts_with("_c_"),
        "{}",
        describe(&q)
    );
    assert_entry(
        &q,
        3,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_eq!(q[3].owner_session, c_b.session_id(), "{}", describe(&q));

    // Release A; every holder releases as soon as it has the lock.
    let a_rel = now_millis();
    a_guard.unlock().unwrap();
    let c_line = peer_acquired(&mut cur);
    let c_rel = cur.release();
    let k_line = peer_acquired(&mut kaz);
    let k_rel = kaz.release();
    let (b_node, b_acq) = local_b.acquired();
    let b_rel = local_b.release();

    assert_eq!(acquired_node(&c_line), q[1].name);
    assert_eq!(acquired_node(&k_line), q[2].name);
    assert_eq!(last_segment(&b_node), q[3].name);
    let chain = [
        ("A acquired", a_acq),
        ("A released", a_rel),
        ("Curator acquired", line_millis(&c_line)),
        ("Curator released", c_rel),
        ("kazoo acquired", line_millis(&k_line)),
        ("kazoo released", k_rel),
        ("B acquired", b_acq),
        ("B released", b_rel),
    ];
    eprintln!("fifo: {chain:?}");
    for pair in chain.windows(2) {
        assert_order(pair[0], pair[1]);
    }
    cur.quit();
    kaz.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}
