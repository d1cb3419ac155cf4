//! Read/write lock, election, semaphore and multi-lock against a real ZooKeeper.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::{children, wait_until};
use zklock::recipes::{
    CancelToken, CloseMode, Election, LatchEvent, LockError, LockState, MultiLock, NodeKind,
    RwLock, Semaphore,
};
use zklock::{Client, EventType};

const T: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(20);
const BRIEF: Duration = Duration::from_millis(300);

fn client() -> Client {
    testkit::shared_client(T)
}

fn path(name: &str) -> String {
    format!("/recipes-{name}-{}", std::process::id())
}

fn wait_children(c: &Client, p: &str, n: usize) {
    testkit::wait_children(c, p, n, WAIT);
}

#[test]
fn readers_share_and_writers_exclude() {
    let p = path("rw");
    let (a, b, c) = (client(), client(), client());
    let ra = RwLock::new(&a, &p).unwrap();
    let rb = RwLock::new(&b, &p).unwrap();
    let rc = RwLock::new(&c, &p).unwrap();
    let r1 = ra.read().unwrap();
    let r2 = rb.read_timeout(BRIEF).expect("readers share");
    assert_eq!(rc.try_write().unwrap().map(|_| ()), None);
    // A writer queues; a reader arriving after it waits for it (no starvation).
    let writer = std::thread::spawn(move || {
        let g = rc.write_timeout(WAIT).unwrap();
        let t = Instant::now();
        g.unlock().unwrap();
        t
    });
    wait_children(&a, &p, 3);
    let late = RwLock::new(&client(), &p).unwrap();
    assert_eq!(late.read_timeout(BRIEF).unwrap_err(), LockError::Timeout);
    drop(r1);
    drop(r2);
    let written = writer.join().unwrap();
    let r3 = late.read_timeout(WAIT).unwrap();
    assert!(Instant::now() >= written);
    let names = children(&a, &p);
    assert!(names
        .iter()
        .all(|n| n.contains("-__READ__") || n.contains("-__WRIT__")));
    drop(r3);
    testkit::wait_no_children(&a, &p, WAIT);
}

#[test]
fn downgrade_allowed_upgrade_refused() {
    let p = path("grade");
    let c = client();
    let rw = RwLock::new(&c, &p).unwrap();
    let w = rw.write().unwrap();
    let r = rw.read().expect("a write holder may read");
    drop(w);
    // Still excluded: the downgraded read keeps the write node.
    let other = RwLock::new(&client(), &p).unwrap();
    assert!(other.try_write().unwrap().is_none());
    // Waits for the delete: a dropped guard's delete may still be on its
    // way when another session looks.
    r.unlock().unwrap();
    assert!(other.try_write().unwrap().is_some());
    let r = rw.read().unwrap();
    assert_eq!(rw.write().unwrap_err(), LockError::UpgradeRefused);
    drop(r);
}

#[test]
fn election_elects_in_order_and_reports_the_leader() {
    let p = path("election");
    let (a, b) = (client(), client());
    let ea = Election::new(&a, &p, b"alpha").unwrap();
    let eb = Election::new(&b, &p, b"beta").unwrap();
    let (none, appeared) = eb.watch_leader().unwrap();
    assert!(none.is_none());
    let lead = ea.campaign().unwrap();
    appeared.recv_timeout(WAIT).unwrap();
    let (leader, change) = eb.watch_leader().unwrap();
    let leader = leader.unwrap();
    assert_eq!(leader.id, b"alpha");
    assert_eq!(leader.session, a.session_id());
    assert!(leader.node.contains("-latch-"));
    assert_eq!(eb.try_campaign().unwrap().map(|_| ()), None);
    let b_wins = std::thread::spawn(move || {
        let g = eb.campaign_timeout(WAIT).unwrap();
        (g.state(), g.fencing_token())
    });
    wait_children(&a, &p, 2);
    let first_token = lead.fencing_token();
    drop(lead);
    assert_eq!(
        change.recv_timeout(WAIT).unwrap().kind,
        EventType::NodeDeleted
    );
    let (state, token) = b_wins.join().unwrap();
    assert_eq!(state, LockState::Held);
    assert!(token > first_token);
}

#[test]
fn semaphore_admits_at_most_n() {
    let p = path("sem");
    let max = 3;
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (p, inside, peak) = (p.clone(), inside.clone(), peak.clone());
            std::thread::spawn(move || {
                let c = client();
                let s = Semaphore::new(&c, &p, max).unwrap();
                for _ in 0..3 {
                    let lease = s.acquire_timeout(Duration::from_secs(60)).unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= max, "{now} leases at once");
                    c.exists(&p).unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) >= 1);
    let c = client();
    let mut kids = children(&c, &p);
    kids.sort();
    assert_eq!(kids, vec!["leases".to_string(), "locks".to_string()]);
    testkit::wait_no_children(&c, &format!("{p}/leases"), WAIT);
    // With all leases held, another waits and then times out cleanly.
    let p = path("sem-one");
    let s = Semaphore::new(&c, &p, 1).unwrap();
    let held = s.acquire().unwrap();
    let s2 = Semaphore::new(&client(), &p, 1).unwrap();
    assert_eq!(s2.acquire_timeout(BRIEF).unwrap_err(), LockError::Timeout);
    // The timed-out waiter's lease node goes in the background.
    wait_until("the waiter's lease node to go", WAIT, || {
        s.lease_count().unwrap() == 1
    });
    drop(held);
}

#[test]
fn multilock_takes_all_or_none() {
    let (x, y) = (path("multi-x"), path("multi-y"));
    let (a, b) = (client(), client());
    let both = MultiLock::new(&a, &[&y, &x]).unwrap();
    let guards = both.lock().unwrap();
    assert_eq!(guards.len(), 2);
    assert!(
        guards.guards()[0].node_path().starts_with(&x),
        "sorted order"
    );
    guards.unlock().unwrap();
    // b holds y; a's multi-lock takes x, then times out on y and gives x back.
    let hold_y = zklock::recipes::Mutex::new(&b, &y).unwrap().lock().unwrap();
    assert_eq!(both.lock_timeout(BRIEF).unwrap_err(), LockError::Timeout);
    testkit::wait_no_children(&a, &x, WAIT);
    drop(hold_y);
    testkit::wait_no_children(&a, &y, WAIT);
    let token = CancelToken::new();
    token.cancel();
    assert_eq!(
        both.lock_with(None, Some(&token)).unwrap_err(),
        LockError::Cancelled
    );
    assert!(both.try_lock().unwrap().is_some());
}

#[test]
fn multilock_started_without_blocking() {
    let (x, y) = (path("multi-start-x"), path("multi-start-y"));
    let (a, b) = (client(), client());
    let options = zklock::recipes::MutexOptions::default().watch_node(true);
    let both = MultiLock::with_options(&a, &[&x, &y], options).unwrap();
    let mutex_y = zklock::recipes::Mutex::new(&b, &y).unwrap();
    // b holds y: the multi-lock takes x, then waits on y.
    let hold_y = mutex_y.lock().unwrap();
    let pending = both.start_lock(None);
    wait_children(&a, &y, 2);
    assert_eq!(children(&a, &x).len(), 1);
    assert!(pending.try_take().is_none());
    drop(hold_y);
    let guards = pending.wait_timeout(WAIT).unwrap();
    assert_eq!(guards.len(), 2);
    assert!(guards.guards().iter().all(|g| g.state() == LockState::Held));
    drop(guards);
    testkit::wait_no_children(&a, &x, WAIT);
    testkit::wait_no_children(&a, &y, WAIT);

    // x is taken and then lost (a third party deletes its node) while y is
    // awaited: the whole fails, and y is given back once granted.
    let hold_y = mutex_y.lock().unwrap();
    let pending = both.start_lock(None);
    wait_children(&a, &y, 2);
    let x_node = format!("{x}/{}", children(&a, &x)[0]);
    b.delete(&x_node, None).unwrap();
    // The deletion's event reaches a's client before this reply does.
    a.exists(&x_node).unwrap();
    assert!(pending.try_take().is_none());
    drop(hold_y);
    let mut outcome = None;
    wait_until("the multi-lock's outcome", WAIT, || {
        outcome = pending.try_take();
        outcome.is_some()
    });
    assert_eq!(outcome.unwrap().unwrap_err(), LockError::Lost);
    assert!(pending.try_take().is_none(), "the outcome comes once");
    testkit::wait_no_children(&a, &y, WAIT);
}

#[test]
fn election_campaign_started_without_blocking() {
    let p = path("election-start");
    let (a, b) = (client(), client());
    let ea = Election::new(&a, &p, b"alpha").unwrap();
    let eb = Election::new(&b, &p, b"beta").unwrap();
    let lead = ea.start_campaign(None).wait_timeout(WAIT).unwrap();
    let pending = eb.start_campaign(None);
    wait_children(&a, &p, 2);
    assert!(pending.try_take().is_none());
    let first_token = lead.fencing_token();
    drop(lead);
    let next = pending.wait_timeout(WAIT).unwrap();
    assert_eq!(next.state(), LockState::Held);
    assert!(next.fencing_token() > first_token);
    assert_eq!(eb.leader().unwrap().unwrap().id, b"beta");
}

#[test]
fn inspection_lists_kinds_in_order() {
    let p = path("inspect");
    let c = client();
    let rw = RwLock::new(&c, &p).unwrap();
    let _r = rw.read().unwrap();
    let other = RwLock::new(&client(), &p).unwrap();
    let w = std::thread::spawn(move || other.write_timeout(BRIEF).map(|_| ()));
    wait_children(&c, &p, 2);
    let q = rw.queue().unwrap();
    assert_eq!(q[0].kind, NodeKind::Read);
    assert_eq!(q[1].kind, NodeKind::Write);
    assert!(q[0].sequence < q[1].sequence);
    assert_eq!(w.join().unwrap().unwrap_err(), LockError::Timeout);
}

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
    let mut first = lock.start_lock(None);
    let mut second = lock.start_lock(None);
    let token = CancelToken::new();
    let mut third = lock.start_lock_cancellable(None, token.clone());
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

/// Lock nodes created for an authenticated identity with a creator-only
/// ACL, under a lock path that also denies others: another identity can
/// neither delete the holder's node nor queue (a typed NoAuth), while the
/// same identity on another session queues as usual.
#[test]
fn creator_only_lock_nodes_refuse_other_identities() {
    use zklock::recipes::{Mutex, MutexOptions};
    use zklock::{Acl, Error, ErrorCode};
    let p = path("acl");
    let authed = |who: &[u8]| {
        let c = client();
        c.add_auth("digest", who).unwrap();
        c
    };
    let alice = authed(b"alice:secret");
    let options = MutexOptions::default()
        .acl(Acl::creator_all())
        .parent_acl(Acl::creator_all());
    let held = Mutex::with_options(&alice, &p, options.clone())
        .unwrap()
        .lock()
        .unwrap();
    let bob = authed(b"bob:other");
    assert_eq!(
        bob.delete(held.node_path(), None).unwrap_err().code(),
        Some(ErrorCode::NoAuth)
    );
    let refused = Mutex::with_options(&bob, &p, options.clone())
        .unwrap()
        .try_lock()
        .unwrap_err();
    assert!(
        matches!(
            refused,
            LockError::Client(Error::Server {
                code: ErrorCode::NoAuth,
                ..
            })
        ),
        "{refused:?}"
    );
    let alice_elsewhere = authed(b"alice:secret");
    assert!(Mutex::with_options(&alice_elsewhere, &p, options)
        .unwrap()
        .try_lock()
        .unwrap()
        .is_none());
    drop(held);
    testkit::wait_no_children(&alice, &p, WAIT);
}

/// The number of leases is stored on the semaphore path (as kazoo does): a
/// user asking for another number is refused instead of admitting more.
#[test]
fn semaphore_refuses_a_different_number_of_leases() {
    let p = path("sem-count");
    let c = client();
    let two = Semaphore::new(&c, &p, 2).unwrap();
    let lease = two.acquire().unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    let three = Semaphore::new(&client(), &p, 3).unwrap();
    assert_eq!(
        three.try_acquire().unwrap_err(),
        LockError::MaxLeasesMismatch {
            stored: 2,
            asked: 3
        }
    );
    let also_two = Semaphore::new(&client(), &p, 2).unwrap();
    assert!(also_two.try_acquire().unwrap().is_some());
    drop(lease);
}

/// A latch campaigns again after a loss and reports each gain and loss;
/// dropping it withdraws.
#[test]
fn leader_latch_requeues_after_a_loss() {
    use zklock::recipes::LatchEvent;
    let p = path("latch");
    let (a, b) = (client(), client());
    let latch_a = Election::new(&a, &p, b"a").unwrap().latch();
    let first = latch_a.events().recv_timeout(WAIT).unwrap();
    let LatchEvent::Gained { fencing_token } = first else {
        panic!("{first:?}");
    };
    assert!(latch_a.is_leader());
    let latch_b = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    // A third party removes the leader's node: A is told, B leads, A
    // queues again behind B.
    let leader_node = Election::new(&a, &p, b"x")
        .unwrap()
        .leader()
        .unwrap()
        .unwrap()
        .node;
    client()
        .delete(&format!("{p}/{leader_node}"), None)
        .unwrap();
    assert!(matches!(
        latch_a.events().recv_timeout(WAIT).unwrap(),
        LatchEvent::Lost {
            reason: Some(zklock::recipes::LossReason::NodeDeleted)
        }
    ));
    assert!(matches!(
        latch_b.events().recv_timeout(WAIT).unwrap(),
        LatchEvent::Gained { .. }
    ));
    wait_children(&a, &p, 2);
    assert!(!latch_a.is_leader());
    drop(latch_b);
    let again = latch_a.events().recv_timeout(WAIT).unwrap();
    assert!(
        matches!(again, LatchEvent::Gained { fencing_token: t } if t > fencing_token),
        "{again:?}"
    );
    drop(latch_a);
    testkit::wait_no_children(&a, &p, WAIT);
}

/// Any client follows the leadership without campaigning, new values
/// proclaimed by the leader included; a latch's holder can wait for
/// leadership with a deadline.
#[test]
fn observers_follow_leaders_and_what_they_proclaim() {
    let p = path("observe");
    let (a, b, watcher) = (client(), client(), client());
    let observed = Election::new(&watcher, &p, b"never campaigns").unwrap();
    let mut observer = observed.observe();
    assert_eq!(observer.next(WAIT).unwrap(), None, "nobody leads yet");
    let ea = Election::new(&a, &p, b"a").unwrap();
    let ga = ea.campaign_timeout(WAIT).unwrap();
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"a");
    ea.proclaim(&ga, b"a, second term").unwrap();
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"a, second term");
    // B's latch waits behind A; A steps down and B leads.
    let latch_b = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    assert!(!latch_b.is_leader());
    drop(ga);
    assert!(latch_b.await_leadership(WAIT));
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"b");
    drop(latch_b);
    assert_eq!(observer.next(WAIT).unwrap(), None, "B withdrew");
    // A leader whose node is gone cannot proclaim.
    let ga = ea.campaign_timeout(WAIT).unwrap();
    client().delete(ga.node_path(), None).unwrap();
    assert_eq!(ea.proclaim(&ga, b"too late"), Err(LockError::Lost));
}

/// Curator's close modes: NotifyLeader tells a leader's readers `Lost`, then
/// `Closed`; Silent just ends the events. Either way the node is gone when
/// `close` returns, and the next candidate leads.
#[test]
fn close_modes_tell_readers_or_not_and_hand_over_at_once() {
    let client = client();
    let path = format!("/latch-close-{}", std::process::id());
    for mode in [CloseMode::NotifyLeader, CloseMode::Silent] {
        let leader = Election::new(&client, &path, b"first").unwrap().latch();
        let reader = leader.events().clone();
        assert!(matches!(
            reader.recv_timeout(WAIT),
            Ok(LatchEvent::Gained { .. })
        ));
        let next = Election::new(&client, &path, b"next").unwrap().latch();
        testkit::wait_children(&client, &path, 2, WAIT);
        leader.close(mode).unwrap();
        assert_eq!(
            testkit::children(&client, &path).len(),
            1,
            "{mode:?}: the leader's node is gone when close returns"
        );
        let told: Vec<_> = reader.try_iter().collect();
        match mode {
            CloseMode::NotifyLeader => assert_eq!(
                told,
                [LatchEvent::Lost { reason: None }, LatchEvent::Closed],
                "{mode:?}"
            ),
            _ => assert!(told.is_empty(), "{mode:?}: {told:?}"),
        }
        assert!(matches!(
            next.events().recv_timeout(WAIT),
            Ok(LatchEvent::Gained { .. })
        ));
        // A candidate that never led hears only Closed.
        let waiting = Election::new(&client, &path, b"third").unwrap().latch();
        let third = waiting.events().clone();
        testkit::wait_children(&client, &path, 2, WAIT);
        waiting.close(CloseMode::NotifyLeader).unwrap();
        assert_eq!(third.try_iter().collect::<Vec<_>>(), [LatchEvent::Closed]);
        drop(next);
        testkit::wait_no_children(&client, &path, WAIT);
    }
}
