//! A channel for one answer to one blocked thread: a mutex and a condition
//! variable. crossbeam's channels spin, then call `sched_yield` four times,
//! before they park a receiver. An answer that needs a round trip to the
//! server never comes that soon, so each of those yields is a context switch
//! for nothing. Here the receiver parks at once. A task can await it instead
//! ([`Receiver::poll_recv`]): the sender wakes whichever waits.

use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};

use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Gives the answer; clones share the one slot. When the last one goes
/// without an answer given, the receiver hears `Disconnected`.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Waits for the answer. Dropped, it refuses any answer still to come (the
/// sender gets it back) and drops one that came unseen.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
    ready: Condvar,
}

struct Slot<T> {
    value: Option<T>,
    /// An answer was given (it may have been taken since).
    answered: bool,
    senders: usize,
    receiver: bool,
    /// The task awaiting the answer, if one does.
    waker: Option<Waker>,
}

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        slot: Mutex::new(Slot {
            value: None,
            answered: false,
            senders: 1,
            receiver: true,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Shared<T> {
    /// Nothing here can panic while the lock is held, but a poisoned lock
    /// still guards a consistent slot.
    fn slot(&self) -> MutexGuard<'_, Slot<T>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Sender<T> {
    /// Hands `value` to the receiver.
    ///
    /// # Errors
    /// `value` back if the receiver is gone or an answer was already given.
    pub(crate) fn send(&self, value: T) -> Result<(), T> {
        let mut slot = self.shared.slot();
        if !slot.receiver || slot.answered {
            return Err(value);
        }
        slot.value = Some(value);
        slot.answered = true;
        let waker = slot.waker.take();
        drop(slot);
        self.shared.ready.notify_one();
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.slot().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut slot = self.shared.slot();
        slot.senders -= 1;
        let last = slot.senders == 0 && !slot.answered;
        let waker = if last { slot.waker.take() } else { None };
        drop(slot);
        if last {
            self.shared.ready.notify_one();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Blocks until the answer, or until every sender is gone without one
    /// (for the tests: callers wait with a deadline, or await).
    ///
    /// # Errors
    /// `RecvError` if no answer can come any more.
    #[cfg(test)]
    pub(crate) fn recv(&self) -> Result<T, RecvError> {
        let mut slot = self.shared.slot();
        loop {
            if let Some(value) = slot.value.take() {
                return Ok(value);
            }
            if slot.answered || slot.senders == 0 {
                return Err(RecvError);
            }
            slot = self
                .shared
                .ready
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The answer if it has come, without waiting.
    ///
    /// # Errors
    /// `Empty` while it may still come, `Disconnected` if it cannot.
    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut slot = self.shared.slot();
        match slot.value.take() {
            Some(value) => Ok(value),
            None if slot.answered || slot.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// The answer for a task: ready once it has come (or cannot come any
    /// more); else the task is woken when it does.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        let mut slot = self.shared.slot();
        if let Some(value) = slot.value.take() {
            return Poll::Ready(Ok(value));
        }
        if slot.answered || slot.senders == 0 {
            return Poll::Ready(Err(RecvError));
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Waits for the answer (or until every sender is gone without one),
    /// for `timeout` at most.
    ///
    /// # Errors
    /// As [`Receiver::recv_deadline`].
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_deadline(crate::deadline::from_now(timeout))
    }

    /// Waits for the answer (or until every sender is gone without one),
    /// until `deadline` at the latest.
    ///
    /// # Errors
    /// `Timeout` at the deadline, `Disconnected` if no answer can come.
    pub(crate) fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        let mut slot = self.shared.slot();
        loop {
            if let Some(value) = slot.value.take() {
                return Ok(value);
            }
            if slot.answered || slot.senders == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            slot = self
                .shared
                .ready
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut slot = self.shared.slot();
        slot.receiver = false;
        let unseen = slot.value.take();
        drop(slot);
        // Outside the lock: dropping an answer may do work (a lock guard
        // releases itself).
        drop(unseen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_reaches_a_thread_blocked_before_it_was_sent() {
        let (tx, rx) = channel();
        let (started_tx, started) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            started_tx.send(()).ok();
            rx.recv()
        });
        started.recv().ok();
        assert_eq!(tx.send(7), Ok(()));
        assert_eq!(waiter.join().ok(), Some(Ok(7)));
    }

    #[test]
    fn a_second_answer_and_an_answer_nobody_waits_for_come_back() {
        let (tx, rx) = channel();
        let other = tx.clone();
        assert_eq!(tx.send(1), Ok(()));
        assert_eq!(other.send(2), Err(2));
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Err(RecvError));
        let (tx, rx) = channel::<u8>();
        drop(rx);
        assert_eq!(tx.send(3), Err(3));
    }

    #[test]
    fn the_last_sender_gone_without_an_answer_disconnects() {
        let (tx, rx) = channel::<u8>();
        let other = tx.clone();
        drop(tx);
        assert_eq!(
            rx.recv_deadline(Instant::now()),
            Err(RecvTimeoutError::Timeout)
        );
        drop(other);
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(
            rx.recv_deadline(Instant::now() + Duration::from_secs(60)),
            Err(RecvTimeoutError::Disconnected)
        );
    }

    #[test]
    fn try_recv_tells_empty_from_answered_and_from_gone() {
        let (tx, rx) = channel::<u8>();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(tx.send(5), Ok(()));
        assert_eq!(rx.try_recv(), Ok(5));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn a_deadline_ends_the_wait() {
        let (_tx, rx) = channel::<u8>();
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(rx.recv_deadline(deadline), Err(RecvTimeoutError::Timeout));
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn an_answer_dropped_unseen_is_dropped_by_the_receiver() {
        let (tx, rx) = channel();
        let seen = Arc::new(());
        tx.send(seen.clone()).ok();
        assert_eq!(Arc::strong_count(&seen), 2);
        drop(rx);
        assert_eq!(Arc::strong_count(&seen), 1);
    }

    #[test]
    fn a_task_awaiting_the_answer_is_woken_by_it_and_by_the_last_sender_gone() {
        let (count, waker) = crate::wakers::counting::counting();
        let mut cx = Context::from_waker(&waker);
        let woken = || crate::wakers::counting::woken(&count);

        let (tx, rx) = channel();
        assert!(rx.poll_recv(&mut cx).is_pending());
        assert_eq!(woken(), 0);
        assert_eq!(tx.send(5), Ok(()));
        assert_eq!(woken(), 1, "the answer wakes the task");
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Ok(5)));

        let (tx, rx) = channel::<u8>();
        let other = tx.clone();
        assert!(rx.poll_recv(&mut cx).is_pending());
        drop(tx);
        assert_eq!(woken(), 1, "a sender is left");
        drop(other);
        assert_eq!(woken(), 2, "the last sender gone wakes the task");
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Err(RecvError)));
    }

    /// A receiver awaited by one task, then polled by another (a future
    /// moved to another task, or a `select!` that changed hands), wakes the
    /// task that polled it last: the answer must not go to the one that
    /// stopped waiting.
    ///
    /// Kills: Receiver::poll_recv match guard `w.will_wake(cx.waker())` → true
    #[test]
    fn the_answer_wakes_the_task_that_polled_last() {
        let (first, first_waker) = crate::wakers::counting::counting();
        let (second, second_waker) = crate::wakers::counting::counting();
        let woken = crate::wakers::counting::woken;

        let (tx, rx) = channel();
        assert!(rx
            .poll_recv(&mut Context::from_waker(&first_waker))
            .is_pending());
        assert!(rx
            .poll_recv(&mut Context::from_waker(&second_waker))
            .is_pending());
        assert_eq!(tx.send(5), Ok(()));
        assert_eq!(woken(&second), 1, "the task polling now is woken");
        assert_eq!(woken(&first), 0, "the task that moved on is not");
        assert_eq!(
            rx.poll_recv(&mut Context::from_waker(&second_waker)),
            Poll::Ready(Ok(5))
        );
    }
}

/// Every interleaving loom finds, of the answer, the senders' drops and the
/// receiver's wait (`scripts/loom.sh`).
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    #[test]
    fn an_answer_reaches_a_receiver_waiting_or_not() {
        loom::model(|| {
            let (tx, rx) = channel();
            let t = thread::spawn(move || tx.send(7).is_ok());
            assert_eq!(rx.recv(), Ok(7));
            assert!(t.join().unwrap());
        });
    }

    #[test]
    fn the_last_sender_gone_without_an_answer_wakes_the_receiver() {
        loom::model(|| {
            let (tx, rx) = channel::<u8>();
            let other = tx.clone();
            let a = thread::spawn(move || drop(tx));
            let b = thread::spawn(move || drop(other));
            assert_eq!(rx.recv(), Err(RecvError));
            a.join().unwrap();
            b.join().unwrap();
        });
    }

    #[test]
    fn of_two_senders_exactly_one_answers() {
        loom::model(|| {
            let (tx, rx) = channel();
            let other = tx.clone();
            let a = thread::spawn(move || tx.send(1).is_ok());
            let b = thread::spawn(move || other.send(2).is_ok());
            let got = rx.recv().unwrap();
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            assert!(a != b, "one answer accepted, the other refused");
            assert_eq!(got, if a { 1 } else { 2 });
        });
    }

    #[test]
    fn a_receiver_gone_refuses_later_answers_and_never_blocks_a_sender() {
        loom::model(|| {
            let (tx, rx) = channel();
            let t = thread::spawn(move || tx.send(5));
            drop(rx);
            // Accepted before the drop (and dropped with the slot), or
            // handed back: either way the sender returned.
            let _ = t.join().unwrap();
        });
    }
}
