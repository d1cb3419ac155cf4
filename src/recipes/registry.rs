//! Which thread of this process holds which lock, so a second request from
//! the same thread is refused (or shared, when re-entrant) instead of
//! queueing behind itself forever.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;

/// Exclusive (mutex, write lock, election), shared (read lock), or a
/// semaphore lease (a thread may hold several).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Side {
    Exclusive,
    Shared,
    Lease,
}

/// A lock as this process knows it: session, lock path and side.
pub(crate) type Key = (i64, String, Side);

type Holders = HashMap<(Key, ThreadId), usize>;

fn with<T>(f: impl FnOnce(&mut Holders) -> T) -> T {
    static HOLDERS: OnceLock<Mutex<Holders>> = OnceLock::new();
    let m = HOLDERS.get_or_init(|| Mutex::new(HashMap::new()));
    match m.lock() {
        Ok(mut m) => f(&mut m),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

pub(crate) fn held_by_current_thread(key: &Key) -> bool {
    let me = std::thread::current().id();
    with(|m| m.contains_key(&(key.clone(), me)))
}

/// Records that `thread` holds `key` (once more).
pub(crate) fn insert(key: Key, thread: ThreadId) {
    with(|m| *m.entry((key, thread)).or_insert(0) += 1);
}

pub(crate) fn remove(key: &Key, thread: ThreadId) {
    with(|m| {
        let k = (key.clone(), thread);
        if let Some(n) = m.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                m.remove(&k);
            }
        }
    });
}
