//! Servers going away under a live session: the leader killed during
//! writes, a server restarted within the session timeout.

use super::*;

// ---------------------------------------------------------------------------
// 1. Leader killed while a client writes
// ---------------------------------------------------------------------------

#[derive(Default, Debug)]
struct WriterLog {
    /// Writes acknowledged with Ok: (index, path the server returned).
    acked: Vec<(usize, String)>,
    /// Writes whose attempt failed with ConnectionLoss/Timeout and that were
    /// then found applied (so not sent again).
    found_after_loss: Vec<usize>,
    /// Attempts whose outcome was unknown (ConnectionLoss or Timeout).
    uncertain: usize,
    /// Uncertain attempts found not applied and therefore sent again.
    resent: usize,
}

/// Learns whether the write with `prefix` was applied. `sync` first, so the
/// server we ask has caught up with everything the leader decided.
fn write_applied(c: &Client, root: &str, prefix: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "could not learn within 60 s whether {prefix} was applied"
        );
        match c.sync(root).and_then(|()| c.get_children(root)) {
            Ok(kids) => return kids.iter().any(|k| k.starts_with(prefix)),
            Err(e) if e.is_outcome_unknown() => continue,
            Err(e) => panic!("checking whether {prefix} was applied: {e:?}"),
        }
    }
}

/// Sequential creates with unique names and payloads until `stop`; an
/// uncertain outcome is resolved by looking for the write before resending.
fn write_loop(c: &Client, root: &str, stop: &AtomicBool, done: &AtomicUsize) -> WriterLog {
    let mut log = WriterLog::default();
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let prefix = format!("w{i:05}-");
        let payload = format!("payload-{i}");
        loop {
            match c.create(
                &format!("{root}/{prefix}"),
                payload.as_bytes(),
                CreateMode::PersistentSequential,
            ) {
                Ok(path) => {
                    log.acked.push((i, path));
                    break;
                }
                Err(e) if e.is_outcome_unknown() => {
                    log.uncertain += 1;
                    if write_applied(c, root, &prefix) {
                        log.found_after_loss.push(i);
                        break;
                    }
                    log.resent += 1;
                }
                Err(e) => panic!(
                    "write {i} failed with {e:?} (session {:#x})",
                    c.session_id()
                ),
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
        i += 1;
        // Pace the writer; not a synchronisation.
        thread::sleep(Duration::from_millis(5));
    }
    log
}

#[test]
fn leader_killed_during_writes_keeps_session_and_every_write_exactly_once() {
    init();
    let started = Instant::now();
    let ens = ZkEnsemble::start_with(3, TICK_MS);
    let t = Duration::from_secs(8);
    let c = Client::connect(&ens.connect_string(), t).expect("connect to the ensemble");
    let id = c.session_id();
    let mut states = States::of(&c);
    let root = root(&c, "failover");
    let eph = c
        .create(&format!("{root}-eph"), b"", CreateMode::Ephemeral)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (c, root, stop, done) = (c.clone(), root.clone(), stop.clone(), done.clone());
        thread::spawn(move || write_loop(&c, &root, &stop, &done))
    };
    let progress = |what: &str, n: usize, timeout: Duration| {
        let target = done.load(Ordering::SeqCst) + n;
        wait_until(what, timeout, || {
            writer.is_finished() || done.load(Ordering::SeqCst) >= target
        });
    };

    progress("the first writes", 20, Duration::from_secs(30));
    let mut killed = Vec::new();
    for round in 0..2 {
        let mut leader = None;
        wait_until("a leader", Duration::from_secs(30), || {
            leader = ens.leader();
            leader.is_some()
        });
        let leader = leader.unwrap();
        killed.push(leader);
        ens.kill(leader);
        progress(
            &format!("writes after killing leader {leader} (round {round})"),
            20,
            Duration::from_secs(45),
        );
        ens.restart(leader);
        progress(
            &format!("writes after member {leader} rejoined (round {round})"),
            10,
            Duration::from_secs(30),
        );
    }
    stop.store(true, Ordering::SeqCst);
    let log = writer
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));

    states.drain();
    assert!(
        !states.seen.contains(&SessionState::Expired),
        "the session expired: {:?}",
        states.seen
    );
    assert!(
        states.seen.contains(&SessionState::Suspended),
        "killing the leader should have cost the client its connection: {:?}",
        states.seen
    );
    c.wait_connected(t).expect("connected at the end");
    assert_eq!(c.session_id(), id, "a new session was created");

    c.sync(&root).unwrap();
    let kids = c.get_children(&root).unwrap();
    let total = log.acked.len() + log.found_after_loss.len();
    let mut by_write: HashMap<&str, Vec<&String>> = HashMap::new();
    for k in &kids {
        by_write.entry(&k[..7]).or_default().push(k);
    }
    for i in 0..total {
        let prefix = format!("w{i:05}-");
        let n = by_write.get(prefix.as_str()).map_or(0, Vec::len);
        assert_eq!(n, 1, "write {i} is present {n} times (lost or doubled)");
    }
    assert_eq!(kids.len(), total, "children that no write accounts for");
    for (i, path) in &log.acked {
        let (data, _) = c.get_data(path).unwrap();
        assert_eq!(data, format!("payload-{i}").as_bytes(), "{path}");
    }
    let stat = c.exists(&eph).unwrap().expect("the ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
    assert_no_io_panic();
    eprintln!(
        "failover: killed {killed:?}; {} writes ({} acked, {} found applied after a loss), \
         {} uncertain outcomes, {} resent; states {:?}; {:?}",
        total,
        log.acked.len(),
        log.found_after_loss.len(),
        log.uncertain,
        log.resent,
        states.seen,
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// 5. Standalone server restart
// ---------------------------------------------------------------------------

#[test]
fn server_restart_within_the_session_timeout_keeps_session_and_watches() {
    init();
    let server = ZkServer::start_with(TICK_MS);
    let t = Duration::from_secs(10);
    let c = Client::connect(&server.connect_string(), t).unwrap();
    let id = c.session_id();
    let r = root(&c, "restart");
    let (a, b, kids) = (format!("{r}/a"), format!("{r}/b"), format!("{r}/kids"));
    c.create(&a, b"0", CreateMode::Persistent).unwrap();
    c.create(&kids, b"", CreateMode::Persistent).unwrap();
    let eph = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, _, wa) = c.get_data_and_watch(&a).unwrap();
    let (_, wb) = c.exists_and_watch(&b).unwrap();
    let (_, _, wc) = c.get_children_and_watch(&kids).unwrap();
    let mut states = States::of(&c);

    let down = Instant::now();
    server.stop();
    states.wait_for(SessionState::Suspended, t);
    // A call made while the server is down waits for it.
    let queued = {
        let (c, p) = (c.clone(), format!("{r}/queued"));
        thread::spawn(move || c.create(&p, b"", CreateMode::Persistent))
    };
    server.restart();
    let restarted = down.elapsed();
    states.wait_for(SessionState::Connected, t);
    let outage = down.elapsed();
    eprintln!("restart: server back after {restarted:?}, client connected after {outage:?}");
    assert!(
        outage < t,
        "outage {outage:?} not within the session timeout"
    );
    assert_eq!(c.session_id(), id);
    assert_eq!(queued.join().unwrap().unwrap(), format!("{r}/queued"));

    let other = Client::connect(&server.connect_string(), t).unwrap();
    let stat = other.exists(&eph).unwrap().expect("the ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
    other.set_data(&a, b"1", None).unwrap();
    other.create(&b, b"", CreateMode::Persistent).unwrap();
    other
        .create(&format!("{kids}/k"), b"", CreateMode::Persistent)
        .unwrap();
    expect_event(&wa, EventType::NodeDataChanged, &a, t);
    expect_event(&wb, EventType::NodeCreated, &b, t);
    expect_event(&wc, EventType::NodeChildrenChanged, &kids, t);
    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (w, p) in [(&wa, &a), (&wb, &b), (&wc, &kids)] {
        expect_spent(w, p);
    }
    let seen = states.drain();
    assert!(
        !seen.contains(&SessionState::Expired) && !seen.contains(&SessionState::Lost),
        "{seen:?}"
    );
    assert_no_io_panic();
}
