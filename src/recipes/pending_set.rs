//! Many acquisitions under way, their outcomes on one channel.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::guard::LockGuard;
use super::mutex::Mutex;
use super::outcome::InSet;
use super::queue_lock::{QueueLock, Start};
use super::rwlock::RwLock;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError};
use crate::wakers::WakeSlot;

/// One outcome of a [`PendingSet`]: the key its start returned, and the
/// guard or why there is none.
pub type SetOutcome = (u64, Result<LockGuard, LockError>);

/// Acquisitions started together whose outcomes arrive on one channel, in
/// the order they come, each with the key its start returned.
///
/// For one thread that waits on thousands of locks: each outcome costs the
/// same however many are open, where a `Select` over as many
/// [`PendingLock`](super::PendingLock) receivers registers with every one of
/// them each time it waits. Dropping the set gives up every acquisition
/// whose outcome was not taken; guards already taken are unaffected.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::{Mutex, PendingSet}};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let jobs: Vec<Mutex> = (0..1000)
///     .map(|i| Mutex::new(&client, &format!("/locks/job-{i}")))
///     .collect::<Result<_, _>>()?;
/// let mut set = PendingSet::new();
/// for job in &jobs {
///     set.start_lock(job, None);
/// }
/// while let Some((key, outcome)) = set.recv() {
///     let guard = outcome?;
///     println!("job {key}: {}", guard.node_path());
/// }
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the set gives up every acquisition in it"]
pub struct PendingSet {
    tx: Sender<SetOutcome>,
    rx: Receiver<SetOutcome>,
    /// Key → the attempt and its runner's door, to give it up (`None`:
    /// it never started; its error waits in the channel). A `BTreeMap`:
    /// its small nodes never make one allocation that grows with the keys
    /// (a hash table of many keys frees one large block each time it
    /// doubles; see `session/long_frame.rs` for why that costs memory, and
    /// bench/FIGURES.md).
    open: BTreeMap<u64, Option<(AttemptId, CommandSender)>>,
    /// Outcomes read from the channel early (by a cancel), not yet handed out.
    ready: VecDeque<SetOutcome>,
    /// The task polling [`PendingSet::next_outcome`].
    wake: WakeSlot,
    next_key: u64,
}

impl Default for PendingSet {
    fn default() -> Self {
        PendingSet::new()
    }
}

impl PendingSet {
    /// An empty set.
    pub fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        PendingSet {
            tx,
            rx,
            open: BTreeMap::new(),
            ready: VecDeque::new(),
            wake: WakeSlot::default(),
            next_key: 0,
        }
    }

    /// Starts taking `mutex`; returns the key its outcome will carry.
    /// `deadline`: when to give up with [`LockError::Timeout`].
    pub fn start_lock(&mut self, mutex: &Mutex, deadline: Option<Instant>) -> u64 {
        self.start(mutex.queue_lock(), deadline)
    }

    /// Starts taking a read lock on `lock`; returns the key.
    pub fn start_read(&mut self, lock: &RwLock, deadline: Option<Instant>) -> u64 {
        self.start(lock.read_side(), deadline)
    }

    /// Starts taking the write lock on `lock`; returns the key.
    pub fn start_write(&mut self, lock: &RwLock, deadline: Option<Instant>) -> u64 {
        self.start(lock.write_side(), deadline)
    }

    fn start(&mut self, lock: &QueueLock, deadline: Option<Instant>) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        let outcome = |_| InSet(self.tx.clone(), key, self.wake.clone());
        match lock.start(Start::by(deadline), outcome) {
            Ok(id) => {
                self.open.insert(key, Some((id, lock.command_sender())));
            }
            Err(e) => {
                // Could not start: the outcome says so, in order.
                self.open.insert(key, None);
                let _ = self.tx.send((key, Err(e)));
            }
        }
        key
    }

    /// Acquisitions whose outcome has not been taken from the set.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether every outcome has been taken.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Blocks for the next outcome; `None` once the set is empty. Bounded
    /// by the acquisitions' own deadlines: one started without a deadline
    /// waits until it is held, or until its client ends (its outcome is then
    /// [`LockError::Client`]). [`PendingSet::recv_timeout`] bounds the wait.
    ///
    /// # Errors
    /// Each outcome carries its acquisition's error, if any
    /// ([`LockError::Timeout`] at its deadline, ...).
    pub fn recv(&mut self) -> Option<SetOutcome> {
        if let Some(taken) = self.take_ready() {
            return Some(taken);
        }
        while !self.open.is_empty() {
            // The set holds a sender: the channel never disconnects.
            let outcome = self.rx.recv().ok()?;
            if let Some(taken) = self.take(outcome) {
                return Some(taken);
            }
        }
        None
    }

    /// Like [`PendingSet::recv`], waiting at most `timeout`; `None` if
    /// nothing came in time or the set is empty.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<SetOutcome> {
        if let Some(taken) = self.take_ready() {
            return Some(taken);
        }
        let deadline = crate::deadline::from_now(timeout);
        while !self.open.is_empty() {
            match self.rx.recv_deadline(deadline) {
                Ok(outcome) => {
                    if let Some(taken) = self.take(outcome) {
                        return Some(taken);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
        None
    }

    /// The next outcome if one has come.
    pub fn try_recv(&mut self) -> Option<SetOutcome> {
        if let Some(taken) = self.take_ready() {
            return Some(taken);
        }
        while let Ok(outcome) = self.rx.try_recv() {
            if let Some(taken) = self.take(outcome) {
                return Some(taken);
            }
        }
        None
    }

    /// Gives up the acquisition with `key` if its outcome has not been
    /// taken (a guard that came meanwhile releases itself). Whether it was
    /// open.
    pub fn cancel(&mut self, key: u64) -> bool {
        match self.open.remove(&key) {
            Some(attempt) => {
                if let Some((id, sender)) = attempt {
                    sender.lock(LockCommand::Withdraw(id));
                }
                // A guard for it may wait in the channel already: keep
                // what came for other keys, in order, and let it go.
                while let Ok(outcome) = self.rx.try_recv() {
                    if self.open.contains_key(&outcome.0) {
                        self.ready.push_back(outcome);
                    }
                }
                true
            }
            None => false,
        }
    }

    /// The next outcome, as a [`Future`]: like [`PendingSet::recv`] without
    /// blocking a thread; `None` once the set is empty.
    ///
    /// ```no_run
    /// # async fn f(set: &mut zklock::recipes::PendingSet) {
    /// while let Some((key, outcome)) = set.next_outcome().await {
    ///     println!("{key}: {}", outcome.is_ok());
    /// }
    /// # }
    /// ```
    pub fn next_outcome(&mut self) -> impl Future<Output = Option<SetOutcome>> + Send + '_ {
        std::future::poll_fn(move |cx| {
            if self.is_empty() {
                return Poll::Ready(None);
            }
            if let Some(outcome) = self.try_recv() {
                return Poll::Ready(Some(outcome));
            }
            self.wake.register(cx.waker());
            // An outcome may have come between the look and the registration.
            match self.try_recv() {
                Some(outcome) => Poll::Ready(Some(outcome)),
                None if self.is_empty() => Poll::Ready(None),
                None => Poll::Pending,
            }
        })
    }

    /// The first outcome read early whose key is still open.
    fn take_ready(&mut self) -> Option<SetOutcome> {
        while let Some(outcome) = self.ready.pop_front() {
            if let Some(taken) = self.take(outcome) {
                return Some(taken);
            }
        }
        None
    }

    /// An outcome for a key still open; outcomes of cancelled keys are
    /// dropped (their guards release themselves).
    fn take(&mut self, (key, outcome): SetOutcome) -> Option<SetOutcome> {
        self.open.remove(&key).map(|_| (key, outcome))
    }
}

impl Drop for PendingSet {
    fn drop(&mut self) {
        let open = std::mem::take(&mut self.open);
        for (id, sender) in open.into_values().flatten() {
            sender.lock(LockCommand::Withdraw(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key opened as one whose start failed: its outcome is what the
    /// test puts in the channel.
    fn open(set: &mut PendingSet, key: u64, outcome: Result<LockGuard, LockError>) {
        set.open.insert(key, None);
        set.tx
            .send((key, outcome))
            .expect("the set holds its receiver");
    }

    fn key(outcome: Option<SetOutcome>) -> Option<u64> {
        outcome.map(|(key, _)| key)
    }

    #[test]
    fn an_outcome_read_early_by_a_cancel_is_still_handed_out() {
        let mut set = PendingSet::new();
        open(&mut set, 0, Err(LockError::Timeout));
        set.open.insert(1, None);
        // Cancelling key 1 drains the channel: key 0's outcome is kept.
        assert!(set.cancel(1));
        assert_eq!(set.len(), 1);
        assert_eq!(key(set.try_recv()), Some(0));
        assert!(set.is_empty());
        assert_eq!(key(set.try_recv()), None);
    }

    #[test]
    fn recv_hands_out_each_outcome_once_then_says_empty_at_once() {
        let mut set = PendingSet::new();
        open(&mut set, 0, Err(LockError::Timeout));
        open(&mut set, 1, Err(LockError::Cancelled));
        set.open.insert(2, None);
        assert!(set.cancel(2));
        assert_eq!(key(set.recv()), Some(0));
        let timeout = Duration::from_secs(10);
        assert_eq!(key(set.recv_timeout(timeout)), Some(1));
        // Empty: neither blocks.
        assert_eq!(key(set.recv()), None);
        assert_eq!(key(set.recv_timeout(timeout)), None);
    }
}
