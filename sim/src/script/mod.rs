//! A driver for the whole client core (session, lock machine, recipes)
//! that takes its script from raw bytes: the `lock_core` cargo-fuzz
//! target, and the simulation tests on the committed seeds in
//! `fuzz/seeds/lock_core/` and on generated scripts
//! (tests/simulation/script.rs).
//!
//! One client, built with `ClientBuilder::build_manual`, takes three
//! mutexes (two on one path) through their public handles, against the
//! model ZooKeeper (`crate::zookeeper`), on virtual time, on one thread:
//! the core is stepped by hand. The script decides what a real network
//! and server may decide: when each request reaches the server (and is
//! answered there), a refusal instead, time passing, the connection
//! dropping (its writes landed or not), a stall, the session expiring
//! once it has been silent long enough, and other processes' contenders
//! and an operator's deletes (link.rs, third_party.rs). The model does
//! the rest by ZooKeeper's rules, its own expiry of a silent session
//! included, so that what the client is told is always true of its tree.
//!
//! After every step the core is held to the simulator's checker
//! (`crate::world::checker`, the world's own): no panic; a guard says
//! `Held` only while connected, while its session lives on the server, on
//! a node of its own session that no contender of any session precedes,
//! unless a third party deleted that node (and then only until it reads
//! of the deletion, if it watches its node); it is Lost within a session
//! timeout of the last request the server answered; its `valid_until`
//! never passes the server's expiry; a wait ends by its deadline. At the
//! end, every handle dropped on a healthy network, the core forgets every
//! acquisition and leaves no node of its session; then the client goes,
//! the core finishes its close, and no node of its session outlives it
//! (checks.rs, settle.rs).
//!
//! The first byte configures the run (session timeout asked, the
//! server's tick, which mutexes watch their node, the leader check); then
//! each pair of bytes is one choice and its argument (`Script::act`).
//! `ZKLOCK_FUZZ_TRACE` set: each step is printed, and the server's every
//! request and reply.

mod checks;
mod link;
mod settle;
mod third_party;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use zklock::recipes::{LockGuard, Mutex, MutexOptions, PendingLock};
use zklock::testing::Core;
use zklock::Client;

use crate::zookeeper::{ConnId, SimZooKeeper};
use link::{Link, REFUSALS};

/// The lock paths: mutexes 0 and 1 share the first.
const PATHS: [&str; 3] = ["/locks/a", "/locks/a", "/locks/b/c"];

/// Runs one script. Panics only when the core breaks a promise.
pub fn run(data: &[u8]) {
    run_counting(data);
}

/// What one script made happen, so that a test can tell that scripts
/// reach the states worth checking.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reached {
    /// Guards handed out.
    pub grants: usize,
    /// Grants while another process's contender was queued on the path.
    pub grants_past_foreign: usize,
    /// Guards seen Suspended or Lost.
    pub suspended: usize,
    pub lost: usize,
    /// Sessions the server expired.
    pub expiries: usize,
    /// Acquisitions that ended without a guard.
    pub failures: usize,
}

impl Reached {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Reached) {
        self.grants += other.grants;
        self.grants_past_foreign += other.grants_past_foreign;
        self.suspended += other.suspended;
        self.lost += other.lost;
        self.expiries += other.expiries;
        self.failures += other.failures;
    }
}

/// [`run`], saying what the script reached.
pub fn run_counting(data: &[u8]) -> Reached {
    let mut bytes = data.iter().copied();
    let config = bytes.next().unwrap_or(0);
    let mut script = Script::new(config);
    while let Some(op) = bytes.next() {
        let arg = bytes.next().unwrap_or(0);
        script.act(op, arg);
        script.step();
    }
    script.settle();
    script.reached
}

/// An acquisition under way or held, through the public handles.
struct Acquisition {
    /// Which mutex (an index into `PATHS`).
    lock: usize,
    started: Instant,
    /// The deadline its wait was started with.
    deadline: Option<Instant>,
    handle: Handle,
}

enum Handle {
    Waiting(PendingLock),
    Held(LockGuard),
}

struct Script {
    /// When the script started (traces show times from it).
    start: Instant,
    now: Instant,
    client: Option<Client>,
    core: Core,
    mutexes: Vec<Mutex>,
    acquisitions: Vec<Acquisition>,
    server: SimZooKeeper,
    /// The session timeout the server grants (what the client asks,
    /// clamped to its `[2, 20]` ticks).
    timeout: Duration,
    /// The core's connection, while it has one.
    link: Option<Link>,
    /// Nothing moves either way on the connection (the core is not told).
    stalled: bool,
    /// When the server last received anything of the session's: the
    /// bytes the core wrote, as they left it once the handshake had run
    /// (link.rs, `touch`), and the handshake as it ran.
    heard: Instant,
    /// When the newest request the server answered was sent (S2's proof
    /// of life).
    last_answered_send: Instant,
    /// The frames the server wrote so far (each is numbered by it).
    writes: u64,
    /// Our nodes an operator deleted: the number of the server's last
    /// write before, and the connections that had a data watch on the
    /// node then (who must hear of it).
    admin_deleted: BTreeMap<String, (u64, Vec<ConnId>)>,
    /// Which mutexes watch their holders' nodes.
    watching: Vec<bool>,
    /// Foreign nodes created so far (for names).
    foreign_count: u32,
    /// The session was seen alive on the server (an expiry is counted
    /// once it is gone), and the core is closing it on purpose.
    session_seen: bool,
    closing: bool,
    trace: bool,
    reached: Reached,
}

impl Script {
    fn new(config: u8) -> Script {
        let now = Instant::now();
        let asked = [
            Duration::from_secs(1),
            Duration::from_secs(6),
            Duration::from_secs(30),
        ][usize::from(config >> 2 & 3) % 3];
        let tick = if config & 0x10 == 0 {
            Duration::from_millis(100)
        } else {
            Duration::from_millis(500)
        };
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(asked)
            .leader_check(config & 1 == 0)
            .new_session_after_expiry(false)
            .build_manual(now, u128::from(config))
            .expect("a manual client");
        let watching: Vec<bool> = (0..PATHS.len())
            .map(|i| (config >> 1 & 1 == 1) ^ (i == 1))
            .collect();
        let mutexes = PATHS
            .iter()
            .zip(&watching)
            .map(|(path, &watch)| {
                let options = MutexOptions::default().watch_node(watch).data(b"fuzz");
                Mutex::with_options(&client, path, options).expect("a valid path")
            })
            .collect();
        let trace = std::env::var_os("ZKLOCK_FUZZ_TRACE").is_some();
        let server = SimZooKeeper::new(now, tick);
        let server = if trace { server.with_trace() } else { server };
        Script {
            start: now,
            now,
            client: Some(client),
            core,
            mutexes,
            acquisitions: Vec::new(),
            server,
            timeout: asked.clamp(2 * tick, 20 * tick),
            link: None,
            stalled: false,
            heard: now,
            last_answered_send: now,
            writes: 0,
            admin_deleted: BTreeMap::new(),
            watching,
            foreign_count: 0,
            session_seen: false,
            closing: false,
            trace,
            reached: Reached::default(),
        }
    }

    /// One choice of the script.
    fn act(&mut self, op: u8, arg: u8) {
        if self.trace {
            eprintln!(
                "{:>9.3} op {} arg {arg:#04x}: {:?} linked={} stalled={} attempts={} tree={:?}",
                (self.now - self.start).as_secs_f64(),
                op % 16,
                self.core,
                self.link.is_some(),
                self.stalled,
                self.core.lock_attempts(),
                self.server.paths()
            );
        }
        match op % 16 {
            // Start an acquisition: no deadline, a deadline, or a try.
            0 | 1 => {
                let lock = usize::from(arg) % PATHS.len();
                let deadline = match arg >> 2 & 3 {
                    0 | 1 => None,
                    2 => Some(self.now),
                    _ => Some(self.now + Duration::from_millis(u64::from(arg >> 4) * 1000 + 500)),
                };
                let pending = self.mutexes[lock].start_lock(deadline);
                self.acquisitions.push(Acquisition {
                    lock,
                    started: self.now,
                    deadline,
                    handle: Handle::Waiting(pending),
                });
            }
            // Drop a handle: a waiter gives up, a holder releases.
            2 => {
                if !self.acquisitions.is_empty() {
                    let i = usize::from(arg) % self.acquisitions.len();
                    self.acquisitions.swap_remove(i);
                }
            }
            // A holder lets go and queues again in one write.
            3 => {
                let held: Vec<usize> = (0..self.acquisitions.len())
                    .filter(|&i| matches!(self.acquisitions[i].handle, Handle::Held(_)))
                    .collect();
                if let Some(&i) = held.get(usize::from(arg) % held.len().max(1)) {
                    let a = self.acquisitions.swap_remove(i);
                    if let Handle::Held(guard) = a.handle {
                        let pending = self.mutexes[a.lock].requeue(guard, None);
                        self.acquisitions.push(Acquisition {
                            lock: a.lock,
                            started: self.now,
                            deadline: None,
                            handle: Handle::Waiting(pending),
                        });
                    }
                }
            }
            // The oldest requests reach the server, which answers them.
            4..=6 => {
                for _ in 0..=arg % 4 {
                    self.answer(None);
                }
            }
            // The oldest request refused before it ran.
            7 => self.answer(Some(REFUSALS[usize::from(arg) % REFUSALS.len()])),
            // Everything answered, and what follows, until quiet.
            8 => {
                if !self.stalled {
                    self.serve();
                }
            }
            // Time passes.
            9 => self.now += Duration::from_millis(u64::from(arg) * 25),
            // To the core's next deadline.
            10 => {
                if let Some(at) = self.core.poll_timeout() {
                    self.now = self.now.max(at);
                }
            }
            // The connection drops; its writes on the way landed or not.
            11 => self.drop_connection(arg & 1 == 1),
            // A connection, if the core wants one.
            12 => self.connect(),
            // A stall starts or ends.
            13 => self.stalled = !self.stalled && self.link.is_some(),
            // Other processes and an operator.
            14 => self.third_party(arg),
            // The session expires, if it has been silent long enough.
            _ => self.expire_if_silent(),
        }
    }

    /// Moves what can move, lets the core run, then checks it.
    fn step(&mut self) {
        self.server.handle_timeout(self.now);
        self.drain_server();
        self.core.turn(self.now);
        for _ in 0..8 {
            let moved = self.move_bytes();
            self.core.turn(self.now);
            self.events();
            if !moved && !self.core.has_commands() {
                break;
            }
        }
        self.note_expiry();
        self.collect();
        self.check();
        self.print_server_trace();
    }

    /// Answers everything, and what the answers lead to, until the core
    /// asks nothing more (a healthy network and server, for the end).
    fn serve(&mut self) {
        if self.trace {
            eprintln!(
                "{:>9.3} serve: {:?} linked={} waiting at the server: {}",
                (self.now - self.start).as_secs_f64(),
                self.core,
                self.link.is_some(),
                self.link.as_ref().map_or(0, |l| l.up.len())
            );
        }
        for _ in 0..64 {
            let moved = self.move_bytes();
            self.core.turn(self.now);
            self.events();
            if self.link.as_ref().is_some_and(|l| !l.up.is_empty()) {
                self.answer_all();
            } else if !moved && self.core.output().is_empty() {
                return;
            }
        }
    }

    /// The session's expiry, counted once the server has ended it on its
    /// own (not closed by the core at the end).
    fn note_expiry(&mut self) {
        let sid = self.core.session_id();
        if sid == 0 {
            return;
        }
        if self.server.session_alive(sid) {
            self.session_seen = true;
        } else if self.session_seen {
            self.session_seen = false;
            if !self.closing {
                self.reached.expiries += 1;
            }
        }
    }

    /// The server's own trace lines, when tracing.
    fn print_server_trace(&mut self) {
        for line in self.server.take_trace() {
            eprintln!("          server {line}");
        }
    }
}
