//! A holder cut off from the leader lets go before the next is granted, for
//! every recipe; healthy servers never suspend a holder.

use super::*;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Mutex,
    RwLock,
    Semaphore,
    Latch,
}

/// Something holding a lock, and a channel that yields the instant it
/// first stopped saying Held.
struct Holding {
    _keep: Box<dyn Send>,
    not_held: Receiver<Instant>,
    /// The guard's `valid_until` (a latch has none).
    valid_until: Box<dyn Fn() -> Option<Instant> + Send>,
}

/// Reports the first state other than Held.
fn watch_guard(guard: &LockGuard) -> Receiver<Instant> {
    let changes = guard.state_changes();
    let (tx, rx) = bounded(1);
    thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            match changes.recv_timeout(Duration::from_millis(200)) {
                Ok(LockState::Held) | Err(RecvTimeoutError::Timeout) => {}
                Ok(_) | Err(RecvTimeoutError::Disconnected) => {
                    let _ = tx.send(Instant::now());
                    return;
                }
            }
        }
    });
    rx
}

/// Takes the lock of `kind` at `path` (blocking, bounded by `WAIT`).
fn take(kind: Kind, client: &Client, path: &str) -> Holding {
    let guard = match kind {
        Kind::Mutex => Mutex::new(client, path).unwrap().lock_timeout(WAIT),
        Kind::RwLock => RwLock::new(client, path).unwrap().write_timeout(WAIT),
        Kind::Semaphore => Semaphore::new(client, path, 1)
            .unwrap()
            .acquire_timeout(WAIT),
        Kind::Latch => {
            let latch = Election::new(client, path, b"me").unwrap().latch();
            match latch.events().recv_timeout(WAIT) {
                Ok(LatchEvent::Gained { .. }) => {}
                other => panic!("latch did not gain: {other:?}"),
            }
            let events = latch.events().clone();
            let (tx, rx) = bounded(1);
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(120);
                while Instant::now() < deadline {
                    match events.recv_timeout(Duration::from_millis(200)) {
                        Ok(LatchEvent::Resumed) | Err(RecvTimeoutError::Timeout) => {}
                        Ok(_) | Err(RecvTimeoutError::Disconnected) => {
                            let _ = tx.send(Instant::now());
                            return;
                        }
                    }
                }
            });
            return Holding {
                _keep: Box::new(latch),
                not_held: rx,
                valid_until: Box::new(|| None),
            };
        }
    };
    let guard = guard.unwrap_or_else(|e| panic!("{kind:?} at {path}: {e}"));
    let not_held = watch_guard(&guard);
    let guard = std::sync::Arc::new(guard);
    let horizon = guard.clone();
    Holding {
        _keep: Box::new(guard),
        not_held,
        valid_until: Box::new(move || horizon.valid_until()),
    }
}

/// Times of one trial, relative to the cut.
#[derive(Debug)]
struct Timeline {
    expiry: Option<Duration>,
    granted: Duration,
    not_held: Option<Duration>,
}

impl Timeline {
    /// How long both said they held: from the second's grant to the
    /// first's last Held (zero if the first let go first).
    fn overlap(&self) -> Duration {
        match self.not_held {
            Some(n) => n.saturating_sub(self.granted),
            None => Duration::MAX,
        }
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("never".into(), |d| format!("+{} ms", d.as_millis()))
}

/// Holder on a follower F (its connect string names F only), F↔leader cut
/// silently, a second client on the leader waiting for the lock.
fn trial(kind: Kind, timeout: Duration) -> Timeline {
    let ens = ensemble();
    let leader = ens.leader().expect("a leader");
    let follower = ens.followers()[0];
    let (traffic, _) = ens.link_traffic(follower, leader);
    assert!(traffic > 0, "members talk through the link proxies");
    let direct = ens.direct_member_connections();
    assert!(
        direct.is_empty(),
        "members talk around the proxies: {direct:?}"
    );
    let path = format!(
        "/partition-{kind:?}-{}-{}",
        timeout.as_millis(),
        std::process::id()
    );
    let first = Client::builder(&ens.member_addr(follower).to_string())
        .session_timeout(timeout)
        .connect()
        .unwrap();
    let second = Client::builder(&ens.member_addr(leader).to_string())
        .session_timeout(timeout)
        .connect()
        .unwrap();
    let holding = take(kind, &first, &path);
    // Where the holder's node is, and where (and how many) nodes show that
    // the second contender waits: a semaphore keeps leases under `leases`
    // and lets one waiter at a time queue under `locks`.
    let (node_dir, queue_dir, queued) = match kind {
        Kind::Semaphore => (format!("{path}/leases"), format!("{path}/locks"), 1),
        _ => (path.clone(), path.clone(), 2),
    };
    let mine = children(&second, &node_dir);
    assert_eq!(mine.len(), 1, "the first holder's node alone: {mine:?}");
    let my_node = format!("{node_dir}/{}", mine[0]);

    // The quorum's view: the first's node deleted = its session expired.
    let (_, deleted) = second.exists_and_watch(&my_node).unwrap();
    let (deleted_tx, deleted_rx) = bounded::<Instant>(1);
    thread::spawn(move || {
        if deleted.recv_timeout(Duration::from_secs(60)).is_ok() {
            let _ = deleted_tx.send(Instant::now());
        }
    });
    // The second contender waits on the leader.
    let (granted_tx, granted_rx) = bounded::<Instant>(1);
    let (done_tx, done_rx) = bounded::<()>(1);
    let waiter = {
        let (second, path) = (second.clone(), path.clone());
        thread::spawn(move || {
            let held = take(kind, &second, &path);
            let _ = granted_tx.send(Instant::now());
            let _ = done_rx.recv_timeout(Duration::from_secs(60));
            drop(held);
        })
    };
    wait_children(&second, &queue_dir, queued, WAIT);
    assert!(
        holding.not_held.try_recv().is_err(),
        "the first holder lost the lock before the cut"
    );

    let cut = Instant::now();
    ens.cut_link(follower, leader);
    let bound = timeout * 3 + Duration::from_secs(15);
    let granted = granted_rx
        .recv_timeout(bound)
        .unwrap_or_else(|_| panic!("{kind:?}: the second client was never granted"));
    // The first holder's horizon never reached past the other's grant.
    if let Some(horizon) = (holding.valid_until)() {
        assert!(
            horizon <= granted,
            "{kind:?}: valid_until {:?} after the cut, the next grant at {:?}",
            horizon.saturating_duration_since(cut),
            granted.saturating_duration_since(cut)
        );
    }
    let expiry = deleted_rx.recv_timeout(Duration::from_secs(5)).ok();
    // The first holder must let go; bounded by the follower's own giving up.
    let not_held = holding
        .not_held
        .recv_timeout(bound)
        .ok()
        .map(|t| t.saturating_duration_since(cut));
    let timeline = Timeline {
        expiry: expiry.map(|t| t.saturating_duration_since(cut)),
        granted: granted.saturating_duration_since(cut),
        not_held,
    };
    eprintln!(
        "{kind:?} timeout {} ms: cut +0, expiry seen {}, second granted {}, first stops saying Held {}, overlap {} ms",
        timeout.as_millis(),
        ms(timeline.expiry),
        ms(Some(timeline.granted)),
        ms(timeline.not_held),
        timeline.overlap().as_millis().min(u128::from(u32::MAX)),
    );
    let _ = done_tx.send(());
    waiter.join().unwrap();
    drop(holding);
    ens.heal_link(follower, leader);
    ens.wait_ready();
    let _ = first.close();
    let _ = second.close();
    timeline
}

/// Both timeouts first, then the verdict, so that a failure shows both.
fn check(kind: Kind) {
    let timelines: Vec<(Duration, Timeline)> = [SHORT, LONG].map(|t| (t, trial(kind, t))).into();
    for (timeout, t) in &timelines {
        assert!(
            t.expiry.is_some(),
            "{kind:?}, timeout {timeout:?}: the quorum never deleted the first holder's node: {timelines:?}"
        );
        assert_eq!(
            t.overlap(),
            Duration::ZERO,
            "{kind:?}, timeout {timeout:?}: the first holder said Held after the second was granted: {timelines:?}"
        );
    }
}

#[test]
fn mutex_holder_cut_off_from_the_leader_lets_go_before_the_next_is_granted() {
    check(Kind::Mutex);
}

#[test]
fn rwlock_writer_cut_off_from_the_leader_lets_go_before_the_next_is_granted() {
    check(Kind::RwLock);
}

#[test]
fn semaphore_lease_cut_off_from_the_leader_lets_go_before_the_next_is_granted() {
    check(Kind::Semaphore);
}

#[test]
fn leader_latch_cut_off_from_the_leader_lets_go_before_the_next_gains() {
    check(Kind::Latch);
}

/// The leader check must not cry wolf: holders on a follower, on the leader
/// and on a standalone server keep saying Held, and their sessions
/// Connected, for many timeouts of a healthy ensemble, at the shortest
/// timeout the servers allow (2 ticks).
#[test]
fn healthy_servers_never_suspend_a_holder() {
    let standalone = testkit::zk::ZkServer::start_with(TICK_MS);
    let ens = ensemble();
    let leader = ens.leader().expect("a leader");
    let follower = ens.followers()[0];
    let targets = [
        ("follower", ens.member_addr(follower).to_string()),
        ("leader", ens.member_addr(leader).to_string()),
        ("standalone", standalone.connect_string()),
    ];
    let mut held = Vec::new();
    for (name, addr) in &targets {
        let client = Client::builder(addr)
            .session_timeout(SHORT)
            .connect()
            .unwrap();
        let states = client.subscribe();
        let path = format!("/partition-healthy-{name}-{}", std::process::id());
        let holding = take(Kind::Mutex, &client, &path);
        held.push((name, client, states, holding));
    }
    // Five session timeouts: about 40 syncs per session.
    let until = Instant::now() + SHORT * 5;
    for (name, client, states, holding) in &held {
        let left = until.saturating_duration_since(Instant::now());
        if let Ok(at) = holding.not_held.recv_timeout(left) {
            panic!(
                "{name}: the holder stopped saying Held on a healthy server after {:?} (session {:?}, states {:?})",
                at.saturating_duration_since(until - SHORT * 5),
                client.state(),
                states.try_iter().collect::<Vec<_>>()
            );
        }
        let seen: Vec<_> = states.try_iter().collect();
        assert!(
            seen.iter().all(|s| *s == zklock::SessionState::Connected),
            "{name}: session states {seen:?}"
        );
    }
    drop(held);
}
