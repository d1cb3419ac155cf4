//! A holder whose server is cut off from the leader (docs/PARTITION.md).
//!
//! A follower cut off from the leader goes on answering its clients' pings
//! until its own link to the leader times out (`syncLimit × tickTime`),
//! while the leader, which no longer hears the holder's session, expires it
//! after the session timeout and lets another client take the lock. The
//! holder must stop saying Held before that other client is granted.
//!
//! The ensemble runs `tickTime=1000, syncLimit=5`: the follower gives up
//! after 5 s. What decides the hazard is the ratio of the session timeout to
//! that, so the scaled-down tick keeps the file fast and measures the same
//! thing as the production-like `2000 × 5` with 4 s and 12 s timeouts: the
//! tests run 2 s (0.4 of it, as 4 s is of 10 s) and 6 s (1.2 of it, as
//! 12 s is of 10 s).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use testkit::zk::{ZkEnsemble, ZkOptions};
use testkit::{children, wait_children};
use zklock::recipes::{Election, LatchEvent, LockGuard, LockState, Mutex, RwLock, Semaphore};
use zklock::Client;

const TICK_MS: u64 = 1000;
const SYNC_LIMIT: u32 = 5;
/// Below and above `SYNC_LIMIT × TICK_MS` (5 s).
const SHORT: Duration = Duration::from_millis(2000);
const LONG: Duration = Duration::from_millis(6000);
const WAIT: Duration = Duration::from_secs(30);

/// One ensemble for the whole file; trials take turns on it.
fn ensemble() -> MutexGuard<'static, ZkEnsemble> {
    static ENSEMBLE: OnceLock<StdMutex<ZkEnsemble>> = OnceLock::new();
    let ens = ENSEMBLE
        .get_or_init(|| {
            let options = ZkOptions::new().tick_ms(TICK_MS);
            StdMutex::new(ZkEnsemble::start_with_links(3, &options, SYNC_LIMIT))
        })
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // A trial that failed may have left a link cut.
    ens.heal_all();
    ens.wait_ready();
    ens
}

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

// ---- the fenced-write referee --------------------------------------------

/// The protected resource: accepts a write only with a fencing token at
/// least as high as every one it accepted before.
#[derive(Default)]
struct Store {
    highest: i64,
    accepted: u64,
    /// (token, highest accepted at the time): a holder that still said Held
    /// wrote with a token older than someone else's.
    rejected: Vec<(i64, i64)>,
    /// The worker asked to hold long next time it is granted.
    hold_long: Option<usize>,
    /// The worker in a long tenure, while it lasts: what a long fault aims at.
    long_holder: Option<usize>,
}

impl Store {
    fn write(&mut self, token: i64) -> bool {
        if token < self.highest {
            self.rejected.push((token, self.highest));
            return false;
        }
        self.highest = token;
        self.accepted += 1;
        true
    }
}

/// xorshift64*: reproducible from the seed printed by the test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One holder's time as holder: from the grant until it stopped saying
/// Held (or began to release).
#[derive(Clone, Copy, Debug)]
struct Tenure {
    worker: usize,
    token: i64,
    from: Instant,
    until: Instant,
}

/// Takes the mutex again and again, writing to the store with its fencing
/// token while the guard says Held, until `stop`.
fn referee_worker(
    worker: usize,
    connect: String,
    path: String,
    store: Arc<StdMutex<Store>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Vec<Tenure> {
    let mut tenures = Vec::new();
    let mut client: Option<Client> = None;
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        let c = match &client {
            Some(c) if !c.state().is_terminal() => c.clone(),
            _ => match Client::builder(&connect).session_timeout(SHORT).connect() {
                Ok(c) => {
                    client = Some(c.clone());
                    c
                }
                Err(_) => continue,
            },
        };
        let Ok(mutex) = Mutex::new(&c, &path) else {
            continue;
        };
        let Ok(guard) = mutex.lock_timeout(SHORT) else {
            continue;
        };
        let from = Instant::now();
        let token = guard.fencing_token();
        let changes = guard.state_changes();
        let mut until = None;
        // Write every 10 ms, only while Held, for 50-300 ms; 4-6 s when
        // asked to hold long, through a fault.
        let long = {
            let mut store = store.lock().unwrap();
            let long = store.hold_long == Some(worker);
            if long {
                store.hold_long = None;
                store.long_holder = Some(worker);
            }
            long
        };
        let writes = if long {
            400 + rng.below(200)
        } else {
            5 + rng.below(25)
        };
        for _ in 0..writes {
            while let Ok(state) = changes.try_recv() {
                if state != LockState::Held && until.is_none() {
                    until = Some(Instant::now());
                }
            }
            if until.is_some() || guard.state() != LockState::Held {
                until.get_or_insert_with(Instant::now);
                break;
            }
            let mut store = store.lock().unwrap();
            // Checked again under the store's lock: the write happens now.
            if guard.state() != LockState::Held {
                until = Some(Instant::now());
                break;
            }
            store.write(token);
            drop(store);
            if changes
                .recv_timeout(Duration::from_millis(10))
                .is_ok_and(|s| s != LockState::Held)
            {
                until = Some(Instant::now());
                break;
            }
        }
        let until = until.unwrap_or_else(Instant::now);
        if long {
            store.lock().unwrap().long_holder = None;
        }
        tenures.push(Tenure {
            worker,
            token,
            from,
            until,
        });
        // Released (or given up) after the tenure ended.
        drop(guard);
    }
    if let Some(c) = client {
        let _ = c.close();
    }
    tenures
}

/// Three holders take turns on one mutex through an ensemble whose member
/// links are cut, reset, stalled and healed at random, 50 rounds; every
/// holder writes to a store that refuses a lower fencing token. No write
/// may be refused (no holder acted on a stale lock), no two tenures may
/// overlap, and no lock node may be left behind.
#[test]
fn fenced_writes_stay_in_order_while_member_links_fail() {
    let ens = ensemble();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("referee seed {seed}");
    let mut rng = Rng(seed);
    let path = format!("/partition-referee-{}", std::process::id());
    let store = Arc::new(StdMutex::new(Store::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let n = ens.len();
    assert_eq!(n, 3, "one worker per member");
    let workers: Vec<_> = (0..n)
        .map(|w| {
            // Each worker talks to one member only: clients free to move
            // drift to the leader (the one server never cut off from it)
            // and the hazard is never set up.
            let connect = ens.member_addr(w).to_string();
            let (path, store, stop) = (path.clone(), store.clone(), stop.clone());
            let seed = rng.next() | 1;
            thread::spawn(move || referee_worker(w, connect, path, store, stop, seed))
        })
        .collect();

    let started = Instant::now();
    let mut faults = [0u32; 3];
    let mut aimed_hits = 0;
    for round in 0..50 {
        // Every tenth round outlasts a session timeout and a tick, long
        // enough for the leader to expire sessions it no longer hears and
        // grant their locks to others: a silent cut or a stall between the
        // leader and a follower whose worker holds the lock for long. The
        // other rounds hit any link, briefly.
        let long = round % 10 == 9;
        let target = if long {
            aim_at_long_holder(&ens, &store, &mut rng)
        } else {
            None
        };
        let (a, b, kind) = match target {
            Some((leader, follower, aimed)) => {
                aimed_hits += u32::from(aimed);
                (leader, follower, [0, 2][rng.below(2) as usize])
            }
            None => {
                let a = rng.below(n as u64) as usize;
                let b = (a + 1 + rng.below(n as u64 - 1) as usize) % n;
                (a, b, rng.below(3) as usize)
            }
        };
        faults[kind] += 1;
        match kind {
            0 => ens.cut_link(a, b),
            1 => ens.reset_link(a, b),
            _ => ens.stall_link(a, b),
        }
        let hold = if long {
            3000 + rng.below(800)
        } else {
            50 + rng.below(250)
        };
        // How long the fault lasts: a duration of the experiment, not a
        // wait for anything to happen.
        thread::sleep(Duration::from_millis(hold));
        ens.heal_link(a, b);
        thread::sleep(Duration::from_millis(rng.below(100)));
    }
    let chaos = started.elapsed();
    ens.heal_all();
    ens.wait_ready();
    // A little calm, so that holders are granted on a healed ensemble too.
    let calm_from = store.lock().unwrap().accepted;
    let calm = testkit::poll_until(Duration::from_secs(20), || {
        store.lock().unwrap().accepted >= calm_from + 20
    });
    stop.store(true, Ordering::SeqCst);
    let mut tenures: Vec<Tenure> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    tenures.sort_by_key(|t| t.from);

    let store = store.lock().unwrap();
    let mut per_worker = [0usize; 3];
    for t in &tenures {
        per_worker[t.worker] += 1;
    }
    eprintln!(
        "referee: {} rounds in {chaos:?} (cut {}, reset {}, stall {}), tenures {per_worker:?}, {} writes accepted, {} refused",
        faults.iter().sum::<u32>(),
        faults[0],
        faults[1],
        faults[2],
        store.accepted,
        store.rejected.len()
    );
    assert!(tenures.len() >= 10, "too few tenures to judge: {tenures:?}");
    let overlaps: Vec<(Tenure, Tenure)> = tenures
        .windows(2)
        .filter(|w| w[1].from < w[0].until)
        .map(|w| (w[0], w[1]))
        .collect();
    let longest = overlaps
        .iter()
        .map(|(a, b)| a.until.min(b.until).saturating_duration_since(b.from))
        .max();
    eprintln!(
        "referee: {aimed_hits} of 5 long faults cut off a holder in a long tenure; {} overlapping tenures (longest {longest:?})",
        overlaps.len()
    );
    assert!(
        store.rejected.is_empty() && overlaps.is_empty(),
        "{} writes with a stale fencing token (token, highest), first {:?}; {} overlaps, first {:?}",
        store.rejected.len(),
        store.rejected.iter().take(3).collect::<Vec<_>>(),
        overlaps.len(),
        overlaps.iter().take(3).collect::<Vec<_>>()
    );
    for w in tenures.windows(2) {
        assert!(
            w[1].token > w[0].token,
            "fencing tokens not increasing: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    assert!(
        aimed_hits >= 1,
        "no long fault found a holder to cut off: the hazard was never set up"
    );
    assert!(
        calm,
        "fewer than 20 writes in 20 s after the links healed (tenures {per_worker:?})"
    );
    // Every worker closed its session: nothing may remain.
    let observer = Client::builder(&ens.connect_string())
        .session_timeout(SHORT)
        .connect()
        .unwrap();
    testkit::wait_no_children(&observer, &path, SHORT * 3);
    let _ = observer.close();
}

/// The leader and a random follower, after asking the worker on that
/// follower to hold long: true once it holds (6 s at most), so that the
/// fault cuts a holder off. None without a leader.
fn aim_at_long_holder(
    ens: &ZkEnsemble,
    store: &StdMutex<Store>,
    rng: &mut Rng,
) -> Option<(usize, usize, bool)> {
    let leader = ens.leader()?;
    let n = ens.len();
    let follower = (leader + 1 + rng.below(n as u64 - 1) as usize) % n;
    store.lock().unwrap().hold_long = Some(follower);
    let holds = testkit::poll_until(Duration::from_secs(6), || {
        store.lock().unwrap().long_holder == Some(follower)
    });
    store.lock().unwrap().hold_long = None;
    Some((leader, follower, holds))
}

/// The harness itself: members really talk through the link proxies, the
/// election's call-backs included, so that cutting the leader off from
/// both followers makes them elect one of themselves, and healing brings
/// the old leader back as a member.
#[test]
fn cutting_the_leader_off_from_both_followers_elects_another() {
    let ens = ensemble();
    let old = ens.leader().expect("a leader");
    let followers = ens.followers();
    assert_eq!(followers.len(), 2, "{followers:?}");
    let hellos: u64 = (0..ens.len())
        .flat_map(|a| (a + 1..ens.len()).map(move |b| (a, b)))
        .map(|(a, b)| ens.link_traffic(a, b).1)
        .sum();
    assert!(hellos > 0, "no election hello went through a proxy");
    let direct = ens.direct_member_connections();
    assert!(
        direct.is_empty(),
        "members connected around the proxies (from, to, port): {direct:?}"
    );
    for &f in &followers {
        ens.cut_link(old, f);
    }
    let elected = testkit::poll_until(WAIT, || {
        ens.leader().is_some_and(|l| l != old) && ens.member_mode(old).as_deref() != Some("leader")
    });
    let modes: Vec<_> = (0..ens.len()).map(|i| ens.member_mode(i)).collect();
    ens.heal_all();
    assert!(
        elected,
        "the followers did not elect another leader (modes {modes:?})"
    );
    ens.wait_ready();
    assert_eq!(ens.followers().len(), 2);
    let direct = ens.direct_member_connections();
    assert!(
        direct.is_empty(),
        "after the re-election, members connected around the proxies: {direct:?}"
    );
}

/// The other half of the fix: a holder whose server is cut off from the
/// leader drops that server once the leader stops confirming its session,
/// finds another server while the session still lives, and holds again:
/// Suspended, then Held, never Lost, same node.
#[test]
fn a_holder_cut_off_with_its_server_moves_to_another_and_keeps_the_lock() {
    let ens = ensemble();
    let leader = ens.leader().expect("a leader");
    let followers = ens.followers();
    assert_eq!(followers.len(), 2, "{followers:?}");
    // Both followers, not the leader: whichever the client picks, it is one
    // that can be cut off from the leader.
    let connect = followers
        .iter()
        .map(|&f| ens.member_addr(f).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let client = Client::builder(&connect)
        .session_timeout(LONG)
        .connect()
        .unwrap();
    let sid = format!("sid=0x{:x}", client.session_id());
    let on = *followers
        .iter()
        .find(|&&f| ens.four_letter(f, "cons").contains(&sid))
        .expect("the client's follower");
    let path = format!("/partition-moves-{}", std::process::id());
    let guard = Mutex::new(&client, &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let node = guard.node_path();
    let changes = guard.state_changes();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));

    let cut = Instant::now();
    ens.cut_link(on, leader);
    let suspended = changes.recv_timeout(LONG * 2);
    let suspended_at = cut.elapsed();
    let back = changes.recv_timeout(LONG * 2);
    let back_at = cut.elapsed();
    let moved_to = followers
        .iter()
        .copied()
        .find(|&f| f != on && ens.four_letter(f, "cons").contains(&sid));
    ens.heal_link(on, leader);
    eprintln!(
        "cut +0: {suspended:?} at +{} ms, then {back:?} at +{} ms, now on member {moved_to:?} (was {on})",
        suspended_at.as_millis(),
        back_at.as_millis()
    );
    assert_eq!(suspended, Ok(LockState::Suspended));
    assert!(
        suspended_at < LONG * 3 / 4,
        "Suspended only at +{suspended_at:?}"
    );
    assert_eq!(back, Ok(LockState::Held), "the holder did not hold again");
    assert!(
        moved_to.is_some(),
        "the client did not move to the other follower"
    );
    assert_eq!(guard.node_path(), node);
    assert!(client.exists(node).unwrap().is_some());
    drop(guard);
    let _ = client.close();
    ens.wait_ready();
}
