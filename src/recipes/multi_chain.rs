//! A multi-lock acquisition under way (behind a [`PendingMulti`]). The
//! locks are taken one after another, in the multi-lock's order: each part
//! is started from the client's I/O thread when the one before is granted,
//! so the chain moves on without anyone polling, and the whole is handed
//! out only if every part still holds.

use std::sync::{Arc, Mutex as StdMutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::Sender;

use super::guard::LockGuard;
use super::multi_guard::MultiGuard;
use super::mutex::Mutex;
use super::outcome::Call;
use super::pending::{GiveUp, PendingMulti};
use super::queue_lock::Start;
use crate::machine::{AttemptId, CommandSender, LockCommand, LockError, LockState};
use crate::wakers::WakeSlot;

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
    /// The task awaiting the handle.
    wake: WakeSlot,
}

/// Starts taking `locks` in order, to `deadline`.
pub(crate) fn start(locks: Arc<[Mutex]>, deadline: Option<Instant>) -> PendingMulti {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let wake = WakeSlot::default();
    let chain = Arc::new(StdMutex::new(Chain {
        taken: Vec::with_capacity(locks.len()),
        locks,
        deadline,
        current: None,
        outcome: Some(tx),
        wake: wake.clone(),
    }));
    start_part(&chain);
    PendingMulti::new(rx, wake, GiveUp::Steps(Box::new(move || give_up(&chain))))
}

/// The handle went before the outcome: withdraw the part awaited, release
/// the rest. (An outcome already sent drops with the channel: a guard
/// releases itself.)
fn give_up(chain: &StdMutex<Chain>) {
    let (current, taken) = {
        let mut chain = lock(chain);
        chain.outcome = None;
        (chain.current.take(), std::mem::take(&mut chain.taken))
    };
    if let Some((id, sender)) = current {
        sender.lock(LockCommand::Withdraw(id));
    }
    release(taken);
}

/// Hands the outcome to the handle and wakes its task. A receiver gone
/// drops a guard here: it releases.
fn deliver(
    tx: Sender<Result<MultiGuard, LockError>>,
    wake: &WakeSlot,
    r: Result<MultiGuard, LockError>,
) {
    if tx.send(r).is_ok() {
        wake.wake();
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
    let on_outcome = |_| {
        Call(Arc::new(move |result| {
            if let Some(chain) = weak.upgrade() {
                part_done(&chain, result);
            }
            // With the handle gone, a guard drops here and releases itself.
        }))
    };
    let mut c = lock(chain);
    let Some(tx) = c.outcome.clone() else {
        return;
    };
    let locks = c.locks.clone();
    let Some(part) = locks.get(c.taken.len()) else {
        c.outcome = None;
        let whole = MultiGuard::from_parts(std::mem::take(&mut c.taken));
        let wake = c.wake.clone();
        drop(c);
        deliver(tx, &wake, Ok(whole));
        return;
    };
    let queue = part.queue_lock();
    match queue.start(Start::by(c.deadline), on_outcome) {
        Ok(id) => c.current = Some((id, queue.command_sender())),
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
            let wake = c.wake.clone();
            drop(c);
            release(taken);
            deliver(tx, &wake, Err(e));
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
