//! Cut and blackholed connections: requests in flight fail, watches fire
//! for changes made while away, an expired session is never replaced.

use super::*;

/// Length on the wire (frame header included) of one request.
fn frame_len(req: &jute::Request) -> u64 {
    let mut buf = BytesMut::new();
    jute::encode_request(&mut buf, 1, req);
    buf.len() as u64
}

// ---------------------------------------------------------------------------
// 2. Connection cut with requests and watches outstanding
// ---------------------------------------------------------------------------

#[test]
fn cut_fails_in_flight_requests_and_watches_fire_for_changes_made_while_away() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(6);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let r = root(&other, "cut");
    let (a, b, kids, d, e) = (
        format!("{r}/a"),
        format!("{r}/b"),
        format!("{r}/kids"),
        format!("{r}/d"),
        format!("{r}/e"),
    );
    for p in [&a, &kids, &d, &e] {
        other.create(p, b"0", CreateMode::Persistent).unwrap();
    }
    let (_, _, wa) = c.get_data_and_watch(&a).unwrap();
    let (none, wb) = c.exists_and_watch(&b).unwrap();
    assert!(none.is_none());
    let (_, _, wc) = c.get_children_and_watch(&kids).unwrap();
    let (_, _, wd) = c.get_data_and_watch(&d).unwrap();
    let (_, _, we) = c.get_data_and_watch(&e).unwrap();
    let id = c.session_id();
    let mut states = States::of(&c);
    assert_eq!(states.current(), SessionState::Connected);

    // Hold the server's replies; let requests through so they are surely in flight.
    proxy.stall_direction(Direction::ServerToClient);
    let big = vec![7u8; 2000];
    let in_flight = [
        jute::Request::SetData(jute::SetDataRequest {
            path: e.clone(),
            data: big.clone(),
            version: -1,
        }),
        jute::Request::GetData(jute::PathWatch {
            path: a.clone(),
            watch: true,
        }),
        jute::Request::Exists(jute::PathWatch {
            path: r.clone(),
            watch: false,
        }),
    ];
    let expected_bytes: u64 = in_flight.iter().map(frame_len).sum();
    let sent_before = proxy.bytes_forwarded(Direction::ClientToServer);
    let set = {
        let (c, e, big) = (c.clone(), e.clone(), big.clone());
        thread::spawn(move || c.set_data(&e, &big, None))
    };
    let get_w = {
        let (c, a) = (c.clone(), a.clone());
        thread::spawn(move || c.get_data_and_watch(&a).map(|_| ()))
    };
    let ex = {
        let (c, r) = (c.clone(), r.clone());
        thread::spawn(move || c.exists(&r))
    };
    wait_until(
        "the three requests to reach the server",
        Duration::from_secs(3),
        || proxy.bytes_forwarded(Direction::ClientToServer) >= sent_before + expected_bytes,
    );
    // Keep the client away while another client changes things, then cut.
    proxy.refuse(true);
    proxy.cut_all();
    assert_eq!(
        join(set).unwrap_err(),
        Error::ConnectionLoss,
        "setData in flight"
    );
    assert_eq!(
        join(get_w).unwrap_err(),
        Error::ConnectionLoss,
        "getData+watch in flight"
    );
    assert_eq!(
        join(ex).unwrap_err(),
        Error::ConnectionLoss,
        "exists in flight"
    );
    states.wait_for(SessionState::Suspended, t);

    // A request made while disconnected waits and is sent after the reconnect.
    let queued = {
        let (c, p) = (c.clone(), format!("{r}/queued"));
        thread::spawn(move || c.create(&p, b"q", CreateMode::Persistent))
    };
    other.set_data(&a, b"1", None).unwrap();
    other.create(&b, b"", CreateMode::Persistent).unwrap();
    other
        .create(&format!("{kids}/k"), b"", CreateMode::Persistent)
        .unwrap();
    other.delete(&d, None).unwrap();
    // The in-flight setData was applied although its caller saw ConnectionLoss.
    assert_eq!(other.get_data(&e).unwrap().0, big);
    for w in [&wa, &wb, &wc, &wd, &we] {
        assert_eq!(w.try_recv(), Ok(None), "a watch fired while disconnected");
    }

    proxy.clear();
    states.wait_for(SessionState::Connected, t);
    assert_eq!(c.session_id(), id, "the session changed");
    expect_event(&wa, EventType::NodeDataChanged, &a, t);
    expect_event(&wb, EventType::NodeCreated, &b, t);
    expect_event(&wc, EventType::NodeChildrenChanged, &kids, t);
    expect_event(&wd, EventType::NodeDeleted, &d, t);
    // Its event was sent on the stalled connection and lost; SetWatches re-fires it.
    expect_event(&we, EventType::NodeDataChanged, &e, t);
    assert_eq!(join(queued).unwrap(), format!("{r}/queued"));

    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (w, p) in [(&wa, &a), (&wb, &b), (&wc, &kids), (&wd, &d), (&we, &e)] {
        expect_spent(w, p);
    }
    assert_eq!(
        states.drain(),
        &[
            SessionState::Connected,
            SessionState::Suspended,
            SessionState::Connected
        ]
    );
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 3. Expiry
// ---------------------------------------------------------------------------

/// The one-session client (`new_session_after_expiry(false)`).
#[test]
fn session_expired_while_blackholed_is_reported_and_never_replaced() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(60))
        .new_session_after_expiry(false)
        .connect()
        .unwrap();
    let t = c.negotiated_timeout().expect("negotiated");
    assert_eq!(t, Duration::from_secs(3));
    let other = Client::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    let r = root(&other, "expiry");
    let eph = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, gone) = other.exists_and_watch(&eph).unwrap();
    let never = format!("{r}/never");
    let (_, pending_watch) = c.exists_and_watch(&never).unwrap();
    let (_, _, pending_data_watch) = c.get_data_and_watch(&r).unwrap();
    let id = c.session_id();
    let mut states = States::of(&c);

    proxy.blackhole(Direction::Both);
    let cut_at = Instant::now();
    states.wait_for(SessionState::Suspended, t * 2);
    states.wait_for(SessionState::Lost, t * 2);
    let lost_after = cut_at.elapsed();
    assert!(
        lost_after >= t - Duration::from_millis(t.as_millis() as u64 / 3 + 50),
        "Lost reported after {lost_after:?}, before a whole session timeout {t:?}"
    );
    // The server expires the session: its ephemeral goes.
    expect_event(&gone, EventType::NodeDeleted, &eph, t * 3);

    // Calls made while away stay pending (request timeout 60 s) until the
    // client learns the session's fate.
    let pending_calls: Vec<_> = (0..3)
        .map(|i| {
            let c = c.clone();
            let p = format!("{r}/late{i}");
            thread::spawn(move || c.create(&p, b"", CreateMode::Persistent))
        })
        .collect();
    for h in &pending_calls {
        assert!(
            !h.is_finished(),
            "a call ended while the server was unreachable"
        );
    }

    // Contact returns. The client may be in a handshake whose bytes the
    // blackhole ate: it began 2T/3 after the last contact and is given at
    // most T, so it ends within 2T/3 of now (we are past Lost, T after the
    // last contact); the next attempt learns of the expiry.
    proxy.clear();
    let cleared = Instant::now();
    states.wait_for(SessionState::Expired, t * 3);
    let expired_after = cleared.elapsed();
    eprintln!(
        "expiry: Lost after {lost_after:?}, Expired {expired_after:?} after contact returned; \
         states {:?}",
        states.seen
    );
    let seen = states.drain().to_vec();
    let lost = seen.iter().position(|s| *s == SessionState::Lost);
    let expired = seen.iter().position(|s| *s == SessionState::Expired);
    assert!(
        matches!((lost, expired), (Some(l), Some(x)) if l < x),
        "Lost must come before Expired: {seen:?}"
    );
    assert!(
        !seen[lost.unwrap()..].contains(&SessionState::Connected),
        "reconnected between Lost and Expired: {seen:?}"
    );
    assert!(
        expired_after <= t,
        "Expired reported {expired_after:?} after contact returned; session timeout is {t:?}"
    );

    for h in pending_calls {
        assert_eq!(
            h.join().unwrap().unwrap_err(),
            Error::SessionExpired,
            "pending call"
        );
    }
    assert_eq!(
        pending_watch.recv_timeout(t).unwrap_err(),
        Error::SessionExpired
    );
    assert_eq!(
        pending_data_watch.recv_timeout(t).unwrap_err(),
        Error::SessionExpired
    );
    // Calls after the expiry (checked at the end, after the other invariants).
    let after_calls = [
        ("exists", c.exists(&r).map(drop)),
        (
            "create",
            c.create(&format!("{r}/after"), b"", CreateMode::Persistent)
                .map(drop),
        ),
        ("exists_and_watch", c.exists_and_watch(&r).map(drop)),
        ("get_data", c.get_data(&r).map(drop)),
    ];
    let first_state_of_new_subscription = c.subscribe().recv_timeout(Duration::from_secs(5));

    // No new session: no connection is attempted any more, nothing changes.
    let accepted = proxy.connections_accepted();
    states.assert_quiet(Duration::from_millis(1500));
    assert_eq!(
        proxy.connections_accepted(),
        accepted,
        "the client reconnected after Expired"
    );
    assert_eq!(c.state(), SessionState::Expired);
    assert_eq!(c.session_id(), id, "the session id changed");
    assert_eq!(
        other.exists(&eph).unwrap(),
        None,
        "the ephemeral is still there"
    );
    assert!(other.exists(&format!("{r}/late0")).unwrap().is_none());
    assert_no_io_panic();
    for (what, result) in after_calls {
        assert_eq!(
            result,
            Err(Error::SessionExpired),
            "{what} on an expired client (state() says {:?})",
            c.state()
        );
    }
    assert_eq!(
        first_state_of_new_subscription,
        Ok(SessionState::Expired),
        "subscribe() on an expired client must start with the current state"
    );
}
