//! The lock's own promises under faults, against a real ZooKeeper through
//! the fault proxy: one regression test for each failure issue 9 measured
//! on the blocking, thread-per-wait recipes.

use std::time::{Duration, Instant};

use testkit::proxy::{Direction, Proxy};
use testkit::zk::{self, ZkServer};
use testkit::{children, wait_until};
use zklock::recipes::{LockError, LockGuard, LockState, LossReason, Mutex, MutexOptions};
use zklock::{Client, CreateMode};

const WAIT: Duration = Duration::from_secs(20);
/// What "returns by its deadline" allows for scheduling on a busy machine.
const SLACK: Duration = Duration::from_millis(250);

fn lock_path(name: &str) -> String {
    format!("/faults-{name}-{}", std::process::id())
}

fn total_watches(server: &ZkServer) -> u64 {
    let wchs = server.four_letter("wchs");
    wchs.lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no watch total in {wchs:?}"))
}

/// Scenario 1: a client holds three locks; its connection drops, comes
/// back, then goes for good while the holders are being re-checked. Every guard
/// must say Lost before another process can take any of the locks (the old
/// monitor re-checked holders one by one with blocking calls and said Held
/// 1.5 s after another process held).
#[test]
fn every_holder_is_told_before_another_process_holds() {
    let server = ZkServer::start_with(500);
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(2);
    // A long request timeout: a re-check queued on a dead connection waits
    // that long, and must not hold back what the holders are told.
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(t)
        .request_timeout(Duration::from_secs(15))
        .connect()
        .unwrap();
    let paths: Vec<String> = (0..3).map(|i| format!("/told-{i}")).collect();
    let guards: Vec<LockGuard> = paths
        .iter()
        .map(|p| Mutex::new(&c, p).unwrap().lock().unwrap())
        .collect();
    let first = guards[0].state_changes();
    assert_eq!(first.recv_timeout(WAIT).unwrap(), LockState::Held);
    // Slow enough that re-checks one by one would take a while.
    proxy.set_delay(Duration::from_millis(40));
    proxy.cut_all();
    assert_eq!(first.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(first.recv_timeout(WAIT).unwrap(), LockState::Held);
    proxy.refuse(true);
    proxy.cut_all();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let taken: Vec<LockGuard> = paths
        .iter()
        .map(|p| {
            Mutex::new(&other, p)
                .unwrap()
                .lock_timeout(WAIT)
                .expect("the expired holder's locks are free")
        })
        .collect();
    for (i, g) in guards.iter().enumerate() {
        assert_eq!(
            g.state(),
            LockState::Lost,
            "guard {i} did not know another process holds its lock"
        );
    }
    assert_eq!(guards[0].lost_reason(), Some(LossReason::NoContact));
    proxy.refuse(false);
    proxy.clear();
    drop(taken);
}

/// Scenario 2: every call inside an acquire waited on the client's request
/// timeout, not on the caller's deadline (`lock_timeout(1 s)` returned 3.9 s
/// late under a black hole).
#[test]
fn lock_timeout_returns_by_its_deadline_whatever_the_network_does() {
    let path = lock_path("deadline");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), Duration::from_secs(10)).unwrap();
    let holder_client = testkit::shared_client(Duration::from_secs(10));
    let holder = Mutex::new(&holder_client, &path).unwrap().lock().unwrap();
    let m = Mutex::new(&c, &path).unwrap();
    for (i, timeout) in [1000u64, 300, 50].into_iter().enumerate() {
        let timeout = Duration::from_millis(timeout);
        if i == 1 {
            proxy.blackhole(Direction::Both);
        } else if i == 2 {
            proxy.clear();
            proxy.stall();
        }
        let started = Instant::now();
        assert_eq!(m.lock_timeout(timeout).unwrap_err(), LockError::Timeout);
        let took = started.elapsed();
        assert!(
            took <= timeout + SLACK,
            "lock_timeout({timeout:?}) returned after {took:?}"
        );
        // Not early either: the timeout is the caller's, served whole.
        assert!(
            took >= timeout,
            "lock_timeout({timeout:?}) gave up early, after {took:?}"
        );
    }
    proxy.clear();
    // The given-up attempts leave nothing behind once the network heals.
    wait_until("only the holder's node to remain", WAIT, || {
        children(&holder_client, &path).len() == 1
    });
    drop(holder);
}

/// Scenario 3: create reply lost, then the recovery's listing lost too,
/// then the deadline: every node the attempt may have created must go
/// (the old code deleted only the node it knew of, and the stray, owned by
/// the live session, blocked everyone).
#[test]
fn an_attempt_given_up_after_a_double_fault_leaves_no_node() {
    let path = lock_path("double");
    let proxy = Proxy::start(zk::shared().addr());
    let c = Client::connect(&proxy.connect_string(), Duration::from_secs(10)).unwrap();
    let other = testkit::shared_client(Duration::from_secs(10));
    other.create(&path, b"", CreateMode::Persistent).unwrap();
    let holder = Mutex::new(&other, &path).unwrap().lock().unwrap();
    proxy.drop_reply_of_next(15); // create2
    let waiter = std::thread::spawn({
        let c = c.clone();
        let path = path.clone();
        move || {
            Mutex::new(&c, &path)
                .unwrap()
                .lock_timeout(Duration::from_millis(1500))
        }
    });
    assert!(proxy.wait_reply_dropped(WAIT), "no create reply dropped");
    proxy.drop_reply_of_next(8); // the getChildren that looks for our node
    assert!(proxy.wait_reply_dropped(WAIT), "no listing reply dropped");
    proxy.blackhole(Direction::Both);
    assert_eq!(waiter.join().unwrap().unwrap_err(), LockError::Timeout);
    proxy.clear();
    wait_until("the attempt's nodes to go", WAIT, || {
        children(&other, &path).len() == 1
    });
    drop(holder);
    testkit::wait_no_children(&other, &path, WAIT);
    // And the lock is free for anyone.
    let m = Mutex::new(&other, &path).unwrap();
    assert!(m.try_lock().unwrap().is_some());
}

/// Scenario 4: a holder that does not watch its node was never re-checked,
/// and one registered after the session ended stayed Held forever.
#[test]
fn unwatched_holders_hear_of_the_session_ending() {
    let server = ZkServer::start_with(500);
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(2);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let options = MutexOptions::default().watch_node(false);
    let g = Mutex::with_options(&c, "/unwatched", options.clone())
        .unwrap()
        .lock()
        .unwrap();
    let changes = g.state_changes();
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Held);
    proxy.blackhole(Direction::Both);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Suspended);
    assert_eq!(changes.recv_timeout(WAIT).unwrap(), LockState::Lost);
    proxy.clear();
    // Closing a client tells its unwatched holders too.
    let c2 = Client::connect(&server.connect_string(), t).unwrap();
    let g2 = Mutex::with_options(&c2, "/unwatched-2", options)
        .unwrap()
        .lock()
        .unwrap();
    c2.close().unwrap();
    wait_until("the closed client's holder to say Lost", WAIT, || {
        g2.state() == LockState::Lost
    });
    assert_eq!(g2.lost_reason(), Some(LossReason::ClientClosed));
    // Once a session is over, no acquisition can start as Held.
    assert!(Mutex::new(&c2, "/unwatched-3").unwrap().try_lock().is_err());
}

/// Scenario 6: `exists` with a watch on a predecessor already gone left a
/// watch for a name that never comes back; many short attempts piled up
/// hundreds of server watches.
#[test]
fn short_attempts_leave_no_watches_on_the_server() {
    let server = ZkServer::start();
    let holder_client = Client::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    let holder = Mutex::new(&holder_client, "/churn")
        .unwrap()
        .lock()
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = Client::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
            std::thread::spawn(move || {
                let m = Mutex::new(&c, "/churn").unwrap();
                for _ in 0..100 {
                    assert!(m.lock_timeout(Duration::from_millis(3)).is_err());
                }
                c
            })
        })
        .collect();
    let clients: Vec<Client> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop(holder);
    testkit::wait_no_children(&holder_client, "/churn", WAIT);
    for c in &clients {
        c.sync("/").unwrap();
    }
    holder_client.sync("/").unwrap();
    assert_eq!(total_watches(&server), 0, "{}", server.four_letter("wchs"));
}
