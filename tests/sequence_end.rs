//! zklock's recipes at the end of ZooKeeper's sequence counter, on a real
//! ZooKeeper 3.8 server (`testkit::zk::ZkHarness`, which sets a lock
//! parent's stored cversion a few creates before 2147483647).
//!
//! ZooKeeper does not wrap the counter (DataTree.createNode stores a
//! parent's cversion only if greater): at the end, names repeat
//! `2147483647` or come out negative, and no order among them is safe.
//! Three clients contend for ~30 rounds each; what must hold: never two
//! holders at once (an in-process record of who holds), every acquisition
//! either succeeds on a node issued before the end or fails with
//! `LockError::SequenceExhausted { path }`, and nothing hangs (every call
//! has a deadline; the rounds are bounded).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use testkit::peers::{acquired_node, line_millis, Peer, PeerKind, REPLY_TIMEOUT};
use testkit::zk::ZkHarness;
use zklock::recipes::{
    past_the_end, Election, LatchEvent, LockError, LockGuard, LockState, Mutex, RwLock, Semaphore,
};
use zklock::{Client, CreateMode};

const TICK: Duration = Duration::from_millis(200);
const SESSION: Duration = Duration::from_secs(4);
/// Per acquisition: far longer than any hand-over between three local
/// clients; reaching it counts as a hang.
const ACQUIRE: Duration = Duration::from_secs(10);
const ROUNDS: usize = 30;
/// Per peer acquisition (`acquire <ms>`): a deadlocked peer reports
/// `timeout` after it.
const PEER_ACQUIRE: Duration = Duration::from_secs(3);
const CLIENTS: usize = 3;
/// The counter is set this many creates before its end.
const BEFORE_END: i32 = 3;

/// Whether a holder still believes it holds: its guard (or latch) says so.
type Believes = Arc<dyn Fn() -> bool + Send + Sync>;

/// What the contenders saw, shared between their threads.
///
/// A holder counts as one from the moment its acquisition returns until it
/// starts releasing, unless its guard has told it that it lost the lock
/// (a holder whose queue ran past the end is told `Lost(SequenceExhausted)`
/// and its node goes; the next waiter may then hold). An overlap is an
/// acquisition while another holder still believes it holds. The check
/// reads the other guards' states right after the acquisition returns: the
/// other's node was deleted before ours could win, and the library marks a
/// guard lost before it deletes its node.
#[derive(Default)]
struct Record {
    holders: StdMutex<Vec<(u64, Believes)>>,
    next_id: AtomicUsize,
    overlaps: AtomicUsize,
    held: AtomicUsize,
    /// Holds that began after an earlier holder had been told it lost.
    after_lost: AtomicUsize,
    exhausted: AtomicUsize,
    /// Anything else: a wrong path in the error, another error, a node
    /// past the end held.
    wrong: StdMutex<Vec<String>>,
    /// Every hold, in order of events, to explain an overlap.
    log: StdMutex<Vec<String>>,
    started: std::sync::OnceLock<Instant>,
}

impl Record {
    fn note(&self, what: String) {
        let t = self.started.get_or_init(Instant::now).elapsed();
        self.log.lock().unwrap().push(format!("{t:>12?} {what}"));
    }

    fn wrong(&self, what: String) {
        self.wrong.lock().unwrap().push(what);
    }

    /// A hold begins; returns its id for [`Record::end_hold`].
    fn begin_hold(&self, what: &str, believes: Believes) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) as u64;
        let mut holders = self.holders.lock().unwrap();
        let believing = holders.iter().filter(|(_, b)| b()).count();
        if believing > 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        if holders.len() > believing {
            self.after_lost.fetch_add(1, Ordering::SeqCst);
        }
        holders.push((id, believes));
        drop(holders);
        self.held.fetch_add(1, Ordering::SeqCst);
        self.note(format!(
            "{what}: holds ({believing} others believe they hold)"
        ));
        id
    }

    fn end_hold(&self, id: u64, what: &str) {
        self.note(format!("{what}: releasing"));
        self.holders.lock().unwrap().retain(|(h, _)| *h != id);
    }

    /// One acquisition's outcome. A held guard is kept for a moment of
    /// work, then released.
    fn outcome(&self, lock_path: &str, r: Result<LockGuard, LockError>) {
        match r {
            Ok(guard) => {
                let guard = Arc::new(guard);
                let node = guard.node_path().to_owned();
                let g = guard.clone();
                let id = self.begin_hold(&node, Arc::new(move || g.state() == LockState::Held));
                if past_the_end(sequence_of(&node)) {
                    self.wrong(format!("held on {node}, a node past the end"));
                }
                // Some work under the lock, so that a second holder would
                // overlap with this one rather than slip in between.
                thread::sleep(Duration::from_millis(5));
                let state = format!("{node} {:?} {:?}", guard.state(), guard.lost_reason());
                self.end_hold(id, &state);
                match Arc::try_unwrap(guard) {
                    Ok(guard) => {
                        if let Err(e) = guard.unlock() {
                            self.wrong(format!("unlock {node}: {e}"));
                        }
                    }
                    Err(_) => self.wrong(format!("{node}: guard still shared at release")),
                }
            }
            Err(LockError::SequenceExhausted { path }) => {
                self.exhausted.fetch_add(1, Ordering::SeqCst);
                if path != lock_path {
                    self.wrong(format!("SequenceExhausted names {path}, not {lock_path}"));
                }
            }
            Err(e) => self.wrong(format!("{e:?}")),
        }
    }

    fn report(&self, what: &str) -> (usize, usize, usize) {
        let held = self.held.load(Ordering::SeqCst);
        let exhausted = self.exhausted.load(Ordering::SeqCst);
        let overlaps = self.overlaps.load(Ordering::SeqCst);
        let after_lost = self.after_lost.load(Ordering::SeqCst);
        let wrong = self.wrong.lock().unwrap();
        eprintln!(
            "{what}: {held} held ({after_lost} after an earlier holder was told Lost), \
             {exhausted} SequenceExhausted, {overlaps} overlaps, \
             {} other outcomes, the first: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(3)]
        );
        (held, exhausted, overlaps)
    }
}

/// The number ZooKeeper appended to a node name (`%010d`): ten digits when
/// non-negative; a minus sign and nine or ten digits when negative. The
/// names used here end their prefix in `-lock-`, `-latch-`, `-lease-`,
/// `__WRIT__` or kazoo's `__lock__`, so a `-` right after a `-` or `_` is
/// the sign.
fn sequence_of(node: &str) -> i32 {
    let head = node.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = node.len() - head.len();
    let negative =
        head.ends_with('-') && (digits == 9 || head.ends_with("--") || head.ends_with("_-"));
    let start = if negative { head.len() - 1 } else { head.len() };
    node[start..]
        .parse()
        .unwrap_or_else(|e| panic!("{node}: no sequence number: {e}"))
}

fn client(server: &ZkHarness) -> Client {
    Client::connect(&server.connect_string(), SESSION).expect("connect to the harness server")
}

/// Sets the counter of `path` and of every node under it (a semaphore keeps
/// its queues in children) `BEFORE_END` creates before the end.
fn near_the_end(server: &ZkHarness, admin: &Client, path: &str) -> Vec<String> {
    let mut parents = vec![path.to_string()];
    for child in testkit::children(admin, path) {
        parents.push(format!("{path}/{child}"));
    }
    for p in &parents {
        server.set_sequence_counter(p, i32::MAX - BEFORE_END);
    }
    parents
}

/// Runs `CLIENTS` threads of `ROUNDS` acquisitions each; `acquire` takes a
/// lock on the thread's own client.
fn contend<L: Send + 'static>(
    server: &ZkHarness,
    lock_path: &str,
    make: impl Fn(&Client) -> L,
    acquire: fn(&L) -> Result<LockGuard, LockError>,
) -> Arc<Record> {
    let record = Arc::new(Record::default());
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = client(server);
            let lock = make(&c);
            let record = record.clone();
            let lock_path = lock_path.to_string();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    record.outcome(&lock_path, acquire(&lock));
                }
                drop(lock);
                drop(c);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contender panicked");
    }
    eprintln!("{lock_path}: {:?} for all rounds", started.elapsed());
    record
}

/// The common assertions: no overlap, nothing but success or the typed
/// error, successes only while names before the end remained, and the end
/// was reached.
fn assert_fail_closed(record: &Record, what: &str, max_held: usize) {
    let (held, exhausted, overlaps) = record.report(what);
    assert_eq!(
        overlaps,
        0,
        "{what}: two holders at once:\n{}",
        record.log.lock().unwrap().join("\n")
    );
    let wrong = record.wrong.lock().unwrap();
    assert!(
        wrong.is_empty(),
        "{what}: {} other outcomes, the first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert_eq!(held + exhausted, CLIENTS * ROUNDS, "{what}");
    assert!(held <= max_held, "{what}: {held} held, at most {max_held}");
    assert!(exhausted > 0, "{what}: the end was never reported");
}

fn prepare(server: &ZkHarness, warm: impl FnOnce(&Client), path: &str) -> Vec<String> {
    let admin = client(server);
    // One acquisition creates the lock's parents; then move their counters.
    warm(&admin);
    near_the_end(server, &admin, path)
}

#[test]
fn mutex_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/mutex";
    prepare(
        &server,
        |c| {
            Mutex::new(c, path)
                .unwrap()
                .lock()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| Mutex::new(c, path).unwrap(),
        |m| m.lock_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "Mutex", BEFORE_END as usize);
    assert_eq!(server.stored(path).cversion, i32::MAX);
}

#[test]
fn rwlock_writers_fail_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/rw";
    prepare(
        &server,
        |c| {
            RwLock::new(c, path)
                .unwrap()
                .write()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| RwLock::new(c, path).unwrap(),
        |l| l.write_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "RwLock (writers)", BEFORE_END as usize);
}

#[test]
fn semaphore_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/sem";
    let parents = prepare(
        &server,
        |c| {
            Semaphore::new(c, path, 1)
                .unwrap()
                .acquire()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    assert!(parents.len() >= 3, "semaphore parents: {parents:?}");
    let record = Arc::new(Record::default());
    // The error names whichever queue ran out (the gate or the leases).
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = client(&server);
            let sem = Semaphore::new(&c, path, 1).unwrap();
            let record = record.clone();
            let parents = parents.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    match sem.acquire_timeout(ACQUIRE) {
                        Err(LockError::SequenceExhausted { path: p }) if parents.contains(&p) => {
                            record
                                .outcome(&p, Err(LockError::SequenceExhausted { path: p.clone() }))
                        }
                        other => record.outcome(path, other),
                    }
                }
                drop(sem);
                drop(c);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contender panicked");
    }
    assert_fail_closed(&record, "Semaphore (1 lease)", BEFORE_END as usize);
}

#[test]
fn election_fails_closed_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/election";
    prepare(
        &server,
        |c| {
            Election::new(c, path, b"warm")
                .unwrap()
                .campaign()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = contend(
        &server,
        path,
        |c| Election::new(c, path, b"candidate").unwrap(),
        |e| e.campaign_timeout(ACQUIRE),
    );
    assert_fail_closed(&record, "Election", BEFORE_END as usize);
}

/// LeaderLatch campaigns again after every loss: at the end it must stop
/// with the typed error rather than lead on a node past the end. Each
/// client runs a latch until it gains (then resigns by dropping it) or
/// stops, `ROUNDS` times.
#[test]
fn leader_latch_stops_at_the_counter_end() {
    let server = ZkHarness::start(TICK);
    let path = "/end/latch";
    prepare(
        &server,
        |c| {
            Election::new(c, path, b"warm")
                .unwrap()
                .campaign()
                .unwrap()
                .unlock()
                .unwrap()
        },
        path,
    );
    let record = Arc::new(Record::default());
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let c = client(&server);
            let record = record.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    let latch = Election::new(&c, path, b"latch").unwrap().latch();
                    match latch.events().recv_timeout(ACQUIRE) {
                        Ok(LatchEvent::Gained { .. }) => {
                            let latch = Arc::new(latch);
                            let l = latch.clone();
                            let id = record.begin_hold("latch", Arc::new(move || l.is_leader()));
                            thread::sleep(Duration::from_millis(5));
                            record.end_hold(id, "latch");
                            drop(latch);
                            continue;
                        }
                        Ok(LatchEvent::Stopped(LockError::SequenceExhausted { path: p })) => {
                            record.exhausted.fetch_add(1, Ordering::SeqCst);
                            if p != path {
                                record.wrong(format!("SequenceExhausted names {p}"));
                            }
                        }
                        other => record.wrong(format!("latch: {other:?}")),
                    }
                    drop(latch);
                }
                drop(c);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contender panicked");
    }
    assert_fail_closed(&record, "LeaderLatch", BEFORE_END as usize);
}

#[test]
fn sequence_numbers_parse_past_the_end() {
    assert_eq!(sequence_of("/a/_c_x-lock-2147483647"), i32::MAX);
    assert_eq!(sequence_of("/a/_c_x-lock--2147483648"), i32::MIN);
    assert_eq!(sequence_of("/a/_c_x-__WRIT__0000000012"), 12);
    assert_eq!(sequence_of("/a/_c_x-latch--000000001"), -1);
    assert_eq!(sequence_of("0f3a__lock__2147483647"), i32::MAX);
    assert_eq!(sequence_of("0f3a__lock__-2147483647"), -i32::MAX);
    assert_eq!(sequence_of("0f3a__lock__-000000012"), -12);
    assert_eq!(sequence_of("_c_9-lock-0000000001"), 1);
}

// ---- the peers at the end, measured ---------------------------------------

/// What one peer's acquisition came to.
#[derive(Debug)]
enum PeerOutcome {
    /// `[acquired, released]` in the peer's unix millis, and the node.
    Held(u64, u64, String),
    Timeout,
    Error(String),
}

/// Three peers of `kind` (`lock_kind` as the peer program names it) on
/// `path`, whose counter is set three creates before the end; `ROUNDS`
/// acquisitions each with a bounded wait. Returns every outcome per peer.
fn peers_at_the_end(kind: PeerKind, lock_kind: &str, path: &str) -> Vec<Vec<PeerOutcome>> {
    let server = ZkHarness::start(TICK);
    let admin = client(&server);
    admin.create("/end", b"", CreateMode::Persistent).unwrap();
    admin.create(path, b"", CreateMode::Persistent).unwrap();
    server.set_sequence_counter(path, i32::MAX - BEFORE_END);
    let cs = server.connect_string();
    let peers: Vec<Peer> = (0..CLIENTS)
        .map(|k| Peer::start(kind, &cs, path, lock_kind, &format!("{kind}-{k}")))
        .collect();
    let started = Instant::now();
    let threads: Vec<_> = peers
        .into_iter()
        .map(|mut peer| {
            thread::spawn(move || {
                let mut outcomes = Vec::new();
                for _ in 0..ROUNDS {
                    peer.send(&format!("acquire {}", PEER_ACQUIRE.as_millis()));
                    let line = peer.next_line(PEER_ACQUIRE + REPLY_TIMEOUT);
                    match line {
                        Some(l) if l.starts_with("acquired ") => {
                            // Some work under the lock, as for zklock above.
                            thread::sleep(Duration::from_millis(5));
                            let released = peer.release();
                            outcomes.push(PeerOutcome::Held(
                                line_millis(&l),
                                released,
                                acquired_node(&l),
                            ));
                        }
                        Some(l) if l == "timeout" => outcomes.push(PeerOutcome::Timeout),
                        Some(l) => outcomes.push(PeerOutcome::Error(l)),
                        None => panic!("{kind}: no answer to acquire within the bound"),
                    }
                }
                peer.quit();
                outcomes
            })
        })
        .collect();
    let all: Vec<Vec<PeerOutcome>> = threads
        .into_iter()
        .map(|t| t.join().expect("a peer thread panicked"))
        .collect();
    eprintln!("{kind} {lock_kind}: {:?} for all rounds", started.elapsed());
    all
}

/// How many pairs of holds by different peers overlap in time (the peers'
/// own stamps: taken right after acquiring and right before releasing).
fn overlapping_pairs(all: &[Vec<PeerOutcome>]) -> usize {
    let spans: Vec<(usize, u64, u64)> = all
        .iter()
        .enumerate()
        .flat_map(|(p, v)| {
            v.iter().filter_map(move |o| match o {
                PeerOutcome::Held(a, r, _) => Some((p, *a, *r)),
                _ => None,
            })
        })
        .collect();
    let mut n = 0;
    for (i, x) in spans.iter().enumerate() {
        for y in &spans[i + 1..] {
            if x.0 != y.0 && x.1 < y.2 && y.1 < x.2 {
                n += 1;
            }
        }
    }
    n
}

/// Prints the measurement and returns (held, held past the end, timeouts,
/// errors, overlapping pairs).
fn summarize(what: &str, all: &[Vec<PeerOutcome>]) -> (usize, usize, usize, usize, usize) {
    let flat: Vec<&PeerOutcome> = all.iter().flatten().collect();
    let held = flat
        .iter()
        .filter(|o| matches!(o, PeerOutcome::Held(..)))
        .count();
    let past: Vec<&str> = flat
        .iter()
        .filter_map(|o| match o {
            PeerOutcome::Held(_, _, node) if past_the_end(sequence_of(node)) => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let timeouts = flat
        .iter()
        .filter(|o| matches!(o, PeerOutcome::Timeout))
        .count();
    let errors: Vec<&str> = flat
        .iter()
        .filter_map(|o| match o {
            PeerOutcome::Error(e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    let overlaps = overlapping_pairs(all);
    eprintln!(
        "{what}: {held} held ({} on nodes past the end), {timeouts} timeouts, {} errors \
         (first: {:?}), {overlaps} overlapping pairs of holds",
        past.len(),
        errors.len(),
        errors.first()
    );
    (held, past.len(), timeouts, errors.len(), overlaps)
}

/// Curator's InterProcessMutex at the end: measured, not fixed. What the
/// test pins down is that it does not fail closed (it holds on nodes past
/// the end) — the fact docs/SEQUENCE_END.md reports beside ours.
#[test]
fn curator_mutex_at_the_counter_end_measured() {
    let all = peers_at_the_end(PeerKind::Curator, "mutex", "/end/curator");
    let (held, past, timeouts, errors, _) = summarize("Curator InterProcessMutex", &all);
    assert_eq!(held + timeouts + errors, CLIENTS * ROUNDS);
    assert!(past > 0, "Curator held no node past the end");
}

/// kazoo's Lock at the end, measured the same way.
#[test]
fn kazoo_lock_at_the_counter_end_measured() {
    let all = peers_at_the_end(PeerKind::Kazoo, "mutex", "/end/kazoo");
    let (held, past, timeouts, errors, _) = summarize("kazoo Lock", &all);
    assert_eq!(held + timeouts + errors, CLIENTS * ROUNDS);
    assert!(past > 0, "kazoo held no node past the end");
}

/// Well before the end, the observer (and the log) hear that the counter
/// runs out, once per node issued past `SEQUENCE_WARNING`; before it,
/// never.
#[test]
fn the_observer_is_warned_near_the_end() {
    use std::sync::atomic::AtomicI32;
    use zklock::recipes::SEQUENCE_WARNING;
    use zklock::Observer;
    #[derive(Default)]
    struct Warned {
        calls: AtomicUsize,
        last: AtomicI32,
    }
    impl Observer for Warned {
        fn sequence_near_end(&self, _node: &str, sequence: i32) {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.last.store(sequence, Ordering::SeqCst);
        }
    }
    let server = ZkHarness::start(TICK);
    let warned = Arc::new(Warned::default());
    let c = Client::builder(&server.connect_string())
        .session_timeout(SESSION)
        .observer(warned.clone())
        .connect()
        .unwrap();
    let path = "/end/warned";
    let m = Mutex::new(&c, path).unwrap();
    m.lock_timeout(ACQUIRE).unwrap().unlock().unwrap();
    assert_eq!(warned.calls.load(Ordering::SeqCst), 0, "far from the end");
    server.set_sequence_counter(path, SEQUENCE_WARNING + 1);
    for _ in 0..3 {
        m.lock_timeout(ACQUIRE).unwrap().unlock().unwrap();
    }
    assert_eq!(warned.calls.load(Ordering::SeqCst), 3);
    assert_eq!(warned.last.load(Ordering::SeqCst), SEQUENCE_WARNING + 3);
}
