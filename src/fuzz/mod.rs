//! A driver for the whole client core (session, lock machine, recipes)
//! that takes its script from raw bytes, for the `core` cargo-fuzz target
//! and for the stable test suite (the seeds in `fuzz/seeds/core/` and
//! generated scripts).
//!
//! One client, built with [`ClientBuilder::build_manual`](crate::ClientBuilder::build_manual),
//! takes three mutexes (two on one path) through their public handles,
//! against the model server of `server.rs`. The script decides what a
//! real network and server may decide: when each request is answered, a
//! refusal instead, time passing, the connection dropping (its writes
//! landed or not), a stall, the session expiring once it has been silent
//! long enough, and other processes' contenders and an operator's deletes.
//! After every step the core must hold to what it promises, read against
//! the model's tree:
//!
//! - no panic;
//! - a guard says `Held` only while connected, while its session lives on
//!   the server, on a node of its own session that no contender precedes
//!   (so never two holders, ours or another process's), unless a third
//!   party deleted that node; its `valid_until` never passes the moment
//!   the server may expire the session;
//! - at the end, every handle dropped on a healthy network: the core
//!   forgets every acquisition and leaves no node of its session, and its
//!   close ends the session.

mod server;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use self::server::{Answer, Server, FOREIGN, REFUSALS};
use crate::machine::{Core, CoreEvent};
use crate::recipes::{LockGuard, LockState, Mutex, MutexOptions, PendingLock};
use crate::Client;

/// The lock paths: mutexes 0 and 1 share the first.
const PATHS: [&str; 3] = ["/locks/a", "/locks/a", "/locks/b/c"];

/// Steps the end may take to settle (each answers everything and moves
/// to the core's next deadline).
const SETTLE_STEPS: usize = 400;

/// Runs one script. Panics only when the core breaks a promise.
pub fn run(data: &[u8]) {
    run_counting(data);
}

/// What one script made happen, so that a test can tell that scripts
/// reach the states worth checking.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reached {
    /// Guards handed out.
    pub(crate) grants: usize,
    /// Grants while another process's contender was queued on the path.
    pub(crate) grants_past_foreign: usize,
    /// Guards seen Suspended or Lost.
    pub(crate) suspended: usize,
    pub(crate) lost: usize,
    /// Sessions the server expired.
    pub(crate) expiries: usize,
    /// Acquisitions that ended without a guard.
    pub(crate) failures: usize,
}

/// [`run`], saying what the script reached.
pub(crate) fn run_counting(data: &[u8]) -> Reached {
    let mut bytes = data.iter().copied();
    let config = bytes.next().unwrap_or(0);
    let mut world = World::new(config);
    while let Some(op) = bytes.next() {
        let arg = bytes.next().unwrap_or(0);
        world.act(op, arg);
        world.step();
    }
    world.settle();
    world.reached
}

/// An acquisition under way or held, through the public handles.
enum Handle {
    Waiting(PendingLock),
    Held(LockGuard),
}

struct World {
    /// When the script started (traces show times from it).
    start: Instant,
    now: Instant,
    client: Option<Client>,
    core: Core,
    mutexes: Vec<Mutex>,
    handles: Vec<(usize, Handle)>,
    server: Server,
    /// The core's connection is up (it was told so and not told otherwise).
    linked: bool,
    /// Nothing moves either way on the connection (the core is not told).
    stalled: bool,
    /// Our nodes an operator deleted: a holder may not know yet.
    admin_deleted: BTreeSet<String>,
    /// Of those, the ones whose deletion notification is on its way to
    /// the client, and the ones it has been handed.
    telling: BTreeSet<String>,
    told: BTreeSet<String>,
    /// Which mutexes watch their holders' nodes.
    watching: Vec<bool>,
    /// Foreign nodes created so far (for names).
    foreign_count: u32,
    /// `ZKLOCK_FUZZ_TRACE` set: each step is printed.
    trace: bool,
    reached: Reached,
}

impl World {
    fn new(config: u8) -> World {
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
        World {
            start: now,
            now,
            client: Some(client),
            core,
            mutexes,
            handles: Vec::new(),
            server: Server::new(tick),
            linked: false,
            stalled: false,
            admin_deleted: BTreeSet::new(),
            telling: BTreeSet::new(),
            told: BTreeSet::new(),
            watching,
            foreign_count: 0,
            trace: std::env::var_os("ZKLOCK_FUZZ_TRACE").is_some(),
            reached: Reached::default(),
        }
    }

    /// One choice of the script.
    fn act(&mut self, op: u8, arg: u8) {
        if self.trace {
            eprintln!(
                "op {} arg {arg:#04x}: {:?} linked={} stalled={} attempts={} tree={:?}",
                op % 16,
                self.core,
                self.linked,
                self.stalled,
                self.core.lock_attempts(),
                self.server.tree.keys().collect::<Vec<_>>()
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
                self.handles.push((lock, Handle::Waiting(pending)));
            }
            // Drop a handle: a waiter gives up, a holder releases.
            2 => {
                if !self.handles.is_empty() {
                    let i = usize::from(arg) % self.handles.len();
                    self.handles.swap_remove(i);
                }
            }
            // A holder lets go and queues again in one write.
            3 => {
                let held: Vec<usize> = (0..self.handles.len())
                    .filter(|&i| matches!(self.handles[i].1, Handle::Held(_)))
                    .collect();
                if let Some(&i) = held.get(usize::from(arg) % held.len().max(1)) {
                    let (lock, handle) = self.handles.swap_remove(i);
                    if let Handle::Held(guard) = handle {
                        let pending = self.mutexes[lock].requeue(guard, None);
                        self.handles.push((lock, Handle::Waiting(pending)));
                    }
                }
            }
            // The oldest request answered, as the server would.
            4..=6 => {
                for _ in 0..=arg % 4 {
                    self.server.answer(self.now, Answer::Serve);
                }
            }
            // The oldest request refused before it ran.
            7 => {
                let code = REFUSALS[usize::from(arg) % REFUSALS.len()];
                self.server.answer(self.now, Answer::Refuse(code));
            }
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
            // The connection drops; its unanswered writes landed or not.
            11 => {
                if self.linked {
                    self.server.disconnect(arg & 1 == 1);
                    self.telling.clear();
                    self.linked = false;
                    self.stalled = false;
                    self.core.handle_disconnected(self.now);
                }
            }
            // A connection, if the core wants one.
            12 => self.connect(),
            // A stall starts or ends.
            13 => self.stalled = !self.stalled && self.linked,
            // Other processes and an operator.
            14 => self.third_party(arg),
            // The session expires, if it has been silent long enough.
            _ => {
                let session = self.core.session_id();
                if self.server.expire_if_silent(self.now, session) {
                    self.reached.expiries += 1;
                    self.server_closed();
                }
            }
        }
    }

    fn connect(&mut self) {
        if !self.linked && self.core.wants_connection() {
            self.core.prepare_connection();
            self.server.connect();
            self.linked = true;
            self.stalled = false;
            self.core.handle_connected(self.now);
        }
    }

    /// Answers everything asked so far.
    fn answer_all(&mut self) {
        // Bounded: a connection asks at most what the core wrote.
        for _ in 0..256 {
            if !self.server.has_asked() {
                return;
            }
            self.server.answer(self.now, Answer::Serve);
        }
    }

    /// Answers everything, and what the answers lead to, until the core
    /// asks nothing more (a healthy network and server, for the end).
    fn serve(&mut self) {
        if self.trace {
            eprintln!(
                "serve at {:?}: {:?} linked={} asked={}",
                self.now - self.start,
                self.core,
                self.linked,
                self.server.asked()
            );
        }
        for _ in 0..64 {
            let moved = self.move_bytes();
            self.core.turn(self.now);
            self.events();
            if self.server.has_asked() {
                self.answer_all();
            } else if !moved && self.core.output().is_empty() {
                return;
            }
        }
    }

    /// Another process queues or leaves, or an operator deletes one of
    /// our nodes.
    fn third_party(&mut self, arg: u8) {
        let queue = PATHS[usize::from(arg >> 4) % PATHS.len()];
        if !self.server.tree.contains_key(queue) {
            return;
        }
        let children: Vec<String> = self.server.tree[queue].children.iter().cloned().collect();
        let pick = |owned: &dyn Fn(i64) -> bool| -> Option<String> {
            let mine: Vec<&String> = children
                .iter()
                .filter(|c| {
                    let path = format!("{queue}/{c}");
                    self.server.tree.get(&path).is_some_and(|n| owned(n.owner))
                })
                .collect();
            mine.get(usize::from(arg >> 2) % mine.len().max(1))
                .map(|c| format!("{queue}/{c}"))
        };
        match arg & 3 {
            // A contender of another process.
            0 => {
                self.foreign_count += 1;
                let name = format!(
                    "{queue}/_c_{:08x}-0000-4000-8000-000000000000-lock-",
                    self.foreign_count
                );
                self.server.admin_create(FOREIGN, &name, true);
            }
            // Another session's node that carries one of our attempts' ids.
            1 => {
                let ours = pick(&|o| o != FOREIGN && o != 0);
                if let Some((prefix, _)) = ours.as_deref().and_then(|p| p.split_once("-lock-")) {
                    self.server
                        .admin_create(FOREIGN, &format!("{prefix}-lock-"), true);
                } else {
                    // Or something that is no contender at all.
                    self.server
                        .admin_create(0, &format!("{queue}/readme"), false);
                }
            }
            // A foreign contender leaves.
            2 => {
                if let Some(path) = pick(&|o| o == FOREIGN || o == 0) {
                    self.server.admin_delete(&path);
                }
            }
            // An operator deletes one of our nodes.
            _ => {
                if let Some(path) = pick(&|o| o != FOREIGN && o != 0) {
                    if self.server.admin_delete(&path) {
                        self.telling.insert(path.clone());
                    }
                    self.admin_deleted.insert(path);
                }
            }
        }
    }

    /// Moves what can move, lets the core run, then checks it.
    fn step(&mut self) {
        self.core.turn(self.now);
        for _ in 0..8 {
            let moved = self.move_bytes();
            self.core.turn(self.now);
            self.events();
            if !moved && !self.core.has_commands() {
                break;
            }
        }
        self.collect();
        self.check();
    }

    /// Bytes both ways, unless stalled; `true` if any moved.
    fn move_bytes(&mut self) -> bool {
        let mut moved = false;
        if self.linked && !self.stalled {
            let out = self.core.output();
            if !out.is_empty() {
                let n = out.len();
                self.server.receive(self.now, out);
                self.core.consume_output(n);
                moved = true;
            }
        }
        if self.linked && !self.stalled && !self.server.out.is_empty() {
            let bytes = self.server.out.split();
            self.core.handle_input(self.now, &bytes);
            self.told.append(&mut self.telling);
            moved = true;
        }
        if self.server.closed && !self.stalled {
            self.server_closed();
            moved = true;
        }
        moved
    }

    /// The server closed the connection: what it wrote before arrives,
    /// then the close.
    fn server_closed(&mut self) {
        self.server.closed = false;
        if !self.linked {
            return;
        }
        if !self.server.out.is_empty() {
            let bytes = self.server.out.split();
            self.core.handle_input(self.now, &bytes);
        }
        self.told.append(&mut self.telling);
        self.linked = false;
        self.stalled = false;
        self.core.handle_disconnected(self.now);
    }

    /// What the core asks of its driver.
    fn events(&mut self) {
        while let Some(event) = self.core.poll_event() {
            if let CoreEvent::DropConnection(_) = event {
                if self.linked {
                    self.server.disconnect(false);
                    self.telling.clear();
                    self.linked = false;
                    self.stalled = false;
                }
            }
        }
    }

    /// Outcomes that came: a guard, or an acquisition that ended.
    fn collect(&mut self) {
        let mut i = 0;
        while i < self.handles.len() {
            let outcome = match &self.handles[i].1 {
                Handle::Waiting(p) => p.try_take(),
                Handle::Held(_) => None,
            };
            match outcome {
                Some(Ok(guard)) => {
                    self.reached.grants += 1;
                    let queue = PATHS[self.handles[i].0];
                    let foreign = self.server.tree.iter().any(|(p, n)| {
                        n.owner == FOREIGN
                            && p.strip_prefix(queue).is_some_and(|r| r.starts_with('/'))
                    });
                    self.reached.grants_past_foreign += usize::from(foreign);
                    self.handles[i].1 = Handle::Held(guard);
                    i += 1;
                }
                Some(Err(e)) => {
                    if self.trace {
                        eprintln!("acquisition failed: {e:?}");
                    }
                    self.reached.failures += 1;
                    self.handles.swap_remove(i);
                }
                None => i += 1,
            }
        }
    }

    /// Every guard saying Held against the model's tree.
    fn check(&mut self) {
        for (lock, handle) in &self.handles {
            let Handle::Held(guard) = handle else {
                continue;
            };
            match guard.state() {
                LockState::Held => {}
                LockState::Suspended => self.reached.suspended += 1,
                LockState::Lost => self.reached.lost += 1,
            }
            let session = guard.owner_session();
            if let (Some(until), Some(record)) =
                (guard.valid_until(), self.server.sessions.get(&session))
            {
                let expiry = record.last_heard + record.timeout;
                assert!(
                    until <= expiry,
                    "mutex {lock}: valid_until {:?} past the server's expiry",
                    until - expiry
                );
            }
            if guard.state() != LockState::Held {
                continue;
            }
            let node = guard.node_path();
            assert!(
                self.linked,
                "mutex {lock}: {node} says Held with no connection"
            );
            assert_eq!(
                session,
                self.core.session_id(),
                "mutex {lock}: {node} says Held for session {session:#x}, not the client's"
            );
            assert!(
                self.server.session_alive(session),
                "mutex {lock}: {node} says Held but session {session:#x} is gone on the server"
            );
            let Some(stat) = self.server.tree.get(node) else {
                assert!(
                    self.admin_deleted.contains(node),
                    "mutex {lock}: says Held but its node {node} is gone"
                );
                // A holder that watches its node hears of its deletion.
                assert!(
                    !(self.watching[*lock] && self.told.contains(node)),
                    "mutex {lock}: read the deletion of its node {node} and still says Held"
                );
                continue;
            };
            assert_eq!(
                stat.owner, session,
                "mutex {lock}: says Held by {node}, owned by {:#x}, not by its session",
                stat.owner
            );
            let (queue, name) = node.rsplit_once('/').unwrap_or(("/", node));
            let ours = sequence(name);
            if let Some(below) = self.server.tree.get(queue).and_then(|q| {
                q.children
                    .iter()
                    .filter(|c| c.contains("-lock-"))
                    .find(|c| sequence(c) < ours)
            }) {
                panic!("mutex {lock}: says Held by {node} while {queue}/{below} precedes it");
            }
        }
    }

    /// The end: every handle dropped, the network healed, and the core
    /// given the time it needs; then nothing of ours may remain.
    fn settle(&mut self) {
        self.handles.clear();
        self.stalled = false;
        for _ in 0..SETTLE_STEPS {
            self.connect();
            self.serve();
            self.step();
            if self.trace {
                eprintln!(
                    "settle at {:?}: {:?} linked={} attempts={} asked={} tree={:?}",
                    self.now - self.start,
                    self.core,
                    self.linked,
                    self.core.lock_attempts(),
                    self.server.asked(),
                    self.server.tree.keys().collect::<Vec<_>>()
                );
            }
            if self.core.lock_attempts() == 0 && !self.server.has_asked() {
                break;
            }
            match self.core.poll_timeout() {
                Some(at) => self.now = self.now.max(at),
                None => self.now += Duration::from_millis(100),
            }
            // The server hears the client: its session does not expire
            // while the core works through its timers.
            self.step();
        }
        assert_eq!(
            self.core.lock_attempts(),
            0,
            "acquisitions still tracked after every handle was dropped on a healthy network"
        );
        let session = self.core.session_id();
        if self.server.session_alive(session) {
            let left: Vec<&String> = self
                .server
                .tree
                .iter()
                .filter(|(_, n)| n.owner == session)
                .map(|(p, _)| p)
                .collect();
            assert!(
                left.is_empty(),
                "nodes of session {session:#x} left after every handle was dropped: {left:?}"
            );
        }
        // The last client handle goes: the session closes.
        self.mutexes.clear();
        self.client = None;
        for _ in 0..SETTLE_STEPS {
            if self.core.is_finished() {
                break;
            }
            self.connect();
            self.serve();
            self.step();
            if self.trace {
                eprintln!(
                    "close: {:?} linked={} asked={}",
                    self.core,
                    self.linked,
                    self.server.asked()
                );
            }
            if let Some(at) = self.core.poll_timeout() {
                self.now = self.now.max(at);
            }
        }
        assert!(self.core.is_finished(), "the core never finished its close");
        // A close asked while disconnected ends the session here only: the
        // server expires it later. It must hold no node meanwhile.
        if let Some((path, _)) = self.server.tree.iter().find(|(_, n)| n.owner == session) {
            panic!("{path} of session {session:#x} outlives the close");
        }
    }
}

/// A node name's sequence suffix (the last ten digits).
fn sequence(name: &str) -> i64 {
    name.get(name.len().saturating_sub(10)..)
        .and_then(|s| s.parse().ok())
        .unwrap_or(i64::MAX)
}
