//! What a holder can rely on (held / suspended / lost), and the state a
//! guard shares with the lock machine's runner, which updates it on the
//! I/O thread in the same loop turn as the session change that causes it.
//! Curator and kazoo never tell a holder that it lost its lock; we do.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::sync::{AtomicBool, AtomicU64, AtomicU8, Mutex};
use crate::wakers::WakeList;

use crossbeam_channel::{Receiver, Sender, TrySendError};

pub use zklock_proto::lock::{LockState, LossReason};

const HELD: u8 = 0;
const SUSPENDED: u8 = 1;
const LOST: u8 = 2;

fn decode_state(v: u8) -> LockState {
    match v {
        HELD => LockState::Held,
        SUSPENDED => LockState::Suspended,
        _ => LockState::Lost,
    }
}

/// Shared by a guard and the runner that reports on it.
pub(crate) struct HolderState {
    state: AtomicU8,
    released: AtomicBool,
    reason: Mutex<Option<LossReason>>,
    listeners: Mutex<Vec<Sender<LockState>>>,
    /// Functions told of each change, on the thread that makes it (the
    /// core's): for recipes that react without a thread of their own.
    callbacks: Mutex<Vec<StateCallback>>,
    /// Someone asked the holder to let go (revocable locks).
    revocation: AtomicBool,
    revocation_listeners: Mutex<Vec<Sender<()>>>,
    /// State changes so far: a task awaiting the next one knows it came.
    changes: AtomicU64,
    /// Tasks awaiting a change or a revocation request.
    tasks: WakeList,
}

impl std::fmt::Debug for HolderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HolderState")
            .field("state", &self.current())
            .field("reason", &self.reason())
            .finish_non_exhaustive()
    }
}

/// How many state changes a listener's channel keeps unread (session
/// subscribers and guards' `state_changes` alike). A reader that falls this
/// far behind misses later changes until it reads; the current state is
/// always readable where the channel came from.
pub const STATE_CHANNEL_CAPACITY: usize = 256;

/// Told of a holder's state change.
pub(crate) type StateCallback = Arc<dyn Fn(LockState) + Send + Sync>;

impl HolderState {
    pub(crate) fn new() -> Self {
        HolderState {
            state: AtomicU8::new(HELD),
            released: AtomicBool::new(false),
            reason: Mutex::new(None),
            listeners: Mutex::new(Vec::new()),
            callbacks: Mutex::new(Vec::new()),
            revocation: AtomicBool::new(false),
            revocation_listeners: Mutex::new(Vec::new()),
            changes: AtomicU64::new(0),
            tasks: WakeList::default(),
        }
    }

    /// How many state changes there have been so far.
    pub(crate) fn change_count(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// For a task: ready with the current state once there has been a
    /// change since `seen` changes, or the state is Lost (nothing follows
    /// it); else the task is woken at the next change.
    pub(crate) fn poll_change(&self, seen: u64, cx: &mut Context<'_>) -> Poll<LockState> {
        self.tasks.poll_until(cx, || {
            let now = self.current();
            (self.change_count() != seen || now == LockState::Lost).then_some(now)
        })
    }

    /// For a task: ready once a revocation request has arrived; else the
    /// task is woken when one does (or the state changes).
    pub(crate) fn poll_revocation(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.tasks
            .poll_until(cx, || self.revocation_requested().then_some(()))
    }

    /// A revocation request arrived: listeners hear it once each time.
    pub(crate) fn request_revocation(&self) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        self.revocation.store(true, Ordering::SeqCst);
        if let Ok(mut ls) = self.revocation_listeners.lock() {
            // A listener that has not read the last request needs no other.
            ls.retain(|l| !matches!(l.try_send(()), Err(TrySendError::Disconnected(_))));
        }
        self.tasks.wake_all();
    }

    /// Whether a revocation request arrived.
    pub(crate) fn revocation_requested(&self) -> bool {
        self.revocation.load(Ordering::SeqCst)
    }

    /// A channel that yields once per revocation request (one already
    /// received: at once).
    pub(crate) fn revocations(&self) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.revocation_requested() {
            let _ = tx.try_send(());
        }
        if let Ok(mut ls) = self.revocation_listeners.lock() {
            ls.push(tx);
        }
        rx
    }

    /// Calls `f` with each later change (not after a release).
    pub(crate) fn on_change(&self, f: StateCallback) {
        if let Ok(mut cs) = self.callbacks.lock() {
            cs.push(f);
        }
    }

    /// The holder let go: no more changes are reported, but for how the
    /// release ends ([`HolderState::finish_release`]).
    pub(crate) fn mark_released(&self) {
        self.released.store(true, Ordering::SeqCst);
        // No change comes any more; a callback may own the guard.
        if let Ok(mut cs) = self.callbacks.lock() {
            cs.clear();
        }
    }

    /// The release finished. If the server refused to delete the node,
    /// listeners hear `Lost` (reason [`LossReason::ReleaseRefused`]): the
    /// lock stays taken for everyone else, and nobody here holds it.
    pub(crate) fn finish_release(&self, refused: bool) {
        if let Ok(mut ls) = self.listeners.lock() {
            if refused {
                if let Ok(mut r) = self.reason.lock() {
                    *r = Some(LossReason::ReleaseRefused);
                }
                self.state.store(LOST, Ordering::SeqCst);
                self.changes.fetch_add(1, Ordering::SeqCst);
                for l in ls.iter() {
                    offer(l, LockState::Lost);
                }
            }
            ls.clear();
        }
        if refused {
            self.tasks.wake_all();
        }
    }

    /// A channel yielding the current state, then every change.
    pub(crate) fn changes(&self) -> Receiver<LockState> {
        // Unbounded, capped by `offer`: a bounded channel would allocate
        // and stamp all its slots for each call, though most listeners see
        // a handful of changes in their life.
        let (tx, rx) = crossbeam_channel::unbounded();
        if let Ok(mut ls) = self.listeners.lock() {
            offer(&tx, self.current());
            if !self.released.load(Ordering::SeqCst) {
                ls.push(tx);
            }
        }
        rx
    }

    /// Marks the lock lost for `reason`; the first reason given stays.
    pub(crate) fn lose(&self, reason: LossReason) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
        self.set(LockState::Lost);
    }

    /// Whether the holder's node may still stand for it: not Lost, or Lost
    /// by zklock's own judgement while the session may live (the node then
    /// stays until the guard goes). A thread that asks for the same lock
    /// again meanwhile would queue behind itself.
    pub(crate) fn may_keep_node(&self) -> bool {
        // `lose` sets the reason before the state.
        self.current() != LockState::Lost
            || matches!(
                self.reason(),
                Some(LossReason::NoContact | LossReason::SequenceExhausted)
            )
    }

    pub(crate) fn reason(&self) -> Option<LossReason> {
        self.reason.lock().ok().and_then(|r| *r)
    }

    pub(crate) fn current(&self) -> LockState {
        decode_state(self.state.load(Ordering::SeqCst))
    }

    pub(crate) fn set(&self, state: LockState) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        let new = match state {
            LockState::Held => HELD,
            LockState::Suspended => SUSPENDED,
            LockState::Lost => LOST,
        };
        // Lost is final.
        let changed = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                (old != LOST && old != new).then_some(new)
            })
            .is_ok();
        if changed {
            self.changes.fetch_add(1, Ordering::SeqCst);
            self.tasks.wake_all();
            // Outside every lock: a callback may drop the guard, or start
            // another acquisition.
            let callbacks: Vec<StateCallback> = self
                .callbacks
                .lock()
                .map(|cs| cs.clone())
                .unwrap_or_default();
            for f in callbacks {
                f(state);
            }
            if let Ok(mut ls) = self.listeners.lock() {
                ls.retain(|l| offer(l, state));
            }
        }
    }
}

/// Sends `state` unless the reader has [`STATE_CHANNEL_CAPACITY`] changes
/// unread: that reader misses this one (`LockGuard::state` stays current).
/// `false` once the reader is gone. Sends happen under the listeners' lock,
/// so the count cannot grow between the look and the send.
fn offer(tx: &Sender<LockState>, state: LockState) -> bool {
    tx.len() >= STATE_CHANNEL_CAPACITY || tx.send(state).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn lost_is_final_and_its_first_reason_stays() {
        let h = HolderState::new();
        let rx = h.changes();
        assert_eq!(rx.try_recv(), Ok(LockState::Held));
        h.set(LockState::Held);
        assert!(rx.try_recv().is_err(), "no change, nothing sent");
        h.set(LockState::Suspended);
        h.lose(LossReason::NoContact);
        h.lose(LossReason::SessionExpired);
        h.set(LockState::Held);
        assert_eq!(
            rx.try_iter().collect::<Vec<_>>(),
            [LockState::Suspended, LockState::Lost]
        );
        assert_eq!(h.current(), LockState::Lost);
        assert_eq!(h.reason(), Some(LossReason::NoContact));
    }

    #[test]
    fn after_a_release_nothing_changes_and_no_callback_runs() {
        let h = HolderState::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        h.on_change(Arc::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        h.set(LockState::Suspended);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        h.mark_released();
        h.set(LockState::Held);
        h.lose(LossReason::NodeDeleted);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(h.current(), LockState::Suspended);
        assert_eq!(h.reason(), None);
        // A channel asked for now gets the state and then ends.
        let rx = h.changes();
        assert_eq!(rx.recv(), Ok(LockState::Suspended));
        assert!(rx.recv().is_err());
    }

    #[test]
    fn a_refused_release_tells_listeners_lost_and_a_clean_one_ends_them() {
        let refused = HolderState::new();
        let rx = refused.changes();
        rx.try_recv().unwrap();
        refused.mark_released();
        refused.finish_release(true);
        assert_eq!(rx.try_recv(), Ok(LockState::Lost));
        assert!(rx.recv().is_err(), "no listener left");
        assert_eq!(refused.current(), LockState::Lost);
        assert_eq!(refused.reason(), Some(LossReason::ReleaseRefused));

        let clean = HolderState::new();
        let rx = clean.changes();
        rx.try_recv().unwrap();
        clean.mark_released();
        clean.finish_release(false);
        assert!(rx.recv().is_err(), "ended without a Lost");
        assert_eq!(clean.current(), LockState::Held);
        assert_eq!(clean.reason(), None);
    }

    #[test]
    fn revocation_is_told_to_every_listener_once_per_request_and_not_after_release() {
        let h = HolderState::new();
        let early = h.revocations();
        assert!(!h.revocation_requested());
        assert!(early.try_recv().is_err());
        h.request_revocation();
        h.request_revocation();
        assert!(h.revocation_requested());
        // One unread request is enough: the channel holds one.
        assert_eq!(early.try_iter().count(), 1);
        // A listener that comes later hears of it at once.
        let late = h.revocations();
        assert_eq!(late.try_iter().count(), 1);
        h.request_revocation();
        assert_eq!(early.try_iter().count(), 1);
        assert_eq!(late.try_iter().count(), 1);

        let released = HolderState::new();
        let rx = released.revocations();
        released.mark_released();
        released.request_revocation();
        assert!(!released.revocation_requested());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_reader_a_whole_channel_behind_misses_changes_but_not_the_current_state() {
        let h = HolderState::new();
        let rx = h.changes();
        for _ in 0..STATE_CHANNEL_CAPACITY {
            h.set(LockState::Suspended);
            h.set(LockState::Held);
        }
        assert_eq!(rx.len(), STATE_CHANNEL_CAPACITY);
        h.lose(LossReason::NodeDeleted);
        assert_eq!(h.current(), LockState::Lost);
        let read: Vec<_> = rx.try_iter().collect();
        assert_eq!(read.len(), STATE_CHANNEL_CAPACITY);
        assert_ne!(
            read.last(),
            Some(&LockState::Lost),
            "the Lost found no room"
        );
    }

    /// The I/O thread ends a refused release: a reader a whole channel
    /// behind must not hold it up. Kills: `finish_release` sending `Lost`
    /// with a blocking send into a full channel.
    #[test]
    fn a_refused_release_does_not_wait_for_a_reader_a_whole_channel_behind() {
        let h = Arc::new(HolderState::new());
        let rx = h.changes();
        while rx.len() < STATE_CHANNEL_CAPACITY {
            h.set(LockState::Suspended);
            h.set(LockState::Held);
        }
        h.mark_released();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let releaser = h.clone();
        let thread = std::thread::spawn(move || {
            releaser.finish_release(true);
            let _ = done_tx.send(());
        });
        // A guard against a hang, not a clock: a blocked send never ends.
        let ended = done.recv_timeout(std::time::Duration::from_secs(60));
        let unread = rx.len();
        drop(rx);
        thread.join().unwrap();
        assert!(ended.is_ok(), "finish_release waited for the reader");
        assert_eq!(unread, STATE_CHANNEL_CAPACITY);
        assert_eq!(h.current(), LockState::Lost);
        assert_eq!(h.reason(), Some(LossReason::ReleaseRefused));
    }
}

/// A holder's state updated by the I/O thread while a guard's thread
/// releases or reads it, under every interleaving loom finds
/// (`scripts/loom.sh`).
#[cfg(all(test, zklock_loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    #[test]
    fn lost_stays_lost_whatever_comes_after() {
        loom::model(|| {
            let h = Arc::new(HolderState::new());
            let core = h.clone();
            let t = thread::spawn(move || core.lose(LossReason::SessionExpired));
            h.set(LockState::Suspended);
            h.set(LockState::Held);
            t.join().unwrap();
            assert_eq!(h.current(), LockState::Lost);
            assert_eq!(h.reason(), Some(LossReason::SessionExpired));
        });
    }

    #[test]
    fn after_a_release_no_change_is_made() {
        loom::model(|| {
            let h = Arc::new(HolderState::new());
            let core = h.clone();
            h.mark_released();
            let t = thread::spawn(move || {
                core.set(LockState::Suspended);
                core.lose(LossReason::NodeDeleted);
            });
            t.join().unwrap();
            assert_eq!(h.current(), LockState::Held);
            assert_eq!(h.reason(), None);
        });
    }

    #[test]
    fn a_refused_release_racing_a_loss_ends_lost_with_a_reason() {
        loom::model(|| {
            let h = Arc::new(HolderState::new());
            let core = h.clone();
            let t = thread::spawn(move || core.lose(LossReason::NoContact));
            h.mark_released();
            h.finish_release(true);
            t.join().unwrap();
            assert_eq!(h.current(), LockState::Lost);
            assert!(h.reason().is_some());
        });
    }
}
