use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;

use crossbeam_channel::{Receiver, Sender};

use crate::sync::{AtomicBool, Mutex};
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
    // Dropping the sender wakes every waiter selecting on the receiver.
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
    /// Tasks of pending handles that look at the token when polled.
    tasks: WakeList,
}

impl CancelToken {
    /// A token nobody has cancelled yet.
    pub fn new() -> Self {
        let (tx, rx) = crossbeam_channel::bounded(0);
        CancelToken {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                tx: Mutex::new(Some(tx)),
                rx,
                tasks: WakeList::default(),
            }),
        }
    }

    /// Wakes every acquire using this token; they give up with `Cancelled`.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        match self.inner.tx.lock() {
            Ok(mut tx) => drop(tx.take()),
            Err(poisoned) => drop(poisoned.into_inner().take()),
        }
        self.inner.tasks.wake_all();
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Becomes ready (disconnected) once cancelled.
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.inner.rx
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

/// A token cancelled on one thread while another looks at it, under every
/// interleaving loom finds (`scripts/loom.sh`). loom models the flag and the
/// mutex around the sender, not crossbeam's channel: it cannot see an order
/// between a channel operation and its own, so it would never run the
/// interleavings that matter between `try_recv` and the flag. The channel's
/// end is observed as the sender's being gone from under the mutex (the
/// sender is the channel's only one: gone, the receiver is disconnected).
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use crossbeam_channel::TryRecvError;
    use loom::thread;

    /// A waiter woken by the channel (`BatchMutex::lock_with` selects on
    /// it) then asks the token: it must hear "cancelled", or it would wait
    /// again on a channel that is ready at once, spinning.
    #[test]
    fn a_waiter_woken_by_the_channel_finds_the_token_cancelled() {
        loom::model(|| {
            let token = CancelToken::new();
            let other = token.clone();
            let t = thread::spawn(move || other.cancel());
            // What a select on the receiver would wake for.
            let woken = token.inner.tx.lock().unwrap().is_none();
            assert!(!woken || token.is_cancelled(), "woken, not cancelled");
            t.join().unwrap();
            assert!(token.is_cancelled());
            assert_eq!(token.receiver().try_recv(), Err(TryRecvError::Disconnected));
        });
    }
}
