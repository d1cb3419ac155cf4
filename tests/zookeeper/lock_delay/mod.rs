//! Lock-delay against a real ZooKeeper: after a holder's unclean end (its
//! session closed under it, so the server deleted its node), the next
//! holder — a waiter or a newcomer — is granted no earlier than the delay
//! after that end and is told so; after a clean release, nobody waits and
//! nothing is left on the path. Every recipe takes the option.
//!
//! Both sides are checked on the server's clock: the end is recorded on
//! its tenure mark (`<path>~tenure/<uuid>`, version 1, mtime = the record)
//! by the first who sees it; a grant after it makes the new holder's mark,
//! whose ctime is the grant's time. Safety: that ctime is at least the
//! record plus the delay. Availability: tries, and timed waits that reach
//! past record + delay, are granted.

/// The semaphore under lock-delay.
mod semaphore;

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

/// The children of `path` (contenders, and nothing else).
fn children(client: &Client, path: &str) -> Vec<String> {
    testkit::children(client, path)
}

/// Where the tenure marks of the lock path `path` live
/// (`zklock_proto::lock::tenure_path`).
fn marks_dir(path: &str) -> String {
    format!("{path}~tenure")
}

/// The tenure marks of `path`, with their Stats.
fn marks(client: &Client, path: &str) -> Vec<(String, zklock::Stat)> {
    let dir = marks_dir(path);
    testkit::children(client, &dir)
        .into_iter()
        .filter_map(|name| {
            let (_, stat) = client.get_data(&format!("{dir}/{name}")).ok()?;
            Some((name, stat))
        })
        .collect()
}

/// The unclean ends recorded on the server: each stale mark's record time
/// (ms, the leader's clock).
fn recorded_ends(client: &Client, path: &str) -> Vec<i64> {
    marks(client, path)
        .into_iter()
        .filter(|(_, s)| s.version > 0)
        .map(|(_, s)| s.mtime)
        .collect()
}

/// The server times at which the current holders were granted: the ctime
/// of each mark not recorded as ended.
fn grant_stamps(client: &Client, path: &str) -> Vec<i64> {
    marks(client, path)
        .into_iter()
        .filter(|(_, s)| s.version == 0)
        .map(|(_, s)| s.ctime)
        .collect()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap()
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
    let kept = children(&a, &marks_dir(&path));
    assert_eq!(kept.len(), 1, "the holder keeps one mark: {kept:?}");
    let waiter = std::thread::spawn(move || {
        let guard = second.lock_timeout(WAIT);
        guard.map(|g| {
            let unclean = g.follows_unclean_end();
            g.unlock().unwrap();
            unclean
        })
    });
    testkit::wait_children(&a, &path, 2, WAIT);
    held.unlock().unwrap();
    // Granted within WAIT under a delay of an hour: none was served.
    assert!(!waiter.join().unwrap().unwrap());
    testkit::wait_no_children(&a, &path, WAIT);
    testkit::wait_no_children(&a, &marks_dir(&path), WAIT);
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
    testkit::wait_children(&a, &path, 2, WAIT);
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
    let left = children(&b, &marks_dir(&path));
    guard.unlock().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    testkit::wait_no_children(&b, &path, WAIT);
    testkit::wait_no_children(&b, &marks_dir(&path), WAIT);
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
    // Nothing of the failed try stays; the old mark does, its end recorded.
    testkit::wait_no_children(&b, &path, WAIT);
    let recorded = recorded_ends(&b, &path);
    assert_eq!(recorded.len(), 1);
    assert_eq!(children(&b, &marks_dir(&path)).len(), 1);
    // A wait is granted once the delay has passed since the recorded end,
    // on the server's clock.
    let short = Mutex::with_options(&b, &path, delayed(DELAY)).unwrap();
    let guard = short.lock_timeout(WAIT).unwrap();
    assert!(guard.follows_unclean_end());
    let granted = grant_stamps(&b, &path);
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(granted[0] >= recorded[0] + millis(DELAY));
    guard.unlock().unwrap();
    testkit::wait_no_children(&b, &path, WAIT);
    testkit::wait_no_children(&b, &marks_dir(&path), WAIT);
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
    testkit::wait_no_children(&b, &path, WAIT);
    let left = children(&b, &marks_dir(&path));
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(recorded_ends(&b, &path).len(), 1);
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
    testkit::wait_children(&b, &path, 2, WAIT);
    let ended = Instant::now();
    a.close().unwrap();
    match latch.events().recv_timeout(WAIT) {
        Ok(LatchEvent::Gained { .. }) => assert!(ended.elapsed() >= DELAY),
        other => panic!("{other:?}"),
    }
}

/// The delay of the tests of tries and timed waits (as in the report that
/// found callers that only try locked out for good).
const TRY_DELAY: Duration = Duration::from_secs(2);

/// Callers that only try: after an unclean end, the first try records the
/// end on the server and is refused; tries go on being refused while the
/// server's clock is within the delay of the record, and once it is past,
/// a try is granted at once. Before, each try counted its own delay from
/// its own look and was refused: 0 granted of every try over 20 s.
#[test]
fn tries_after_an_unclean_end_are_granted_once_the_delay_has_passed_on_the_server() {
    let path = base("tries");
    end_uncleanly(&path);
    let b = connect();
    let mutex = Mutex::with_options(&b, &path, delayed(TRY_DELAY)).unwrap();
    let mut tries = 0u32;
    let mut first_refused = None;
    let mut recorded = None;
    let mut held = None;
    let within = Duration::from_secs(20);
    testkit::poll_until(within, || {
        tries += 1;
        let result = mutex.try_lock().unwrap();
        first_refused.get_or_insert(result.is_none());
        match result {
            Some(guard) => held = Some(guard),
            None if recorded.is_none() => recorded = recorded_ends(&b, &path).into_iter().max(),
            None => {}
        }
        held.is_some()
    });
    let guard = held
        .unwrap_or_else(|| panic!("{tries} tries over {within:?} after an unclean end: 0 granted"));
    assert!(guard.follows_unclean_end());
    assert_eq!(
        first_refused,
        Some(true),
        "the try right after the end was granted"
    );
    let recorded = recorded.expect("the first try records the end on the server");
    let granted = grant_stamps(&b, &path);
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(
        granted[0] >= recorded + millis(TRY_DELAY),
        "granted at {} on the server's clock, {} ms after the recorded end",
        granted[0],
        granted[0] - recorded
    );
    // Swept: the only mark left is the new holder's.
    assert_eq!(children(&b, &marks_dir(&path)).len(), 1);
}

/// Timed waits after an unclean end: each `lock_timeout(1 s)` whose
/// deadline reaches past the recorded end plus the delay is granted, and
/// not before the server's clock is past it. Before, each wait started a
/// delay of its own, longer than itself: 0 granted.
#[test]
fn timed_waits_reaching_past_the_recorded_end_and_the_delay_are_granted() {
    let path = base("timed");
    end_uncleanly(&path);
    let b = connect();
    let mutex = Mutex::with_options(&b, &path, delayed(TRY_DELAY)).unwrap();
    assert!(matches!(mutex.try_lock(), Ok(None)));
    let recorded = recorded_ends(&b, &path);
    let mut outcomes = Vec::new();
    let mut held = None;
    for _ in 0..5 {
        match mutex.lock_timeout(Duration::from_secs(1)) {
            Ok(guard) => {
                held = Some(guard);
                break;
            }
            Err(e) => outcomes.push(e),
        }
    }
    let _guard = held.unwrap_or_else(|| panic!("5 waits of 1 s, 0 granted: {outcomes:?}"));
    // `follows_unclean_end` is not asserted: a wait that timed out on its
    // own clock just as the machine granted it (a late guard, refused and
    // released) took the record with it; that grant came after the delay.
    let [recorded] = recorded[..] else {
        panic!("one recorded end expected: {recorded:?}")
    };
    assert!(
        outcomes.iter().all(|e| matches!(e, LockError::Timeout)),
        "{outcomes:?}"
    );
    let granted = grant_stamps(&b, &path);
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(
        granted[0] >= recorded + millis(TRY_DELAY),
        "{} < {recorded} + delay",
        granted[0]
    );
}

/// A blocking wait that starts right after an unclean end records the end
/// itself and is granted once the server's clock is past record + delay.
#[test]
fn a_blocking_wait_after_an_unclean_end_is_granted_after_the_delay_on_the_servers_clock() {
    let path = base("blocking");
    end_uncleanly(&path);
    let b = connect();
    let mutex = Mutex::with_options(&b, &path, delayed(TRY_DELAY)).unwrap();
    let waiter = std::thread::spawn(move || mutex.lock().map(|g| (g.follows_unclean_end(), g)));
    let mut recorded = Vec::new();
    let seen = testkit::poll_until(WAIT, || {
        recorded = recorded_ends(&b, &path);
        !recorded.is_empty() || waiter.is_finished()
    });
    assert!(
        seen && recorded.len() == 1,
        "the end recorded: {recorded:?}"
    );
    let (unclean, guard) = waiter.join().unwrap().unwrap();
    assert!(unclean);
    let granted = grant_stamps(&b, &path);
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(granted[0] >= recorded[0] + millis(TRY_DELAY));
    drop(guard);
}

/// The marks stay out of the lock path: its children are the contenders
/// alone (what Curator, kazoo and `inspect` list), while a holder holds
/// and after its unclean end.
#[test]
fn tenure_marks_are_never_children_of_the_lock_path() {
    let path = base("outside");
    let a = connect();
    let held = Mutex::with_options(&a, &path, delayed(FOREVER))
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let listed = children(&a, &path);
    assert_eq!(listed.len(), 1, "the holder's node alone: {listed:?}");
    assert!(listed[0].contains("-lock-"), "{listed:?}");
    assert_eq!(children(&a, &marks_dir(&path)).len(), 1);
    std::mem::forget(held);
    a.close().unwrap();
    let b = connect();
    testkit::wait_no_children(&b, &path, WAIT);
    assert_eq!(children(&b, &marks_dir(&path)).len(), 1, "the record stays");
}

/// Lock nodes readable by their creator alone (`acl(creator_all)`), under
/// an open lock path: another identity still reads and records the end on
/// the holder's mark (marks take the lock path's ACL, not the node's), and
/// its tries are granted once the delay has passed.
#[test]
fn tries_by_another_identity_after_a_creator_only_holders_unclean_end_are_granted() {
    let path = base("creator-only");
    let options = || delayed(TRY_DELAY).acl(zklock::Acl::creator_all());
    let alice = connect();
    alice.add_auth("digest", b"alice:secret").unwrap();
    let held = Mutex::with_options(&alice, &path, options())
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    std::mem::forget(held);
    alice.close().unwrap();
    let bob = connect();
    bob.add_auth("digest", b"bob:other").unwrap();
    let mutex = Mutex::with_options(&bob, &path, options()).unwrap();
    let (mut tries, mut held) = (0u32, None);
    let within = Duration::from_secs(20);
    testkit::poll_until(within, || {
        tries += 1;
        held = mutex.try_lock().unwrap();
        held.is_some()
    });
    let guard = held.unwrap_or_else(|| panic!("{tries} tries over {within:?}: 0 granted"));
    assert!(guard.follows_unclean_end());
    assert!(tries > 1, "granted within the delay");
}
