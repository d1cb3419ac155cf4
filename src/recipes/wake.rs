//! The task a future of this crate parks, woken from the core's thread
//! when an outcome is handed over. No runtime: a `Waker` is all it needs.

use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

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

/// A waker that unparks this thread: for a caller that blocks while it
/// runs a handle's steps itself, woken by what they wait for.
pub(crate) fn unpark_this_thread() -> Waker {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wakers::counting::{counting, woken};

    #[test]
    fn an_outcome_wakes_the_registered_task_once() {
        let slot = WakeSlot::default();
        slot.wake(); // nobody registered yet: nothing to do
        let (count, waker) = counting();
        slot.register(&waker);
        slot.register(&waker);
        slot.wake();
        assert_eq!(woken(&count), 1);
        // Woken tasks poll (and register) again; until then nobody is.
        slot.wake();
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn the_latest_poll_s_waker_replaces_the_one_before() {
        let slot = WakeSlot::default();
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        slot.register(&first_waker);
        slot.register(&second_waker);
        slot.wake();
        assert_eq!((woken(&first), woken(&second)), (0, 1));
    }
}
