//! Read/write lock, election and latch, semaphore, multi-lock, batch mutex and
//! creator-only ACLs against a real ZooKeeper.

mod acl;
mod batch;
mod between_reads;
mod election;
mod multilock;
mod no_contact;
mod refusals;
mod rwlock;
mod semaphore;
mod semaphore_checks;
mod semaphore_reaped;
mod withdraw;

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
