//! The non-blocking twins of what a service waits for: each a `std` future
//! woken by the client's I/O thread, run here on a thread that only parks
//! (no runtime), against a real server.

use super::pending::block_on;
use super::*;
use zklock::recipes::{revoke, Election, LatchEvent};
use zklock::Error;

#[test]
fn a_guards_state_change_and_revocation_are_futures_woken_by_the_io_thread() {
    let path = lock_path("twins-state");
    let (c, other) = (client(), client());
    let options = MutexOptions::default().watch_node(true).revocable(true);
    let guard = Mutex::with_options(&c, &path, options)
        .unwrap()
        .lock()
        .unwrap();
    std::thread::scope(|s| {
        let asked = s.spawn(|| block_on(guard.revocation_request()));
        // Someone asks the holder to let go: the task is woken.
        assert!(revoke(&other, guard.node_path()).unwrap());
        assert_eq!(asked.join().unwrap(), Some(()), "the request woke the task");
        let changed = s.spawn(|| block_on(guard.next_state_change()));
        // A third party deletes the holder's node: it is told Lost.
        other.delete(guard.node_path(), None).unwrap();
        assert_eq!(changed.join().unwrap(), Some(LockState::Lost));
    });
    assert_eq!(guard.lost_reason(), Some(LossReason::NodeDeleted));
    // Nothing follows Lost: a later wait ends at once.
    assert_eq!(block_on(guard.next_state_change()), Some(LockState::Lost));
    assert_eq!(block_on(guard.revocation_request()), Some(()));
}

#[test]
fn an_async_unlock_resolves_once_the_node_is_gone_and_an_async_close_once_the_session_is() {
    let path = lock_path("twins-unlock");
    let (c, watcher) = (client(), client());
    let mutex = Mutex::new(&c, &path).unwrap();
    let guard = mutex.lock().unwrap();
    assert_eq!(children(&watcher, &path).len(), 1);
    assert_eq!(block_on(guard.unlock_async()), Some(Ok(())));
    // Resolved only once the delete was confirmed: nothing is left to see.
    assert!(children(&watcher, &path).is_empty());

    // A closed session's ephemeral nodes are gone when the close resolves.
    let closing = client();
    let node = Mutex::new(&closing, &path).unwrap().lock().unwrap();
    let name = node.node_path().to_owned();
    // Left to the session's end.
    node.abandon();
    assert_eq!(block_on(closing.close_async()), Some(()));
    assert_eq!(closing.state(), SessionState::Closed);
    assert!(
        watcher.exists(&name).unwrap().is_none(),
        "{name} outlived the close"
    );
}

#[test]
fn a_latchs_leadership_next_event_and_close_are_futures_woken_by_the_io_thread() {
    let path = lock_path("twins-latch");
    let (c, rival) = (client(), client());
    // A rival leads first, so our latch's leadership comes from the I/O
    // thread, after the wait began.
    let held = Election::new(&rival, &path, b"rival")
        .unwrap()
        .campaign()
        .unwrap();
    let latch = Election::new(&c, &path, b"ours").unwrap().latch();
    std::thread::scope(|s| {
        let leading = s.spawn(|| block_on(latch.leadership()));
        wait_children(&c, &path, 2, WAIT);
        drop(held);
        assert_eq!(leading.join().unwrap(), Some(true));
    });
    assert!(matches!(
        block_on(latch.next_event()),
        Some(LatchEvent::Gained { .. })
    ));
    // Closed, awaited: it resolves once our node is gone, and then (not
    // before) its readers hear Lost and Closed.
    let events = latch.events().clone();
    assert_eq!(children(&rival, &path).len(), 1);
    let closing = latch.close_async(zklock::recipes::CloseMode::NotifyLeader);
    assert!(
        events.try_recv().is_err(),
        "nothing told before it resolves"
    );
    assert_eq!(block_on(closing), Some(Ok(())));
    assert!(
        children(&rival, &path).is_empty(),
        "resolved with the node gone"
    );
    let told: Vec<LatchEvent> = events.try_iter().collect();
    assert_eq!(
        told,
        [LatchEvent::Lost { reason: None }, LatchEvent::Closed]
    );
}

/// Connecting, awaited: the future resolves with the first session, woken
/// by the I/O thread; against a server that accepts and never answers, the
/// core's timer wakes it at its deadline with `NoSession` (no failure comes
/// to wake it first: the handshake's own wait is longer).
#[test]
fn an_async_connect_resolves_with_the_session_or_at_its_deadline() {
    let connect = zk::shared().connect_string();
    let c = block_on(Client::builder(&connect).session_timeout(T).connect_async())
        .expect("resolved in time")
        .expect("connected");
    assert_eq!(c.state(), SessionState::Connected);
    assert_ne!(c.session_id(), 0);

    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let wait = Duration::from_secs(2);
    let started = std::time::Instant::now();
    let outcome = block_on(
        Client::builder(&addr.to_string())
            .session_timeout(wait)
            .connect_timeout(Duration::from_secs(60))
            .connect_async(),
    )
    .expect("resolved before the test's own bound");
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::NoSession(_))),
        "{:?}",
        outcome.map(|c| c.session_id())
    );
    assert!(took >= wait, "gave up after {took:?}, before its {wait:?}");
    // Woken at the deadline, not at the next poll someone else makes.
    assert!(
        took < wait * 3,
        "resolved {took:?} after a wait of {wait:?}"
    );
    drop(silent);
}
