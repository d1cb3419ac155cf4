//! Which thread of this process holds which lock, so a second request from
//! the same thread is refused (or shared, when re-entrant) instead of
//! queueing behind itself forever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::ThreadId;

use crate::machine::held::{HolderState, LockState};

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

/// Per lock and thread, the states of the holdings taken there: a holding
/// already Lost does not count as held (a thread may take the lock again).
type Holders = HashMap<(Key, ThreadId), Vec<Weak<HolderState>>>;

fn with<T>(f: impl FnOnce(&mut Holders) -> T) -> T {
    static HOLDERS: OnceLock<Mutex<Holders>> = OnceLock::new();
    let m = HOLDERS.get_or_init(|| Mutex::new(HashMap::new()));
    match m.lock() {
        Ok(mut m) => f(&mut m),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

/// Whether this thread holds `key` by a holding not yet Lost.
pub(crate) fn held_by_current_thread(key: &Key) -> bool {
    let me = std::thread::current().id();
    with(|m| {
        m.get(&(key.clone(), me)).is_some_and(|states| {
            states
                .iter()
                .filter_map(Weak::upgrade)
                .any(|s| s.current() != LockState::Lost)
        })
    })
}

/// Records that `thread` holds `key` by the holding whose state is `state`.
pub(crate) fn insert(key: Key, thread: ThreadId, state: &Arc<HolderState>) {
    with(|m| {
        m.entry((key, thread))
            .or_default()
            .push(Arc::downgrade(state))
    });
}

/// Forgets the holding whose state is `state`.
pub(crate) fn remove(key: &Key, thread: ThreadId, state: &Arc<HolderState>) {
    with(|m| {
        let k = (key.clone(), thread);
        if let Some(states) = m.get_mut(&k) {
            let target = Arc::downgrade(state);
            if let Some(i) = states.iter().position(|s| s.ptr_eq(&target)) {
                states.swap_remove(i);
            }
            if states.is_empty() {
                m.remove(&k);
            }
        }
    });
}
