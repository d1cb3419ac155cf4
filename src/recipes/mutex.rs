//! The fair, herd-free exclusive lock (Curator's InterProcessMutex layout),
//! and the guard every recipe hands out.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crossbeam_channel::Select;

use super::attempt::{LockSpec, Rule};
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::{Holding, LockGuard};
use super::held::LockState;
use super::inspect::{inspect, QueueEntry};
use super::pending::PendingLock;
use super::pending_thread::{PendingThreadLock, Target};
use super::registry::{self, Key, Side};
use super::service::{self, Outcome};
use crate::machine::AttemptId;
use crate::machine::CommandSender;
use crate::{Acl, Client, Error};

/// The default data of a lock node, naming who holds or waits:
/// `hostname:pid`. Tools acting for another process pass its pid.
pub fn holder_identity(pid: u32) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{pid}")
}

fn default_holder_data() -> Vec<u8> {
    holder_identity(std::process::id()).into_bytes()
}

/// Options shared by the lock recipes.
#[derive(Debug, Clone, Default)]
pub struct MutexOptions {
    data: Option<Vec<u8>>,
    reentrant: bool,
    watch_node: bool,
    revocable: bool,
    lock_delay: Option<Duration>,
    acl: Option<Vec<Acl>>,
    parent_acl: Option<Vec<Acl>>,
}

impl MutexOptions {
    /// Data stored in our lock node (default `hostname:pid`), shown by inspection.
    pub fn data(mut self, data: &[u8]) -> Self {
        self.data = Some(data.to_vec());
        self
    }

    /// Lets others ask the holder to release (Curator's revocation: a
    /// third party writes `__REVOKE__` into the holder's node, e.g. with
    /// [`revoke`](super::revoke) or Curator's `Revoker.attemptRevoke`); the
    /// guard then says so ([`LockGuard::revocation_requests`](super::LockGuard::revocation_requests)).
    /// Releasing stays the holder's choice. Implies
    /// [`watch_node`](Self::watch_node).
    pub fn revocable(mut self, yes: bool) -> Self {
        self.revocable = yes;
        self
    }

    /// Lock-delay (Chubby's and Consul's): when a holder ends uncleanly —
    /// its session expired or was closed, not a release — the next holder
    /// is granted only `delay` after it saw so, giving the old holder time
    /// to notice ([`LockState::Lost`](crate::recipes::LockState)) and stop
    /// before anyone else acts. The new guard says so
    /// ([`LockGuard::follows_unclean_end`](super::LockGuard::follows_unclean_end)).
    ///
    /// Each holder keeps a tenure mark, a persistent node
    /// `~tenure.<uuid>` beside its lock node, deleted with it on release in
    /// one write; a mark without its node is what an unclean end leaves.
    /// So every contender on the path should set the same delay: a
    /// holder without it leaves no mark, and its unclean end goes unseen.
    /// Curator's and kazoo's mutexes skip the marks (Curator's semaphore
    /// counts them as leases). A grant costs one listing and one write
    /// more. Without this option: no delay and no marks. A zero delay
    /// keeps the marks, to tell the next holder, and does not wait.
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// Lets the holding thread lock again; the lock is released when its last
    /// guard drops. Off by default: a second lock from the holder is an error.
    pub fn reentrant(mut self, yes: bool) -> Self {
        self.reentrant = yes;
        self
    }

    /// Whether a guard watches its own node, so that it reports `Lost` the
    /// moment a third party deletes the node (an operator breaking the
    /// lock). Off by default, as in Curator and kazoo: the watch costs one
    /// read per acquisition and one more notification per release. Without
    /// it, loss is still reported at once on session expiry or loss of
    /// contact, re-checked after every reconnect, and caught by
    /// [`LockGuard::fenced`](super::LockGuard::fenced) writes. Elections
    /// watch their leader's node always.
    pub fn watch_node(mut self, yes: bool) -> Self {
        self.watch_node = yes;
        self
    }

    /// The ACL of our lock nodes (default: open). With
    /// [`Acl::creator_all`] and an authenticated session, only this identity
    /// may change them; to stop others from deleting them, the lock path's
    /// ACL must also deny them DELETE (ZooKeeper checks it on the parent).
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// The ACL of the lock path and ancestors created on the way
    /// (default: open).
    pub fn parent_acl(mut self, acl: Vec<Acl>) -> Self {
        self.parent_acl = Some(acl);
        self
    }

    pub(crate) fn parent_acl_or_open(&self) -> Vec<Acl> {
        self.parent_acl.clone().unwrap_or_else(Acl::open_unsafe)
    }

    pub(crate) fn holder_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(default_holder_data)
    }
}

/// A queue lock of one side: the machinery behind Mutex, both halves of
/// RwLock, the semaphore and Election.
#[derive(Debug)]
pub(crate) struct QueueLock {
    pub(crate) client: Client,
    /// The lock path as the caller names it.
    pub(crate) path: String,
    spec: Arc<LockSpec>,
    side: Side,
    reentrant: bool,
    /// Per thread, the holding it last took here (for re-entry: readers
    /// of one process hold at once, each re-enters its own).
    taken: StdMutex<Vec<(ThreadId, Weak<Holding>)>>,
}

/// What a lock call from one thread does before (or instead of) queueing.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Shares a live holding of that thread: re-entry, or a write holder's
    /// read.
    Share(Arc<Holding>),
    /// Shares it once a read shows its node still ours: a holder that does
    /// not watch its node cannot know it was deleted.
    Confirm(Arc<Holding>),
    /// Refused: waiting would be waiting for ourselves.
    Refuse(LockError),
    Queue,
}

impl QueueLock {
    pub(crate) fn new(
        client: &Client,
        path: &str,
        marker: &'static str,
        rule: Rule,
        side: Side,
        options: &MutexOptions,
    ) -> Result<QueueLock, LockError> {
        let parent = client.to_server_path(path, false)?;
        Ok(QueueLock {
            client: client.clone(),
            path: path.to_owned(),
            spec: Arc::new(LockSpec {
                parent,
                marker,
                data: options.holder_data(),
                acl: options.acl.clone().unwrap_or_else(Acl::open_unsafe),
                parent_acl: options.parent_acl.clone().unwrap_or_else(Acl::open_unsafe),
                rule,
                watch_node: options.watch_node || options.revocable,
                revocable: options.revocable,
                lock_delay: options.lock_delay,
            }),
            side,
            reentrant: options.reentrant,
            taken: StdMutex::new(Vec::new()),
        })
    }

    pub(crate) fn key(&self, side: Side) -> Key {
        (self.client.session_id(), self.path.clone(), side)
    }

    /// `thread`'s live holding of this lock object, if any. One already
    /// Lost is not shared: the lock is no longer ours to re-enter.
    pub(crate) fn held_by(&self, thread: ThreadId) -> Option<Arc<Holding>> {
        let taken = self.taken.lock().ok()?;
        let (_, weak) = taken.iter().find(|(t, _)| *t == thread)?;
        let holding = weak.upgrade()?;
        (holding.state() != LockState::Lost).then_some(holding)
    }

    /// How a call shares `holding`: at once if the holder watches its node.
    pub(crate) fn share(&self, holding: Arc<Holding>) -> Entry {
        if self.spec.watch_node {
            Entry::Share(holding)
        } else {
            Entry::Confirm(holding)
        }
    }

    /// What a lock call from `thread` does first: re-enter its holding
    /// (when re-entrant), refuse (it holds the lock already), or queue.
    /// Leases are not refused: a thread may hold several.
    pub(crate) fn entry(&self, thread: ThreadId) -> Entry {
        if self.reentrant {
            if let Some(holding) = self.held_by(thread) {
                return self.share(holding);
            }
        }
        if self.side != Side::Lease && registry::held_by(&self.key(self.side), thread) {
            return Entry::Refuse(LockError::WouldDeadlock);
        }
        Entry::Queue
    }

    /// Records that `thread` took `guard` from the queue.
    pub(crate) fn record(&self, guard: &mut LockGuard, thread: ThreadId) {
        guard.register_owner(self.key(self.side), thread);
        if let Ok(mut taken) = self.taken.lock() {
            taken.retain(|(t, weak)| *t != thread && weak.strong_count() > 0);
            taken.push((thread, Arc::downgrade(guard.holding())));
        }
    }

    /// The deadline a call made at `now` runs to, and whether it is a try:
    /// a deadline already past still gets one round trip, bounded by the
    /// request timeout, rather than timing out before it is sent.
    pub(crate) fn call_deadline(
        &self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> (Option<Instant>, bool) {
        match deadline {
            Some(d) if d <= now => (
                Some(crate::deadline::after(now, self.client.request_timeout())),
                true,
            ),
            _ => (deadline, false),
        }
    }

    /// Starts an acquisition and returns at once.
    pub(crate) fn start(&self, deadline: Option<Instant>) -> PendingLock {
        service::start(&self.client, self.spec.clone(), deadline, false)
    }

    /// Starts an acquisition as `lock_with` would at `now`: a deadline
    /// already past makes it a try (one round trip, bounded by the request
    /// timeout) rather than an attempt that times out before it is sent.
    /// The second value says it is a try: its outcome alone ends it.
    pub(crate) fn start_at(&self, now: Instant, deadline: Option<Instant>) -> (PendingLock, bool) {
        let (deadline, no_wait) = self.call_deadline(now, deadline);
        (self.start_call(deadline, no_wait), no_wait)
    }

    /// Starts an acquisition to `deadline`, as a try if `no_wait` (see
    /// [`QueueLock::call_deadline`]).
    pub(crate) fn start_call(&self, deadline: Option<Instant>, no_wait: bool) -> PendingLock {
        service::start(&self.client, self.spec.clone(), deadline, no_wait)
    }

    /// Releases `guard` and queues again, in one write when `guard` holds
    /// this lock on this client (else it is dropped, which releases it,
    /// and an acquisition starts).
    pub(crate) fn requeue(&self, guard: LockGuard, deadline: Option<Instant>) -> PendingLock {
        let parent = guard.node_path().rsplit_once('/').map(|(p, _)| p);
        let ours = parent == Some(self.path.trim_end_matches('/'))
            && guard.owner_session() == self.client.session_id();
        match ours.then(|| guard.into_requeue()).flatten() {
            Some(old) => service::requeue(&self.client, old, self.spec.clone(), deadline),
            None => self.start(deadline),
        }
    }

    /// Starts an acquisition whose outcome goes to `outcome`; what it
    /// takes to give it up, or the error that stopped it from starting.
    pub(crate) fn start_to<O: Outcome>(
        &self,
        deadline: Option<Instant>,
        outcome: O,
    ) -> Result<(AttemptId, CommandSender), LockError> {
        let id = service::start_to(&self.client, self.spec.clone(), deadline, false, outcome);
        Ok((id, self.client.command_sender()))
    }

    /// Blocks until held, `deadline` (a deadline already past: one round
    /// trip, as a try-lock) or cancellation. The wait is bounded here, by
    /// the caller's clock, whatever the network does.
    ///
    /// Inlined, so that a call without a token (`lock()`, `try_lock()`,
    /// `lock_timeout()`) links only the wait without one.
    #[inline]
    pub(crate) fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        self.lock_entered(|thread| self.entry(thread), deadline, cancel)
    }

    /// [`QueueLock::lock_with`], with `entry` deciding what the calling
    /// thread does before it queues (a read/write lock's sides decide
    /// with each other).
    #[inline]
    pub(crate) fn lock_entered(
        &self,
        entry: impl Fn(ThreadId) -> Entry,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        match cancel {
            None => self.lock_waiting(entry, deadline, |q, deadline, no_wait| {
                q.wait_blocked(deadline, no_wait)
            }),
            Some(c) => self.lock_waiting(entry, deadline, |q, deadline, no_wait| {
                if c.is_cancelled() {
                    return Err(LockError::Cancelled);
                }
                q.wait_cancellable(deadline, no_wait, c)
            }),
        }
    }

    /// [`QueueLock::lock_entered`], waiting with `wait` (called with the
    /// deadline and whether this is a try-lock) once the lock is neither
    /// shared nor refused. The polled form, the same steps without
    /// blocking, is [`PendingThreadLock`](super::PendingThreadLock).
    fn lock_waiting(
        &self,
        entry: impl Fn(ThreadId) -> Entry,
        deadline: Option<Instant>,
        wait: impl FnOnce(&QueueLock, Option<Instant>, bool) -> Result<LockGuard, LockError>,
    ) -> Result<LockGuard, LockError> {
        let me = std::thread::current().id();
        // A try still gets its round trip (the confirming read's too).
        let (deadline, no_wait) = self.call_deadline(Instant::now(), deadline);
        // A confirming read that finds our node gone makes that holding
        // Lost: the second look does not see it.
        for first in [true, false] {
            match entry(me) {
                Entry::Share(holding) => return Ok(LockGuard::from_holding(holding)),
                Entry::Confirm(holding) if first => {
                    if holding.confirm(deadline)? {
                        return Ok(LockGuard::from_holding(holding));
                    }
                }
                Entry::Refuse(e) => return Err(e),
                Entry::Confirm(_) | Entry::Queue => break,
            }
        }
        let mut guard = wait(self, deadline, no_wait)?;
        self.record(&mut guard, me);
        Ok(guard)
    }

    /// The outcome for a thread that only waits: on a oneshot, which parks
    /// at once (see `crate::oneshot`).
    fn wait_blocked(
        &self,
        deadline: Option<Instant>,
        no_wait: bool,
    ) -> Result<LockGuard, LockError> {
        let (id, outcome) =
            service::start_blocking(&self.client, self.spec.clone(), deadline, no_wait);
        let received = match deadline {
            None => outcome.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => outcome.recv_deadline(d),
        };
        match received {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                // Refuse a late guard (it releases itself), then give the
                // attempt up.
                drop(outcome);
                service::cancel(&self.client, id);
                Err(LockError::Timeout)
            }
            Err(RecvTimeoutError::Disconnected) => Err(LockError::Client(Error::Closed)),
        }
    }

    /// The outcome, or `cancel`, or the deadline, whichever comes first.
    fn wait_cancellable(
        &self,
        deadline: Option<Instant>,
        no_wait: bool,
        cancel: &CancelToken,
    ) -> Result<LockGuard, LockError> {
        let pending = service::start(&self.client, self.spec.clone(), deadline, no_wait);
        let mut select = Select::new();
        let outcome = select.recv(pending.receiver());
        select.recv(cancel.receiver());
        let chosen = match deadline {
            Some(d) => select.select_deadline(d),
            None => Ok(select.select()),
        };
        // Dropping `pending` without an outcome taken gives the attempt up.
        match chosen {
            Ok(op) if op.index() == outcome => {
                let r = op.recv(pending.receiver());
                pending.mark_taken();
                r.unwrap_or(Err(LockError::Client(Error::Closed)))
            }
            Ok(op) => {
                let _ = op.recv(cancel.receiver());
                Err(LockError::Cancelled)
            }
            Err(_) => Err(LockError::Timeout),
        }
    }

    pub(crate) fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        inspect(&self.client, &self.path).map_err(LockError::from)
    }
}

/// Expands the four std-style lock calls over a `*_with(deadline, cancel)`.
macro_rules! lock_calls {
    ($with:ident, $block:ident, $try:ident, $timeout:ident, $guard:ty, $what:literal) => {
        #[doc = concat!("Blocks until ", $what, " is ours.")]
        ///
        /// # Errors
        #[doc = concat!("As [`Self::", stringify!($with), "`], with no deadline and no cancel.")]
        pub fn $block(&self) -> Result<$guard, LockError> {
            self.$with(None, None)
        }

        #[doc = concat!("Takes ", $what, " only if that needs no waiting (one round trip).")]
        ///
        /// # Errors
        #[doc = concat!("As [`Self::", stringify!($with), "`]; where it would have to wait, `Ok(None)`.")]
        pub fn $try(&self) -> Result<Option<$guard>, LockError> {
            match self.$with(Some(Instant::now()), None) {
                Ok(g) => Ok(Some(g)),
                Err(LockError::Timeout) => Ok(None),
                Err(e) => Err(e),
            }
        }

        #[doc = concat!("Waits at most `timeout` for ", $what, " (one deadline for every retry inside).")]
        ///
        /// # Errors
        #[doc = concat!("[`LockError::Timeout`] if `timeout` passes first; else as [`Self::", stringify!($with), "`].")]
        pub fn $timeout(&self, timeout: Duration) -> Result<$guard, LockError> {
            self.$with(Some(crate::deadline::from_now(timeout)), None)
        }
    };
}
pub(crate) use lock_calls;

/// A distributed exclusive lock on a ZooKeeper path.
///
/// Fair (first come, first served), herd-free (each waiter watches only the
/// node before it) and interoperable: its nodes are named like Curator's
/// `InterProcessMutex` (`_c_<uuid>-lock-<seq>`), and Curator's and kazoo's
/// nodes on the same path count as contenders.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::Mutex};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let mutex = Mutex::new(&client, "/locks/nightly-job")?;
/// if let Some(guard) = mutex.try_lock()? {
///     println!("fencing token {}", guard.fencing_token());
///     // ... the work; the lock is released when `guard` drops.
/// }
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct Mutex {
    inner: Arc<QueueLock>,
}

impl Mutex {
    /// A mutex on `path` with default options. Nothing is sent until a lock call.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str) -> Result<Mutex, LockError> {
        Mutex::with_options(client, path, MutexOptions::default())
    }

    /// A mutex on `path` with the given options.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn with_options(
        client: &Client,
        path: &str,
        options: MutexOptions,
    ) -> Result<Mutex, LockError> {
        Ok(Mutex {
            inner: Arc::new(QueueLock::new(
                client,
                path,
                "-lock-",
                Rule::Predecessor,
                Side::Exclusive,
                &options,
            )?),
        })
    }

    /// Releases `guard` and queues for the lock again, in one write: the
    /// delete of our node and the create of the next one go to the server
    /// as one `multi`, one commit where a release and a new acquisition
    /// take two. For a holder that loops over the same lock. Returns at
    /// once; wait on the [`PendingLock`] (or `.await` it).
    ///
    /// Fair: the new node queues behind every waiter, as a release and a
    /// new acquisition would. A guard of another lock, or one re-entrant
    /// guards still share, is released as usual and a plain acquisition
    /// starts. With [lock-delay](MutexOptions::lock_delay), and while
    /// disconnected, the core does the two steps one after the other.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::Mutex};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let lock = Mutex::new(&client, "/locks/batches")?;
    /// let mut guard = lock.lock()?;
    /// for batch in 0..3 {
    ///     println!("batch {batch} under token {}", guard.fencing_token());
    ///     guard = lock.requeue(guard, None).wait()?;
    /// }
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn requeue(&self, guard: LockGuard, deadline: Option<Instant>) -> PendingLock {
        self.inner.requeue(guard, deadline)
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    pub(crate) fn queue_lock(&self) -> &QueueLock {
        &self.inner
    }

    /// Starts taking the lock and returns at once; see [`PendingLock`].
    /// `deadline`: when to give up with [`LockError::Timeout`]. Not
    /// re-entrant: each call queues a node of its own.
    pub fn start_lock(&self, deadline: Option<Instant>) -> PendingLock {
        self.inner.start(deadline)
    }

    /// Starts taking the lock for `thread` and returns at once; see
    /// [`PendingThreadLock`]: re-entry and [`LockError::WouldDeadlock`] as
    /// `thread`'s own [`Mutex::lock_with`] decides them, polled.
    pub fn start_lock_for(&self, thread: ThreadId, deadline: Option<Instant>) -> PendingThreadLock {
        PendingThreadLock::new(Target::One(self.inner.clone()), thread, deadline)
    }

    lock_calls!(
        lock_with,
        lock,
        try_lock,
        lock_timeout,
        LockGuard,
        "the lock"
    );

    /// Waits until `deadline` (if any) or until `cancel` (if any) is cancelled.
    /// A connection lost meanwhile is no error: the wait goes on across
    /// reconnects, for as long as the session lives.
    ///
    /// # Errors
    /// * [`LockError::Timeout`] at `deadline`, [`LockError::Cancelled`] on
    ///   `cancel`: our node has been removed (in the background);
    /// * [`LockError::WouldDeadlock`]: this thread holds the lock already, and
    ///   it is not [re-entrant](MutexOptions::reentrant);
    /// * [`LockError::SessionExpired`], or [`LockError::Client`] with
    ///   [`Error::Closed`] or [`Error::AuthFailed`]: the session ended;
    /// * [`LockError::Client`] with the server's refusal (an ACL:
    ///   [`ErrorCode::NoAuth`](crate::ErrorCode::NoAuth)).
    #[inline]
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        self.inner.lock_with(deadline, cancel)
    }

    /// The queue as it stands: holder first, then waiters in order.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)); a lock path that does not exist
    /// has an empty queue.
    pub fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        self.inner.queue()
    }
}
