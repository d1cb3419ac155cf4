//! A max hold against a real server: a holder whose thread hangs, while
//! its process and session stay alive, is let go on time by the client's
//! I/O thread, and the next waiter is granted (after the lock-delay, when
//! one is set).

use std::time::Instant;

use zklock::recipes::LockGuard;

use super::*;

/// How late, past the max hold's end, the hung holder may be told and the
/// next waiter granted: the I/O thread's timer, the delete's round trip,
/// the waiter's notification and its grant are each well under 100 ms on
/// loopback; the rest is room for a loaded machine (two shared cores).
const BOUND: Duration = Duration::from_secs(1);

/// The holder's thread takes the lock with a max hold of 2 s and then
/// blocks on a channel nobody sends on. Another client's waiter is granted
/// only once the max hold has passed (not early: its grant comes no sooner
/// than 2 s after the holder's call began, an instant before the grant),
/// and within `BOUND` of it (not late: counted from when the holder's call
/// returned, an instant after the grant); the hung holder's guard says
/// `Lost` with `LossReason::MaxHold` within the same window, while its
/// session stays connected, and its later unlock has nothing left to do.
#[test]
fn a_hung_holder_is_let_go_at_its_max_hold_and_the_next_waiter_granted() {
    let max = Duration::from_secs(2);
    let path = lock_path("max-hold");
    let hung_client = client();
    let (hang_tx, hang_rx) = crossbeam_channel::bounded::<()>(0);
    let (held_tx, held_rx) = crossbeam_channel::bounded(1);
    let hung = {
        let (c, path) = (hung_client.clone(), path.clone());
        std::thread::spawn(move || {
            let options = MutexOptions::default().max_hold(max);
            let mutex = Mutex::with_options(&c, &path, options).unwrap();
            let called = Instant::now();
            let guard = Arc::new(mutex.lock().unwrap());
            let returned = Instant::now();
            held_tx.send((called, returned, guard.clone())).unwrap();
            // The hang: nothing is ever sent; the test drops the sender
            // only once it has seen everything.
            assert!(hang_rx.recv().is_err());
            let guard = Arc::try_unwrap(guard).expect("the test let go of its copy");
            guard.unlock()
        })
    };
    let (called, returned, guard): (Instant, Instant, Arc<LockGuard>) =
        held_rx.recv_timeout(WAIT).expect("the holder's grant");
    assert_eq!(guard.state(), LockState::Held);
    let states = guard.state_changes();
    let hung_node = guard.node_path().to_owned();

    let other_client = client();
    let waiter = {
        let (c, path) = (other_client.clone(), path.clone());
        std::thread::spawn(move || {
            let mutex = Mutex::new(&c, &path).unwrap();
            let g = mutex.lock_timeout(max + BOUND + WAIT).unwrap();
            let granted = Instant::now();
            (granted, g.node_path().to_owned(), g.unlock())
        })
    };
    testkit::wait_children(&hung_client, &path, 2, WAIT);

    let late = returned + max + BOUND;
    let lost_at = loop {
        let state = states
            .recv_deadline(late)
            .expect("the hung holder told Lost by the max hold's end and BOUND");
        if state == LockState::Lost {
            break Instant::now();
        }
    };
    assert_eq!(guard.lost_reason(), Some(LossReason::MaxHold));
    assert!(
        lost_at >= called + max,
        "told Lost {:?} after its call, before the max hold {max:?}",
        lost_at - called
    );
    let (granted, other_node, other_unlock) = waiter.join().unwrap();
    assert!(
        granted >= called + max,
        "the next waiter granted {:?} after the holder's call, before the max hold {max:?}",
        granted - called
    );
    assert!(
        granted <= late,
        "the next waiter granted {:?} past the max hold, over {BOUND:?}",
        granted - (returned + max)
    );
    assert_ne!(other_node, hung_node);
    assert_eq!(other_unlock, Ok(()));
    assert!(
        !children(&hung_client, &path).contains(&hung_node.rsplit('/').next().unwrap().to_owned()),
        "the hung holder's node is gone"
    );
    assert_eq!(
        hung_client.state(),
        SessionState::Connected,
        "let go by its max hold, not by its session's end"
    );

    drop(guard);
    drop(hang_tx);
    assert_eq!(
        hung.join().unwrap(),
        Ok(()),
        "the hung holder's unlock, after the max hold, has nothing left to do"
    );
    testkit::wait_no_children(&hung_client, &path, WAIT);
}

/// With lock-delay, a max hold's end is an unclean one: the holder is let
/// go at its max hold, and the next waiter (lock-delay set too) is granted
/// only once the delay has run after it, not before `max + delay` from the
/// holder's call and within `BOUND` of that from its grant.
#[test]
fn with_lock_delay_the_next_waiter_serves_the_delay_after_a_max_hold() {
    let (max, delay) = (Duration::from_secs(1), Duration::from_millis(1500));
    let path = lock_path("max-hold-delay");
    let options = MutexOptions::default().lock_delay(delay);
    let holder_client = client();
    let holder = Mutex::with_options(&holder_client, &path, options.clone().max_hold(max)).unwrap();
    let called = Instant::now();
    let guard = holder.lock().unwrap();
    let returned = Instant::now();
    let states = guard.state_changes();

    let other_client = client();
    let waiter = {
        let (c, path, options) = (other_client.clone(), path.clone(), options.clone());
        std::thread::spawn(move || {
            let mutex = Mutex::with_options(&c, &path, options).unwrap();
            let g = mutex.lock_timeout(max + delay + BOUND + WAIT).unwrap();
            (Instant::now(), g.unlock())
        })
    };
    while states
        .recv_deadline(returned + max + BOUND)
        .expect("the holder told Lost by its max hold's end and BOUND")
        != LockState::Lost
    {}
    assert_eq!(guard.lost_reason(), Some(LossReason::MaxHold));
    let (granted, unlocked) = waiter.join().unwrap();
    assert!(
        granted >= called + max + delay,
        "the next waiter granted {:?} after the holder's call, before max hold and delay {:?}",
        granted - called,
        max + delay
    );
    assert!(
        granted <= returned + max + delay + BOUND,
        "the next waiter granted {:?} past max hold and delay, over {BOUND:?}",
        granted - (returned + max + delay)
    );
    assert_eq!(unlocked, Ok(()));
    drop(guard);
}
