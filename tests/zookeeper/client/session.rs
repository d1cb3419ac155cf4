//! The session: many requests from many threads, the negotiated timeout,
//! pings, chroot, close, sharing one session, and TCP keepalive.

use super::*;

#[test]
fn ten_thousand_requests_from_sixteen_threads() {
    let c = client();
    let r = root(&c, "load");
    for t in 0..16 {
        c.create(
            &format!("{r}/t{t}"),
            format!("{t}").as_bytes(),
            CreateMode::Persistent,
        )
        .unwrap();
    }
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let c = c.clone();
            let r = r.clone();
            std::thread::spawn(move || {
                let path = format!("{r}/t{t}");
                let (mut writes, mut last_version) = (0, 0);
                for i in 0..625 {
                    if i % 5 == 0 {
                        let stat = c.set_data(&path, format!("{t}").as_bytes(), None).unwrap();
                        writes += 1;
                        last_version = stat.version;
                    } else {
                        // Each thread reads its own node: a reply sent to the
                        // wrong caller would show another thread's number.
                        let (data, _) = c.get_data(&path).unwrap();
                        assert_eq!(data, format!("{t}").as_bytes());
                    }
                }
                (writes, last_version)
            })
        })
        .collect();
    for t in threads {
        // Every write was answered to its own caller, in order.
        let (writes, last_version) = t.join().unwrap();
        assert_eq!(last_version, writes);
    }
}

#[test]
fn negotiated_timeout_is_clamped_by_the_server() {
    // The test server's tickTime is 2 s: sessions are clamped to [4 s, 40 s].
    let short =
        Client::connect(&zk::shared().connect_string(), Duration::from_millis(500)).unwrap();
    assert_eq!(short.negotiated_timeout(), Some(Duration::from_secs(4)));
    let long = Client::connect(&zk::shared().connect_string(), Duration::from_secs(600)).unwrap();
    assert_eq!(long.negotiated_timeout(), Some(Duration::from_secs(40)));
}

#[test]
fn idle_session_is_kept_alive_by_pings() {
    let c = Client::connect(&zk::shared().connect_string(), Duration::from_secs(4)).unwrap();
    let states = c.subscribe();
    assert_eq!(states.recv().unwrap(), SessionState::Connected);
    let r = root(&c, "idle");
    let e = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let id = c.session_id();
    // Idle for three session timeouts: any state change would be a failure.
    let negotiated = c.negotiated_timeout().unwrap();
    assert_eq!(
        states.recv_timeout(negotiated * 3),
        Err(crossbeam_channel::RecvTimeoutError::Timeout)
    );
    assert_eq!(c.state(), SessionState::Connected);
    assert_eq!(c.session_id(), id);
    let other = client();
    let stat = other.exists(&e).unwrap().expect("ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
}

#[test]
fn chroot_is_applied_and_stripped() {
    let c = client();
    let r = root(&c, "chroot");
    let rooted = Client::connect(&format!("{}{r}", zk::shared().connect_string()), T).unwrap();
    let p = rooted.create("/x", b"in", CreateMode::Persistent).unwrap();
    assert_eq!(p, "/x");
    assert_eq!(c.get_data(&format!("{r}/x")).unwrap().0, b"in");
    let s = rooted
        .create("/seq-", b"", CreateMode::PersistentSequential)
        .unwrap();
    assert!(s.starts_with("/seq-"), "{s}");
    let mut kids = rooted.get_children("/").unwrap();
    kids.sort();
    assert_eq!(kids[1], "x");
    let (_, w) = rooted.exists_and_watch("/x").unwrap();
    c.delete(&format!("{r}/x"), None).unwrap();
    assert_eq!(w.recv_timeout(T).unwrap().path, "/x");
    let results = rooted
        .multi(&[Op::create("/m", b"", CreateMode::Persistent)])
        .unwrap();
    assert!(matches!(&results[0], OpResult::Create { path, .. } if path == "/m"));
}

#[test]
fn close_removes_ephemerals_and_ends_the_session() {
    let c = client();
    let watcher = client();
    let r = root(&c, "close");
    let e = c
        .create(&format!("{r}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, w) = watcher.exists_and_watch(&e).unwrap();
    let (_, _, pending) = c.get_data_and_watch(&r).unwrap();
    c.close().unwrap();
    assert_eq!(c.state(), SessionState::Closed);
    assert_eq!(w.recv_timeout(T).unwrap().kind, EventType::NodeDeleted);
    assert_eq!(pending.recv_timeout(T).unwrap_err(), Error::Closed);
    assert_eq!(c.exists(&r).unwrap_err(), Error::Closed);
}

#[test]
fn clients_are_send_sync_and_share_one_session() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
    let c = Arc::new(client());
    let c2 = (*c).clone();
    assert_eq!(c.session_id(), c2.session_id());
}

#[test]
fn connections_use_tcp_keepalive() {
    let server = zk::ZkServer::start();
    let c = Client::connect(&server.connect_string(), Duration::from_secs(30)).unwrap();
    c.exists("/").unwrap();
    // /proc/net/tcp: the client side of the connection (remote port = the
    // server's) carries timer 02, the keepalive timer, once idle.
    let port = format!(":{:04X}", server.addr().port());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let timers: Vec<String> = table
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2)?.ends_with(&port) && f.get(3)? == &"01")
                    .then(|| f.get(5).map(|t| t[..2].to_string()))?
            })
            .collect();
        assert_eq!(timers.len(), 1, "expected our one connection: {timers:?}");
        if timers[0] == "02" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no keepalive timer: {timers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
}

/// `last_zxid` is at least the zxid of the client's own latest write as
/// soon as that write returns. Kills `Client::last_zxid` → 0, 1, -1.
#[test]
fn last_zxid_follows_the_clients_own_writes() {
    let c = client();
    let r = root(&c, "zxid");
    let first = c.set_data(&r, b"1", None).unwrap();
    assert!(
        c.last_zxid() >= first.mzxid,
        "{} < {}",
        c.last_zxid(),
        first.mzxid
    );
    let second = c.set_data(&r, b"2", None).unwrap();
    assert!(second.mzxid > first.mzxid && first.mzxid > 0);
    assert!(
        c.last_zxid() >= second.mzxid,
        "{} < {}",
        c.last_zxid(),
        second.mzxid
    );
}

/// The frame limit asked for is the one the client reports and enforces.
/// Kills `Client::max_frame` → 0, 1.
#[test]
fn the_frame_limit_asked_is_the_one_reported_and_enforced() {
    let c = Client::builder(&zk::shared().connect_string())
        .session_timeout(T)
        .max_frame(4096)
        .connect()
        .unwrap();
    assert_eq!(c.max_frame(), 4096);
    let r = root(&c, "frame");
    assert!(matches!(
        c.create(&format!("{r}/big"), &[0; 8192], CreateMode::Persistent),
        Err(Error::TooLarge { .. })
    ));
    c.create(&format!("{r}/small"), &[0; 1024], CreateMode::Persistent)
        .unwrap();
}

/// Waiting for a connection on a session that has ended says how it ended,
/// at once: Expired (on a one-session client), or Closed after `close`. Kills the Expired and Closed
/// arms of `connect::settled` deleted (the wait would run out its timeout
/// and say Timeout).
#[test]
fn waiting_to_connect_on_an_ended_session_says_how_it_ended() {
    let link = testkit::ClientLink::start(&zk::shared().connect_string());
    let expired = Client::builder(&link.connect_string())
        .session_timeout(T)
        .new_session_after_expiry(false)
        .connect()
        .unwrap();
    link.expire_session();
    testkit::wait_until("the expiry to be heard", T * 3, || {
        expired.state() == SessionState::Expired
    });
    assert_eq!(
        expired.wait_connected(T).unwrap_err(),
        Error::SessionExpired
    );
    let closed = client();
    closed.close().unwrap();
    assert_eq!(closed.wait_connected(T).unwrap_err(), Error::Closed);
    // A sync, like every call, says the session is over.
    assert_eq!(closed.sync("/").unwrap_err(), Error::Closed);
}
