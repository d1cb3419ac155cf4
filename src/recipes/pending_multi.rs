//! A multi-lock acquisition under way, for callers that do not block. The
//! locks are taken one after another, in the multi-lock's order: each part
//! is started from the client's I/O thread when the one before is granted,
//! so the chain moves on without anyone polling, and the whole is handed
//! out only if every part still holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::guard::LockGuard;
use super::multi_guard::MultiGuard;
use super::mutex::Mutex;
use super::service::Call;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError, LockState};
use crate::Error;

/// A [`MultiLock`](super::MultiLock) acquisition started with
/// [`MultiLock::start_lock`](super::MultiLock::start_lock). Its outcome
/// arrives once on [`PendingMulti::receiver`]: every lock, or the first
/// failure, the locks taken so far released as it is sent (whether or not
/// the handle is kept). Dropping it before then gives the acquisition up:
/// the part awaited is withdrawn and the parts taken are released.
#[derive(Debug)]
#[must_use = "dropping the handle gives the acquisition up"]
pub struct PendingMulti {
    chain: Arc<StdMutex<Chain>>,
    outcome: Receiver<Result<MultiGuard, LockError>>,
    /// The outcome was taken.
    taken: AtomicBool,
}

/// The acquisition's progress, shared with the I/O thread's callbacks.
#[derive(Debug)]
struct Chain {
    locks: Arc<[Mutex]>,
    deadline: Option<Instant>,
    taken: Vec<LockGuard>,
    /// The part awaited, to withdraw on give-up.
    current: Option<(AttemptId, CommandSender)>,
    /// Where the outcome goes; `None` once sent, or given up.
    outcome: Option<Sender<Result<MultiGuard, LockError>>>,
}

impl PendingMulti {
    pub(crate) fn start(locks: Arc<[Mutex]>, deadline: Option<Instant>) -> PendingMulti {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let chain = Arc::new(StdMutex::new(Chain {
            taken: Vec::with_capacity(locks.len()),
            locks,
            deadline,
            current: None,
            outcome: Some(tx),
        }));
        start_part(&chain);
        PendingMulti {
            chain,
            outcome: rx,
            taken: AtomicBool::new(false),
        }
    }

    /// Yields the outcome once. For `crossbeam_channel::select!` and
    /// `Select`.
    pub fn receiver(&self) -> &Receiver<Result<MultiGuard, LockError>> {
        &self.outcome
    }

    /// The outcome if it has come; `None` before, and after it was taken.
    ///
    /// # Errors
    /// The first failure of a part ([`LockError::Timeout`] at the deadline,
    /// ...), or [`LockError::Lost`] if a lock taken earlier was lost while a
    /// later one was awaited.
    pub fn try_take(&self) -> Option<Result<MultiGuard, LockError>> {
        if self.taken.load(Ordering::Relaxed) {
            return None;
        }
        let outcome = match self.outcome.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err(LockError::Client(Error::Closed)),
        };
        self.taken.store(true, Ordering::Relaxed);
        Some(outcome)
    }

    /// Blocks at most `timeout` for the outcome; then gives the acquisition
    /// up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if it did not come in time; else as
    /// [`PendingMulti::try_take`].
    pub fn wait_timeout(self, timeout: Duration) -> Result<MultiGuard, LockError> {
        match self
            .outcome
            .recv_deadline(crate::deadline::from_now(timeout))
        {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(LockError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(LockError::Client(Error::Closed)),
        }
    }
}

impl Drop for PendingMulti {
    fn drop(&mut self) {
        // An outcome already sent drops with the channel (a guard releases
        // itself). Otherwise: withdraw the part awaited, release the rest.
        let (current, taken) = {
            let mut chain = lock(&self.chain);
            chain.outcome = None;
            (chain.current.take(), std::mem::take(&mut chain.taken))
        };
        if let Some((id, sender)) = current {
            sender.lock(LockCommand::Withdraw(id));
        }
        release(taken);
    }
}

fn lock(chain: &StdMutex<Chain>) -> MutexGuard<'_, Chain> {
    chain.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the next part, or hands out the whole when every part is taken.
/// Called by the caller's thread for the first part and by the I/O thread
/// for the others. The chain stays locked until the part is started and
/// recorded as the one awaited: a give-up either comes first (and nothing
/// starts) or finds the part to withdraw, and its outcome (on the I/O
/// thread) waits for the record.
fn start_part(chain: &Arc<StdMutex<Chain>>) {
    let weak = Arc::downgrade(chain);
    let on_outcome = Call(Arc::new(move |result| {
        if let Some(chain) = weak.upgrade() {
            part_done(&chain, result);
        }
        // With the handle gone, a guard drops here and releases itself.
    }));
    let mut c = lock(chain);
    let Some(tx) = c.outcome.clone() else {
        return;
    };
    let locks = c.locks.clone();
    let Some(part) = locks.get(c.taken.len()) else {
        c.outcome = None;
        let whole = MultiGuard::from_parts(std::mem::take(&mut c.taken));
        drop(c);
        // A receiver gone drops the guard here: it releases.
        let _ = tx.send(Ok(whole));
        return;
    };
    let queue = part.queue_lock();
    let reserved = queue.reserve();
    let id = reserved.id();
    match queue.start_reserved(reserved, c.deadline, on_outcome) {
        Ok(()) => c.current = Some((id, queue.command_sender())),
        Err(e) => {
            drop(c);
            part_done(chain, Err(e));
        }
    }
}

/// A part's outcome, on the I/O thread: take the next part, or fail.
fn part_done(chain: &Arc<StdMutex<Chain>>, result: Result<LockGuard, LockError>) {
    let mut c = lock(chain);
    c.current = None;
    let Some(tx) = c.outcome.clone() else {
        drop(c);
        drop(result);
        return;
    };
    match result.and_then(|g| add_part(&mut c.taken, g)) {
        Ok(()) => {
            drop(c);
            start_part(chain);
        }
        Err(e) => {
            // The whole failed: the parts taken go now, before the caller
            // hears of it, not when it drops the handle (it may keep it).
            c.outcome = None;
            let taken = std::mem::take(&mut c.taken);
            drop(c);
            release(taken);
            let _ = tx.send(Err(e));
        }
    }
}

/// Releases parts taken, the last taken first.
fn release(mut taken: Vec<LockGuard>) {
    while let Some(g) = taken.pop() {
        drop(g);
    }
}

/// Adds a granted part to those taken before it. A part lost while a later
/// one was awaited makes the whole fail: every part is released (the last
/// taken first) and the caller hears [`LockError::Lost`].
pub(super) fn add_part(taken: &mut Vec<LockGuard>, guard: LockGuard) -> Result<(), LockError> {
    taken.push(guard);
    if taken.iter().all(|g| g.state() != LockState::Lost) {
        return Ok(());
    }
    release(std::mem::take(taken));
    Err(LockError::Lost)
}
