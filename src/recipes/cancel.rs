use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

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
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Becomes ready (disconnected) once cancelled.
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.inner.rx
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}
