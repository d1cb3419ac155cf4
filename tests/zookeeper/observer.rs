//! The observer hook against a real ZooKeeper: every call counted, none
//! missing, none extra.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use zklock::recipes::{LockError, LockState, Mutex, MutexOptions};
use zklock::{Client, Observer, SessionState};

const WAIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Counts {
    connected: AtomicU64,
    acquired: AtomicU64,
    failed: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    nodes: StdMutex<Vec<String>>,
}

impl Observer for Counts {
    fn session_state(&self, state: SessionState) {
        if state == SessionState::Connected {
            self.connected.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn lock_acquired(&self, node: &str, _waited: Duration) {
        self.acquired.fetch_add(1, Ordering::SeqCst);
        self.nodes.lock().unwrap().push(node.to_owned());
    }
    fn lock_failed(&self, _lock_path: &str, error: &LockError, _waited: Duration) {
        assert_eq!(*error, LockError::Timeout);
        self.failed.fetch_add(1, Ordering::SeqCst);
    }
    fn holder_state(&self, _node: &str, state: LockState) {
        if state == LockState::Lost {
            self.lost.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn lock_released(&self, _node: &str, _held: Duration, refused: bool) {
        assert!(!refused);
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_observer_hears_each_session_change_and_lock_event_once() {
    let server = testkit::zk::shared();
    let counts = Arc::new(Counts::default());
    let c = Client::builder(&server.connect_string())
        .observer(counts.clone())
        .connect()
        .unwrap();
    assert_eq!(counts.connected.load(Ordering::SeqCst), 1);
    let path = format!("/observer-{}", std::process::id());
    let options = MutexOptions::default().watch_node(true);
    let m = Mutex::with_options(&c, &path, options).unwrap();
    for _ in 0..3 {
        m.lock_timeout(WAIT).unwrap().unlock().unwrap();
    }
    // A try-lock that finds it taken fails once.
    let other = testkit::shared_client(WAIT);
    let held = Mutex::new(&other, &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    assert!(m.try_lock().unwrap().is_none());
    drop(held);
    // A holder whose node a third party deletes is told, and so is the
    // observer.
    let g = m.lock_timeout(WAIT).unwrap();
    let changes = g.state_changes();
    other.delete(g.node_path(), None).unwrap();
    while changes.recv_timeout(WAIT).unwrap() != LockState::Lost {}
    drop(g);
    c.close().unwrap();
    assert_eq!(counts.acquired.load(Ordering::SeqCst), 4);
    assert_eq!(counts.failed.load(Ordering::SeqCst), 1);
    assert_eq!(counts.lost.load(Ordering::SeqCst), 1);
    assert_eq!(counts.released.load(Ordering::SeqCst), 4);
    let nodes = counts.nodes.lock().unwrap();
    assert!(nodes.iter().all(|n| n.starts_with(&path)), "{nodes:?}");
}
