//! The non-blocking twins of what a service waits for: each a `std` future
//! woken by the client's I/O thread, run here on a thread that only parks
//! (no runtime), against a real server.

use super::pending::block_on;
use super::*;
use zklock::recipes::{revoke, Election, LatchEvent};

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
fn a_latchs_leadership_and_next_event_are_futures_woken_by_the_io_thread() {
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
    latch.close(zklock::recipes::CloseMode::Silent).unwrap();
}
