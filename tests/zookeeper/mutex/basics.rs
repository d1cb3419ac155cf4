//! Exclusion, arrival order, giving up, reentrancy, fencing, one wake per
//! release, and requeueing.

use super::*;

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

/// A re-entrant holder that does not watch its node reads it before a
/// second guard; a try gets that read's round trip too. Readers of one
/// process each re-enter their own read lock, whichever took one last.
#[test]
fn reentrant_tries_and_readers_of_one_process() {
    let path = lock_path("reentrant-try");
    let c = client();
    let reentrant = MutexOptions::default().reentrant(true);
    let m = Mutex::with_options(&c, &path, reentrant.clone()).unwrap();
    let g1 = m.lock().unwrap();
    let g2 = m.try_lock().unwrap().expect("re-entered by a try");
    assert_eq!(g1.node_path(), g2.node_path());
    drop((g1, g2));
    assert!(children(&c, &path).is_empty());

    let rw =
        Arc::new(RwLock::with_options(&c, &lock_path("reentrant-readers"), reentrant).unwrap());
    let mine = rw.read().unwrap();
    let theirs = {
        let rw = rw.clone();
        std::thread::spawn(move || {
            let g = rw.read().unwrap();
            let again = rw.try_read().unwrap().expect("its own read re-entered");
            assert_eq!(g.node_path(), again.node_path());
            g
        })
        .join()
        .unwrap()
    };
    let again = rw.read().unwrap();
    assert_eq!(
        again.node_path(),
        mine.node_path(),
        "our own read, not theirs"
    );
    assert_ne!(theirs.node_path(), mine.node_path());
    assert_eq!(
        rw.write_timeout(WAIT).unwrap_err(),
        LockError::UpgradeRefused
    );
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
fn each_release_wakes_at_most_two_waiters() {
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
    // One deletion per release, seen by the waiter behind it and by the
    // one behind that (its scout: it lists again while the next holds, so
    // that the next release grants it on the event alone). Every waiter
    // also watches its own node while it waits (a third party's delete must
    // reach it; a blocker's deletion alone grants it): that watch fires once
    // more at its own release. Three per waiter, less the ends of the queue
    // (2 999 for 1 000), give or take a race; a herd would add hundreds.
    let events = c.watch_events_received() - events_before;
    let per_waiter = 3 * WAITERS as u64;
    assert!(
        (per_waiter - 2..=per_waiter + 2).contains(&events),
        "releases woke more than two waiters: {events} events for {WAITERS} waiters"
    );
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

/// An abandoned guard leaves its node (the lock stays taken) until its
/// session ends: no delete is sent for it, now or when it drops.
#[test]
fn an_abandoned_guard_keeps_the_lock_until_its_session_ends() {
    let path = lock_path("abandon");
    let (owner, other) = (client(), client());
    let guard = Mutex::new(&owner, &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let node = guard.node_path().to_owned();
    guard.abandon();
    // A round trip after the abandon: a delete sent for it would be done.
    owner.sync(&path).unwrap();
    assert!(owner.exists(&node).unwrap().is_some(), "{node} was deleted");
    let m = Mutex::new(&other, &path).unwrap();
    assert!(m.try_lock().unwrap().is_none(), "the lock is free");
    owner.close().unwrap();
    let next = m.lock_timeout(WAIT).expect("free once the session ended");
    assert_eq!(next.state(), LockState::Held);
}
