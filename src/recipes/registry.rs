//! Which thread of this process holds which lock, so a second request from
//! the same thread is refused (or shared, when re-entrant) instead of
//! queueing behind itself forever.

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::ThreadId;

use crate::machine::held::LockState;
use crate::machine::Holding;
use crate::sync::Mutex;
use zklock_proto::id_hash::IdMap;

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

/// One holding a thread took, through the lock object `object`: re-entry
/// shares only what was taken through the same object, as Curator's.
#[derive(Debug)]
struct Taken {
    object: u64,
    holding: Weak<Holding>,
}

/// Per lock and thread, the holdings taken there. A holding counts while
/// it lives: it goes with its last guard.
type Holders<T> = IdMap<(Key, T), Vec<Taken>>;

/// The holdings of a process's threads. A thread is named by `T`: std's
/// `ThreadId` in the process's one registry (below), any distinct ids in a
/// model check (loom runs its threads on one OS thread, so std's id cannot
/// tell them apart).
pub(crate) struct Registry<T> {
    map: Mutex<(Holders<T>, usize)>,
}

impl<T: Copy + Eq + Hash> Registry<T> {
    pub(crate) fn new() -> Self {
        Registry {
            map: Mutex::new((IdMap::default(), 0)),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut (Holders<T>, usize)) -> R) -> R {
        match self.map.lock() {
            Ok(mut m) => f(&mut m),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether `thread` holds `key` by a holding whose node may still
    /// stand: not Lost, or Lost by zklock's own judgement while the
    /// session may live (its node stays until the guard goes, so asking
    /// again would queue behind it).
    pub(crate) fn held_by(&self, key: &Key, thread: T) -> bool {
        self.with(|(m, _)| {
            m.get(&(key.clone(), thread)).is_some_and(|taken| {
                taken
                    .iter()
                    .filter_map(|t| t.holding.upgrade())
                    .any(|h| h.state().may_keep_node())
            })
        })
    }

    /// The holding `thread` took last through `object`, unless it is Lost
    /// (the lock is no longer ours to re-enter).
    pub(crate) fn taken_through(&self, key: &Key, thread: T, object: u64) -> Option<Arc<Holding>> {
        self.with(|(m, _)| {
            let taken = m.get(&(key.clone(), thread))?;
            let last = taken.iter().rev().find(|t| t.object == object)?;
            let holding = last.holding.upgrade()?;
            (holding.state().current() != LockState::Lost).then_some(holding)
        })
    }

    /// Records that `thread` holds `key` by `holding`, taken through
    /// `object`. Holdings gone are forgotten here: those of this key and
    /// thread at once, every other once the table has doubled since the
    /// last sweep, so threads that locked once and ended leave nothing.
    pub(crate) fn insert(&self, key: Key, thread: T, object: u64, holding: &Arc<Holding>) {
        self.with(|(m, swept)| {
            let taken = m.entry((key, thread)).or_default();
            taken.retain(|t| t.holding.strong_count() > 0);
            taken.push(Taken {
                object,
                holding: Arc::downgrade(holding),
            });
            if sweep_due(m.len(), *swept) {
                m.retain(|_, taken| {
                    taken.retain(|t| t.holding.strong_count() > 0);
                    !taken.is_empty()
                });
                *swept = m.len();
            }
        });
    }
}

/// Whether a table of `len` entries, `live` of them live at the last sweep,
/// is due for another: once it has doubled, so that a sweep costs a
/// constant share of each insert.
fn sweep_due(len: usize, live: usize) -> bool {
    len > 2 * live + 8
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

/// The holding `thread` took last through `object`, unless it is Lost.
pub(crate) fn taken_through(key: &Key, thread: ThreadId, object: u64) -> Option<Arc<Holding>> {
    process().taken_through(key, thread, object)
}

/// Records that `thread` holds `key` by `holding`, taken through `object`.
pub(crate) fn insert(key: Key, thread: ThreadId, object: u64, holding: &Arc<Holding>) {
    process().insert(key, thread, object, holding);
}

/// A new lock object's id, for [`insert`] and [`taken_through`].
pub(crate) fn new_object() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Registry, Side};
    use crate::machine::held::HolderState;
    use crate::machine::{Holding, ReleaseDoor};

    /// A release asked of nobody.
    #[derive(Debug)]
    struct Nowhere;

    impl ReleaseDoor for Nowhere {
        fn release(
            &self,
            _: u64,
            _: Option<crate::oneshot::Sender<Result<(), crate::machine::LockError>>>,
        ) -> bool {
            true
        }
    }

    pub(super) fn holding() -> Arc<Holding> {
        let state = Arc::new(HolderState::new());
        let stat = jute::Stat::default();
        Arc::new(Holding::new(
            0,
            "/lock/n".into(),
            stat,
            state,
            Arc::new(Nowhere),
        ))
    }

    #[test]
    fn a_taker_whose_holding_is_gone_is_forgotten() {
        let here = std::thread::current().id();
        let there = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        let key = (1, "/lock".to_owned(), Side::Exclusive);
        let registry = Registry::new();
        let (kept, ended) = (holding(), holding());
        registry.insert(key.clone(), there, 0, &ended);
        registry.insert(key.clone(), here, 0, &kept);
        assert!(registry.held_by(&key, there) && registry.held_by(&key, here));
        drop(ended);
        assert!(!registry.held_by(&key, there), "its holding went");
        let again = holding();
        registry.insert(key.clone(), here, 0, &again);
        let entries = registry.with(|(m, _)| m.values().map(Vec::len).sum::<usize>());
        assert_eq!(entries, 3, "the ended holding is swept only with the table");
        let through = registry.taken_through(&key, here, 0).unwrap();
        assert!(
            Arc::ptr_eq(&through, &again),
            "the last taken is re-entered"
        );
        assert!(
            registry.taken_through(&key, here, 1).is_none(),
            "not through another object"
        );
        // A holding gone is forgotten when its thread takes the same lock
        // again.
        drop(through);
        drop(again);
        let last = holding();
        registry.insert(key.clone(), here, 0, &last);
        let here_entries = registry.with(|(m, _)| m[&(key.clone(), here)].len());
        assert_eq!(here_entries, 2, "kept and last; again is gone");
        // Enough keys to make the table sweep: the ended holdings go, the
        // live ones stay.
        for i in 0..64 {
            let h = holding();
            registry.insert((1, format!("/other/{i}"), Side::Lease), here, 0, &h);
        }
        let keys = registry.with(|(m, _)| m.len());
        assert!(keys <= 13, "holdings gone are swept: {keys} keys left");
        assert!(
            registry.held_by(&key, here),
            "a live holding outlives the sweeps"
        );
        assert!(!registry.held_by(&key, there));
        drop((kept, last));
    }
}

/// The registry as threads use it, under every interleaving loom finds
/// (`scripts/loom.sh`). Each test builds a registry of its own and names
/// threads by loom's ids: loom runs its threads on one OS thread, where
/// `std::thread::current().id()` is the same for all of them. The thin
/// wrappers above (the process's registry, std's ids) are not covered.
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::tests::holding;
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
                let h = holding();
                assert!(!registry.held_by(&k, me));
                registry.insert(k.clone(), me, 7, &h);
                assert!(registry.held_by(&k, me));
                assert!(registry.taken_through(&k, me, 7).is_some());
                assert!(registry.taken_through(&k, me, 8).is_none());
                drop(h);
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
    /// holding and no other.
    #[test]
    fn a_guard_dropped_on_another_thread_forgets_only_its_holding() {
        loom::model(|| {
            let registry = LoomArc::new(Registry::new());
            let me = thread::current().id();
            let k = key(Side::Lease);
            let first = holding();
            registry.insert(k.clone(), me, 0, &first);
            let t = thread::spawn(move || drop(first));
            let second = holding();
            registry.insert(k.clone(), me, 0, &second);
            assert!(registry.held_by(&k, me));
            t.join().unwrap();
            assert!(registry.held_by(&k, me), "the second lease still counts");
            drop(second);
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
            let h = holding();
            registry.insert(k.clone(), me, 0, &h);
            let core = h.state().clone();
            let t = thread::spawn(move || core.lose(LossReason::SessionExpired));
            let first = registry.held_by(&k, me);
            let second = registry.held_by(&k, me);
            assert!(first || !second, "Lost, then held again");
            t.join().unwrap();
            assert!(!registry.held_by(&k, me), "a Lost holding counts");
            assert!(
                registry.taken_through(&k, me, 0).is_none(),
                "nor is it re-entered"
            );
            let again = holding();
            registry.insert(k.clone(), me, 0, &again);
            assert!(registry.held_by(&k, me));
        });
    }
}
