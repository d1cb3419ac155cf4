//! Tasks awaiting something the I/O thread makes happen (an outcome handed
//! over, a state change, a latch event): each registers its waker, and
//! whoever makes it happen wakes it. No runtime: a `Waker` is all it needs.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// The wakers of every task that waits, until the next wake.
#[derive(Debug, Default)]
pub(crate) struct WakeList(Mutex<Vec<Waker>>);

impl WakeList {
    /// Ready with what `ready` says; else the task waits here, looking
    /// again after registering: what it waits for may come between the
    /// look and the registration.
    pub(crate) fn poll_until<T>(
        &self,
        cx: &mut Context<'_>,
        ready: impl Fn() -> Option<T>,
    ) -> Poll<T> {
        if let Some(v) = ready() {
            return Poll::Ready(v);
        }
        self.register(cx.waker());
        match ready() {
            Some(v) => Poll::Ready(v),
            None => Poll::Pending,
        }
    }

    /// The task waits here until the next wake (look after this, not
    /// before: what it waits for may come in between).
    pub(crate) fn register(&self, task: &Waker) {
        if let Ok(mut ws) = self.0.lock() {
            if !ws.iter().any(|w| w.will_wake(task)) {
                ws.push(task.clone());
            }
        }
    }

    /// `task` waits no more.
    pub(crate) fn forget(&self, task: &Waker) {
        if let Ok(mut ws) = self.0.lock() {
            ws.retain(|w| !w.will_wake(task));
        }
    }

    /// Something happened: every task waiting looks again.
    pub(crate) fn wake_all(&self) {
        let woken = self
            .0
            .lock()
            .map(|mut ws| std::mem::take(&mut *ws))
            .unwrap_or_default();
        for w in woken {
            w.wake();
        }
    }
}

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

/// A waker that counts how often it was woken, for the tests of what wakes
/// tasks.
#[cfg(test)]
pub(crate) mod counting {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    pub(crate) struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A fresh count and a waker that adds to it.
    pub(crate) fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    /// How often the count's waker was woken.
    pub(crate) fn woken(count: &Count) -> usize {
        count.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::counting::{counting, woken};
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn every_waiting_task_is_woken_once_and_a_ready_one_never_waits() {
        let list = WakeList::default();
        let done = AtomicBool::new(false);
        let ready = || done.load(Ordering::SeqCst).then_some(());
        let tasks: Vec<_> = (0..2).map(|_| counting()).collect();
        for (_, waker) in &tasks {
            let mut cx = Context::from_waker(waker);
            assert!(list.poll_until(&mut cx, ready).is_pending());
            assert!(
                list.poll_until(&mut cx, ready).is_pending(),
                "registered once"
            );
        }
        done.store(true, Ordering::SeqCst);
        list.wake_all();
        list.wake_all();
        for (count, waker) in &tasks {
            assert_eq!(woken(count), 1);
            let mut cx = Context::from_waker(waker);
            assert_eq!(list.poll_until(&mut cx, ready), Poll::Ready(()));
        }
    }

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

    /// Kills: `WakeList::forget` emptied, or its `!` deleted (a task that
    /// gave up waiting would still be woken, and one waiting forgotten).
    #[test]
    fn a_forgotten_task_is_not_woken_and_the_others_are() {
        let list = WakeList::default();
        let (gone, gone_waker) = counting();
        let (kept, kept_waker) = counting();
        list.register(&gone_waker);
        list.register(&kept_waker);
        list.forget(&gone_waker);
        list.wake_all();
        assert_eq!((woken(&gone), woken(&kept)), (0, 1));
    }

    /// A wake before the park leaves the thread's token: the park that
    /// follows returns at once, long before its timeout.
    /// Kills: the unparking waker's `wake` emptied (a blocked caller would
    /// sleep to its deadline, or for good without one).
    #[test]
    fn the_unparking_waker_unparks_its_thread() {
        let waker = unpark_this_thread();
        let start = std::time::Instant::now();
        waker.wake_by_ref();
        std::thread::park_timeout(std::time::Duration::from_secs(60));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "parked to the timeout: never unparked"
        );
    }
}
