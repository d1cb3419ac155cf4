//! The exclusive lock against a real ZooKeeper, with faults from the proxy.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex as StdMutex};
use std::time::Duration;

use testkit::children;
use testkit::proxy::{Direction, Proxy};
use testkit::zk::{self, ZkServer};
use zklock::recipes::{
    CancelToken, LockError, LockState, LossReason, Mutex, MutexOptions, PendingSet,
};
use zklock::{Client, CreateMode, Op, SessionState};

const T: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(20);

fn client() -> Client {
    testkit::shared_client(T)
}

fn lock_path(name: &str) -> String {
    format!("/mutex-{name}-{}", std::process::id())
}

/// Runs `f` while checking that nobody else is inside.
fn exclusive(inside: &AtomicBool, f: impl FnOnce()) {
    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
    f();
    inside.store(false, Ordering::SeqCst);
}

#[test]
fn mutual_exclusion_across_threads_and_clients() {
    let path = lock_path("exclusion");
    let inside = Arc::new(AtomicBool::new(false));
    let entries = Arc::new(AtomicUsize::new(0));
    let clients: Vec<Client> = (0..4).map(|_| client()).collect();
    let threads: Vec<_> = (0..12)
        .map(|i| {
            let c = clients[i % clients.len()].clone();
            let (path, inside, entries) = (path.clone(), inside.clone(), entries.clone());
            std::thread::spawn(move || {
                let m = Mutex::new(&c, &path).unwrap();
                for _ in 0..5 {
                    let g = m.lock_timeout(Duration::from_secs(60)).unwrap();
                    assert_eq!(g.state(), LockState::Held);
                    exclusive(&inside, || {
                        entries.fetch_add(1, Ordering::SeqCst);
                        // Touch the server while holding, so holders overlap
                        // in time if exclusion were broken.
                        c.exists(&path).unwrap();
                    });
                    g.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(entries.load(Ordering::SeqCst), 60);
    testkit::wait_no_children(&clients[0], &path, WAIT);
}

#[test]
fn waiters_acquire_in_arrival_order() {
    let path = lock_path("fifo");
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    let first = m.lock().unwrap();
    let order = Arc::new(StdMutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..5 {
        let c2 = client();
        let (p2, order) = (path.clone(), order.clone());
        handles.push(std::thread::spawn(move || {
            let m = Mutex::new(&c2, &p2).unwrap();
            let g = m.lock_timeout(WAIT).unwrap();
            order.lock().unwrap().push(i);
            g.unlock().unwrap();
        }));
        // Wait until waiter i has its node in the queue before starting i+1.
        testkit::wait_children(&c, &path, i + 2, WAIT);
    }
    drop(first);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

#[test]
fn try_lock_timeout_and_cancel_leave_no_node() {
    let path = lock_path("giveup");
    let holder_client = client();
    let holder = Mutex::new(&holder_client, &path).unwrap();
    let g = holder.lock().unwrap();
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    assert!(m.try_lock().unwrap().is_none());
    assert_eq!(children(&c, &path).len(), 1);
    assert_eq!(
        m.lock_timeout(Duration::from_millis(300)).unwrap_err(),
        LockError::Timeout
    );
    assert_eq!(children(&c, &path).len(), 1);
    let token = CancelToken::new();
    let canceller = {
        let token = token.clone();
        let c = c.clone();
        let path = path.clone();
        std::thread::spawn(move || {
            // Cancel once our waiter's node is in the queue.
            testkit::poll_until(WAIT, || children(&c, &path).len() >= 2);
            token.cancel();
        })
    };
    assert_eq!(
        m.lock_with(None, Some(&token)).unwrap_err(),
        LockError::Cancelled
    );
    canceller.join().unwrap();
    assert_eq!(children(&c, &path).len(), 1);
    drop(g);
    // The holder's release goes out on its own session, in the background.
    testkit::wait_no_children(&c, &path, WAIT);
    assert!(m.try_lock().unwrap().is_some());
}

#[test]
fn dropped_guard_and_panicking_holder_release() {
    let path = lock_path("drop");
    let c = client();
    {
        let m = Mutex::new(&c, &path).unwrap();
        let _g = m.lock().unwrap();
    }
    assert!(children(&c, &path).is_empty());
    let c2 = c.clone();
    let p2 = path.clone();
    let panicked = std::thread::spawn(move || {
        let m = Mutex::new(&c2, &p2).unwrap();
        let _g = m.lock().unwrap();
        panic!("holder dies");
    })
    .join();
    assert!(panicked.is_err());
    assert!(children(&c, &path).is_empty());
    let m = Mutex::new(&client(), &path).unwrap();
    assert!(m.try_lock().unwrap().is_some());
}

#[test]
fn reentrancy_is_explicit() {
    let path = lock_path("reentrant");
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    assert_eq!(m.lock().unwrap_err(), LockError::WouldDeadlock);
    assert_eq!(
        Mutex::new(&c, &path).unwrap().try_lock().unwrap_err(),
        LockError::WouldDeadlock
    );
    drop(g);
    let r = Mutex::with_options(&c, &path, MutexOptions::default().reentrant(true)).unwrap();
    let g1 = r.lock().unwrap();
    let g2 = r.lock().unwrap();
    assert_eq!(g1.node_path(), g2.node_path());
    assert_eq!(children(&c, &path).len(), 1);
    drop(g1);
    assert_eq!(children(&c, &path).len(), 1, "released while still entered");
    drop(g2);
    assert!(children(&c, &path).is_empty());
}

#[test]
fn fencing_token_rises_and_fenced_writes_stop_after_loss() {
    let path = lock_path("fencing");
    let c = client();
    let data = format!("{path}-data");
    c.create(&data, b"0", CreateMode::Persistent).unwrap();
    let m = Mutex::with_options(&c, &path, MutexOptions::default().watch_node(true)).unwrap();
    let mut last = 0;
    for i in 0..3 {
        let g = m.lock().unwrap();
        assert!(g.fencing_token() > last);
        last = g.fencing_token();
        g.fenced(&[Op::set_data(&data, format!("{i}").as_bytes(), None)])
            .unwrap();
    }
    let g = m.lock().unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    // Someone deletes our node: the lock is lost, and we are told.
    client().delete(g.node_path(), None).unwrap();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Lost);
    assert_eq!(g.state(), LockState::Lost);
    assert_eq!(g.lost_reason(), Some(LossReason::NodeDeleted));
    assert_eq!(
        g.fenced(&[Op::set_data(&data, b"stale", None)])
            .unwrap_err(),
        LockError::Lost
    );
    assert_eq!(c.get_data(&data).unwrap().0, b"2");
}

#[test]
fn missing_parents_are_created_as_containers() {
    let path = format!("{}/deep/er", lock_path("parents"));
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    let parent = path.rsplit_once('/').unwrap().0;
    let stat = c.exists(parent).unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, 0);
    assert!(g.node_path().starts_with(&format!("{path}/_c_")));
    assert!(g.node_path().contains("-lock-"));
    let q = m.queue().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].owner_session, c.session_id());
    assert_eq!(q[0].czxid, g.fencing_token());
}

#[test]
fn each_release_wakes_exactly_one_waiter() {
    const WAITERS: usize = 1000;
    let path = lock_path("herd");
    let c = Client::builder(&zk::shared().connect_string())
        .session_timeout(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(60))
        .connect()
        .unwrap();
    // Guards that do not watch their own node: every watch event counted
    // below is then a waiter being woken.
    let options = MutexOptions::default().watch_node(false);
    let m = Mutex::with_options(&c, &path, options.clone()).unwrap();
    let first = m.lock().unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(WAITERS + 1));
    let threads: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (c, path, acquired, barrier, options) = (
                c.clone(),
                path.clone(),
                acquired.clone(),
                barrier.clone(),
                options.clone(),
            );
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let m = Mutex::with_options(&c, &path, options).unwrap();
                    barrier.wait();
                    let g = m.lock_timeout(Duration::from_secs(300)).unwrap();
                    acquired.fetch_add(1, Ordering::SeqCst);
                    g.unlock().unwrap();
                })
                .unwrap()
        })
        .collect();
    barrier.wait();
    testkit::wait_children(&c, &path, WAITERS + 1, Duration::from_secs(120));
    let events_before = c.watch_events_received();
    drop(first);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), WAITERS);
    // One deletion per release, each seen by the single waiter behind it.
    // A waiter with nothing but its blocker below it also watches its own
    // node (so the blocker's deletion alone grants it): that watch fires
    // once more at its own release. Only the first waiters can be alone
    // (one, or two after a late listing); a herd would add hundreds.
    let events = c.watch_events_received() - events_before;
    assert!(
        (WAITERS as u64..=WAITERS as u64 + 2).contains(&events),
        "releases woke more than one waiter: {events} events for {WAITERS} waiters"
    );
}

#[test]
fn lost_create_reply_leaves_exactly_one_node() {
    let path = lock_path("lostreply");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    let m = Mutex::new(&c, &path).unwrap();
    // Create the parent first, so the dropped reply is the lock node's create2.
    c.create(&path, b"", CreateMode::Persistent).unwrap();
    proxy.drop_reply_of_next(15);
    let g = m.lock_timeout(WAIT).unwrap();
    assert!(
        proxy.wait_reply_dropped(Duration::from_secs(1)),
        "no reply was dropped"
    );
    let kids = children(&client(), &path);
    assert_eq!(kids.len(), 1, "orphan nodes: {kids:?}");
    assert!(g.node_path().ends_with(&kids[0]));
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    testkit::wait_no_children(&client(), &path, WAIT);
}

#[test]
fn disconnect_while_holding_suspends_then_holds_again() {
    let path = lock_path("suspend");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), T).unwrap();
    let g = Mutex::new(&c, &path).unwrap().lock().unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    assert_eq!(g.lost_reason(), None);
    proxy.cut_all();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    assert_eq!(c.state(), SessionState::Connected);
}

/// A private server with a short tick, so sessions can expire quickly.
fn fast_server() -> ZkServer {
    ZkServer::start_with(500)
}

#[test]
fn expiry_while_holding_reports_lost_and_while_waiting_fails() {
    let server = fast_server();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(2);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let path = "/expiry";
    let g = Mutex::new(&c, path).unwrap().lock().unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);

    // A waiter on a second proxied session.
    let waiter_client = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let waiter = std::thread::spawn({
        let wc = waiter_client.clone();
        move || {
            Mutex::new(&wc, path)
                .unwrap()
                .lock_timeout(Duration::from_secs(60))
        }
    });
    testkit::wait_children(&other, path, 2, WAIT);
    // Silence both sessions past their timeout; the server expires them.
    proxy.blackhole(Direction::Both);
    testkit::wait_no_children(&other, path, WAIT);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Lost);
    proxy.clear();
    assert_eq!(
        waiter.join().unwrap().unwrap_err(),
        LockError::SessionExpired
    );
    assert_eq!(g.state(), LockState::Lost);
    // Silence for a whole session timeout came first; the expiry after it.
    assert_eq!(g.lost_reason(), Some(LossReason::NoContact));
}

#[test]
fn lock_cycles_leave_no_watches_on_the_server() {
    let server = ZkServer::start();
    let c = Client::connect(&server.connect_string(), T).unwrap();
    let m = Mutex::new(&c, "/no-watch-leak").unwrap();
    for _ in 0..100 {
        m.lock().unwrap().unlock().unwrap();
    }
    // A round trip after the last release: every earlier request is done.
    c.sync("/").unwrap();
    let wchs = server.four_letter("wchs");
    let total: u64 = wchs
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no watch total in {wchs:?}"));
    assert_eq!(total, 0, "watches left behind: {wchs}");
}

#[test]
fn a_pending_set_delivers_each_outcome_once_and_gives_up_the_rest_on_drop() {
    let path = lock_path("pending-set");
    let c = client();
    let free: Vec<Mutex> = (0..3)
        .map(|i| Mutex::new(&c, &format!("{path}/free-{i}")).unwrap())
        .collect();
    let busy = Mutex::new(&c, &format!("{path}/busy")).unwrap();
    let holder = busy.lock().unwrap();
    let mut set = PendingSet::new();
    let keys: Vec<u64> = free.iter().map(|m| set.start_lock(m, None)).collect();
    let waiting = set.start_lock(&busy, None);
    let cancelled = set.start_lock(&busy, None);
    assert_eq!(set.len(), 5);
    let mut got = Vec::new();
    for _ in 0..3 {
        let (key, outcome) = set.recv_timeout(WAIT).expect("a free lock's outcome");
        outcome.unwrap().unlock().unwrap();
        got.push(key);
    }
    got.sort_unstable();
    assert_eq!(got, keys);
    assert!(set.try_recv().is_none(), "the busy lock is not ours yet");
    assert!(set.cancel(cancelled));
    assert!(!set.cancel(cancelled));
    drop(holder);
    let (key, outcome) = set.recv_timeout(WAIT).expect("the busy lock after release");
    assert_eq!(key, waiting);
    let guard = outcome.unwrap();
    assert!(set.is_empty());
    assert!(set.recv().is_none(), "an empty set does not block");
    // Dropping a set with an open acquisition removes its node.
    let mut set = PendingSet::new();
    set.start_lock(&busy, None);
    testkit::wait_children(&c, &format!("{path}/busy"), 2, WAIT);
    drop(set);
    drop(guard);
    testkit::wait_no_children(&c, &format!("{path}/busy"), WAIT);
}

#[test]
fn a_pending_set_hears_when_its_client_goes() {
    let path = lock_path("pending-set-gone");
    let holder = client();
    let _held = Mutex::new(&holder, &path).unwrap().lock().unwrap();
    // Closed: the session ends and the waiter with it.
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    let mut set = PendingSet::new();
    let closed = set.start_lock(&m, None);
    testkit::wait_children(&holder, &path, 2, WAIT);
    c.close().unwrap();
    let (key, outcome) = set.recv_timeout(WAIT).expect("an outcome after close");
    assert_eq!(key, closed);
    assert!(outcome.is_err());
    // Every handle dropped: the I/O thread ends, and the set still hears.
    let c = client();
    let m = Mutex::new(&c, &path).unwrap();
    let gone = set.start_lock(&m, None);
    testkit::wait_children(&holder, &path, 2, WAIT);
    drop((m, c));
    let (key, outcome) = set
        .recv_timeout(WAIT)
        .expect("an outcome after the client went");
    assert_eq!(key, gone);
    assert!(outcome.is_err());
}

/// A key cancelled after its lock was granted but before the set handed
/// the guard out: the node goes at once, not when the set is dropped.
#[test]
fn a_pending_set_cancel_after_the_grant_frees_the_lock_at_once() {
    let path = lock_path("pending-set-granted");
    let (c, other) = (client(), client());
    let granted = Mutex::new(&c, &format!("{path}/granted")).unwrap();
    let later = Mutex::new(&c, &format!("{path}/later")).unwrap();
    let mut set = PendingSet::new();
    let key = set.start_lock(&granted, None);
    // Its create (and the listing sent with it) is on the server...
    testkit::wait_children(&other, &format!("{path}/granted"), 1, WAIT);
    // ...so replies arrive in order: its grant was handed out before this
    // later lock's, which we wait for.
    let _later = later.start_lock(None).wait_timeout(WAIT).unwrap();
    assert!(set.cancel(key));
    assert!(set.is_empty());
    // The set lives on; the lock must be free for others anyway.
    testkit::wait_no_children(&other, &format!("{path}/granted"), WAIT);
    let g = Mutex::new(&other, &format!("{path}/granted"))
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    assert_eq!(g.state(), LockState::Held);
    drop(set);
}

/// A lost holding is never handed out again to the thread that held it:
/// with or without a watch on the node, the next call queues anew.
#[test]
fn a_lost_holding_is_not_reentered_nor_a_deadlock() {
    let path = lock_path("reenter-lost");
    let (c, admin) = (client(), client());
    for watch in [false, true] {
        let options = MutexOptions::default().reentrant(true).watch_node(watch);
        let r = Mutex::with_options(&c, &path, options).unwrap();
        let first = r.lock_timeout(WAIT).unwrap();
        let changes = first.state_changes();
        admin.delete(first.node_path(), None).unwrap();
        if watch {
            assert!(becomes_lost(&changes), "watch {watch}");
        }
        let second = r.lock_timeout(WAIT).unwrap();
        assert_ne!(second.node_path(), first.node_path(), "watch {watch}");
        assert_eq!(second.state(), LockState::Held);
        assert_eq!(first.state(), LockState::Lost, "watch {watch}");
        assert_eq!(first.lost_reason(), Some(LossReason::NodeDeleted));
        drop((first, second));
    }
    // Not re-entrant: a thread whose holding is lost may queue again.
    let m = Mutex::with_options(&c, &path, MutexOptions::default().watch_node(true)).unwrap();
    let first = m.lock_timeout(WAIT).unwrap();
    let changes = first.state_changes();
    admin.delete(first.node_path(), None).unwrap();
    assert!(becomes_lost(&changes));
    let second = m
        .lock_timeout(WAIT)
        .expect("no WouldDeadlock for a lost holding");
    assert_eq!(second.state(), LockState::Held);
}

/// Whether `changes` says Lost within `WAIT`.
fn becomes_lost(changes: &crossbeam_channel::Receiver<LockState>) -> bool {
    let until = std::time::Instant::now() + WAIT;
    while let Ok(s) = changes.recv_deadline(until) {
        if s == LockState::Lost {
            return true;
        }
    }
    false
}

/// A lock path whose ACL lets contenders create but not delete: the
/// release is refused, and both ways of releasing say so; the node (and
/// the lock) goes with the session.
#[test]
fn a_refused_release_is_an_error_not_a_success() {
    use zklock::{perms, Acl, CreateOptions, ErrorCode, Id};
    let admin = client();
    admin.add_auth("digest", b"lock-admin:secret").unwrap();
    let world = Acl {
        perms: perms::READ | perms::CREATE,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    let parent =
        CreateOptions::new(CreateMode::Persistent).acl([Acl::creator_all(), vec![world]].concat());
    let base = lock_path("refused");
    admin.create(&base, b"", CreateMode::Persistent).unwrap();
    for side in ["unlock", "drop"] {
        let path = format!("{base}/{side}");
        admin.create_with(&path, b"", &parent).unwrap();
        let contender = client();
        let m = Mutex::new(&contender, &path).unwrap();
        let g = m.lock_timeout(WAIT).unwrap();
        let node = g.node_path().to_owned();
        if side == "unlock" {
            match g.unlock() {
                Err(LockError::ReleaseRefused { path: p, code }) => {
                    assert_eq!((p.as_str(), code), (node.as_str(), ErrorCode::NoAuth));
                }
                other => panic!("unlock said {other:?}"),
            }
        } else {
            let changes = g.state_changes();
            drop(g);
            assert!(becomes_lost(&changes), "the listener hears of it");
        }
        // Still there, and the lock still taken...
        assert!(admin.exists(&node).unwrap().is_some(), "{side}");
        // ...until the session ends.
        contender.close().unwrap();
        testkit::wait_no_children(&admin, &path, WAIT);
    }
}

/// Polls `fut` on this thread until it resolves or `WAIT` passes, parking
/// between polls: the crate's futures need no runtime, only a waker (here
/// the thread's unpark), which the client's I/O thread calls.
fn block_on<F: std::future::Future>(fut: F) -> Option<F::Output> {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let until = std::time::Instant::now() + WAIT;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = std::time::Instant::now();
        if now >= until {
            return None;
        }
        std::thread::park_timeout(until - now);
    }
}

#[test]
fn a_pending_lock_and_a_pending_set_are_futures_woken_by_the_io_thread() {
    let path = lock_path("future");
    let (holder_client, c) = (client(), client());
    let holder = Mutex::new(&holder_client, &path).unwrap().lock().unwrap();
    let waiter = {
        let m = Mutex::new(&c, &path).unwrap();
        std::thread::spawn(move || block_on(m.start_lock(None)))
    };
    // The waiter queues behind the holder; its release wakes the task.
    testkit::wait_children(&holder_client, &path, 2, WAIT);
    drop(holder);
    let guard = waiter
        .join()
        .unwrap()
        .expect("the future resolved")
        .unwrap();
    assert_eq!(guard.state(), LockState::Held);
    drop(guard);
    // A set's outcomes, one by one, then None.
    let locks: Vec<Mutex> = (0..3)
        .map(|i| Mutex::new(&c, &format!("{path}-set-{i}")).unwrap())
        .collect();
    let mut set = PendingSet::new();
    let mut keys: Vec<u64> = locks.iter().map(|m| set.start_lock(m, None)).collect();
    let mut got = Vec::new();
    while let Some((key, outcome)) = block_on(set.next_outcome()).expect("resolved") {
        drop(outcome.unwrap());
        got.push(key);
    }
    got.sort_unstable();
    keys.sort_unstable();
    assert_eq!(got, keys);
}

/// A holder's horizon: in the future while it holds, moved on by the
/// session's proofs of life, gone once Lost.
#[test]
fn valid_until_lies_ahead_while_held_and_ends_with_the_lock() {
    let path = lock_path("valid-until");
    let (c, admin) = (client(), client());
    let m = Mutex::with_options(&c, &path, MutexOptions::default().watch_node(true)).unwrap();
    let g = m.lock_timeout(WAIT).unwrap();
    let first = g.valid_until().expect("a horizon while held");
    let now = std::time::Instant::now();
    assert!(first > now && first <= now + T, "{:?}", first - now);
    // The session's own syncs (every T/8) push it on.
    testkit::wait_until("the horizon moves on", WAIT, || {
        g.valid_until().is_some_and(|v| v > first)
    });
    let changes = g.state_changes();
    admin.delete(g.node_path(), None).unwrap();
    assert!(becomes_lost(&changes));
    assert_eq!(g.valid_until(), None);
}

/// A lock refused by an ACL names what was refused, where, as the caller
/// named it.
#[test]
fn a_refused_acquisition_names_the_create_and_the_lock_path() {
    use zklock::{perms, Acl, CreateOptions, Error, ErrorCode, Id, OpCode};
    let admin = client();
    admin.add_auth("digest", b"lock-admin:secret").unwrap();
    let read_only = Acl {
        perms: perms::READ,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    };
    let path = lock_path("refused-create");
    let closed = CreateOptions::new(CreateMode::Persistent)
        .acl([Acl::creator_all(), vec![read_only]].concat());
    admin.create_with(&path, b"", &closed).unwrap();
    let err = Mutex::new(&client(), &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap_err();
    match &err {
        LockError::Client(Error::Server { code, op, path: p }) => {
            assert_eq!(
                (*code, *op, p.as_deref()),
                (ErrorCode::NoAuth, Some(OpCode::Create), Some(path.as_str()))
            );
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("NoAuth") && text.contains(&path), "{text}");
}

/// A looping holder that requeues makes one commit per turn: on a server
/// nobody else writes to, each new node's czxid (its fencing token) is one
/// above the last; a release followed by a lock makes two. Requeueing is
/// fair: a waiter gets the lock first.
#[test]
fn requeue_is_one_commit_per_turn_and_lets_a_waiter_in_first() {
    let server = ZkServer::start();
    let connect = || Client::connect(&server.connect_string(), WAIT).unwrap();
    let (a, b) = (connect(), connect());
    let lock = Mutex::new(&a, "/requeue").unwrap();
    let mut guard = lock.lock_timeout(WAIT).unwrap();
    let mut tokens = vec![guard.fencing_token()];
    for _ in 0..5 {
        guard = lock.requeue(guard, None).wait_timeout(WAIT).unwrap();
        assert_eq!(guard.state(), LockState::Held);
        tokens.push(guard.fencing_token());
    }
    let steps: Vec<i64> = tokens.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(steps, [1; 5], "one commit per requeue: tokens {tokens:?}");
    assert_eq!(children(&a, "/requeue").len(), 1, "one node, ours");
    // The same loop with a release and a lock: two commits per turn.
    drop(guard);
    let first = lock.lock_timeout(WAIT).unwrap();
    let token = first.fencing_token();
    first.unlock().unwrap();
    let second = lock.lock_timeout(WAIT).unwrap();
    assert_eq!(second.fencing_token() - token, 2);

    // A waiter on another session is served before the requeued holder.
    let other = Mutex::new(&b, "/requeue").unwrap();
    let waiting = other.start_lock(None);
    testkit::wait_children(&a, "/requeue", 2, WAIT);
    let again = lock.requeue(second, None);
    let theirs = waiting.wait_timeout(WAIT).unwrap();
    assert!(again.try_take().is_none(), "the requeued holder waits");
    drop(theirs);
    let ours = again.wait_timeout(WAIT).unwrap();
    assert_eq!(ours.state(), LockState::Held);
}
