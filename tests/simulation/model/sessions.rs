//! Sessions: ephemerals, expiry on tick boundaries, resuming on a new
//! connection, refused and unknown sessions, restarts.

use super::*;

#[test]
fn ephemerals_vanish_on_close() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let sid = w.session_id(a);
    let p = created_path(w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral))));
    assert_eq!(w.zk.exists(&p).unwrap().ephemeral_owner, sid);
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/e/child", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NoChildrenForEphemerals))
    );
    // b watches it; the close fires NodeDeleted at b.
    let (h, r) = w.call_w(b, Request::Exists(pw("/e", true)), true);
    r.unwrap();
    w.clients[a].s.close(w.now, 999);
    w.pump();
    assert_eq!(w.clients[a].s.state(), SessionState::Closed);
    assert!(w.clients[a]
        .replies
        .iter()
        .any(|(h, r)| *h == 999 && r.is_ok()));
    assert!(w.zk.exists("/e").is_none());
    assert!(!w.zk.session_alive(sid));
    assert!(w.zk.connection_of(sid).is_none());
    assert_eq!(
        w.fired(b),
        vec![(h, EventType::NodeDeleted, "/e".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn ephemerals_vanish_when_the_session_expires() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let sid = w.session_id(a);
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    assert_eq!(w.zk.session_timeout(sid), Some(TIMEOUT));
    w.clients[a].partitioned = true;
    let silent_since = w.now;
    // Still there just before T: only silence longer than T expires it.
    w.advance(TIMEOUT - Duration::from_millis(1));
    assert!(w.zk.session_alive(sid));
    assert!(w.zk.exists("/e").is_some());
    w.advance(TICK + Duration::from_millis(1));
    assert!(!w.zk.session_alive(sid));
    assert!(w.zk.exists("/e").is_none());
    assert!(w.now - silent_since <= TIMEOUT + TICK);
    // b keeps pinging, so it lives on.
    w.advance(TIMEOUT * 3);
    assert!(w.zk.session_alive(w.session_id(b)));
    // a comes back: the server says expired.
    w.clients[a].partitioned = false;
    w.advance(Duration::from_secs(2));
    assert_eq!(w.clients[a].s.state(), SessionState::Expired);
}

#[test]
fn expiry_happens_on_a_tick_boundary_between_t_and_t_plus_tick() {
    let now = Instant::now();
    let tick = Duration::from_millis(500);
    let mut zk = SimZooKeeper::new(now, tick);
    let conn = zk.connect(now);
    let t0 = now + Duration::from_millis(1234);
    let mut buf = BytesMut::new();
    encode_connect(
        &mut buf,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 100_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
        },
    );
    zk.receive(t0, conn, &buf);
    let (_, frame) = zk.poll_output().unwrap();
    let resp = ConnectResponse::decode_exact(&frame[4..]).unwrap();
    // Clamped to 20 ticks.
    assert_eq!(resp.timeout_ms, 10_000);
    assert_eq!(resp.session_id, SESSION_ID_BASE + 1);
    assert_eq!(resp.passwd, session_password(resp.session_id));
    // 1234 + 10000 = 11234 → next multiple of 500 above it: 11500.
    let deadline = now + Duration::from_millis(11_500);
    assert_eq!(zk.poll_timeout(), Some(deadline));
    zk.handle_timeout(deadline - Duration::from_millis(1));
    assert!(zk.session_alive(resp.session_id));
    zk.handle_timeout(deadline);
    assert!(!zk.session_alive(resp.session_id));
    assert_eq!(zk.poll_closed(), Some(conn));
    assert_eq!(zk.poll_timeout(), None);
}

/// A packet's touch on a follower reaches the leader with the follower's
/// answer to the leader's next ping (every half tick), and the deadline
/// counts from that ping; cut from the leader before the ping, the
/// follower never carries it, and the deadline stays the one already
/// carried. Creating the session touches it at the leader at once.
#[test]
fn a_touch_is_carried_at_the_leaders_next_ping_and_lost_to_a_cut_before_it() {
    for (cut_at, want) in [(None, 14_000), (Some(3_450), 11_500), (Some(3_500), 14_000)] {
        let now = Instant::now();
        let mut zk = SimZooKeeper::new(now, Duration::from_millis(500));
        let conn = zk.connect(now);
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: 100_000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
            },
        );
        zk.receive(now + Duration::from_millis(1_234), conn, &buf);
        let (_, frame) = zk.poll_output().unwrap();
        let sid = ConnectResponse::decode_exact(&frame[4..])
            .unwrap()
            .session_id;
        // At the leader, at once: 1234 + 10000 → the next tick, 11500.
        assert_eq!(
            zk.session_deadline(sid),
            Some(now + Duration::from_millis(11_500))
        );
        // A ping at 3400 on the follower, carried by the leader's ping at
        // 3500: 13500 → 14000 (at once it would have been 13500).
        buf.clear();
        encode_request(&mut buf, -2, &Request::Ping);
        zk.receive(now + Duration::from_millis(3_400), conn, &buf);
        if let Some(at) = cut_at {
            zk.cut_from_leader(now + Duration::from_millis(at), conn);
        }
        assert_eq!(
            zk.session_deadline(sid),
            Some(now + Duration::from_millis(want)),
            "cut at {cut_at:?}"
        );
    }
}

#[test]
fn a_session_resumes_on_a_new_connection_and_keeps_its_ephemerals() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    let old = w.clients[a].conn.unwrap();
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    w.cut(a);
    let new = w.clients[a].conn.unwrap();
    assert_ne!(old, new);
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    assert_eq!(w.zk.connection_of(sid), Some(new));
    assert_eq!(w.zk.exists("/e").unwrap().ephemeral_owner, sid);
    assert_eq!(w.zk.ephemerals_of(sid), vec!["/e".to_string()]);
    // A reconnect while the old connection is still open closes the old one.
    let mut raw = Raw::connect(&mut w.zk, w.now);
    let zxid = w.zk.last_zxid();
    let resp = raw.handshake(&mut w.zk, w.now, zxid, sid, session_password(sid));
    assert_eq!(resp.map(|r| r.session_id), Some(sid));
    let mut closed = Vec::new();
    while let Some(c) = w.zk.poll_closed() {
        closed.push(c);
    }
    assert_eq!(closed, vec![new]);
    assert_eq!(w.zk.connection_of(sid), Some(raw.conn));
    assert!(w.zk.exists("/e").is_some());
}

#[test]
fn a_client_ahead_of_the_server_is_refused_without_an_answer() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
    let ahead = zk.last_zxid() + 5;
    assert!(raw.handshake(&mut zk, now, ahead, 0, vec![0; 16]).is_none());
    assert_eq!(zk.poll_output(), None);
    assert_eq!(zk.poll_closed(), Some(raw.conn));
    assert!(zk.sessions().is_empty());
    // Same through the session core: a server restored from an older
    // snapshot (a fresh one here) refuses a client that saw more.
    let mut w = World::new();
    let a = w.client();
    for i in 0..3 {
        w.call(
            a,
            Request::Create(create(&format!("/n{i}"), b"", CreateMode::Persistent)),
        )
        .unwrap();
    }
    assert!(w.clients[a].s.last_zxid() >= 4);
    w.zk = SimZooKeeper::new(w.now, TICK);
    w.clients[a].conn = None;
    w.clients[a].s.handle_disconnected(w.now);
    w.pump();
    assert_ne!(w.clients[a].s.state(), SessionState::Connected);
    assert!(w.zk.sessions().is_empty());
}

#[test]
fn unknown_session_or_wrong_password_reads_as_expired() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
    let resp = raw.handshake(&mut zk, now, 0, SESSION_ID_BASE + 77, vec![0; 16]);
    let resp = resp.unwrap();
    assert!(resp.is_expired());
    assert_eq!((resp.session_id, resp.passwd), (0, vec![0; 16]));
    assert_eq!(zk.poll_closed(), Some(raw.conn));

    let mut good = Raw::connect(&mut zk, now);
    let sid = good
        .handshake(&mut zk, now, 0, 0, vec![0; 16])
        .unwrap()
        .session_id;
    let mut bad = Raw::connect(&mut zk, now);
    let resp = bad.handshake(&mut zk, now, 0, sid, vec![1; 16]).unwrap();
    assert!(resp.is_expired());
    // The wrong password still closed the session's old connection (as
    // ZooKeeper does), but the session itself lives.
    let mut closed = Vec::new();
    while let Some(c) = zk.poll_closed() {
        closed.push(c);
    }
    assert_eq!(closed, vec![good.conn, bad.conn]);
    assert!(zk.session_alive(sid));
}

#[test]
fn restart_keeps_tree_and_sessions() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    let (h, _) = w.call_w(a, Request::GetData(pw("/e", true)), true);
    let zxid = w.zk.last_zxid();
    w.zk.stop(w.now);
    w.pump();
    assert!(w.zk.connections().is_empty());
    assert_eq!(w.zk.watch_count(), 0);
    // Down for longer than the session timeout: nothing expires meanwhile.
    w.advance(TIMEOUT * 2);
    assert!(w.zk.session_alive(sid));
    w.zk.start(w.now);
    w.advance(Duration::from_secs(2));
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    assert!(w.zk.exists("/e").is_some());
    assert_eq!(w.zk.last_zxid(), zxid);
    // The watch was re-armed by setWatches.
    w.zk.set_data_as_admin(w.now, "/e", b"v").unwrap();
    w.pump();
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeDataChanged, "/e".to_string())]
    );
}
