//! Lock-delay against a real ZooKeeper: after a holder's unclean end (its
//! session closed under it, so the server deleted its node), the next
//! holder — a waiter or a newcomer — is granted no earlier than the delay
//! after that end and is told so; after a clean release, nobody waits and
//! nothing is left on the path. Every recipe takes the option.

use std::time::{Duration, Instant};

use zklock::recipes::{
    BatchMutex, Election, LatchEvent, LockError, LockGuard, Mutex, MutexOptions, RwLock, Semaphore,
};
use zklock::Client;

const WAIT: Duration = Duration::from_secs(30);
/// Long enough that a grant which skipped it could not pass for one that
/// served it; short enough for the suite.
const DELAY: Duration = Duration::from_millis(1500);
/// A delay no test could wait out: a grant under it proves no delay was due.
const FOREVER: Duration = Duration::from_secs(3600);

fn connect() -> Client {
    Client::connect(&testkit::zk::shared().connect_string(), WAIT).expect("connect")
}

fn base(name: &str) -> String {
    format!("/lock-delay-{}-{name}", std::process::id())
}

fn delayed(delay: Duration) -> MutexOptions {
    MutexOptions::default().lock_delay(delay)
}

/// Tenure marks (and any other children) on `path`.
fn children(client: &Client, path: &str) -> Vec<String> {
    testkit::children(client, path)
}

/// A holder of `path` whose session is closed under it: its node goes with
/// the session, its tenure mark stays.
fn end_uncleanly(path: &str) {
    let a = connect();
    let held = Mutex::with_options(&a, path, delayed(FOREVER))
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    std::mem::forget(held);
    a.close().unwrap();
}

#[test]
fn a_clean_release_hands_over_at_once_and_leaves_nothing() {
    let path = base("clean");
    let (a, b) = (connect(), connect());
    let first = Mutex::with_options(&a, &path, delayed(FOREVER)).unwrap();
    let second = Mutex::with_options(&b, &path, delayed(FOREVER)).unwrap();
    let held = first.lock_timeout(WAIT).unwrap();
    assert!(!held.follows_unclean_end());
    let marks: Vec<_> = children(&a, &path)
        .into_iter()
        .filter(|n| n.starts_with(zklock::machine::TENURE_MARK))
        .collect();
    assert_eq!(marks.len(), 1, "the holder keeps one mark: {marks:?}");
    let waiter = std::thread::spawn(move || {
        let guard = second.lock_timeout(WAIT);
        guard.map(|g| {
            let unclean = g.follows_unclean_end();
            g.unlock().unwrap();
            unclean
        })
    });
    testkit::wait_children(&a, &path, 3, WAIT);
    held.unlock().unwrap();
    // Granted within WAIT under a delay of an hour: none was served.
    assert!(!waiter.join().unwrap().unwrap());
    testkit::wait_no_children(&a, &path, WAIT);
    // A try-lock after a clean end is granted in its one attempt.
    let again = Mutex::with_options(&a, &path, delayed(FOREVER)).unwrap();
    assert!(again.try_lock().unwrap().is_some());
}

#[test]
fn a_waiter_behind_an_unclean_end_waits_the_delay_and_is_told() {
    let path = base("waiter");
    let (a, b) = (connect(), connect());
    let first = Mutex::with_options(&a, &path, delayed(DELAY)).unwrap();
    let second = Mutex::with_options(&b, &path, delayed(DELAY)).unwrap();
    let held = first.lock_timeout(WAIT).unwrap();
    let waiter = std::thread::spawn(move || {
        let guard = second.lock_timeout(WAIT);
        (Instant::now(), guard.map(|g| (g.follows_unclean_end(), g)))
    });
    testkit::wait_children(&a, &path, 3, WAIT);
    // The holder's session ends without a release: the server deletes its
    // node, and its mark stays.
    std::mem::forget(held);
    let ended = Instant::now();
    a.close().unwrap();
    let (granted, result) = waiter.join().unwrap();
    let (unclean, guard) = result.unwrap();
    assert!(unclean, "the new holder must be told of the unclean end");
    assert!(
        granted.duration_since(ended) >= DELAY,
        "granted {:?} after the unclean end, before the delay of {DELAY:?}",
        granted.duration_since(ended)
    );
    // The stale mark was swept; only the new holder's node and mark stay.
    let left = children(&b, &path);
    guard.unlock().unwrap();
    assert!(left.len() <= 3, "{left:?}");
    testkit::wait_no_children(&b, &path, WAIT);
}

#[test]
fn a_newcomer_after_an_unclean_end_waits_too_then_the_next_does_not() {
    let path = base("newcomer");
    end_uncleanly(&path);
    let b = connect();
    // The lock is free, but a mark says its last holder ended uncleanly: a
    // try-lock cannot be granted before the delay.
    let mutex = Mutex::with_options(&b, &path, delayed(FOREVER)).unwrap();
    assert!(matches!(mutex.try_lock(), Ok(None)));
    // Nothing of the failed try stays; the old mark does.
    let left = children(&b, &path);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(zklock::machine::TENURE_MARK));
    let short = Mutex::with_options(&b, &path, delayed(DELAY)).unwrap();
    let start = Instant::now();
    let guard = short.lock_timeout(WAIT).unwrap();
    assert!(start.elapsed() >= DELAY);
    assert!(guard.follows_unclean_end());
    guard.unlock().unwrap();
    testkit::wait_no_children(&b, &path, WAIT);
    // The end before was clean: the next is granted at once.
    let next = Mutex::with_options(&b, &path, delayed(FOREVER)).unwrap();
    let guard = next.try_lock().unwrap().expect("free after a clean end");
    assert!(!guard.follows_unclean_end());
}

#[test]
fn a_timeout_during_the_delay_leaves_no_node_and_keeps_the_old_mark() {
    let path = base("timeout");
    end_uncleanly(&path);
    let b = connect();
    let mutex = Mutex::with_options(&b, &path, delayed(FOREVER)).unwrap();
    let start = Instant::now();
    assert!(matches!(
        mutex.lock_timeout(Duration::from_millis(300)),
        Err(LockError::Timeout)
    ));
    assert!(start.elapsed() < WAIT);
    let mut left = Vec::new();
    let only_mark = testkit::poll_until(WAIT, || {
        left = children(&b, &path);
        left.len() == 1
    });
    assert!(only_mark, "{left:?}");
    assert!(left[0].starts_with(zklock::machine::TENURE_MARK));
}

/// One recipe's acquisition with lock-delay on a client, as a guard that
/// says whether it followed an unclean end.
type Acquire = fn(&Client, &str, MutexOptions) -> Box<dyn Held>;

trait Held {
    fn follows_unclean_end(&self) -> bool;
}

impl Held for LockGuard {
    fn follows_unclean_end(&self) -> bool {
        LockGuard::follows_unclean_end(self)
    }
}

impl Held for zklock::recipes::BatchGuard {
    fn follows_unclean_end(&self) -> bool {
        zklock::recipes::BatchGuard::follows_unclean_end(self)
    }
}

fn mutex(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let m = Mutex::with_options(c, p, o).unwrap();
    Box::new(m.lock_timeout(WAIT).unwrap())
}

fn writer(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let l = RwLock::with_options(c, p, o).unwrap();
    Box::new(l.write_timeout(WAIT).unwrap())
}

fn reader(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let l = RwLock::with_options(c, p, o).unwrap();
    Box::new(l.read_timeout(WAIT).unwrap())
}

fn lease(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let s = Semaphore::with_options(c, p, 1, o).unwrap();
    Box::new(s.acquire_timeout(WAIT).unwrap())
}

fn leadership(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let e = Election::with_options(c, p, b"me", o).unwrap();
    Box::new(e.campaign_timeout(WAIT).unwrap())
}

fn batch(c: &Client, p: &str, o: MutexOptions) -> Box<dyn Held> {
    let b = BatchMutex::with_options(c, p, 4, o).unwrap();
    Box::new(b.lock_timeout(WAIT).unwrap())
}

#[test]
fn every_recipe_waits_after_an_unclean_end() {
    let recipes: [(&str, Acquire, Acquire); 6] = [
        ("mutex", mutex, mutex),
        ("writer-then-reader", writer, reader),
        ("reader-then-writer", reader, writer),
        ("semaphore", lease, lease),
        ("election", leadership, leadership),
        ("batch", batch, batch),
    ];
    for (name, first, second) in recipes {
        let path = base(&format!("recipe-{name}"));
        let a = connect();
        let held = first(&a, &path, delayed(DELAY));
        assert!(!held.follows_unclean_end(), "{name}");
        std::mem::forget(held);
        let ended = Instant::now();
        a.close().unwrap();
        let b = connect();
        let next = second(&b, &path, delayed(DELAY));
        assert!(next.follows_unclean_end(), "{name}: not told");
        assert!(ended.elapsed() >= DELAY, "{name}: granted before the delay");
        drop(next);
        b.close().unwrap();
    }
}

#[test]
fn a_latch_gains_leadership_only_after_the_delay() {
    let path = base("latch");
    let a = connect();
    let held = Election::with_options(&a, &path, b"old", delayed(DELAY))
        .unwrap()
        .campaign_timeout(WAIT)
        .unwrap();
    std::mem::forget(held);
    let b = connect();
    let latch = Election::with_options(&b, &path, b"new", delayed(DELAY))
        .unwrap()
        .latch();
    testkit::wait_children(&b, &path, 3, WAIT);
    let ended = Instant::now();
    a.close().unwrap();
    match latch.events().recv_timeout(WAIT) {
        Ok(LatchEvent::Gained { .. }) => assert!(ended.elapsed() >= DELAY),
        other => panic!("{other:?}"),
    }
}
