//! Pending sets, and the pending handles and set as futures.

use std::future::Future;
use std::pin::Pin;

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

/// A task polled by hand on this thread: its waker notes each wake and
/// unparks the thread. The crate's futures need no runtime, only a waker,
/// which the client's I/O thread (or whoever makes the outcome) calls; a
/// future polled again only when woken shows a missing wake as a hang,
/// which [`Task::finish`] bounds.
pub(super) struct Task {
    woken: Arc<Woken>,
    waker: std::task::Waker,
}

struct Woken {
    thread: std::thread::Thread,
    flag: AtomicBool,
}

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.flag.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

impl Task {
    pub(super) fn new() -> Task {
        let woken = Arc::new(Woken {
            thread: std::thread::current(),
            flag: AtomicBool::new(false),
        });
        let waker = std::task::Waker::from(woken.clone());
        Task { woken, waker }
    }

    /// One poll (a wake during it counts for the next).
    pub(super) fn poll<F: Future>(&self, fut: Pin<&mut F>) -> std::task::Poll<F::Output> {
        self.woken.flag.store(false, Ordering::SeqCst);
        fut.poll(&mut std::task::Context::from_waker(&self.waker))
    }

    /// Whether the task was woken since its last poll.
    pub(super) fn woken(&self) -> bool {
        self.woken.flag.load(Ordering::SeqCst)
    }

    /// Polls `fut` again each time it is woken, and only then, until it
    /// resolves; `None` if `within` passes without a wake.
    pub(super) fn finish<F: Future>(
        &self,
        mut fut: Pin<&mut F>,
        within: Duration,
    ) -> Option<F::Output> {
        let until = std::time::Instant::now() + within;
        loop {
            while !self.woken() {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return None;
                }
                std::thread::park_timeout(left);
            }
            if let std::task::Poll::Ready(out) = self.poll(fut.as_mut()) {
                return Some(out);
            }
        }
    }
}

/// Runs `fut` to its end on this thread as [`Task`] does; `None` if it
/// waits `WAIT` without a wake.
pub(super) fn block_on<F: Future>(fut: F) -> Option<F::Output> {
    let task = Task::new();
    let mut fut = std::pin::pin!(fut);
    match task.poll(fut.as_mut()) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => task.finish(fut, WAIT),
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
    pending: &zklock::recipes::PendingLock,
) -> Result<zklock::recipes::LockGuard, LockError> {
    let mut outcome = None;
    wait_until("the call's outcome", WAIT, || {
        outcome = pending.try_take();
        outcome.is_some()
    });
    outcome.expect("an outcome")
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
    let inner = poll_thread_lock(&m.start_lock_for(me, None)).unwrap();
    assert_eq!(inner.node_path(), outer.node_path());
    let soon = Some(std::time::Instant::now() + Duration::from_millis(300));
    assert_eq!(
        poll_thread_lock(&m.start_lock_for(other, soon)).unwrap_err(),
        LockError::Timeout,
        "another thread waits for us"
    );
    drop((outer, inner));
    assert!(children(&c, &path).is_empty());

    let plain = Mutex::new(&c, &path).unwrap();
    let held = poll_thread_lock(&plain.start_lock_for(other, None)).unwrap();
    assert_eq!(
        poll_thread_lock(&plain.start_lock_for(other, None)).unwrap_err(),
        LockError::WouldDeadlock
    );
    // The guard counts as the other thread's, not as the poller's.
    assert!(plain.try_lock().unwrap().is_none());
    drop(held);
    assert!(children(&c, &path).is_empty());
}

/// A thread's call awaited, sharing the holding of a holder that does not
/// watch its node: the read that confirms the node is still ours wakes the
/// task with its reply. The proxy holds the read back until the first poll
/// has returned; the client's request timeout (the read's bound, at which
/// the core would wake the task too) is longer than the wait. Then another
/// thread's call, which queues, is woken by its grant.
#[test]
fn a_thread_call_awaited_is_woken_by_the_reply_to_its_confirming_read() {
    let path = lock_path("thread-call-awaited");
    let proxy = Proxy::start(testkit::zk::shared().addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(T)
        .request_timeout(3 * WAIT)
        .connect()
        .unwrap();
    let m = Mutex::with_options(&c, &path, MutexOptions::default().reentrant(true)).unwrap();
    let outer = m.lock().unwrap();
    let task = Task::new();
    proxy.stall();
    let mut again = std::pin::pin!(m.start_lock_for(std::thread::current().id(), None));
    assert!(
        task.poll(again.as_mut()).is_pending(),
        "the read is held back"
    );
    proxy.clear();
    let inner = task
        .finish(again, WAIT)
        .expect("woken by the read's reply")
        .unwrap();
    assert_eq!(inner.node_path(), outer.node_path());
    // Another thread's call queues behind ours, woken by its grant.
    let other = std::thread::spawn(|| std::thread::current().id())
        .join()
        .unwrap();
    let task = Task::new();
    let mut queued = std::pin::pin!(m.start_lock_for(other, None));
    assert!(task.poll(queued.as_mut()).is_pending(), "it waits for ours");
    drop((inner, outer));
    let theirs = task.finish(queued, WAIT).expect("woken by the grant");
    assert_eq!(theirs.unwrap().state(), LockState::Held);
    c.close().unwrap();
}

/// A batch waiter awaited is woken by each way its wait ends: the
/// process's grant in ZooKeeper (on the acquisition it runs), a local
/// hand-off, its token's cancel, and its deadline (by the core's timer).
/// Each future has a task of its own, so that no other's wake stands in
/// for its own.
#[test]
fn a_batch_waiter_awaited_is_woken_by_each_way_its_wait_ends() {
    use std::pin::pin;
    use zklock::recipes::BatchMutex;
    let path = lock_path("batch-awaited");
    let (a, b) = (client(), client());
    let outsider = Mutex::new(&b, &path).unwrap().lock().unwrap();
    let batch = BatchMutex::new(&a, &path, 4).unwrap();

    let task = Task::new();
    let mut first = pin!(batch.start_lock(None));
    assert!(
        task.poll(first.as_mut()).is_pending(),
        "the outsider holds it"
    );
    // It queued for the process, and asked to be polled again to wait on
    // that acquisition.
    assert!(task.woken());
    assert!(task.poll(first.as_mut()).is_pending());
    testkit::wait_children(&b, &path, 2, WAIT);
    drop(outsider);
    let one = task
        .finish(first, WAIT)
        .expect("woken by the process's grant")
        .unwrap();

    let task = Task::new();
    let mut second = pin!(batch.start_lock(None));
    assert!(
        task.poll(second.as_mut()).is_pending(),
        "one turn at a time"
    );
    let node = one.node_path().to_owned();
    drop(one);
    let two = task
        .finish(second, WAIT)
        .expect("woken by the hand-off")
        .unwrap();
    assert_eq!(two.node_path(), node, "a local turn of the same hold");

    let task = Task::new();
    let token = CancelToken::new();
    let mut third = pin!(batch.start_lock_cancellable(None, token.clone()));
    assert!(task.poll(third.as_mut()).is_pending(), "a thread is inside");
    token.cancel();
    let cancelled = task.finish(third, WAIT).expect("woken by the cancel");
    assert_eq!(cancelled.unwrap_err(), LockError::Cancelled);

    let task = Task::new();
    let soon = std::time::Instant::now() + Duration::from_millis(300);
    let mut late = pin!(batch.start_lock(Some(soon)));
    assert!(task.poll(late.as_mut()).is_pending(), "a thread is inside");
    let late = task.finish(late, WAIT).expect("woken at its deadline");
    assert_eq!(late.unwrap_err(), LockError::Timeout);
    assert!(std::time::Instant::now() >= soon);

    drop(two);
    testkit::wait_no_children(&a, &path, WAIT);
}
