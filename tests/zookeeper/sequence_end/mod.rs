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

mod recipes;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use testkit::sequence_of;
use testkit::zk::ZkHarness;
use zklock::recipes::{
    Election, LatchEvent, LockError, LockGuard, LockState, Mutex, RwLock, Semaphore,
};
use zklock::Client;
use zklock_proto::lock::past_the_end;

const TICK: Duration = Duration::from_millis(200);
const SESSION: Duration = Duration::from_secs(4);
/// Per acquisition: far longer than any hand-over between three local
/// clients; reaching it counts as a hang.
const ACQUIRE: Duration = Duration::from_secs(10);
const ROUNDS: usize = 30;
const CLIENTS: usize = 3;
/// The counter is set this many creates before its end.
const BEFORE_END: i32 = 3;

/// Whether a holder still believes it holds: its guard (or latch) says so.
type Believes = Arc<dyn Fn() -> bool + Send + Sync>;

/// What the contenders saw, shared between their threads.
///
/// A holder counts as one from the moment its acquisition returns until it
/// starts releasing, unless its guard has told it that it lost the lock
/// (a holder whose queue ran past the end is told `Lost(SequenceExhausted)`;
/// its node stays until the guard goes). An overlap is an acquisition while
/// another holder still believes it holds. The check reads the other
/// guards' states right after the acquisition returns: the other's node
/// was deleted before ours could win, and the library marks a guard lost
/// before it deletes its node. A hold that begins while an earlier holder
/// told Lost still has its guard (`after_lost`) is a hand-over while that
/// holder's work may still run: none may happen where the guard keeps the
/// node (every recipe but `LeaderLatch`, which lets go itself on a loss).
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
    if what != "LeaderLatch" {
        assert_eq!(
            record.after_lost.load(Ordering::SeqCst),
            0,
            "{what}: a hold began while a holder told Lost still had its guard:\n{}",
            record.log.lock().unwrap().join("\n")
        );
    }
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
