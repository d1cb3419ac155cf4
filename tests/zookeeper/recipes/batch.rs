//! The batch mutex: local hand-off in bounded batches, polled waiters,
//! exclusion of other processes, and a kept hold given back.

use super::*;

#[test]
fn batch_mutex_hands_off_locally_within_a_bounded_batch() {
    use zklock::recipes::BatchMutex;
    let p = path("batch");
    let c = client();
    let lock = BatchMutex::new(&c, &p, 2).unwrap();
    let first = lock.lock().unwrap();
    let node = first.node_path().to_owned();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            std::thread::spawn(move || {
                let g = lock.lock_timeout(WAIT).unwrap();
                let n = g.node_path().to_owned();
                drop(g);
                n
            })
        })
        .collect();
    wait_until("the waiters", WAIT, || lock.local_waiters() >= 2);
    assert_eq!(lock.lock().unwrap_err(), LockError::WouldDeadlock);
    // Another process (session) queues behind the batch.
    let outsider = zklock::recipes::Mutex::new(&client(), &p).unwrap();
    assert!(outsider.try_lock().unwrap().is_none());
    drop(first);
    let nodes: Vec<String> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    // Batch of two: one waiter got the same node, the other queued anew.
    assert_eq!(nodes.iter().filter(|n| **n == node).count(), 1, "{nodes:?}");
    assert!(outsider.lock_timeout(WAIT).is_ok());
}

/// BatchMutex's non-blocking waiters, all polled from one thread: the
/// first queues for the process, a cancelled token ends its waiter at the
/// next poll, the hold passes on locally with its node and token, and the
/// node goes once the last turn ends.
#[test]
fn batch_waiters_polled_from_one_thread() {
    use zklock::recipes::{BatchMutex, CancelToken};
    let p = path("batch-poll");
    let (a, b) = (client(), client());
    let outsider = zklock::recipes::Mutex::new(&b, &p).unwrap();
    let held = outsider.lock().unwrap();
    let lock = BatchMutex::new(&a, &p, 3).unwrap();
    let first = lock.start_lock(None);
    let second = lock.start_lock(None);
    let token = CancelToken::new();
    let third = lock.start_lock_cancellable(None, token.clone());
    assert!(first.try_take().is_none(), "it queues for the process");
    wait_children(&a, &p, 2);
    assert!(second.try_take().is_none());
    assert!(third.try_take().is_none());
    assert_eq!(lock.local_waiters(), 3);
    token.cancel();
    assert_eq!(third.try_take().unwrap().unwrap_err(), LockError::Cancelled);
    assert!(third.try_take().is_none(), "the outcome comes once");
    assert_eq!(lock.local_waiters(), 2);
    drop(held);
    let mut turn = None;
    wait_until("the first turn", WAIT, || {
        turn = first.try_take();
        turn.is_some()
    });
    let one = turn.unwrap().unwrap();
    assert_eq!(one.state(), LockState::Held);
    assert!(second.try_take().is_none(), "one turn at a time");
    let (node, fencing) = (one.node_path().to_owned(), one.fencing_token());
    drop(one);
    let two = second
        .try_take()
        .expect("a local turn: no waiting")
        .unwrap();
    assert_eq!(
        (two.node_path(), two.fencing_token()),
        (node.as_str(), fencing)
    );
    assert_eq!(children(&a, &p).len(), 1, "one node for the whole batch");
    drop(two);
    testkit::wait_no_children(&a, &p, WAIT);
}

#[test]
fn batch_mutex_excludes_other_processes() {
    use zklock::recipes::BatchMutex;
    let p = path("batch-excl");
    let inside = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for proc_ in 0..2 {
        let c = client();
        let lock = BatchMutex::new(&c, &p, 4).unwrap();
        for _ in 0..4 {
            let (lock, inside, c, p) = (lock.clone(), inside.clone(), c.clone(), p.clone());
            threads.push(std::thread::spawn(move || {
                for _ in 0..5 {
                    let g = lock.lock_timeout(Duration::from_secs(60)).unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "overlap ({proc_})"
                    );
                    c.exists(&p).unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(g);
                }
            }));
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    testkit::wait_no_children(&client(), &p, WAIT);
}

/// Regression (issue 9, scenario 5): the holder drops its guard while a
/// local waiter is counted, so the ZooKeeper lock is kept for a hand-off;
/// the waiter then sees its cancel token and leaves. The kept lock must go
/// back to the queue, or another process waits forever.
#[test]
fn batch_mutex_gives_back_a_hold_kept_for_a_waiter_that_left() {
    use zklock::recipes::BatchMutex;
    let p = path("batch-left");
    let c = client();
    let lock = BatchMutex::new(&c, &p, 8).unwrap();
    let held = lock.lock().unwrap();
    let token = CancelToken::new();
    let waiter = {
        let (lock, token) = (lock.clone(), token.clone());
        std::thread::spawn(move || lock.lock_with(None, Some(&token)).map(drop))
    };
    wait_until("the waiter", WAIT, || lock.local_waiters() >= 1);
    token.cancel();
    drop(held);
    let left = waiter.join().unwrap();
    assert!(
        matches!(left, Ok(()) | Err(LockError::Cancelled)),
        "{left:?}"
    );
    let outsider = zklock::recipes::Mutex::new(&client(), &p).unwrap();
    let g = outsider
        .lock_timeout(WAIT)
        .expect("the process gave the lock back");
    drop(g);
}

/// A try that waits for its round trip (the server does not answer) waits
/// on its acquisition's channel: it does not poll in a loop. Over a
/// one-second request timeout its thread uses a small part of that second
/// (a loop on an idle machine) and blocks a few times, not once per turn
/// (a loop on a busy one, switched out at each turn).
#[test]
fn a_batch_try_waiting_for_its_round_trip_does_not_spin() {
    use testkit::proxy::Proxy;
    use zklock::recipes::BatchMutex;
    let timeout = Duration::from_secs(1);
    let proxy = Proxy::start(testkit::zk::shared().addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(T)
        .request_timeout(timeout)
        .connect()
        .unwrap();
    let batch = BatchMutex::new(&c, &path("batch-try-spin"), 4).unwrap();
    let tid = testkit::current_thread_id().expect("this thread's id");
    proxy.stall();
    let (cpu, switches) = (testkit::thread_cpu(tid), testkit::thread_switches(tid));
    let tried = batch.try_lock();
    let used = testkit::thread_cpu(tid).unwrap() - cpu.unwrap();
    let switched = testkit::thread_switches(tid).unwrap() - switches.unwrap();
    proxy.clear();
    // Not taken: a try that is not answered in time says so.
    assert!(tried.is_ok_and(|g| g.is_none()), "a try without an answer");
    assert!(used < timeout / 4, "{used:?} of CPU in a {timeout:?} wait");
    assert!(
        switched < 50,
        "switched out {switched} times in a {timeout:?} wait"
    );
    c.close().unwrap();
}
