//! Mutual exclusion under faults: workers increment a counter under the lock
//! with fenced writes while a chaos thread cuts, stalls and black-holes their
//! connections (long enough, at times, to expire sessions). Bounded in time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::proxy::{Direction, Proxy};
use testkit::zk::ZkServer;
use zklock::recipes::{LockError, Mutex};
use zklock::{Client, CreateMode, Error, ErrorCode, Op};

const RUN: Duration = Duration::from_secs(12);
const SESSION: Duration = Duration::from_secs(2);
const WORKERS: usize = 4;

#[derive(Default)]
struct Tally {
    /// Increments the server confirmed.
    done: AtomicU64,
    /// Increments whose outcome is unknown (connection lost mid-write).
    unknown: AtomicU64,
    /// Someone else wrote while we held the lock: exclusion broken.
    violations: AtomicU64,
    /// Fenced writes refused because the lock was gone: fencing worked.
    fenced_off: AtomicU64,
    /// Sessions that expired and were replaced by the worker, explicitly.
    new_sessions: AtomicU64,
}

fn connect(proxy: &Proxy) -> Option<Client> {
    Client::connect(&proxy.connect_string(), SESSION).ok()
}

fn worker(proxy: Arc<Proxy>, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut client = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match client.take().or_else(|| connect(&proxy)) {
            Some(c) => c,
            None => continue,
        };
        let m = Mutex::new(&c, "/chaos/lock").unwrap();
        match m.lock_timeout(Duration::from_secs(3)) {
            Ok(guard) => {
                let read = c.get_data("/chaos/counter");
                if let Ok((data, stat)) = read {
                    let n: u64 = String::from_utf8_lossy(&data).parse().unwrap_or(0);
                    let write = Op::set_data(
                        "/chaos/counter",
                        (n + 1).to_string().as_bytes(),
                        Some(stat.version),
                    );
                    match guard.fenced(&[write]) {
                        Ok(_) => {
                            tally.done.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(LockError::Lost) => {
                            tally.fenced_off.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(LockError::Client(Error::MultiFailed {
                            index: 1,
                            code: ErrorCode::BadVersion,
                            ..
                        })) => {
                            tally.violations.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(LockError::Client(e)) if e.is_outcome_unknown() => {
                            tally.unknown.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => {}
                    }
                }
                drop(guard);
                client = Some(c);
            }
            Err(LockError::SessionExpired) => {
                // The caller's explicit choice: a new session.
                tally.new_sessions.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => client = Some(c),
        }
        if let Some(c) = &client {
            if c.state().is_terminal() {
                tally.new_sessions.fetch_add(1, Ordering::SeqCst);
                client = None;
            }
        }
    }
}

/// The variable that fixes the fault schedule's seed; unset, the clock
/// picks one.
const SEED_VAR: &str = "CHAOS_SEED";

/// The seed from `CHAOS_SEED`, or from the clock (printed either way);
/// never 0, which xorshift would keep at 0.
fn seed() -> u64 {
    match std::env::var(SEED_VAR) {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not a number"))
            .max(1),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        }
    }
}

/// Prints the command that replays the seed's fault schedule when the test
/// fails, whichever assertion or unwrap failed.
struct Replay(u64);

impl Replay {
    fn command(&self) -> String {
        format!(
            "{SEED_VAR}={} cargo test --test zookeeper chaos:: -- --nocapture",
            self.0
        )
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("chaos failed; replay its faults: {}", self.command());
        }
    }
}

/// `CHAOS_SEED` fixes which connection gets which fault, and when.
#[test]
fn fenced_increments_stay_exclusive_under_faults() {
    let server = ZkServer::start_with(500);
    let admin = Client::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    admin.create("/chaos", b"", CreateMode::Persistent).unwrap();
    admin
        .create("/chaos/counter", b"0", CreateMode::Persistent)
        .unwrap();
    let proxies: Vec<Arc<Proxy>> = (0..WORKERS)
        .map(|_| Arc::new(Proxy::start(server.addr())))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let workers: Vec<_> = proxies
        .iter()
        .map(|p| {
            let (p, stop, tally) = (p.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || worker(p, stop, tally))
        })
        .collect();

    // Chaos: a fault every few hundred milliseconds, on one connection.
    let seed = seed();
    let replay = Replay(seed);
    eprintln!("chaos seed {seed}; replay: {}", replay.command());
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let end = Instant::now() + RUN;
    let mut faults = 0;
    while Instant::now() < end {
        let p = &proxies[(next() % WORKERS as u64) as usize];
        match next() % 4 {
            0 => p.cut_all(),
            1 => {
                p.stall();
                std::thread::sleep(Duration::from_millis(300));
                p.clear();
            }
            2 => {
                // Longer than the session timeout: the server expires it.
                p.blackhole(Direction::Both);
                std::thread::sleep(SESSION + Duration::from_millis(800));
                p.clear();
                p.cut_all();
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
        faults += 1;
        std::thread::sleep(Duration::from_millis(100 + next() % 300));
    }
    stop.store(true, Ordering::SeqCst);
    for p in &proxies {
        p.clear();
    }
    for w in workers {
        w.join().unwrap();
    }

    let done = tally.done.load(Ordering::SeqCst);
    let unknown = tally.unknown.load(Ordering::SeqCst);
    let (data, _) = admin.get_data("/chaos/counter").unwrap();
    let counter: u64 = String::from_utf8_lossy(&data).parse().unwrap();
    eprintln!(
        "chaos: {faults} faults, {done} increments, {unknown} unknown, {} fenced off, {} new sessions",
        tally.fenced_off.load(Ordering::SeqCst),
        tally.new_sessions.load(Ordering::SeqCst)
    );
    assert_eq!(
        tally.violations.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    assert!(done > 0, "no work got done under chaos");
    assert!(
        (done..=done + unknown).contains(&counter),
        "counter {counter}, confirmed {done}, unknown {unknown}"
    );
    // Every session is closed or expired: no lock node may remain.
    testkit::wait_no_children(&admin, "/chaos/lock", Duration::from_secs(10));
}
