//! What one seed's run is made of: the plan, the waits, the faults, and
//! the random draw of faults.

use std::time::Duration;

use super::super::rng::Rng;

/// What one seed's run is made of.
#[derive(Debug, Clone)]
pub struct Plan {
    pub clients: usize,
    pub locks: usize,
    pub ops_per_client: usize,
    /// Faults happen before this; afterwards the world settles.
    pub fault_window: Duration,
    /// Mean gap between faults.
    pub fault_gap: Duration,
    /// The parent cversion new lock paths start at (near the wrap or not).
    pub sequence_start: i32,
    /// Give up settling after this much virtual time.
    pub horizon: Duration,
    /// The options every client of the run is built with.
    pub options: Options,
}

/// The public options a user sets, as dimensions of the seed: each value
/// takes a share of the seeds (the switches by the seed's digits, so that
/// consecutive seeds walk through every combination), and the invariants,
/// safety and availability both, hold under each.
#[derive(Debug, Clone)]
pub struct Options {
    /// The session timeout each client asks for (up to four clients):
    /// below, inside or above the `[2, 20]` ticks the server clamps to.
    pub asked_timeouts: [Duration; 4],
    /// `ClientBuilder::leader_check`. Off, the run has no follower cut
    /// from its leader: the check is what keeps a holder behind such a
    /// follower from saying Held while the leader expires its session
    /// (docs/PARTITION.md), and a user turns it off only for a standalone
    /// server.
    pub leader_check: bool,
    /// `MutexOptions::lock_delay` on every lock path (every contender on a
    /// path sets the same delay).
    pub lock_delay: Option<Duration>,
    /// `MutexOptions::watch_node`: the locks that watch their node are the
    /// odd ones instead of the even ones.
    pub watch_flip: bool,
    /// `MutexOptions::reentrant`: lock 2 re-entrant instead of 0 and 1.
    pub reentrant_flip: bool,
    /// `MutexOptions::revocable` on every mutex, read/write and lease lock.
    pub revocable: bool,
    /// The links' steady one-way latency (jitter comes on top), up to
    /// `MAX_STEADY_LATENCY` of the client's session timeout.
    pub steady_latency_per_mille: u32,
    /// Clients send writes of their own that the server refuses (and some
    /// it accepts) while they hold and wait for locks.
    pub refused_writes: bool,
    /// `ClientBuilder::new_session_after_expiry`: a client whose session
    /// expired opens a new one; off, the world replaces it by a new client.
    pub new_session_after_expiry: bool,
    /// `MutexOptions::max_hold` on every lock, multi-lock part, batch hold,
    /// campaign and latch.
    pub max_hold: Option<Duration>,
}

/// The largest steady one-way latency the world puts on a link, as a share
/// of the negotiated session timeout (per mille): a round trip of `T / 10`,
/// inside the `T / 8` the leader check is documented to tolerate without
/// an alarm (docs/PARTITION.md, "No false alarm"), with room for the
/// jitter on top.
pub const MAX_STEADY_LATENCY: u32 = 50;

impl Options {
    /// The options of `seed`.
    pub fn for_seed(seed: u64) -> Options {
        let mut rng = Rng::new(seed ^ 0x6f70_7469_6f6e_7321);
        // The switches and the class of timeouts from the seed's digits:
        // 2^7 × 3 combinations, each met by every 384 consecutive seeds.
        let bit = |n: u32| seed >> n & 1 == 1;
        // One class a run (a client waiting out a long session timeout
        // while the others ping at a short one makes a run long).
        let class = (seed >> 7) % 3;
        let asked_timeouts = std::array::from_fn(|_| {
            Duration::from_millis(match class {
                // Below the floor of 2 ticks: negotiated up.
                0 => 500 + rng.below(3500),
                // Inside, mostly short ones (faults are sized for them).
                1 => {
                    if rng.chance(3, 4) {
                        4000 + rng.below(4000)
                    } else {
                        4000 + rng.below(36_001)
                    }
                }
                // Above the ceiling of 20 ticks: negotiated down.
                _ => 40_001 + rng.below(80_000),
            })
        });
        Options {
            asked_timeouts,
            leader_check: !bit(0),
            lock_delay: bit(1).then(|| Duration::from_millis(rng.below(3000))),
            watch_flip: bit(2),
            reentrant_flip: bit(3),
            revocable: bit(4),
            steady_latency_per_mille: if bit(5) {
                rng.below(u64::from(MAX_STEADY_LATENCY) + 1) as u32
            } else {
                0
            },
            refused_writes: !bit(6),
            // Drawn last, so that the draws above stay each seed's own
            // (and after them, a max hold in half the seeds, from about as
            // short as a grant's round trips to longer than most holds).
            new_session_after_expiry: rng.chance(1, 2),
            max_hold: rng
                .chance(1, 2)
                .then(|| Duration::from_millis(100 + rng.below(2900))),
        }
    }
}

impl Plan {
    pub fn from_seed(rng: &mut Rng, options: Options) -> Plan {
        Plan {
            options,
            clients: 2 + rng.below(3) as usize,
            // Every recipe in every seed: mutexes (0, 2, and a multi-lock
            // over both), readers and writers (1), semaphore leases (3), and
            // campaigns in the latches' election (4). The old draw of a
            // number of locks is kept, so the rest of each seed's plan is as
            // it was.
            locks: {
                let _ = rng.below(4);
                5
            },
            ops_per_client: 3 + rng.below(10) as usize,
            fault_window: Duration::from_millis(3000 + rng.below(15_000)),
            fault_gap: Duration::from_millis(100 + rng.below(1500)),
            sequence_start: if rng.chance(1, 4) {
                i32::MAX - rng.below(20) as i32
            } else {
                0
            },
            horizon: Duration::from_secs(300),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    Forever,
    For(Duration),
    Try,
}

#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// The client's connection drops; bytes in flight to the server are
    /// applied (`applied`) or lost, and replies in flight are lost.
    Cut { client: usize, applied: bool },
    /// The client's connection drops; the writes in flight to the server
    /// are applied late: after the client's first request on its next
    /// connection (or a second later), as when the old server forwarded
    /// them and the client reads from a server not yet past them.
    LateCut { client: usize },
    /// Nothing moves between the client and the server for a while (past
    /// the session timeout, sometimes): its connection, and any new one.
    Stall { client: usize, for_: Duration },
    /// The server restarts: every connection drops, the tree and sessions
    /// survive.
    Restart,
    /// A third party deletes a node of a lock's queue (`head`: the holder's).
    AdminDelete { lock: usize, head: bool },
    /// The client's next grant is followed at once by a stall: the worst
    /// moment, with the holder's first check in flight.
    StallAfterGrant { client: usize, for_: Duration },
    /// The application closes the client (its session ends; a new client
    /// takes its place).
    Close { client: usize },
    /// The server expires the client's session now, as an operator's kill
    /// (Curator's KillSession) does: its nodes go, its connection drops,
    /// and its next handshake is told. The client opens a new session, or
    /// (`new_session_after_expiry` off) a new client takes its place.
    Expire { client: usize },
    /// The client's server is a follower silently cut from the leader: it
    /// answers pings and nothing else, the leader stops hearing of the
    /// session, and after `for_` (its sync limit) it drops its clients.
    FollowerCut { client: usize, for_: Duration },
    /// A node carrying the attempt id of one in a lock's queue appears,
    /// made by a third party (owned by no session) or by another client's
    /// session (which owns it), and is deleted later: a client recovering
    /// from an ambiguous create must neither adopt it nor delete it
    /// (twins.rs).
    ForeignTwin { lock: usize, for_: Duration },
}

impl Plan {
    /// The locks a third party meddles with: every one, the latches'
    /// election included.
    fn admin_locks(&self) -> u64 {
        self.locks as u64
    }

    /// Random faults for a plan, drawn from `rng`.
    pub fn random_faults(&self, rng: &mut Rng) -> Vec<(Duration, Fault)> {
        let plan = self;
        let mut faults = Vec::new();
        let mut at = Duration::ZERO;
        loop {
            at += Duration::from_millis(1 + rng.below(2 * plan.fault_gap.as_millis() as u64));
            if at >= plan.fault_window {
                return faults;
            }
            let client = rng.below(plan.clients as u64) as usize;
            let fault = match rng.below(20) {
                0..=7 => {
                    if rng.chance(1, 4) {
                        // A flapping link: back for a moment, then gone
                        // again while the reconnect's checks are in flight.
                        let gap = Duration::from_millis(6 + rng.below(15));
                        let for_ = Duration::from_millis(2000 + rng.below(5000));
                        faults.push((at + gap, Fault::Stall { client, for_ }));
                    }
                    match rng.below(6) {
                        0..=1 => Fault::LateCut { client },
                        n => Fault::Cut {
                            client,
                            applied: n % 2 == 0,
                        },
                    }
                }
                8..=13 => Fault::Stall {
                    client,
                    for_: Duration::from_millis(if rng.chance(1, 3) {
                        3000 + rng.below(4000)
                    } else {
                        rng.below(2500)
                    }),
                },
                14 => Fault::Restart,
                15 => Fault::StallAfterGrant {
                    client,
                    for_: Duration::from_millis(1000 + rng.below(6000)),
                },
                // A draw-free choice between the two, so that every other
                // draw of a seed's plan stays as it was.
                16 if at.as_millis() % 2 == 0 => Fault::Expire { client },
                16 => Fault::Close { client },
                18 if plan.options.leader_check => Fault::FollowerCut {
                    client,
                    // ZooKeeper's default syncLimit × tick is 10 s, past the
                    // 4 s session timeout here.
                    for_: Duration::from_millis(2000 + rng.below(8000)),
                },
                17 => Fault::ForeignTwin {
                    lock: rng.below(plan.admin_locks()) as usize,
                    for_: Duration::from_millis(300 + rng.below(3000)),
                },
                _ => Fault::AdminDelete {
                    lock: rng.below(plan.admin_locks()) as usize,
                    head: rng.chance(1, 2),
                },
            };
            faults.push((at, fault));
            faults.sort_by_key(|(at, _)| *at);
        }
    }
}
