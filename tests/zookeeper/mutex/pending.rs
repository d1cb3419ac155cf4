//! Pending sets, and the pending lock and set as futures.

use super::*;

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

/// Polls `fut` on this thread until it resolves or `WAIT` passes, parking
/// between polls: the crate's futures need no runtime, only a waker (here
/// the thread's unpark), which the client's I/O thread calls.
pub(super) fn block_on<F: std::future::Future>(fut: F) -> Option<F::Output> {
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

/// Polls `pending` until it has an outcome (each poll returns at once).
fn poll_thread_lock(
    pending: &mut zklock::recipes::PendingThreadLock,
) -> Result<zklock::recipes::LockGuard, LockError> {
    let until = std::time::Instant::now() + WAIT;
    loop {
        if let Some(outcome) = pending.try_take() {
            return outcome;
        }
        assert!(std::time::Instant::now() < until, "no outcome in {WAIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A lock call polled for a thread decides as that thread's blocking call
/// would: its own holding is shared (after a read: the holder does not
/// watch its node), another thread's is waited for, and a lock that is not
/// re-entrant is refused to its holder.
#[test]
fn a_thread_lock_shares_only_its_own_threads_holding() {
    let path = lock_path("thread-lock");
    let c = client();
    let m = Mutex::with_options(&c, &path, MutexOptions::default().reentrant(true)).unwrap();
    let me = std::thread::current().id();
    let other = std::thread::spawn(|| std::thread::current().id())
        .join()
        .unwrap();
    let outer = m.lock().unwrap();
    let inner = poll_thread_lock(&mut m.start_lock_for(me, None)).unwrap();
    assert_eq!(inner.node_path(), outer.node_path());
    let soon = Some(std::time::Instant::now() + Duration::from_millis(300));
    assert_eq!(
        poll_thread_lock(&mut m.start_lock_for(other, soon)).unwrap_err(),
        LockError::Timeout,
        "another thread waits for us"
    );
    drop((outer, inner));
    assert!(children(&c, &path).is_empty());

    let plain = Mutex::new(&c, &path).unwrap();
    let held = poll_thread_lock(&mut plain.start_lock_for(other, None)).unwrap();
    assert_eq!(
        poll_thread_lock(&mut plain.start_lock_for(other, None)).unwrap_err(),
        LockError::WouldDeadlock
    );
    // The guard counts as the other thread's, not as the poller's.
    assert!(plain.try_lock().unwrap().is_none());
    drop(held);
    assert!(children(&c, &path).is_empty());
}
