//! The multi-lock: all or none, blocking or started without blocking.

use super::*;

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

/// A part that fails (here: its deadline passes while another client holds
/// y) ends the whole with that error, and the parts already taken are
/// released then, not when the handle is dropped: the caller may keep the
/// handle (it read the outcome with `try_take` or on `receiver()`), and
/// others must not stay locked out of x meanwhile.
#[test]
fn a_failed_multi_lock_releases_its_parts_while_the_handle_is_kept() {
    let (x, y) = (path("multi-fail-x"), path("multi-fail-y"));
    let (a, b) = (client(), client());
    let both = MultiLock::new(&a, &[&x, &y]).unwrap();
    let hold_y = zklock::recipes::Mutex::new(&b, &y).unwrap().lock().unwrap();
    let mutex_x = zklock::recipes::Mutex::new(&b, &x).unwrap();
    for read_on_receiver in [false, true] {
        let pending = both.start_lock(Some(Instant::now() + BRIEF));
        let outcome = if read_on_receiver {
            let receiver = pending.receiver().expect("a multi-lock's outcome is sent");
            receiver.recv_timeout(WAIT).ok()
        } else {
            let mut outcome = None;
            wait_until("the multi-lock's outcome", WAIT, || {
                outcome = pending.try_take();
                outcome.is_some()
            });
            outcome
        };
        assert_eq!(
            outcome.expect("an outcome").unwrap_err(),
            LockError::Timeout,
            "receiver: {read_on_receiver}"
        );
        // The handle is still here: x's node must go all the same.
        testkit::wait_no_children(&b, &x, WAIT);
        let on_x = mutex_x.try_lock().unwrap();
        assert!(
            on_x.is_some(),
            "x stays taken (receiver: {read_on_receiver})"
        );
        drop(on_x);
        testkit::wait_no_children(&b, &x, WAIT);
        drop(pending);
    }
    drop(hold_y);
}
