//! Which thread of this process holds which lock, so a second request from
//! the same thread is refused (or shared, when re-entrant) instead of
//! queueing behind itself forever.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, OnceLock, Weak};
use std::thread::ThreadId;

use crate::machine::held::HolderState;
use crate::sync::Mutex;

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
/// already Lost does not count as held (a thread may take the lock again),
/// unless zklock decided the loss itself and the node may still stand for
/// it (it goes only with the guard: asking again would queue behind it).
type Holders<T> = HashMap<(Key, T), Vec<Weak<HolderState>>>;

/// The holdings of a process's threads. A thread is named by `T`: std's
/// `ThreadId` in the process's one registry (below), any distinct ids in a
/// model check (loom runs its threads on one OS thread, so std's id cannot
/// tell them apart).
pub(crate) struct Registry<T> {
    map: Mutex<Holders<T>>,
}

impl<T: Copy + Eq + Hash> Registry<T> {
    pub(crate) fn new() -> Self {
        Registry {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Holders<T>) -> R) -> R {
        match self.map.lock() {
            Ok(mut m) => f(&mut m),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether `thread` holds `key` by a holding whose node may still
    /// stand (see [`HolderState::may_keep_node`]).
    pub(crate) fn held_by(&self, key: &Key, thread: T) -> bool {
        self.with(|m| {
            m.get(&(key.clone(), thread)).is_some_and(|states| {
                states
                    .iter()
                    .filter_map(Weak::upgrade)
                    .any(|s| s.may_keep_node())
            })
        })
    }

    /// Records that `thread` holds `key` by the holding whose state is `state`.
    pub(crate) fn insert(&self, key: Key, thread: T, state: &Arc<HolderState>) {
        self.with(|m| {
            m.entry((key, thread))
                .or_default()
                .push(Arc::downgrade(state))
        });
    }

    /// Forgets the holding whose state is `state` (from any thread: a guard
    /// may be dropped on another thread than the one that took it).
    pub(crate) fn remove(&self, key: &Key, thread: T, state: &Arc<HolderState>) {
        self.with(|m| {
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
}

/// The process's registry.
fn process() -> &'static Registry<ThreadId> {
    static HOLDERS: OnceLock<Registry<ThreadId>> = OnceLock::new();
    HOLDERS.get_or_init(Registry::new)
}

/// Whether `thread` holds `key` by a holding whose node may still stand.
pub(crate) fn held_by(key: &Key, thread: ThreadId) -> bool {
    process().held_by(key, thread)
}

/// Records that `thread` holds `key` by the holding whose state is `state`.
pub(crate) fn insert(key: Key, thread: ThreadId, state: &Arc<HolderState>) {
    process().insert(key, thread, state);
}

/// Forgets the holding whose state is `state`.
pub(crate) fn remove(key: &Key, thread: ThreadId, state: &Arc<HolderState>) {
    process().remove(key, thread, state);
}

/// The registry as threads use it, under every interleaving loom finds
/// (`scripts/loom.sh`). Each test builds a registry of its own and names
/// threads by loom's ids: loom runs its threads on one OS thread, where
/// `std::thread::current().id()` is the same for all of them. The thin
/// wrappers above (the process's registry, std's ids) are not covered.
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use crate::machine::LossReason;
    use loom::sync::Arc as LoomArc;
    use loom::thread;

    fn key(side: Side) -> Key {
        (1, "/lock".to_owned(), side)
    }

    /// Two threads take and let go of the same lock at once: each is told
    /// only of its own holdings, whatever the other has done so far.
    #[test]
    fn each_thread_is_told_of_its_own_holdings_only() {
        loom::model(|| {
            let registry = LoomArc::new(Registry::new());
            let take_and_let_go = |registry: &Registry<thread::ThreadId>| {
                let me = thread::current().id();
                let k = key(Side::Exclusive);
                let state = Arc::new(HolderState::new());
                assert!(!registry.held_by(&k, me));
                registry.insert(k.clone(), me, &state);
                assert!(registry.held_by(&k, me));
                registry.remove(&k, me, &state);
                assert!(!registry.held_by(&k, me));
            };
            let other = registry.clone();
            let t = thread::spawn(move || take_and_let_go(&other));
            take_and_let_go(&registry);
            t.join().unwrap();
        });
    }

    /// A guard taken here is dropped on another thread while this thread
    /// takes a second lease of the same semaphore: the drop forgets its own
    /// holding (under this thread's id) and no other.
    #[test]
    fn a_guard_dropped_on_another_thread_forgets_only_its_holding() {
        loom::model(|| {
            let registry = LoomArc::new(Registry::new());
            let me = thread::current().id();
            let k = key(Side::Lease);
            let first = Arc::new(HolderState::new());
            registry.insert(k.clone(), me, &first);
            let (other, k2) = (registry.clone(), k.clone());
            let t = thread::spawn(move || {
                // The guard's drop: the owner's id, not the dropping thread's.
                other.remove(&k2, me, &first);
                drop(first);
            });
            let second = Arc::new(HolderState::new());
            registry.insert(k.clone(), me, &second);
            assert!(registry.held_by(&k, me));
            t.join().unwrap();
            assert!(registry.held_by(&k, me), "the second lease still counts");
            registry.remove(&k, me, &second);
            assert!(!registry.held_by(&k, me));
        });
    }

    /// The I/O thread marks a holding Lost while its thread asks: once it
    /// is told "not held" it stays so, and after the loss the thread may
    /// take the lock again.
    #[test]
    fn a_holding_lost_on_the_io_thread_stops_counting() {
        loom::model(|| {
            let registry = Registry::new();
            let me = thread::current().id();
            let k = key(Side::Exclusive);
            let state = Arc::new(HolderState::new());
            registry.insert(k.clone(), me, &state);
            let core = state.clone();
            let t = thread::spawn(move || core.lose(LossReason::SessionExpired));
            let first = registry.held_by(&k, me);
            let second = registry.held_by(&k, me);
            assert!(first || !second, "Lost, then held again");
            t.join().unwrap();
            assert!(!registry.held_by(&k, me), "a Lost holding counts");
            let again = Arc::new(HolderState::new());
            registry.insert(k.clone(), me, &again);
            assert!(registry.held_by(&k, me));
        });
    }
}
