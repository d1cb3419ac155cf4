//! The task a future of this crate parks, woken from the core's thread
//! when an outcome is handed over. No runtime: a `Waker` is all it needs.

use std::sync::{Arc, Mutex};
use std::task::Waker;

/// Holds the waker of the last poll; the sender of an outcome wakes it.
#[derive(Debug, Default, Clone)]
pub(crate) struct WakeSlot(Arc<Mutex<Option<Waker>>>);

impl WakeSlot {
    /// Remembers who to wake (the latest poll's waker replaces any other).
    pub(crate) fn register(&self, waker: &Waker) {
        if let Ok(mut w) = self.0.lock() {
            match w.as_ref() {
                Some(old) if old.will_wake(waker) => {}
                _ => *w = Some(waker.clone()),
            }
        }
    }

    /// An outcome was handed over.
    pub(crate) fn wake(&self) {
        let waker = self.0.lock().ok().and_then(|mut w| w.take());
        if let Some(w) = waker {
            w.wake();
        }
    }
}
