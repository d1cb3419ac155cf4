use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;

use crate::sync::AtomicBool;
use crate::wakers::WakeList;

/// Cancels a blocking acquire from another thread.
///
/// ```
/// let token = zklock::recipes::CancelToken::new();
/// let other = token.clone();
/// std::thread::spawn(move || other.cancel()).join().unwrap();
/// assert!(token.is_cancelled());
/// ```
#[derive(Debug, Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cancelled: AtomicBool,
    /// Tasks that look at the token (each waiter's, blocked or awaited).
    tasks: WakeList,
}

impl CancelToken {
    /// A token nobody has cancelled yet.
    pub fn new() -> Self {
        CancelToken {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                tasks: WakeList::default(),
            }),
        }
    }

    /// Wakes every acquire using this token; they give up with `Cancelled`.
    pub fn cancel(&self) {
        // Set before the wake: a task woken looks and finds it set.
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.tasks.wake_all();
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// `task` is woken at the cancel (look after this, not before).
    pub(crate) fn register(&self, task: &Waker) {
        self.inner.tasks.register(task);
    }

    /// `task` need not be woken any more: a token lives on, and is used
    /// again.
    pub(crate) fn forget(&self, task: &Waker) {
        self.inner.tasks.forget(task);
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

/// A token cancelled on one thread while another waits on it, under every
/// interleaving loom finds (`scripts/loom.sh`). loom models the flag, not
/// the list of tasks (a std mutex): what it checks is the order of the
/// waiter's look after its registration against the canceller's store
/// before its wake.
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use crate::wakers::counting::{counting, woken};
    use loom::thread;

    /// A waiter registers its task, then looks: it finds the token
    /// cancelled, or the cancel wakes it (else it would wait forever).
    #[test]
    fn a_waiter_that_looked_before_the_cancel_is_woken_by_it() {
        loom::model(|| {
            let token = CancelToken::new();
            let other = token.clone();
            let (count, waker) = counting();
            let t = thread::spawn(move || other.cancel());
            token.register(&waker);
            let saw = token.is_cancelled();
            t.join().unwrap();
            assert!(saw || woken(&count) == 1, "not cancelled, and not woken");
            assert!(token.is_cancelled());
        });
    }
}
