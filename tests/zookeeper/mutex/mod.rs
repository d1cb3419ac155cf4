//! The exclusive lock against a real ZooKeeper, with faults from the proxy.

mod async_twins;
mod basics;
mod faults;
mod max_hold;
mod pending;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex as StdMutex};
use std::time::Duration;

use testkit::proxy::{Direction, Proxy};
use testkit::zk::{self, ZkServer};
use testkit::{children, wait_children, wait_until};
use zklock::recipes::{
    CancelToken, LockError, LockState, LossReason, Mutex, MutexOptions, PendingSet, RwLock,
};
use zklock::{Client, CreateMode, Op, SessionState};

const T: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(20);

fn client() -> Client {
    testkit::shared_client(T)
}

fn lock_path(name: &str) -> String {
    format!("/mutex-{name}-{}", std::process::id())
}

/// Runs `f` while checking that nobody else is inside.
fn exclusive(inside: &AtomicBool, f: impl FnOnce()) {
    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
    f();
    inside.store(false, Ordering::SeqCst);
}
