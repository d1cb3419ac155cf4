//! Leadership that keeps campaigning: a LeaderLatch (Curator's name) over
//! an [`Election`], reporting each gain and loss on a channel. It has no
//! thread: the client's I/O thread hands it each outcome and holder state
//! as it happens, and it campaigns again from there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::election::Election;
use super::error::LockError;
use super::guard::{LockGuard, Releasing};
use super::held::{LockState, LossReason};
use super::outcome::Call;
use super::queue_lock::Start;
use crate::machine::{AttemptId, LockCommand};
use crate::oneshot;
use crate::wakers::WakeList;
use std::future::Future;
use std::task::Poll;

/// What a [`LeaderLatch`] reports, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LatchEvent {
    /// We lead, with this fencing token.
    Gained {
        /// The leadership node's czxid: pass it to what the leader writes.
        fencing_token: i64,
    },
    /// The connection dropped: stop acting as the leader until `Resumed`
    /// (or `Lost`).
    Suspended,
    /// Back, and still the leader.
    Resumed,
    /// We no longer lead; the latch campaigns again (after a
    /// [max hold](super::MutexOptions::max_hold) of leadership, reason
    /// [`LossReason::MaxHold`], behind the candidates already queued).
    Lost {
        /// Why, when known.
        reason: Option<LossReason>,
    },
    /// The latch stopped for good: the session ended (expired, on a client
    /// that opens no new session) or campaigning failed.
    Stopped(LockError),
    /// Closed with [`CloseMode::NotifyLeader`]: the last event.
    Closed,
}

/// What [`LeaderLatch::close`] tells those reading the latch's events
/// (Curator's `LeaderLatch.CloseMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CloseMode {
    /// Nothing more: the events just end (as when the latch is dropped).
    #[default]
    Silent,
    /// A leader's readers hear `Lost { reason: None }`, then every reader
    /// hears `Closed`.
    NotifyLeader,
}

/// Campaigns, leads, and after a loss campaigns again, until dropped; a
/// session expiry is a loss like any other on a client that opens a new
/// session after it ([`ClientBuilder::new_session_after_expiry`](crate::ClientBuilder::new_session_after_expiry)):
/// the latch campaigns on the new session.
/// No thread of its own: the client's I/O thread drives it. Dropping it
/// withdraws the candidacy (and leadership) without blocking.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::{Election, LatchEvent}};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let latch = Election::new(&client, "/election/scheduler", b"node-a")?.latch();
/// for event in latch.events() {
///     match event {
///         LatchEvent::Gained { fencing_token } => println!("leading ({fencing_token})"),
///         LatchEvent::Lost { .. } | LatchEvent::Suspended => println!("pausing"),
///         LatchEvent::Stopped(e) => return Err(e.into()),
///         _ => {}
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the latch withdraws the candidacy"]
pub struct LeaderLatch {
    events: Receiver<LatchEvent>,
    shared: Arc<Shared>,
}

/// What the latch and the I/O thread's calls into it share.
///
/// Every event is sent with `current` locked, after a look at `stopped`;
/// `close` sets `stopped` with `current` locked. So an event is either
/// sent before the close took the latch's state, or not at all: none
/// follows `Closed`, and a grant that comes after the close is released,
/// never reported.
struct Shared {
    /// Tasks awaiting an event or leadership.
    tasks: WakeList,
    election: Election,
    tx: Sender<LatchEvent>,
    leading: AtomicBool,
    stopped: AtomicBool,
    /// Signalled whenever `leading` or `stopped` may have changed.
    changed: Condvar,
    changed_lock: Mutex<()>,
    /// The campaign under way, or the leadership held.
    current: Mutex<Current>,
}

#[derive(Default)]
struct Current {
    /// The campaign under way (its outcome not yet handled here).
    attempt: Option<AttemptId>,
    guard: Option<LockGuard>,
    /// Leaderships lost and let go here whose nodes the server has not
    /// yet confirmed gone: `close` waits for them too.
    letting_go: Vec<Releasing>,
    /// The campaign that failed and stopped the latch (at the sequence
    /// counter's end, say): the machine deletes its node in the background,
    /// and `close` waits for that too.
    failed: Option<AttemptId>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLatch")
            .field("leading", &self.leading.load(Ordering::SeqCst))
            .field("stopped", &self.stopped.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Election {
    /// Campaigns for as long as the returned latch lives, again after
    /// every loss, reporting each gain and loss on its channel (Curator's
    /// LeaderLatch).
    pub fn latch(self) -> LeaderLatch {
        LeaderLatch::start(self)
    }
}

impl LeaderLatch {
    pub(crate) fn start(election: Election) -> LeaderLatch {
        // Bounded: a latch nobody reads costs at most this much; a reader
        // that far behind misses events (`is_leader` stays current).
        let (tx, events) = crossbeam_channel::bounded(crate::machine::STATE_CHANNEL_CAPACITY);
        let shared = Arc::new(Shared {
            tasks: WakeList::default(),
            election,
            tx,
            leading: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            changed: Condvar::new(),
            changed_lock: Mutex::new(()),
            current: Mutex::new(Current::default()),
        });
        Shared::campaign(&shared);
        LeaderLatch { events, shared }
    }

    /// Gains, losses and the rest, in order.
    pub fn events(&self) -> &Receiver<LatchEvent> {
        &self.events
    }

    /// Whether we lead now (held, and connected).
    pub fn is_leader(&self) -> bool {
        self.shared.leading.load(Ordering::SeqCst)
    }

    /// The next event, for async code: woken by the I/O thread (no
    /// runtime needed). It reads from [`LeaderLatch::events`]: one event,
    /// to whichever reader takes it first.
    pub fn next_event(&self) -> impl Future<Output = LatchEvent> + Send + '_ {
        std::future::poll_fn(move |cx| {
            self.shared
                .tasks
                .poll_until(cx, || self.events.try_recv().ok())
        })
    }

    /// Resolves once we lead (`true`), or once the latch has stopped
    /// (`false`), for async code: [`LeaderLatch::await_leadership`] without
    /// a thread. Reads no event.
    pub fn leadership(&self) -> impl Future<Output = bool> + Send + '_ {
        let s = &self.shared;
        std::future::poll_fn(move |cx| {
            s.tasks.poll_until(cx, || {
                if s.leading.load(Ordering::SeqCst) {
                    Some(true)
                } else {
                    s.stopped.load(Ordering::SeqCst).then_some(false)
                }
            })
        })
    }

    /// Waits at most `timeout` until we lead (Curator's `await`): `true`
    /// if we do, `false` at the timeout or once the latch stopped. Reads
    /// no event: [`LeaderLatch::events`] still reports everything.
    pub fn await_leadership(&self, timeout: Duration) -> bool {
        let until = crate::deadline::after(Instant::now(), timeout);
        let s = &self.shared;
        let Ok(mut guard) = s.changed_lock.lock() else {
            return self.is_leader();
        };
        loop {
            if s.leading.load(Ordering::SeqCst) {
                return true;
            }
            let now = Instant::now();
            if s.stopped.load(Ordering::SeqCst) || now >= until {
                return false;
            }
            guard = match s.changed.wait_timeout(guard, until - now) {
                Ok((g, _)) => g,
                Err(_) => return self.is_leader(),
            };
        }
    }
}

impl LeaderLatch {
    /// Withdraws and deletes our node, whether we lead, wait in line, or
    /// are being granted right now, and waits (at most the client's request
    /// timeout) for the server to confirm it (Curator's `close`): when this
    /// returns `Ok`, our node is gone and another candidate may lead. `mode`
    /// says whether readers of [`LeaderLatch::events`] (clones of it) hear
    /// of the close; either way no event comes after it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::{CloseMode, Election}};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let latch = Election::new(&client, "/election/scheduler", b"node-a")?.latch();
    /// let events = latch.events().clone(); // a listener's copy
    /// if latch.await_leadership(Duration::from_secs(30)) {
    ///     // ... lead ...
    /// }
    /// latch.close(CloseMode::NotifyLeader)?; // events: Lost, then Closed
    /// # drop(events);
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::unlock`]: [`LockError::ReleaseRefused`] if the
    /// server refused the delete (the node stays until the session ends),
    /// [`Error::Timeout`](crate::Error::Timeout) (as [`LockError::Client`])
    /// if it did not confirm in time (the delete goes on in the background
    /// while the session lives).
    pub fn close(self, mode: CloseMode) -> Result<(), LockError> {
        let (releases, was_leading) = self.start_close();
        let timeout = self.shared.election.queue_lock().client.request_timeout();
        let until = crate::deadline::after(Instant::now(), timeout);
        let mut result = Ok(());
        for release in &releases {
            result = result.and(release.wait(until));
        }
        self.shared.closed(mode, was_leading);
        result
    }

    /// [`LeaderLatch::close`] for async code: resolves once every node of
    /// the latch is gone (or the server refused a delete), woken by the I/O
    /// thread; no runtime is needed. The campaign stops and the releases
    /// are asked for at once, whether or not the future is polled or kept;
    /// like [`LockGuard::unlock_async`] it has no timer of its own, so bound
    /// it with your runtime's timeout. `mode`'s events come when it
    /// resolves.
    ///
    /// # Errors
    /// [`LockError::ReleaseRefused`] if the server refused a delete.
    pub fn close_async(
        self,
        mode: CloseMode,
    ) -> impl Future<Output = Result<(), LockError>> + Send {
        let (releases, was_leading) = self.start_close();
        let mut result = Ok(());
        let mut confirmed = 0;
        std::future::poll_fn(move |cx| {
            while let Some(release) = releases.get(confirmed) {
                let Poll::Ready(r) = release.poll(cx) else {
                    return Poll::Pending;
                };
                result = std::mem::replace(&mut result, Ok(())).and(r);
                confirmed += 1;
            }
            self.shared.closed(mode, was_leading);
            Poll::Ready(std::mem::replace(&mut result, Ok(())))
        })
    }

    /// Stops the campaign and asks for the release of every node of ours:
    /// what the releases say when they are done, and whether we led.
    fn start_close(&self) -> (Vec<Releasing>, bool) {
        let s = &self.shared;
        let (attempt, guard, mut releases, was_leading) = {
            let mut c = s.lock_current();
            s.stopped.store(true, Ordering::SeqCst);
            let was_leading = s.leading.swap(false, Ordering::SeqCst);
            let letting_go = std::mem::take(&mut c.letting_go);
            let attempts = [c.attempt.take(), c.failed.take()];
            (attempts, c.guard.take(), letting_go, was_leading)
        };
        s.notify();
        let queue = s.election.queue_lock();
        let timeout = queue.client.request_timeout();
        for id in attempt.into_iter().flatten() {
            // Granted meanwhile or not, its node goes, and we hear when.
            let (done, rx) = oneshot::channel();
            let release = LockCommand::Release {
                id,
                done: Some(done),
            };
            if queue.command_sender().lock(release) {
                releases.push(Releasing::of_attempt(rx, &queue.path, timeout));
            }
        }
        releases.extend(guard.and_then(LockGuard::start_release));
        (releases, was_leading)
    }
}

impl Drop for LeaderLatch {
    /// Withdraws: the campaign under way is given up, the leadership node
    /// released; nothing blocks.
    fn drop(&mut self) {
        let s = &self.shared;
        let (attempt, guard) = {
            let mut c = s.lock_current();
            s.stopped.store(true, Ordering::SeqCst);
            s.leading.store(false, Ordering::SeqCst);
            (c.attempt.take(), c.guard.take())
        };
        s.notify();
        if let Some(id) = attempt {
            // A grant on its way is released too.
            let queue = s.election.queue_lock();
            queue.command_sender().lock(LockCommand::Withdraw(id));
        }
        drop(guard);
    }
}

impl Shared {
    fn lock_current(&self) -> MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues for leadership; the outcome comes to `decided` on the I/O
    /// thread. The attempt is recorded before its outcome can be handled.
    fn campaign(shared: &Arc<Shared>) {
        let queue = shared.election.queue_lock();
        let weak = Arc::downgrade(shared);
        let outcome = |id| {
            Call(Arc::new(move |result| {
                if let Some(shared) = weak.upgrade() {
                    Shared::decided(&shared, id, result);
                }
            }))
        };
        let mut c = shared.lock_current();
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        match queue.start(Start::default(), outcome) {
            Ok(id) => c.attempt = Some(id),
            Err(e) => shared.stop(&c, e),
        }
    }

    /// The outcome of campaign `id`, on the I/O thread.
    fn decided(shared: &Arc<Shared>, id: AttemptId, result: Result<LockGuard, LockError>) {
        let mut c = shared.lock_current();
        if c.attempt == Some(id) {
            c.attempt = None;
        }
        let guard = match result {
            Ok(guard) => guard,
            Err(LockError::Cancelled) => return,
            // The session expired under the campaign: a client that opens
            // a new session campaigns on that one.
            Err(LockError::SessionExpired)
                if shared.election.queue_lock().client.renews_sessions() =>
            {
                drop(c);
                return Shared::campaign(shared);
            }
            Err(e) => {
                c.failed = Some(id);
                return shared.stop(&c, e);
            }
        };
        if shared.stopped.load(Ordering::SeqCst) {
            // Closed or dropped first: the guard releases as it drops (a
            // `close` waits for that node too).
            drop(c);
            return drop(guard);
        }
        // Leadership belongs to our session, not just to the first place.
        if !shared.election.is_ours(&guard) {
            drop(c);
            drop(guard);
            return Shared::campaign(shared);
        }
        let weak = Arc::downgrade(shared);
        guard.on_state_change(Arc::new(move |state| {
            if let Some(shared) = weak.upgrade() {
                Shared::holder_changed(&shared, state);
            }
        }));
        shared.set_leading(true);
        shared.tell(LatchEvent::Gained {
            fencing_token: guard.fencing_token(),
        });
        c.guard = Some(guard);
    }

    /// The leader's holder state changed.
    fn holder_changed(shared: &Arc<Shared>, state: LockState) {
        let mut c = shared.lock_current();
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        match state {
            LockState::Held => {
                if !shared.leading.load(Ordering::SeqCst) {
                    shared.set_leading(true);
                    shared.tell(LatchEvent::Resumed);
                }
            }
            LockState::Suspended => {
                shared.set_leading(false);
                shared.tell(LatchEvent::Suspended);
            }
            LockState::Lost => {
                shared.set_leading(false);
                let guard = c.guard.take();
                let reason = guard.as_ref().and_then(LockGuard::lost_reason);
                shared.tell(LatchEvent::Lost { reason });
                c.letting_go.retain(|r| !r.settled());
                c.letting_go
                    .extend(guard.and_then(LockGuard::start_release));
                drop(c);
                Shared::campaign(shared);
            }
        }
    }

    /// Stops for good with `error` (told once). Called with `current`
    /// locked (`_locked`), as every event is sent.
    fn stop(&self, _locked: &MutexGuard<'_, Current>, error: LockError) {
        self.set_leading(false);
        if !self.stopped.swap(true, Ordering::SeqCst) {
            self.tell(LatchEvent::Stopped(error));
        }
        self.notify();
    }

    fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
        self.notify();
    }

    /// Wakes `await_leadership` (under its lock, so no wake-up is lost
    /// between its look and its wait).
    fn notify(&self) {
        let held = self.changed_lock.lock();
        self.changed.notify_all();
        drop(held);
        self.tasks.wake_all();
    }

    /// Reports `event` (a reader a whole channel behind misses it).
    fn tell(&self, event: LatchEvent) {
        let _ = self.tx.try_send(event);
        self.tasks.wake_all();
    }

    /// A close is done: with [`CloseMode::NotifyLeader`], readers hear
    /// `Lost` (if we led) and `Closed`.
    fn closed(&self, mode: CloseMode, was_leading: bool) {
        if mode == CloseMode::NotifyLeader {
            if was_leading {
                self.tell(LatchEvent::Lost { reason: None });
            }
            self.tell(LatchEvent::Closed);
        }
    }
}
