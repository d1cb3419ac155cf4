//! zklock's recipes against real Apache Curator (JVM) and kazoo (CPython)
//! processes contending for the same ZooKeeper paths.
//!
//! Exclusion is judged from wall-clock stamps: peers stamp `acquired` right
//! after acquiring and `released` right before releasing; our own holders
//! stamp the same way (`now_millis()` right after a lock call returns and
//! right before `unlock`). Holders that really exclude each other have
//! `[acquired, released]` intervals that never overlap. "Still waiting" is a
//! short bounded wait that must see nothing.

use std::cell::Cell;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use testkit::peers::{acquired_node, line_millis, now_millis, Peer, PeerKind};
use testkit::zk;
use testkit::{children, poll_until};
use zklock::recipes::{
    inspect, Election, LockError, LockGuard, Mutex, NodeKind, NodeOrigin, QueueEntry, RwLock,
    Semaphore,
};
use zklock::Client;

const SESSION: Duration = Duration::from_secs(10);
/// Bound for a hand-over to a waiter (or an uncontended acquire).
const HANDOVER: Duration = Duration::from_secs(15);
/// How long a waiter must stay quiet to count as "still waiting".
const STILL_WAITING: Duration = Duration::from_millis(700);
/// Bound for the queue on the server to reach an expected size.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

fn connect() -> String {
    zk::shared().connect_string()
}

fn client() -> Client {
    Client::connect(&connect(), SESSION).expect("connect to the test server")
}

fn lock_path(name: &str) -> String {
    format!("/interop-{name}-{}", std::process::id())
}

/// Waits (bounded) until `path` has exactly `n` children: a contender we
/// just started has created its node and so has joined the queue.
fn wait_for_queue(c: &Client, path: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    let reached = poll_until(QUEUE_WAIT, || {
        names = children(c, path);
        names.len() == n
    });
    assert!(
        reached,
        "{path}: expected {n} children within {QUEUE_WAIT:?}, have {names:?}"
    );
    names
}

fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn queue(c: &Client, path: &str) -> Vec<QueueEntry> {
    inspect(c, path).unwrap_or_else(|e| panic!("inspect {path}: {e}"))
}

fn describe(q: &[QueueEntry]) -> String {
    q.iter()
        .map(|e| {
            format!(
                "{} ({:?}, {:?}, data {:?})",
                e.name,
                e.kind,
                e.origin,
                String::from_utf8_lossy(&e.data)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Asserts one queue entry's name, kind, origin and (if given) data.
fn assert_entry(
    q: &[QueueEntry],
    i: usize,
    name: Option<&str>,
    kind: NodeKind,
    origin: NodeOrigin,
    data: Option<&[u8]>,
) {
    let e = q
        .get(i)
        .unwrap_or_else(|| panic!("no queue entry {i}: {}", describe(q)));
    if let Some(name) = name {
        assert_eq!(e.name, name, "entry {i}: {}", describe(q));
    }
    assert_eq!(e.kind, kind, "entry {i}: {}", describe(q));
    assert_eq!(e.origin, origin, "entry {i}: {}", describe(q));
    if let Some(data) = data {
        assert_eq!(e.data, data, "entry {i}: {}", describe(q));
    }
    assert_ne!(e.owner_session, 0, "entry {i} is not ephemeral");
}

/// `earlier <= later`, in unix millis, with a readable message.
fn assert_order(earlier: (&str, u64), later: (&str, u64)) {
    assert!(
        earlier.1 <= later.1,
        "{} at {} should not come after {} at {} ({} ms later)",
        earlier.0,
        earlier.1,
        later.0,
        later.1,
        earlier.1 - later.1
    );
}

/// The most `[acquired, released]` intervals that hold at one instant. A
/// release and an acquire stamped in the same millisecond do not overlap:
/// the release stamp is taken before releasing, the acquire stamp after
/// acquiring.
fn max_overlap(intervals: &[(&str, u64, u64)]) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for &(_, acquired, released) in intervals {
        assert!(acquired <= released, "interval {intervals:?}");
        events.push((acquired, 1));
        events.push((released, -1));
    }
    // At equal times, releases (-1) first.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        most = most.max(now);
    }
    most as usize
}

// ------------------------------------------------------------------- peers

fn peer_acquired(peer: &mut Peer) -> String {
    peer.expect_acquired(HANDOVER)
}

fn peer_still_waiting(peer: &mut Peer) {
    peer.expect_waiting(STILL_WAITING);
}

// ------------------------------------------------------- our own holders

enum Cmd {
    Acquire,
    Release,
}

enum Event {
    Acquired {
        node: String,
        token: i64,
        millis: u64,
    },
    Released(u64),
    Failed(LockError),
}

/// A zklock holder on its own thread, driven like a peer: `acquire` starts
/// a blocking lock call, `wait_acquired` sees its outcome, `release` stamps
/// and unlocks. The thread is detached: if a test fails while it is blocked
/// in a lock call, it simply ends with the test binary.
struct Local {
    label: String,
    /// Fencing token of the last acquisition.
    token: Cell<i64>,
    cmds: Sender<Cmd>,
    events: Receiver<Event>,
}

impl Local {
    fn spawn(
        label: &str,
        take: impl Fn() -> Result<LockGuard, LockError> + Send + 'static,
    ) -> Local {
        let (cmds, cmd_rx) = mpsc::channel::<Cmd>();
        let (ev_tx, events) = mpsc::channel::<Event>();
        thread::Builder::new()
            .name(format!("local-{label}"))
            .spawn(move || {
                let mut held: Option<LockGuard> = None;
                for cmd in cmd_rx {
                    let event = match cmd {
                        Cmd::Acquire => match take() {
                            Ok(guard) => {
                                let millis = now_millis();
                                let node = guard.node_path().to_owned();
                                let token = guard.fencing_token();
                                held = Some(guard);
                                Event::Acquired {
                                    node,
                                    token,
                                    millis,
                                }
                            }
                            Err(e) => Event::Failed(e),
                        },
                        Cmd::Release => {
                            let guard = held.take().expect("release without a held lock");
                            let millis = now_millis();
                            match guard.unlock() {
                                Ok(()) => Event::Released(millis),
                                Err(e) => Event::Failed(e),
                            }
                        }
                    };
                    if ev_tx.send(event).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a local holder thread");
        Local {
            label: label.to_string(),
            token: Cell::new(0),
            cmds,
            events,
        }
    }

    fn acquire(&self) {
        self.cmds.send(Cmd::Acquire).expect("local holder alive");
    }

    /// `Some((node path, acquired millis))`, or `None` if still waiting.
    fn wait_acquired(&self, timeout: Duration) -> Option<(String, u64)> {
        match self.events.recv_timeout(timeout) {
            Ok(Event::Acquired {
                node,
                token,
                millis,
            }) => {
                self.token.set(token);
                Some((node, millis))
            }
            Ok(Event::Released(_)) => panic!("{}: unexpected `released`", self.label),
            Ok(Event::Failed(e)) => panic!("{}: lock call failed: {e:?}", self.label),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("{}: thread died", self.label),
        }
    }

    /// Fencing token of the last acquisition seen by `wait_acquired`.
    fn token(&self) -> i64 {
        self.token.get()
    }

    fn acquired(&self) -> (String, u64) {
        self.wait_acquired(HANDOVER)
            .unwrap_or_else(|| panic!("{}: not acquired within {HANDOVER:?}", self.label))
    }

    fn still_waiting(&self) {
        if let Some((node, millis)) = self.wait_acquired(STILL_WAITING) {
            panic!(
                "{}: acquired {node} at {millis} while it should wait",
                self.label
            );
        }
    }

    /// Releases; returns the millis stamped right before unlocking.
    fn release(&self) -> u64 {
        self.cmds.send(Cmd::Release).expect("local holder alive");
        match self.events.recv_timeout(HANDOVER) {
            Ok(Event::Released(millis)) => millis,
            Ok(Event::Failed(e)) => panic!("{}: unlock failed: {e:?}", self.label),
            Ok(Event::Acquired { .. }) => panic!("{}: unexpected `acquired`", self.label),
            Err(e) => panic!("{}: no release: {e:?}", self.label),
        }
    }
}

// ------------------------------------------------------------------ mutex

/// Both directions between a zklock `Mutex` and one peer's exclusive lock.
/// The peer's node must show up in `inspect` as `origin` with the peer id
/// as data, and zklock must count it as a contender.
fn mutex_both_ways(name: &str, kind: PeerKind, peer_kind: &str, marker: &str, origin: NodeOrigin) {
    let path = lock_path(name);
    let c = client();
    let mut peer = Peer::start(kind, &connect(), &path, peer_kind, "peer-1");

    // zklock holds -> the peer waits.
    let m = Mutex::new(&c, &path).unwrap();
    let ours = m.lock().unwrap();
    let our_acq = now_millis();
    let ours_token = ours.fencing_token();
    assert_eq!(
        peer.try_acquire(300),
        None,
        "{kind} acquired while zklock held"
    );
    peer.acquire();
    peer_still_waiting(&mut peer);
    wait_for_queue(&c, &path, 2);
    let q = queue(&c, &path);
    assert_eq!(q.len(), 2, "{}", describe(&q));
    let our_name = last_segment(ours.node_path()).to_string();
    assert_entry(
        &q,
        0,
        Some(&our_name),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(&q, 1, None, NodeKind::Exclusive, origin, Some(b"peer-1"));
    assert!(q[1].name.contains(marker), "{}", describe(&q));
    assert_eq!(m.queue().unwrap(), q, "Mutex::queue and inspect disagree");
    assert!(q[0].czxid < q[1].czxid);

    let our_rel = now_millis();
    ours.unlock().unwrap();
    let p1 = peer_acquired(&mut peer);
    assert_eq!(acquired_node(&p1), q[1].name, "{p1}");
    assert_order(("zklock acquired", our_acq), ("zklock released", our_rel));
    assert_order(
        ("zklock released", our_rel),
        (&format!("{kind} acquired"), line_millis(&p1)),
    );

    // The peer holds -> zklock can't get in, and its failed tries leave nothing behind.
    assert!(
        m.try_lock().unwrap().is_none(),
        "zklock try_lock got the lock while {kind} held it: {}",
        describe(&queue(&c, &path))
    );
    match m.lock_timeout(Duration::from_millis(500)) {
        Err(LockError::Timeout) => {}
        Ok(g) => panic!(
            "zklock lock_timeout got {} while {kind} held the lock",
            g.node_path()
        ),
        Err(e) => panic!("lock_timeout: {e:?}"),
    }
    assert_eq!(
        children(&c, &path),
        vec![q[1].name.clone()],
        "failed tries left nodes"
    );

    // A blocking lock waits for the peer's release.
    let m2 = Mutex::new(&c, &path).unwrap();
    let local = Local::spawn("zklock mutex", move || m2.lock());
    local.acquire();
    local.still_waiting();
    wait_for_queue(&c, &path, 2);
    let p_rel = peer.release();
    let (node, l_acq) = local.acquired();
    assert_order(
        (&format!("{kind} acquired"), line_millis(&p1)),
        (&format!("{kind} released"), p_rel),
    );
    assert_order(
        (&format!("{kind} released"), p_rel),
        ("zklock acquired", l_acq),
    );
    assert_eq!(children(&c, &path), vec![last_segment(&node).to_string()]);
    assert!(
        local.token() > q[1].czxid && q[1].czxid > ours_token,
        "fencing tokens not increasing across holders: {ours_token}, {}, {}",
        q[1].czxid,
        local.token()
    );

    // ... and the peer waits again for us.
    peer.acquire();
    peer_still_waiting(&mut peer);
    let l_rel = local.release();
    let p2 = peer_acquired(&mut peer);
    assert_order(
        ("zklock released", l_rel),
        (&format!("{kind} acquired"), line_millis(&p2)),
    );
    peer.release();
    peer.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

/// zklock `Mutex` <-> Curator `InterProcessMutex`, both directions.
#[test]
fn mutex_with_curator() {
    mutex_both_ways(
        "curator-mutex",
        PeerKind::Curator,
        "mutex",
        "-lock-",
        NodeOrigin::Protected,
    );
}

/// zklock `Mutex` <-> kazoo `Lock` with kazoo's own `<uuid>__lock__<seq>`
/// names (kazoo sees our `-lock-` nodes through its extra pattern; we must
/// count its `__lock__` nodes).
#[test]
fn mutex_with_kazoo_native_names() {
    mutex_both_ways(
        "kazoo-mutex",
        PeerKind::Kazoo,
        "mutex",
        "__lock__",
        NodeOrigin::Kazoo,
    );
}

/// One queue, four contenders of three implementations: they get the lock
/// in arrival order, one at a time.
#[test]
fn fifo_across_implementations() {
    let path = lock_path("fifo");
    let c = client();
    let mut cur = Peer::start(PeerKind::Curator, &connect(), &path, "mutex", "cur");
    let mut kaz = Peer::start(PeerKind::Kazoo, &connect(), &path, "mutex-curator", "kaz");

    let a = Mutex::new(&c, &path).unwrap();
    let a_guard = a.lock().unwrap();
    let a_acq = now_millis();
    wait_for_queue(&c, &path, 1);

    cur.acquire();
    wait_for_queue(&c, &path, 2);
    kaz.acquire();
    wait_for_queue(&c, &path, 3);
    let c_b = client();
    let b = Mutex::new(&c_b, &path).unwrap();
    let local_b = Local::spawn("zklock B", move || b.lock());
    local_b.acquire();
    wait_for_queue(&c, &path, 4);

    peer_still_waiting(&mut cur);
    peer_still_waiting(&mut kaz);
    local_b.still_waiting();

    let q = queue(&c, &path);
    assert_eq!(q.len(), 4, "{}", describe(&q));
    let a_name = last_segment(a_guard.node_path()).to_string();
    assert_entry(
        &q,
        0,
        Some(&a_name),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"cur"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Other,
        Some(b"kaz"),
    );
    assert!(
        q[2].name.contains("-lock-") && !q[2].name.starts_with("_c_"),
        "{}",
        describe(&q)
    );
    assert_entry(
        &q,
        3,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        None,
    );
    assert_eq!(q[3].owner_session, c_b.session_id(), "{}", describe(&q));

    // Release A; every holder releases as soon as it has the lock.
    let a_rel = now_millis();
    a_guard.unlock().unwrap();
    let c_line = peer_acquired(&mut cur);
    let c_rel = cur.release();
    let k_line = peer_acquired(&mut kaz);
    let k_rel = kaz.release();
    let (b_node, b_acq) = local_b.acquired();
    let b_rel = local_b.release();

    assert_eq!(acquired_node(&c_line), q[1].name);
    assert_eq!(acquired_node(&k_line), q[2].name);
    assert_eq!(last_segment(&b_node), q[3].name);
    let chain = [
        ("A acquired", a_acq),
        ("A released", a_rel),
        ("Curator acquired", line_millis(&c_line)),
        ("Curator released", c_rel),
        ("kazoo acquired", line_millis(&k_line)),
        ("kazoo released", k_rel),
        ("B acquired", b_acq),
        ("B released", b_rel),
    ];
    eprintln!("fifo: {chain:?}");
    for pair in chain.windows(2) {
        assert_order(pair[0], pair[1]);
    }
    cur.quit();
    kaz.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

// -------------------------------------------------------- read/write lock

/// zklock `RwLock` <-> Curator `InterProcessReadWriteLock` on one path.
#[test]
fn read_write_lock_with_curator() {
    let path = lock_path("rw");
    let c = client();
    let mut cr = Peer::start(PeerKind::Curator, &connect(), &path, "read", "cr");
    let mut cw = Peer::start(PeerKind::Curator, &connect(), &path, "write", "cw");
    let rw_r = RwLock::new(&c, &path).unwrap();
    let zr = Local::spawn("zklock reader", move || rw_r.read());
    let rw_w = RwLock::new(&c, &path).unwrap();
    let zw = Local::spawn("zklock writer", move || rw_w.write());
    let probe = RwLock::new(&c, &path).unwrap();

    // Our reader and Curator's reader share.
    zr.acquire();
    let (zr_node, zr_acq) = zr.acquired();
    cr.acquire();
    let cr1 = peer_acquired(&mut cr);
    assert!(acquired_node(&cr1).contains("__READ__"), "{cr1}");

    // Curator's writer waits for both readers.
    cw.acquire();
    peer_still_waiting(&mut cw);
    wait_for_queue(&c, &path, 3);
    let q = queue(&c, &path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&zr_node)),
        NodeKind::Read,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&cr1)),
        NodeKind::Read,
        NodeOrigin::Protected,
        Some(b"cr"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Write,
        NodeOrigin::Protected,
        Some(b"cw"),
    );
    // A reader arriving now queues behind the waiting writer, even though
    // only readers hold: no writer starvation, across implementations.
    let rw_late = RwLock::new(&c, &path).unwrap();
    let late = Local::spawn("late zklock reader", move || rw_late.read());
    late.acquire();
    wait_for_queue(&c, &path, 4);
    late.still_waiting();
    let zr_rel = zr.release();
    peer_still_waiting(&mut cw);
    let cr_rel = cr.release();
    let cw1 = peer_acquired(&mut cw);
    assert_eq!(acquired_node(&cw1), q[2].name);
    assert_order(
        ("zklock reader acquired", zr_acq),
        ("Curator reader acquired", line_millis(&cr1)),
    );
    assert_order(
        ("Curator reader acquired", line_millis(&cr1)),
        ("zklock reader released", zr_rel),
    );
    assert_order(
        ("zklock reader released", zr_rel),
        ("Curator writer acquired", line_millis(&cw1)),
    );
    assert_order(
        ("Curator reader released", cr_rel),
        ("Curator writer acquired", line_millis(&cw1)),
    );

    // Our reader waits for Curator's writer; our try_read and try_write fail.
    assert!(
        probe.try_read().unwrap().is_none(),
        "read while Curator writes"
    );
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while Curator writes"
    );
    zr.acquire();
    zr.still_waiting();
    let cw_rel = cw.release();
    let (_, zr_acq2) = zr.acquired();
    let (_, late_acq) = late.acquired();
    assert_order(
        ("Curator writer released", cw_rel),
        ("zklock reader acquired", zr_acq2),
    );
    assert_order(
        ("Curator writer released", cw_rel),
        ("late zklock reader acquired", late_acq),
    );
    zr.release();
    late.release();

    // Our writer waits for Curator's reader.
    cr.acquire();
    let cr2 = peer_acquired(&mut cr);
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while Curator reads"
    );
    zw.acquire();
    zw.still_waiting();
    let cr_rel2 = cr.release();
    let (zw_node, zw_acq) = zw.acquired();
    assert!(zw_node.contains("__WRIT__"), "{zw_node}");
    assert_order(
        ("Curator reader acquired", line_millis(&cr2)),
        ("Curator reader released", cr_rel2),
    );
    assert_order(
        ("Curator reader released", cr_rel2),
        ("zklock writer acquired", zw_acq),
    );

    // Curator's reader (and writer) wait for our writer.
    cr.acquire();
    peer_still_waiting(&mut cr);
    assert_eq!(
        cw.try_acquire(300),
        None,
        "Curator writer got in while zklock wrote"
    );
    let q = queue(&c, &path);
    assert_eq!(q.len(), 2, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&zw_node)),
        NodeKind::Write,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Read,
        NodeOrigin::Protected,
        Some(b"cr"),
    );
    let zw_rel = zw.release();
    let cr3 = peer_acquired(&mut cr);
    assert_order(
        ("zklock writer released", zw_rel),
        ("Curator reader acquired", line_millis(&cr3)),
    );
    cr.release();

    cr.quit();
    cw.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

/// zklock `RwLock` respects kazoo's native `ReadLock`/`WriteLock` nodes
/// (`__rlock__`/`__lock__`). One way only: kazoo's read/write recipes know
/// nothing of Curator-style `__READ__`/`__WRIT__` nodes, so kazoo is never
/// asked to wait for us here.
#[test]
fn read_write_lock_respects_kazoo_nodes() {
    let path = lock_path("kazoo-rw");
    let c = client();
    let mut kr = Peer::start(PeerKind::Kazoo, &connect(), &path, "read", "kr");
    let mut kw = Peer::start(PeerKind::Kazoo, &connect(), &path, "write", "kw");
    let rw_r = RwLock::new(&c, &path).unwrap();
    let zr = Local::spawn("zklock reader", move || rw_r.read());
    let rw_w = RwLock::new(&c, &path).unwrap();
    let zw = Local::spawn("zklock writer", move || rw_w.write());
    let probe = RwLock::new(&c, &path).unwrap();

    // kazoo writes: we neither read nor write.
    let kw1 = kw.try_acquire(10_000).expect("kazoo writer on a free lock");
    assert!(acquired_node(&kw1).contains("__lock__"), "{kw1}");
    assert!(
        probe.try_read().unwrap().is_none(),
        "read while kazoo writes"
    );
    assert!(
        probe.try_write().unwrap().is_none(),
        "write while kazoo writes"
    );
    let q = queue(&c, &path);
    assert_eq!(q.len(), 1, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(&acquired_node(&kw1)),
        NodeKind::Exclusive,
        NodeOrigin::Kazoo,
        Some(b"kw"),
    );
    zr.acquire();
    zr.still_waiting();
    let kw_rel = kw.release();
    let (_, zr_acq) = zr.acquired();
    assert_order(
        ("kazoo writer released", kw_rel),
        ("zklock reader acquired", zr_acq),
    );

    // kazoo reads alongside our reader; our writer waits for both.
    let kr1 = kr
        .try_acquire(10_000)
        .expect("kazoo reader shares with ours");
    assert!(acquired_node(&kr1).contains("__rlock__"), "{kr1}");
    zw.acquire();
    zw.still_waiting();
    let q = queue(&c, &path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(&q, 0, None, NodeKind::Read, NodeOrigin::Protected, None);
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&kr1)),
        NodeKind::Read,
        NodeOrigin::Kazoo,
        Some(b"kr"),
    );
    assert_entry(&q, 2, None, NodeKind::Write, NodeOrigin::Protected, None);
    let zr_rel = zr.release();
    zw.still_waiting();
    let kr_rel = kr.release();
    let (_, zw_acq) = zw.acquired();
    assert_order(
        ("zklock reader released", zr_rel),
        ("zklock writer acquired", zw_acq),
    );
    assert_order(
        ("kazoo reader released", kr_rel),
        ("zklock writer acquired", zw_acq),
    );
    assert_order(
        ("zklock reader acquired", zr_acq),
        ("kazoo reader acquired", line_millis(&kr1)),
    );
    zw.release();

    kr.quit();
    kw.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

// --------------------------------------------------------------- semaphore

/// zklock `Semaphore` <-> Curator `InterProcessSemaphoreV2`, 2 leases.
#[test]
fn semaphore_with_curator() {
    let path = lock_path("sem");
    let leases_path = format!("{path}/leases");
    let c = client();
    let mut s1 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s1");
    let mut s2 = Peer::start(PeerKind::Curator, &connect(), &path, "semaphore:2", "s2");
    let sem1 = Semaphore::new(&c, &path, 2).unwrap();
    let z1 = Local::spawn("zklock lease 1", move || sem1.acquire());
    let c2 = client();
    let sem2 = Semaphore::new(&c2, &path, 2).unwrap();
    let z2 = Local::spawn("zklock lease 2", move || sem2.acquire());
    let probe = Semaphore::new(&c, &path, 2).unwrap();

    z1.acquire();
    let (z1_node, z1_acq) = z1.acquired();
    assert!(z1_node.contains("-lease-"), "{z1_node}");
    s1.acquire();
    let s1_line = peer_acquired(&mut s1);
    assert!(acquired_node(&s1_line).contains("-lease-"), "{s1_line}");

    // Both leases are taken: Curator's third contender waits ...
    s2.acquire();
    peer_still_waiting(&mut s2);
    wait_for_queue(&c, &leases_path, 3);
    let q = queue(&c, &leases_path);
    assert_eq!(q.len(), 3, "{}", describe(&q));
    assert_entry(
        &q,
        0,
        Some(last_segment(&z1_node)),
        NodeKind::Lease,
        NodeOrigin::Protected,
        None,
    );
    assert_entry(
        &q,
        1,
        Some(&acquired_node(&s1_line)),
        NodeKind::Lease,
        NodeOrigin::Protected,
        Some(b"s1"),
    );
    assert_entry(
        &q,
        2,
        None,
        NodeKind::Lease,
        NodeOrigin::Protected,
        Some(b"s2"),
    );
    // ... holding the gate, which is a Curator mutex under `<path>/locks`.
    let gate = queue(&c, &format!("{path}/locks"));
    assert_eq!(gate.len(), 1, "{}", describe(&gate));
    assert_entry(
        &gate,
        0,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"s2"),
    );
    // ... and so does zklock.
    assert!(probe.try_acquire().unwrap().is_none(), "a third lease");
    assert_eq!(
        probe.lease_count().unwrap(),
        3,
        "{}",
        describe(&queue(&c, &leases_path))
    );

    let z1_rel = z1.release();
    let s2_line = peer_acquired(&mut s2);
    assert_eq!(acquired_node(&s2_line), q[2].name);
    assert_order(
        ("zklock lease 1 released", z1_rel),
        ("Curator s2 acquired", line_millis(&s2_line)),
    );

    // Curator holds both leases now: our second lease waits for one of them.
    z2.acquire();
    z2.still_waiting();
    let s1_rel = s1.release();
    let (_, z2_acq) = z2.acquired();
    assert_order(
        ("Curator s1 released", s1_rel),
        ("zklock lease 2 acquired", z2_acq),
    );
    let s2_rel = s2.release();
    let z2_rel = z2.release();

    let intervals = [
        ("zklock 1", z1_acq, z1_rel),
        ("curator s1", line_millis(&s1_line), s1_rel),
        ("curator s2", line_millis(&s2_line), s2_rel),
        ("zklock 2", z2_acq, z2_rel),
    ];
    eprintln!("semaphore leases: {intervals:?}");
    assert_eq!(max_overlap(&intervals), 2, "{intervals:?}");

    s1.quit();
    s2.quit();
    assert_eq!(
        children(&c, &leases_path),
        Vec::<String>::new(),
        "leases left"
    );
    assert_eq!(
        children(&c, &format!("{path}/locks")),
        Vec::<String>::new(),
        "gate nodes left"
    );
}

// ---------------------------------------------------------------- election

/// zklock `Election` <-> Curator `LeaderLatch`: first come leads, and
/// `Election::leader` names a Curator leader.
#[test]
fn election_with_curator_leader_latch() {
    let path = lock_path("election");
    let c = client();
    let mut cl = Peer::start(PeerKind::Curator, &connect(), &path, "leader", "curator-1");

    // Curator came first: it leads.
    let l1 = cl
        .try_acquire(10_000)
        .expect("Curator leads an empty election");
    let cur_node = acquired_node(&l1);
    assert!(cur_node.contains("-latch-"), "{l1}");
    let probe = Election::new(&c, &path, b"probe").unwrap();
    assert!(probe.try_campaign().unwrap().is_none(), "two leaders");
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, cur_node);
    assert_eq!(leader.id, b"curator-1");
    assert_ne!(leader.session, c.session_id());

    let e = Election::new(&c, &path, b"zklock-1").unwrap();
    let ze = Local::spawn("zklock candidate", move || e.campaign());
    ze.acquire();
    ze.still_waiting();
    wait_for_queue(&c, &path, 2);
    let q = queue(&c, &path);
    assert_entry(
        &q,
        0,
        Some(&cur_node),
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"curator-1"),
    );
    assert_entry(
        &q,
        1,
        None,
        NodeKind::Exclusive,
        NodeOrigin::Protected,
        Some(b"zklock-1"),
    );
    assert_eq!(probe.leader().unwrap().expect("a leader").node, cur_node);

    // Curator steps down: we lead.
    let cl_rel = cl.release();
    let (our_node, our_acq) = ze.acquired();
    assert_order(("Curator stepped down", cl_rel), ("zklock leads", our_acq));
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, last_segment(&our_node));
    assert_eq!(leader.id, b"zklock-1");
    assert_eq!(leader.session, c.session_id());

    // Now Curator waits for us.
    cl.acquire();
    peer_still_waiting(&mut cl);
    let our_rel = ze.release();
    let l2 = peer_acquired(&mut cl);
    assert_order(
        ("zklock stepped down", our_rel),
        ("Curator leads", line_millis(&l2)),
    );
    let leader = probe.leader().unwrap().expect("a leader");
    assert_eq!(leader.node, acquired_node(&l2));
    assert_eq!(leader.id, b"curator-1");
    cl.release();
    cl.quit();
    assert_eq!(
        children(&c, &path),
        Vec::<String>::new(),
        "nodes left behind"
    );
}

// -------------------------------------------------------------- revocation

/// Curator's revocation both ways: zklock asks a revocable Curator holder
/// to let go, and Curator's `Revoker` asks a revocable zklock holder.
#[test]
fn revocation_with_curator_both_ways() {
    use zklock::recipes::{revoke, revoke_holder, MutexOptions};
    let path = lock_path("revoke");
    let c = client();

    // A Curator holder, asked by zklock.
    let mut cur = Peer::start(
        PeerKind::Curator,
        &connect(),
        &path,
        "revocable-mutex",
        "cur",
    );
    let line = cur.try_acquire(10_000).expect("Curator holds a free lock");
    let cur_node = format!("{path}/{}", acquired_node(&line));
    assert_eq!(
        revoke_holder(&c, &path).unwrap().as_deref(),
        Some(cur_node.as_str())
    );
    let heard = (0..5).find_map(|_| {
        cur.next_line(HANDOVER)
            .filter(|l| l == "revocation-requested")
    });
    assert!(heard.is_some(), "Curator's listener was not called");
    cur.release();

    // A zklock holder, asked by Curator.
    let options = MutexOptions::default().revocable(true);
    let g = Mutex::with_options(&c, &path, options)
        .unwrap()
        .lock_timeout(HANDOVER)
        .unwrap();
    let requests = g.revocation_requests();
    assert!(!g.revocation_requested());
    cur.send(&format!("revoke {}", g.node_path()));
    assert_eq!(
        cur.next_line(HANDOVER).as_deref(),
        Some(format!("revoked {}", g.node_path()).as_str())
    );
    requests
        .recv_timeout(HANDOVER)
        .expect("the zklock holder hears the request");
    assert!(g.revocation_requested());
    // Letting go is the holder's choice; here it does.
    g.unlock().unwrap();
    // A node that is gone: nothing to ask.
    assert!(!revoke(&c, &format!("{path}/_c_gone-lock-0000000001")).unwrap());
    cur.quit();
    assert!(children(&c, &path).is_empty());
}
