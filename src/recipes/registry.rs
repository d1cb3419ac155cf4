//! Which thread of this process holds which lock, so a second request from
//! the same thread is refused (or counted, when re-entrant) instead of
//! queueing behind itself forever.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;

/// A lock as this process knows it: session and lock path.
pub(crate) type Key = (i64, String);

fn holders() -> &'static Mutex<HashMap<Key, ThreadId>> {
    static HOLDERS: OnceLock<Mutex<HashMap<Key, ThreadId>>> = OnceLock::new();
    HOLDERS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn with<T>(f: impl FnOnce(&mut HashMap<Key, ThreadId>) -> T) -> T {
    match holders().lock() {
        Ok(mut m) => f(&mut m),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

pub(crate) fn held_by_current_thread(key: &Key) -> bool {
    let me = std::thread::current().id();
    with(|m| m.get(key) == Some(&me))
}

pub(crate) fn insert(key: Key) {
    let me = std::thread::current().id();
    with(|m| m.insert(key, me));
}

pub(crate) fn remove(key: &Key) {
    with(|m| m.remove(key));
}
