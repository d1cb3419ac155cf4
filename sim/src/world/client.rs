//! A simulated client: its core, its recipes on each lock of the plan, its
//! connection, and what the harness knows of each of its acquisitions.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use zklock::recipes::{
    BatchGuard, BatchMutex, CancelToken, Election, LeaderLatch, LockError, LockGuard, LockState,
    LossReason, MultiGuard, MultiLock, Mutex, MutexOptions, Pending, PendingLock, PendingMulti,
    PendingSet, RwLock, Semaphore,
};
use zklock::testing::Core;
use zklock::Client;

use super::super::zookeeper::ConnId;
use super::plan::Options;
use super::wakes::Wakes;
use super::AttemptId;

/// What the harness knows of one acquisition, to check the core by.
pub(super) struct Tracked {
    pub(super) lock: usize,
    pub(super) started: Instant,
    pub(super) deadline: Option<Instant>,
    pub(super) hold: Duration,
    pub(super) phase: Phase,
    /// The public handle: waiting on a `PendingLock`, or holding a guard.
    pub(super) handle: Handle,
    /// A read lock (on a read/write lock).
    pub(super) reader: bool,
    /// When the holder last turned Suspended.
    pub(super) suspended_at: Option<Instant>,
    /// Queued again by `Mutex::requeue` as an earlier holder let go.
    pub(super) requeued: bool,
    /// Taken for one of the client's threads (its index in
    /// `SimClient::threads`), through `start_lock_for` and its twins.
    pub(super) thread: Option<usize>,
    /// What that thread held when the call was first polled.
    pub(super) entry: Option<ThreadEntry>,
    /// The plan cancelled its token (the harness's own record: the
    /// library's answer is what is checked).
    pub(super) token_cancelled: bool,
    /// Called with a deadline already past (a try): one round trip, held
    /// to the request timeout (`deadline` says that bound), and it may
    /// time out any time before.
    pub(super) is_try: bool,
    /// Part of this A2 probe (available.rs).
    pub(super) probe: Option<usize>,
    /// Told Lost by zklock's own decision (the counter's end, no contact)
    /// while its session lived and its node was in place: A4 counts it a
    /// holder for as long as it keeps its guard.
    pub(super) own_loss: bool,
}

/// What a thread's lock call must do, from what the thread held when it
/// was first polled.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ThreadEntry {
    /// Hand back the holding of this node: at once if its holder watches
    /// the node, else after reading it, unless that read finds it gone or
    /// the holding is Lost by then (then it looks again).
    Share { node: String },
    /// A write holder's read (a downgrade): a read node of its own, which
    /// its thread's write node `write` does not block, or, if another
    /// writer waits between the two, a share of the write node as `Share`
    /// would be.
    Downgrade { write: String },
    /// Refuse at once with this error.
    Refuse(LockError),
    /// Queue for a node of its own.
    Queue,
}

impl Tracked {
    /// An acquisition of `lock` that starts waiting now, through `handle`.
    pub(super) fn waiting(
        lock: usize,
        now: Instant,
        deadline: Option<Instant>,
        hold: Duration,
        handle: Handle,
    ) -> Tracked {
        Tracked {
            lock,
            started: now,
            deadline,
            hold,
            phase: Phase::Waiting,
            handle,
            reader: false,
            suspended_at: None,
            requeued: false,
            thread: None,
            entry: None,
            is_try: false,
            token_cancelled: false,
            probe: None,
            own_loss: false,
        }
    }
}

pub(super) enum Handle {
    None,
    Pending(PendingLock),
    /// Started in the client's `PendingSet` under this key.
    InSet(u64),
    Guard(LockGuard),
    /// Its guard, shared with a blocking call on another thread (a fenced
    /// write, a proclaim): released when both let go.
    Shared(Arc<LockGuard>),
    /// A `MultiLock` acquisition over [`MULTI_LOCKS`], tracked on the first.
    Multi(PendingMulti),
    /// Its guard, on the first lock's attempt.
    MultiHeld(MultiGuard),
    /// Another part of the multi-lock guard held by attempt `of`.
    Member {
        of: AttemptId,
        index: usize,
    },
    /// A local waiter of the client's `BatchMutex` (on [`BATCH_LOCK`]), and
    /// the token that cancels it, if it was started with one.
    Batch(Pending<BatchGuard>, Option<CancelToken>),
    /// Its guard: one thread's turn inside the process's hold.
    BatchHeld(BatchGuard),
    /// A lock call for one of the client's threads, polled.
    Thread(PendingLock),
}

impl Handle {
    /// A single lock's guard, kept alone or shared with a call.
    pub(super) fn lock_guard(&self) -> Option<&LockGuard> {
        match self {
            Handle::Guard(g) => Some(g),
            Handle::Shared(g) => Some(g),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    Waiting,
    Held {
        node: String,
        czxid: i64,
        state: LockState,
    },
    Released,
    Failed(LockError),
}

pub(super) struct Link {
    pub(super) conn: ConnId,
    /// Requests written on this connection and not yet answered: their xid
    /// (`None` for the handshake) and when they left, in order (ZooKeeper
    /// answers in order).
    pub(super) unanswered: VecDeque<(Option<i32>, Instant)>,
    /// The handshake went out, and its answer came back.
    pub(super) sent_handshake: bool,
    pub(super) heard_handshake: bool,
    /// Bytes on their way to the server, with the time they arrive.
    pub(super) up: VecDeque<(Instant, Vec<u8>)>,
    /// Bytes (or the server's close, as `None`) on their way to the client:
    /// when they arrive, and the number of the server's write.
    pub(super) down: VecDeque<(Instant, u64, Option<Vec<u8>>)>,
    pub(super) stalled_until: Option<Instant>,
}

pub(super) struct SimClient {
    /// Bumped each time an expired session is replaced by a new one.
    pub(super) generation: u32,
    /// The session state its core last announced.
    pub(super) last_state: Option<zklock::SessionState>,
    pub(super) client: Client,
    pub(super) core: Core,
    /// One recipe per lock of the plan, on this client.
    pub(super) locks: Vec<SimLock>,
    /// Where some acquisitions are started instead of a `PendingLock`.
    pub(super) set: PendingSet,
    /// A leader latch campaigning on `LATCH_PATH`, while started.
    pub(super) latch: Option<LeaderLatch>,
    /// Since when the latch has headed the election, connected, without
    /// leading (see latches.rs).
    pub(super) latch_due_since: Option<Instant>,
    /// Locks 0 and 2 taken together.
    pub(super) multi: MultiLock,
    /// Locks 2 and 0 taken together (named in the other order).
    pub(super) multi_reversed: MultiLock,
    /// Lock 2 shared by the client's local waiters through one node.
    pub(super) batch: BatchMutex,
    /// The node of the client's last batch grant: local hand-offs share
    /// it, and its token.
    pub(super) last_batch_node: Option<String>,
    /// Turns handed out inside that hold so far.
    pub(super) batch_run: usize,
    /// When that hold last turned Suspended, as its turns read it: a turn
    /// handed out while it is Suspended inherits it (S3 counts re-reads of
    /// the node from then, not from the turn's start).
    pub(super) batch_suspended_at: Option<Instant>,
    /// The ids of the application's threads that take locks 0 to 2 for
    /// themselves (re-entry, refusals), each a real thread's (ended) so that
    /// no other world's share it.
    pub(super) threads: [ThreadId; THREADS],
    /// Per thread (index), lock and side (write or not): the node the
    /// thread last took from the queue, the holding its calls share.
    pub(super) thread_taken: BTreeMap<(usize, usize, bool), String>,
    /// Read nodes a write holder's read took (a downgrade), and the write
    /// node of the same thread each was let pass: what S1 and exclusion
    /// allow their holders, and the shares of them.
    pub(super) downgrades: BTreeMap<String, String>,
    /// What the core's observer heard of waiters woken.
    pub(super) wakes: Arc<Wakes>,
    pub(super) link: Option<Link>,
    /// When this client was built: A5 counts a new client's first connect
    /// from then, not from a heal before it existed.
    pub(super) built: Instant,
    pub(super) connect_at: Instant,
    /// A stall armed to start at the next grant.
    pub(super) stall_after_grant: Option<Duration>,
    /// Cut off from the server until then (connections made meanwhile
    /// carry nothing until then either).
    pub(super) partitioned_until: Instant,
    pub(super) attempts: BTreeMap<AttemptId, Tracked>,
    pub(super) next_id: AttemptId,
    /// When bytes from the server last arrived.
    pub(super) last_heard: Instant,
    /// When the newest request the server answered was sent (the
    /// handshake's included): every holder must say Lost within a session
    /// timeout of it, since the server may have heard nothing later and
    /// expire the session then (S2).
    pub(super) last_answered_send: Instant,
}

/// The recipe a lock of the plan is taken with.
pub(super) enum SimLock {
    Mutex(Mutex),
    /// Lock 1: readers and writers.
    Rw(RwLock),
    /// Lock 3: a semaphore of [`LEASES`] leases, taken without its gate.
    Lease(Semaphore),
    /// Lock 4: campaigns in the election the latches run on `LATCH_PATH`.
    Election(Election),
}

/// The lock of the plan taken as semaphore leases, and how many.
pub(super) const LEASE_LOCK: usize = 3;
pub(super) const LEASES: usize = 2;

/// Where the clients' leader latches campaign.
pub(super) const LATCH_PATH: &str = "/locks/latch";

/// The lock of the plan that is the latches' election, campaigned for with
/// `Election::start_campaign`.
pub(super) const ELECTION_LOCK: usize = 4;

/// The locks a `MultiLock` takes together, in its (sorted) order.
pub(super) const MULTI_LOCKS: [usize; 2] = [0, 2];

/// The same locks as another `MultiLock` names them, in the other order:
/// two clients each holding one and waiting for the other would deadlock,
/// unless the recipe takes them in one global order (multis.rs).
pub(super) const MULTI_LOCKS_REVERSED: [usize; 2] = [2, 0];

/// The lock some acquisitions take through the client's `BatchMutex`, and
/// how many local turns one hold serves at most.
pub(super) const BATCH_LOCK: usize = 2;
pub(super) const MAX_BATCH: usize = 3;

/// How many threads of a client take locks for themselves, and which
/// locks: lock 0 (re-entrant and watched unless the seed flips them), lock
/// 1 (a read/write lock, re-entrant and unwatched unless flipped: shares
/// after a read) and lock 2 (not re-entrant unless flipped: refusals).
pub(super) const THREADS: usize = 2;
pub(super) const THREAD_LOCKS: [usize; 3] = [0, 1, 2];

/// Whether lock `l` is re-entrant: 0 and 1, or (with the seed's
/// `reentrant_flip`) 2 alone.
pub(super) fn reentrant(options: &Options, l: usize) -> bool {
    (l < 2) != options.reentrant_flip
}

/// The options of the election's campaigns and latches: the seed's max
/// hold, if any (lock-delay stays off there, as it always was).
pub(super) fn with_max_hold(options: &Options) -> MutexOptions {
    match options.max_hold {
        Some(d) => MutexOptions::default().max_hold(d),
        None => MutexOptions::default(),
    }
}

/// Whether lock `l`'s holders watch their node: the even locks, or (with
/// the seed's `watch_flip`) the odd ones; every lock when revocable (which
/// implies the watch); the election always (its candidates watch their
/// leader's node).
pub(super) fn watched(options: &Options, l: usize) -> bool {
    l == ELECTION_LOCK || options.revocable || (l % 2 == 0) != options.watch_flip
}

pub(super) fn lock_path(l: usize) -> String {
    if l == ELECTION_LOCK {
        LATCH_PATH.to_owned()
    } else {
        format!("/locks/l{l}")
    }
}

/// Where lock `l`'s contenders queue: a semaphore's leases sit one level
/// down.
pub(super) fn queue_path(l: usize) -> String {
    if l == LEASE_LOCK {
        format!("/locks/l{l}/leases")
    } else {
        lock_path(l)
    }
}

impl SimClient {
    pub(super) fn new(
        now: Instant,
        index: usize,
        generation: u32,
        locks: usize,
        opts: &Options,
    ) -> SimClient {
        let seed = (index as u128) << 64 | u128::from(generation) << 32 | 0x5eed;
        let wakes = Arc::new(Wakes::default());
        let asked = opts.asked_timeouts[index];
        // The handshake's own timeout is set by the user, who knows the
        // server grants at least 2 ticks: a third of that, so that the
        // slowest link the world draws (a round trip of T / 10) connects.
        let connect_timeout = asked.max(super::MIN_SESSION_TIMEOUT) / 3;
        let (client, core) = Client::builder("127.0.0.1:2181")
            .session_timeout(asked)
            .connect_timeout(connect_timeout)
            .leader_check(opts.leader_check)
            // Off, the world replaces a client whose session ended by a
            // new one.
            .new_session_after_expiry(opts.new_session_after_expiry)
            .observer(wakes.clone())
            .build_manual(now, seed)
            .expect("a manual client");
        let with_delay = |o: MutexOptions| {
            let o = match opts.lock_delay {
                Some(d) => o.lock_delay(d),
                None => o,
            };
            match opts.max_hold {
                Some(d) => o.max_hold(d),
                None => o,
            }
        };
        let locks = (0..locks)
            .map(|l| {
                let options = with_delay(MutexOptions::default())
                    .watch_node(watched(opts, l))
                    .reentrant(reentrant(opts, l))
                    .revocable(opts.revocable)
                    .data(format!("lock {l}").as_bytes());
                if l == ELECTION_LOCK {
                    SimLock::Election(
                        Election::with_options(
                            &client,
                            LATCH_PATH,
                            b"candidate",
                            with_max_hold(opts),
                        )
                        .expect("an election"),
                    )
                } else if l == 1 {
                    SimLock::Rw(RwLock::with_options(&client, &lock_path(l), options).expect("rw"))
                } else if l == LEASE_LOCK {
                    SimLock::Lease(
                        Semaphore::with_options(&client, &lock_path(l), LEASES, options)
                            .expect("a semaphore"),
                    )
                } else {
                    let mutex =
                        Mutex::with_options(&client, &lock_path(l), options).expect("a mutex");
                    assert_eq!(mutex.path(), lock_path(l), "Mutex::path");
                    SimLock::Mutex(mutex)
                }
            })
            .collect();
        let multi_lock = |locks: [usize; 2], data: &[u8]| {
            let paths = locks.map(lock_path);
            MultiLock::with_options(
                &client,
                &paths.each_ref().map(String::as_str),
                with_delay(MutexOptions::default())
                    .watch_node(true)
                    .revocable(opts.revocable)
                    .data(data),
            )
            .expect("a multi-lock")
        };
        let multi = multi_lock(MULTI_LOCKS, b"multi");
        let multi_reversed = multi_lock(MULTI_LOCKS_REVERSED, b"multi, reversed");
        let batch = BatchMutex::with_options(
            &client,
            &lock_path(BATCH_LOCK),
            MAX_BATCH,
            with_delay(MutexOptions::default())
                .watch_node(watched(opts, BATCH_LOCK))
                .revocable(opts.revocable)
                .data(b"batch"),
        )
        .expect("a batch mutex");
        SimClient {
            generation,
            last_state: None,
            client,
            core,
            locks,
            set: PendingSet::new(),
            latch: None,
            latch_due_since: None,
            multi,
            multi_reversed,
            batch,
            last_batch_node: None,
            batch_run: 0,
            batch_suspended_at: None,
            threads: std::array::from_fn(|_| {
                std::thread::spawn(|| std::thread::current().id())
                    .join()
                    .expect("a thread")
            }),
            thread_taken: BTreeMap::new(),
            downgrades: BTreeMap::new(),
            wakes,
            link: None,
            built: now,
            connect_at: now,
            stall_after_grant: None,
            partitioned_until: now,
            attempts: BTreeMap::new(),
            next_id: 1,
            last_heard: now,
            last_answered_send: now,
        }
    }
}

impl SimClient {
    /// Whether `thread` waits in a lock call: a real thread is blocked in
    /// it, and calls nothing else until it returns.
    pub(super) fn thread_in_call(&self, thread: usize) -> bool {
        self.attempts
            .values()
            .any(|t| t.thread == Some(thread) && t.phase == Phase::Waiting)
    }

    /// A call for `lock` (a read if `reader`) made for thread `thread`, to
    /// be polled.
    pub(super) fn thread_call(
        &self,
        lock: usize,
        thread: usize,
        reader: bool,
        deadline: Option<Instant>,
    ) -> Handle {
        let on = self.threads[thread];
        Handle::Thread(match &self.locks[lock] {
            SimLock::Mutex(m) => m.start_lock_for(on, deadline),
            SimLock::Rw(rw) if reader => rw.start_read_for(on, deadline),
            SimLock::Rw(rw) => rw.start_write_for(on, deadline),
            _ => unreachable!("lock {lock} is not taken by threads"),
        })
    }

    /// The guard of attempt `id`, a part of a multi-lock guard included.
    pub(super) fn guard(&self, id: AttemptId) -> Option<&LockGuard> {
        match &self.attempts.get(&id)?.handle {
            Handle::Guard(g) => Some(g),
            Handle::Shared(g) => Some(g),
            Handle::MultiHeld(m) => m.guards().first(),
            Handle::Member { of, index } => match &self.attempts.get(of)?.handle {
                Handle::MultiHeld(m) => m.guards().get(*index),
                _ => None,
            },
            _ => None,
        }
    }

    /// What the holder of attempt `id` says of its lock now: a guard's
    /// state, or a batch guard's (the process's hold's).
    pub(super) fn held_state(&self, id: AttemptId) -> Option<(LockState, Option<LossReason>)> {
        match &self.attempts.get(&id)?.handle {
            Handle::BatchHeld(g) => Some((g.state(), None)),
            _ => self.guard(id).map(|g| (g.state(), g.lost_reason())),
        }
    }
}
