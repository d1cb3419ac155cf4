//! The fenced-write referee: writes stay in order while member links fail.

use super::*;

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
    /// The worker asked to hold long next time it is granted; the others
    /// stand aside (queue no new request) until it is granted, so that it
    /// is granted soon however slow the machine.
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

/// The variable that fixes the referee's seed; unset, the clock picks one.
const SEED_VAR: &str = "FENCED_SEED";

/// The seed from `FENCED_SEED`, or from the clock (printed either way).
fn seed() -> u64 {
    match std::env::var(SEED_VAR) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not a number")),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        }
    }
}

/// Prints the command that replays this seed when the test fails (any
/// panic of the test's thread, whichever assertion or unwrap it came from),
/// and stops the workers, which would otherwise go on using the ensemble
/// the file's other tests share.
struct Replay {
    seed: u64,
    stop: Arc<AtomicBool>,
}

impl Replay {
    fn command(&self) -> String {
        format!(
            "{SEED_VAR}={} cargo test --test zookeeper fenced_writes_stay_in_order -- --nocapture",
            self.seed
        )
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if thread::panicking() {
            eprintln!("referee failed; replay its faults: {}", self.command());
        }
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
    // A bound in case `stop` is never set: well above the referee's
    // longest run (5 long rounds of 3 aims of WAIT each, and the calm).
    let deadline = Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        // Another worker has been asked to hold long: queue nothing until
        // it is granted (bounded; the referee gives up on it after WAIT).
        testkit::poll_until(WAIT, || {
            let store = store.lock().unwrap();
            stop.load(Ordering::SeqCst) || store.hold_long.is_none_or(|w| w == worker)
        });
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
/// overlap, and no lock node may be left behind. Each long round first
/// gets a holder on a follower (`aim_at_long_holder`), so the hazard is set
/// up whatever the load. `FENCED_SEED` fixes the fault schedule.
#[test]
fn fenced_writes_stay_in_order_while_member_links_fail() {
    let ens = ensemble();
    let seed = seed();
    let stop = Arc::new(AtomicBool::new(false));
    let replay = Replay {
        seed,
        stop: stop.clone(),
    };
    eprintln!("referee seed {seed}; replay: {}", replay.command());
    let mut rng = Rng(seed);
    let path = format!("/partition-referee-{}", std::process::id());
    let store = Arc::new(StdMutex::new(Store::default()));
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
            Some((leader, follower)) => {
                aimed_hits += 1;
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
    // Each aim waits for its grant with the other workers standing aside:
    // a miss is a worker that could not take a free mutex for WAIT, an
    // availability failure, not a fault that missed its target.
    assert!(
        aimed_hits >= 1,
        "no long fault found a holder to cut off: in {} aims of {WAIT:?} no worker on a follower was granted a mutex the others stood aside from",
        5 * AIM_ATTEMPTS
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

/// How many times a long round asks a worker on a follower to hold long
/// before it gives up and faults a link at random instead.
const AIM_ATTEMPTS: u32 = 3;

/// Sets up the hazard of a long round: returns the leader and a follower
/// whose worker now holds the mutex in a long tenure, so that the fault
/// cuts a holder off. Waits for a leader, asks the worker on a follower
/// (picked by the seed) to hold long while the others stand aside, and
/// waits for the grant, `WAIT` at most; tries again, saying so, up to
/// `AIM_ATTEMPTS` times. None if no attempt got a holder.
fn aim_at_long_holder(
    ens: &ZkEnsemble,
    store: &StdMutex<Store>,
    rng: &mut Rng,
) -> Option<(usize, usize)> {
    let n = ens.len();
    for attempt in 1..=AIM_ATTEMPTS {
        let mut leader = None;
        testkit::poll_until(WAIT, || {
            leader = ens.leader();
            leader.is_some()
        });
        let Some(leader) = leader else {
            eprintln!("referee: aim {attempt} of {AIM_ATTEMPTS}: no leader within {WAIT:?}");
            continue;
        };
        let follower = (leader + 1 + rng.below(n as u64 - 1) as usize) % n;
        store.lock().unwrap().hold_long = Some(follower);
        let holds =
            testkit::poll_until(WAIT, || store.lock().unwrap().long_holder == Some(follower));
        store.lock().unwrap().hold_long = None;
        if holds {
            return Some((leader, follower));
        }
        eprintln!(
            "referee: aim {attempt} of {AIM_ATTEMPTS}: the worker on member {follower} was not granted within {WAIT:?} while the others stood aside"
        );
    }
    None
}
