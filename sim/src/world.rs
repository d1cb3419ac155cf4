//! The simulated world: clients built with `ClientBuilder::build_manual`,
//! each running the shipped core (session, lock machine and the routing
//! between them and the API's handles) and used through the public recipe
//! API (`Mutex::start_lock`, `PendingLock`, guards), an in-memory ZooKeeper
//! and a network between them, all on virtual time, with every choice drawn
//! from one seed. Faults are injected far more often than in production;
//! invariants are checked after every step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use zklock::recipes::{CancelToken, Election, LeaderLatch, LockError, LockState};
use zklock::testing::CoreEvent;

type AttemptId = u64;

use super::rng::Rng;
use super::zookeeper::{ConnId, SimZooKeeper};

mod act;
mod available;
mod calls;
pub(crate) mod checker;
mod client;
mod close;
mod collect;
mod faults;
mod fenced;
mod herd;
mod latches;
mod multis;
mod network;
mod observe;
mod plan;
mod reconnect;
mod revocation;
mod threads;
mod twins;
mod wakes;
pub(crate) mod wire;
mod withdrawn;
mod writes;

use client::{
    queue_path, watched, Handle, Link, Phase, SimClient, SimLock, ThreadEntry, Tracked,
    ELECTION_LOCK, LATCH_PATH, LEASES, LEASE_LOCK,
};
use herd::WokenBy;
use plan::Wait;
pub use plan::{Fault, Options, Plan};
use wire::note_requests;

/// The server's tick: it clamps session timeouts to `[2, 20]` of them
/// (ZooKeeperServer.processConnectRequest, with the default
/// minSessionTimeout and maxSessionTimeout).
const TICK: Duration = Duration::from_millis(2000);
const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(2 * 2000);
const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(20 * 2000);

/// The most a link's latency varies on top of its steady part.
const MAX_JITTER: Duration = Duration::from_micros(3100);

/// What a test or the user asked of a client at a time.
#[derive(Debug, Clone)]
enum Action {
    Acquire {
        client: usize,
        lock: usize,
        wait: Wait,
        hold: Duration,
        cancel_after: Option<Duration>,
    },
    Release {
        client: usize,
        generation: u32,
        id: AttemptId,
    },
    Cancel {
        client: usize,
        generation: u32,
        id: AttemptId,
    },
    Fault(Fault),
    /// The client starts campaigning with a leader latch on `LATCH_PATH`.
    LatchStart {
        client: usize,
        generation: u32,
    },
    /// The client drops its latch (withdrawing).
    LatchDrop {
        client: usize,
        generation: u32,
    },
    /// A third party deletes this node (if it is still there).
    AdminDeletePath(String),
    /// The server closes this connection (a follower dropping its clients).
    CloseConn(ConnId),
    /// One of the client's threads calls for `lock` again while it holds
    /// it (a read if `reader`): re-entry, a downgrade, or a refusal.
    ThreadCall {
        client: usize,
        generation: u32,
        lock: usize,
        thread: usize,
        reader: bool,
        hold: Duration,
    },
    /// Nothing: a step at this time, for handles that read the clock.
    Look,
    /// The client sends write number `n` of the application's own (most
    /// refused by the server; see writes.rs).
    AppWrite {
        client: usize,
        n: u64,
    },
    /// An A2 probe of `lock` (available.rs): `tries` tries at once, or one
    /// wait of `wait`, once the lock is free; looked at again `left` times.
    /// `free_since`: when it was last found free (it starts once the lock
    /// has stayed so for two round trips).
    Probe {
        lock: usize,
        wait: Option<Duration>,
        tries: usize,
        left: u32,
        free_since: Option<Instant>,
    },
    /// The holder `id` writes through `LockGuard::fenced` (fenced.rs).
    Fenced {
        client: usize,
        generation: u32,
        id: AttemptId,
        kind: fenced::FencedKind,
    },
    /// Client `by` asks the holder `id` of client `client` to let go
    /// (revocation.rs).
    Revoke {
        by: usize,
        client: usize,
        generation: u32,
        id: AttemptId,
        by_holder: bool,
    },
    /// The campaign's winner `id` proclaims a value (observe.rs).
    Proclaim {
        client: usize,
        generation: u32,
        id: AttemptId,
    },
    /// The client looks at the election's leader (observe.rs).
    Observe {
        client: usize,
    },
}

/// A broken invariant, with the seed's story so far.
#[derive(Debug)]
pub struct Violation {
    pub what: String,
    pub at: Duration,
    pub log: String,
}

/// Counts over one run, for the summary of many.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub grants: u64,
    pub timeouts: u64,
    pub faults: u64,
    pub lost: u64,
    /// Waiters woken by their blocker's deletion.
    pub wakes: u64,
    pub expired_sessions: u64,
    /// Expired sessions their client followed with a new one.
    pub renewed_sessions: u64,
    pub virtual_ms: u64,
    /// Turns handed out by a client's BatchMutex, and of those, turns
    /// passed on locally inside one hold.
    pub batch_turns: u64,
    pub batch_handoffs: u64,
    /// Batch waiters that ended Cancelled by their token.
    pub token_cancels: u64,
    /// Threads' calls that shared the thread's holding (re-entry, a
    /// write holder's read), and that were refused.
    pub thread_shares: u64,
    pub thread_refusals: u64,
    /// Grants per lock of the plan (a multi-lock's parts each count), and
    /// multi-locks handed out whole: a recipe that never grants is a bug
    /// no safety check sees.
    pub lock_grants: [u64; 5],
    pub multi_grants: u64,
    /// PendingSets dropped with keys open, and looks at a quiet client's
    /// nodes (withdrawn.rs).
    pub set_drops: u64,
    pub quiet_looks: u64,
    /// Releases of a batch turn with every other local batch waiter giving
    /// up at once (act.rs).
    pub batch_leaves: u64,
    /// The application's own writes sent (most refused), and A2 probes
    /// started on free locks.
    pub app_writes: u64,
    pub probes: u64,
    /// Calls of the handles' other methods (calls.rs): fenced writes,
    /// revocation requests and holders told of them, proclaims, looks at
    /// the leader, latches closed.
    pub fenced_writes: u64,
    pub revocations: u64,
    pub revocations_heard: u64,
    pub proclaims: u64,
    pub observes: u64,
    pub latch_closes: u64,
    /// Reads a lagging follower answered from a state behind the leader's,
    /// and handshakes it refused to clients ahead of it (network.rs).
    pub stale_reads: u64,
    pub refused_ahead: u64,
    /// Holders told Lost for their max hold, and the ends A6 followed
    /// until a contender queued then was served, on a healthy network.
    pub max_hold_ends: u64,
    pub max_hold_hand_ons: u64,
}

pub struct World {
    rng: Rng,
    options: Options,
    base: Instant,
    now: Instant,
    server: SimZooKeeper,
    clients: Vec<SimClient>,
    locks: usize,
    plan: BTreeMap<(Instant, u64), Action>,
    plan_seq: u64,
    /// Per lock: the highest fencing token granted, and the highest
    /// granted to an exclusive holder. An exclusive holder's token is above
    /// every earlier holder's; a reader's above every earlier writer's
    /// (readers between two writers may be granted in any order).
    last_token: Vec<i64>,
    last_writer_token: Vec<i64>,
    /// Nodes a third party created (and will delete).
    admin_twins: Vec<String>,
    /// Nodes a third party deleted, the number of the server's last write
    /// before, and the connections that had a data watch on them then (who
    /// must hear of it).
    admin_deleted: BTreeMap<String, (u64, Vec<ConnId>)>,
    /// Per node a thread's calls share: the server's last zxid when the
    /// holding was first seen ended (Lost, or every guard gone). A call
    /// that was to share it queues only after that.
    holding_ended: BTreeMap<String, i64>,
    /// Latch nodes a third party deleted, and the session that owned each.
    deleted_latch_nodes: BTreeMap<String, i64>,
    /// Numbers the server's writes, in order.
    writes: u64,
    /// Per deleted blocker, the waiters it woke (the herd count).
    woken_by: WokenBy,
    faults_until: Instant,
    /// Per client: when the last fault's effect on its link or on the
    /// server ends (available.rs).
    unhealthy_until: Vec<Instant>,
    /// A2 probes started.
    probes: Vec<available::Probe>,
    /// Lock-delay tenure marks left by unclean ends, and the end each
    /// records (once recorded).
    stale_marks: BTreeMap<String, Option<Instant>>,
    /// The server's zxid when the marks were last looked at.
    marks_scanned: i64,
    /// Per lock: since when it has had fewer holders than room while
    /// contenders queue, with no grant since (A3).
    idle_since: Vec<Option<Instant>>,
    /// What A3 last found: per lock idle, its holders' nodes (a new one is
    /// a grant: progress), and the state it found it in (the server's
    /// zxid, the cores' grants and releases): it looks again only when
    /// that changed.
    idle_locks: Vec<Option<BTreeSet<String>>>,
    idle_key: (i64, u64),
    /// Per client: the last look of the withdrawal check (withdrawn.rs):
    /// the server's zxid, the session, the open acquisitions per path.
    withdrawn_looks: Vec<(i64, i64, BTreeMap<String, usize>)>,
    /// Threads that make the application's blocking calls (writes.rs).
    callers: writes::Callers,
    /// Blocking calls under way whose outcome is checked (calls.rs).
    calls: Vec<calls::Running>,
    /// Per lock node: when the world first saw a revocation request in it;
    /// and the holders told of one (client, generation, attempt), which
    /// let go (revocation.rs).
    revoke_seen: BTreeMap<String, Instant>,
    revoke_told: std::collections::BTreeSet<(usize, u32, AttemptId)>,
    /// The events of latches closed: none may come (latches.rs).
    /// The election's heads over the last `max_lag`, while a follower lags
    /// (observe.rs): what a look served by it may show.
    recent_heads: VecDeque<(Instant, observe::Head)>,
    closed_latches: Vec<(
        usize,
        crossbeam_channel::Receiver<zklock::recipes::LatchEvent>,
    )>,
    /// The servers clients connect to (network.rs).
    ensemble: network::Ensemble,
    /// Nodes another client's session made with an attempt's id (twins.rs).
    foreign_twins: Vec<twins::Twin>,
    /// A5: who has reconnected since the network healed (reconnect.rs).
    reconnect: reconnect::Reconnect,
    /// When each node was granted, as its core reported it (a max hold
    /// counts from then).
    grants: BTreeMap<String, Instant>,
    /// A6: max holds ended on locks with contenders queued (available.rs).
    max_hold_ends: Vec<available::MaxHoldEnd>,
    log: String,
    keep_log: bool,
    verbose: bool,
    pub stats: Stats,
}

impl World {
    /// A world for `plan`.
    pub fn new(seed: u64, plan: &Plan, faults: &[(Duration, Fault)]) -> World {
        let mut rng = Rng::new(seed);
        let base = Instant::now();
        let server = SimZooKeeper::new(base, TICK).with_sequence_start(plan.sequence_start);
        // SIM_TRACE=1 (with SIM_VERBOSE=1): the server's every request,
        // reply and notification too.
        let server = if std::env::var_os("SIM_TRACE").is_some() {
            server.with_trace()
        } else {
            server
        };
        let clients = (0..plan.clients)
            .map(|c| SimClient::new(base, c, 0, plan.locks, &plan.options))
            .collect();
        let mut world = World {
            rng: Rng::new(rng.next()),
            options: plan.options.clone(),
            base,
            now: base,
            server,
            clients,
            locks: plan.locks,
            plan: BTreeMap::new(),
            plan_seq: 0,
            last_token: vec![0; plan.locks],
            last_writer_token: vec![0; plan.locks],
            admin_deleted: BTreeMap::new(),
            holding_ended: BTreeMap::new(),
            deleted_latch_nodes: BTreeMap::new(),
            admin_twins: Vec::new(),
            writes: 0,
            woken_by: WokenBy::new(),
            faults_until: base + plan.fault_window,
            unhealthy_until: vec![base; plan.clients],
            probes: Vec::new(),
            stale_marks: BTreeMap::new(),
            marks_scanned: 0,
            idle_since: vec![None; plan.locks],
            idle_locks: vec![None; plan.locks],
            idle_key: (-1, 0),
            withdrawn_looks: Vec::new(),
            callers: writes::Callers::default(),
            calls: Vec::new(),
            revoke_seen: BTreeMap::new(),
            revoke_told: std::collections::BTreeSet::new(),
            closed_latches: Vec::new(),
            recent_heads: VecDeque::new(),
            ensemble: network::Ensemble::default(),
            foreign_twins: Vec::new(),
            reconnect: reconnect::Reconnect::default(),
            grants: BTreeMap::new(),
            max_hold_ends: Vec::new(),
            log: String::new(),
            keep_log: false,
            verbose: std::env::var_os("SIM_VERBOSE").is_some(),
            stats: Stats::default(),
        };
        for c in 0..plan.clients {
            let mut at = base;
            for _ in 0..plan.ops_per_client {
                at +=
                    Duration::from_millis(rng.below(
                        plan.fault_window.as_millis() as u64 / plan.ops_per_client as u64 + 1,
                    ));
                let wait = match rng.below(10) {
                    0..=2 => Wait::Forever,
                    3..=7 => Wait::For(Duration::from_millis(5 + rng.below(3000))),
                    _ => Wait::Try,
                };
                let cancel_after = rng
                    .chance(1, 8)
                    .then(|| Duration::from_millis(rng.below(1000)));
                let hold = Duration::from_millis(if rng.chance(3, 10) {
                    1000 + rng.below(4000)
                } else {
                    rng.below(800)
                });
                world.schedule(
                    at,
                    Action::Acquire {
                        client: c,
                        lock: rng.below(plan.locks as u64) as usize,
                        wait,
                        hold,
                        cancel_after,
                    },
                );
            }
        }
        // Each client campaigns with a latch for a while, once.
        for c in 0..plan.clients {
            let window = plan.fault_window.as_millis() as u64;
            let start = Duration::from_millis(rng.below(window / 2 + 1));
            let stop = start + Duration::from_millis(1 + rng.below(window / 2 + 1));
            world.schedule(
                base + start,
                Action::LatchStart {
                    client: c,
                    generation: 0,
                },
            );
            world.schedule(
                base + stop,
                Action::LatchDrop {
                    client: c,
                    generation: 0,
                },
            );
        }
        for (at, fault) in faults {
            world.schedule(base + *at, Action::Fault(*fault));
        }
        world.create_app_nodes();
        world.plan_observes(plan);
        let mut tail = Rng::new(rng.next());
        // (Before the tail: its waits are sized by the round trips.)
        world.plan_ensemble(&mut Rng::new(rng.next()));
        world.plan_tail(&mut tail, plan);
        world
    }

    /// After the faults, A2 probes free locks. In the seeds whose clients
    /// write on their own (half), a healthy tail of twice the run's
    /// shortest session timeout follows (a client with a longer one is
    /// held to A1 only as far as the tail reaches): every client campaigns
    /// in the election and holds for a while (holders and waiters A1 and
    /// A3 look at), and sends writes the server mostly refuses, more often
    /// than its leader check's own sync (an eighth of its timeout), as it
    /// did every half timeout during the faults.
    fn plan_tail(&mut self, rng: &mut Rng, plan: &Plan) {
        let base = self.base;
        let tail_start = base + plan.fault_window;
        let t_min = (0..plan.clients)
            .map(|c| self.timeout(c))
            .min()
            .unwrap_or(MIN_SESSION_TIMEOUT);
        let ms = |d: Duration| d.as_millis() as u64;
        for k in 0..3u32 {
            let at = tail_start + t_min * (1 + 3 * k) / 8;
            let lock = rng.below(4) as usize;
            let storm = lock != LEASE_LOCK && rng.chance(1, 2);
            let wait =
                (!storm).then(|| self.a2_min_wait() + Duration::from_millis(rng.below(3000)));
            let tries = 2 + rng.below(3) as usize;
            self.schedule(
                at,
                Action::Probe {
                    lock,
                    wait,
                    tries,
                    left: 12,
                    free_since: None,
                },
            );
        }
        if !plan.options.refused_writes {
            return;
        }
        // Long enough for a client healthy since the faults to be held to
        // A1 and to show a false alarm (Suspended at 3/4 of its timeout,
        // then again after its reconnect).
        let tail_end = tail_start + t_min * 2;
        for c in 0..plan.clients {
            let hold = t_min / 8 + Duration::from_millis(rng.below(ms(t_min) * 3 / 8));
            self.schedule(
                tail_start + Duration::from_millis(rng.below(ms(t_min) / 4)),
                Action::Acquire {
                    client: c,
                    lock: ELECTION_LOCK,
                    wait: Wait::Forever,
                    hold,
                    cancel_after: None,
                },
            );
            // Two writers (every run has two clients or more).
            if c >= 2 {
                continue;
            }
            let t = self.timeout(c);
            let mut at = base + Duration::from_millis(rng.below(ms(t) / 10));
            let mut n = 0;
            while at < tail_end {
                self.schedule(at, Action::AppWrite { client: c, n });
                n += 1;
                at += if at < tail_start {
                    t / 2
                } else {
                    t / 12 + Duration::from_millis(rng.below(ms(t) / 24))
                };
            }
        }
    }

    /// Keeps the story of the run, to print with a violation.
    pub fn keep_log(&mut self) {
        self.keep_log = true;
    }

    fn schedule(&mut self, at: Instant, action: Action) {
        self.plan_seq += 1;
        self.plan.insert((at, self.plan_seq), action);
    }

    /// Records a line of the seed's story, when asked for one: a failing
    /// seed is replayed with the story on (same seed, same run).
    fn note(&mut self, line: impl FnOnce() -> String) {
        if !self.keep_log && !self.verbose {
            return;
        }
        let at = self.now - self.base;
        let line = line();
        for t in self.server.take_trace() {
            if self.verbose {
                eprintln!("          server {t}");
            }
        }
        if self.verbose {
            eprintln!("{:>9.3} {line}", at.as_secs_f64());
        }
        if self.log.len() < 200_000 {
            let _ = writeln!(self.log, "{:>9.3} {line}", at.as_secs_f64());
        }
    }

    fn violation(&self, what: String) -> Violation {
        Violation {
            what,
            at: self.now - self.base,
            log: self.log.clone(),
        }
    }

    /// Runs until the world has settled (every acquisition ended, nothing in
    /// flight, faults over) or a little past the horizon, checking
    /// invariants after every step, then checks what must hold at the end,
    /// and once every client has been closed.
    pub fn run(&mut self, horizon: Duration) -> Result<(), Violation> {
        // Room past the horizon for what it cut short to finish (a release
        // granted just before it, on a link whose round trip is seconds):
        // the end checks judge a settled world, not one mid-round-trip.
        let end = self.base + horizon + 20 * self.max_round_trip() + Duration::from_secs(10);
        let mut steps = 0u64;
        // Steps at one instant: a loop that feeds itself without time
        // passing (each step costs more as attempts pile up) is reported
        // at once, not after hours.
        let mut at_once = 0u32;
        loop {
            steps += 1;
            if steps > 2_000_000 {
                return Err(self.violation("the simulation did not settle in 2M steps".into()));
            }
            let Some(next) = self.next_time() else { break };
            if next > end {
                break;
            }
            at_once = if next > self.now { 0 } else { at_once + 1 };
            if at_once > 10_000 {
                return Err(self.violation("10 000 steps without time passing".into()));
            }
            self.now = next.max(self.now);
            self.step()?;
            self.settle_calls()?;
            self.note_grants();
            self.check_revocation()?;
            self.check_closed_latches()?;
            self.note_recent_head();
            self.note_ended_holdings();
            self.check()?;
            self.check_available()?;
            self.check_latch_liveness()?;
            self.check_multi_progress()?;
            self.stats.quiet_looks += self.check_withdrawn()?;
            self.check_twins()?;
            self.check_reconnected()?;
            if steps % 256 == 0 {
                self.forget_old_attempts();
            }
            if self.now >= self.faults_until && self.plan.is_empty() && self.settled() {
                break;
            }
        }
        self.stats.virtual_ms = (self.now - self.base).as_millis() as u64;
        (self.stats.stale_reads, self.stats.refused_ahead) = self.server.follower_counts();
        self.check_end()?;
        let closed = self.close_all();
        self.check_closed(&closed)
    }

    /// Drops what the harness tracks of acquisitions that ended (no handle
    /// left) and started long ago: every check looks at the live ones, and
    /// an A2 probe at those started since it found its lock free (well
    /// within this age). Without it, every step would walk the whole run's.
    fn forget_old_attempts(&mut self) {
        let longest = (0..self.clients.len())
            .map(|c| self.request_timeout(c) + self.timeout(c))
            .max()
            .unwrap_or_default();
        let Some(before) = self
            .now
            .checked_sub(2 * longest + Duration::from_secs(10) + 20 * self.max_round_trip())
        else {
            return;
        };
        for c in &mut self.clients {
            c.attempts.retain(|_, t| {
                t.started >= before
                    || !matches!(t.handle, Handle::None)
                    || !matches!(t.phase, Phase::Released | Phase::Failed(_))
            });
        }
    }

    fn settled(&self) -> bool {
        // A session closed or given up while cut off lives on the server
        // until it expires there; its nodes go then.
        let live: Vec<i64> = self.clients.iter().map(|c| c.core.session_id()).collect();
        if self.server.sessions().iter().any(|s| !live.contains(s))
            || self.server.has_late_writes()
            || self.server.follower_behind()
        {
            return false;
        }
        self.clients.iter().all(|c| {
            c.core.lock_attempts() == 0
                && c.latch.is_none()
                && !c.core.has_commands()
                && c.attempts
                    .values()
                    .all(|t| matches!(t.phase, Phase::Released | Phase::Failed(_)))
                && c.link
                    .as_ref()
                    .is_none_or(|l| l.up.is_empty() && l.down.is_empty())
        })
    }

    fn next_time(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        at(self.plan.keys().next().map(|(i, _)| *i));
        at(self.server.poll_timeout());
        for c in &self.clients {
            at(c.core.poll_timeout());
            if c.core.has_commands() {
                at(Some(self.now));
            }
            if c.link.is_none() && c.core.wants_connection() {
                at(Some(c.connect_at));
            }
            if let Some(l) = &c.link {
                let held = l.stalled_until.unwrap_or(self.base);
                at(l.up.front().map(|(i, _)| (*i).max(held)));
                at(l.down.front().map(|(i, _, _)| (*i).max(held)));
            }
        }
        t.map(|t| t.max(self.now))
    }

    /// The session timeout client `c` asks for.
    fn asked_timeout(&self, c: usize) -> Duration {
        self.options.asked_timeouts[c]
    }

    /// The session timeout the server grants client `c`: what it asked,
    /// clamped to `[2, 20]` ticks. The client must act on this one.
    fn timeout(&self, c: usize) -> Duration {
        self.asked_timeout(c)
            .clamp(MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT)
    }

    /// Client `c`'s request timeout: the session timeout it asked for, at
    /// least a second (`ClientBuilder::request_timeout`'s default).
    fn request_timeout(&self, c: usize) -> Duration {
        self.asked_timeout(c).max(Duration::from_secs(1))
    }

    /// The steady one-way latency of client `c`'s link.
    fn steady_latency(&self, c: usize) -> Duration {
        self.timeout(c) * self.options.steady_latency_per_mille / 1000
    }

    /// The longest round trip of any request: steady latency and jitter,
    /// both ways, and a lagging follower's lag.
    fn max_round_trip(&self) -> Duration {
        let steady = (0..self.clients.len())
            .map(|c| self.steady_latency(c))
            .max()
            .unwrap_or_default();
        2 * (steady + MAX_JITTER) + self.ensemble.max_lag
    }

    fn latency(&mut self, c: usize) -> Duration {
        self.steady_latency(c) + Duration::from_micros(100 + self.rng.below(3000))
    }

    fn step(&mut self) -> Result<(), Violation> {
        let now = self.now;
        // Planned actions.
        while let Some((&(at, seq), _)) = self.plan.iter().next() {
            if at > now {
                break;
            }
            let action = self.plan.remove(&(at, seq)).expect("present");
            self.act(action);
        }
        // The network.
        for c in 0..self.clients.len() {
            self.move_bytes(c)?;
        }
        // The server.
        self.server.handle_timeout(now);
        self.server_output();
        // The clients: what their handles asked for, their timers, and a
        // connection when they want one.
        for c in 0..self.clients.len() {
            self.clients[c].core.turn(now);
            let client = &mut self.clients[c];
            if client.link.is_none() && client.core.wants_connection() && now >= client.connect_at {
                client.core.prepare_connection();
                let conn = self.connect_next(c);
                let client = &mut self.clients[c];
                let stalled_until =
                    (client.partitioned_until > now).then_some(client.partitioned_until);
                client.link = Some(Link {
                    conn,
                    unanswered: VecDeque::new(),
                    sent_handshake: false,
                    heard_handshake: false,
                    up: VecDeque::new(),
                    down: VecDeque::new(),
                    stalled_until,
                });
                client.core.handle_connected(now);
            }
            self.after_core(c)?;
        }
        self.server_output();
        self.count_wakes()
    }

    /// After the core moved: what it asks of its driver, what its handles
    /// now say, and what it wrote.
    /// What client `c`'s core wrote goes on its link's wire, its requests
    /// noted as unanswered.
    fn send_output(&mut self, c: usize, now: Instant) {
        let latency = self.latency(c);
        let client = &mut self.clients[c];
        let Some(link) = client.link.as_mut() else {
            return;
        };
        let out = client.core.output();
        if !out.is_empty() {
            let handshake = !link.sent_handshake;
            link.sent_handshake = true;
            note_requests(&mut link.unanswered, out, now, handshake);
            link.up.push_back((now + latency, out.to_vec()));
            let n = out.len();
            client.core.consume_output(n);
        }
    }

    fn after_core(&mut self, c: usize) -> Result<(), Violation> {
        let now = self.now;
        self.calls_replied(c);
        // A handle dropped meanwhile queued a command: run it now, as the
        // I/O thread would in the same loop.
        if self.clients[c].core.has_commands() {
            self.clients[c].core.turn(now);
        }
        while let Some(event) = self.clients[c].core.poll_event() {
            match event {
                CoreEvent::State(state) => {
                    let id = self.clients[c].core.session_id();
                    self.note(|| format!("c{c}: session {id:#x} {state:?}"));
                    if state != zklock::SessionState::Connected {
                        self.a1_session(c, &format!("session {id:#x} {state:?}"))?;
                    }
                    if state.is_terminal() {
                        self.stats.expired_sessions += 1;
                    }
                    if state == zklock::SessionState::Connecting
                        && self.clients[c].last_state == Some(zklock::SessionState::Expired)
                    {
                        self.stats.renewed_sessions += 1;
                    }
                    self.clients[c].last_state = Some(state);
                }
                CoreEvent::DropConnection(reason) => {
                    self.a1_session(c, &format!("drops its connection: {reason:?}"))?;
                    let client = &mut self.clients[c];
                    if let Some(link) = client.link.take() {
                        self.server.disconnect(now, link.conn);
                        client.connect_at = now + Duration::from_millis(5);
                        self.note(|| format!("c{c}: drops its connection: {reason:?}"));
                    }
                }
            }
        }
        let ended = self.clients[c].core.state().is_terminal();
        self.collect(c, ended)?;
        self.send_output(c, now);
        // A session that ended for good is replaced by a new one, as an
        // application would.
        // (A batch waiter learns of the end only when it queues for its
        // process, which the core then fails: it is read first. A thread's
        // read that confirms a holding is answered when the session has
        // finished closing: read first too.)
        let batch_waits = self.clients[c]
            .attempts
            .values()
            .any(|t| matches!(t.handle, Handle::Batch(..) | Handle::Thread(_)));
        if self.clients[c].core.state().is_terminal()
            && self.clients[c].core.lock_attempts() == 0
            && !self.clients[c].core.has_commands()
            && !batch_waits
        {
            let generation = self.clients[c].generation + 1;
            let fresh = SimClient::new(now, c, generation, self.locks, &self.options);
            let mut old = std::mem::replace(&mut self.clients[c], fresh);
            if let Some(mut link) = old.link.take() {
                // What the old session sent (its closeSession) still
                // arrives, as TCP delivers what was written before a close.
                for (_, bytes) in link.up.drain(..) {
                    self.server.receive(now, link.conn, &bytes);
                }
                let out = old.core.output().to_vec();
                if !out.is_empty() {
                    self.server.receive(now, link.conn, &out);
                }
                self.server.disconnect(now, link.conn);
                self.server_output();
            }
            for (id, t) in &old.attempts {
                let open = match &t.phase {
                    Phase::Waiting => true,
                    Phase::Held { state, .. } => *state != LockState::Lost,
                    _ => false,
                };
                if open {
                    return Err(self.violation(format!(
                        "c{c}: session ended with attempt #{id} still {:?}",
                        t.phase
                    )));
                }
            }
            self.note(|| format!("c{c}: new session (generation {generation})"));
        }
        Ok(())
    }
}
