//! The fair, herd-free exclusive lock (Curator's InterProcessMutex layout),
//! and the guard every recipe hands out.

use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::acquire::{predecessor, Bounds, LockQueue, Rule};
use super::cancel::CancelToken;
use super::error::LockError;
use super::held::{HeldNode, LockState, LossReason};
use super::inspect::{inspect, QueueEntry};
use super::registry::{self, Key, Side};
use crate::{Client, Op, OpResult};

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
    unwatched: bool,
}

impl MutexOptions {
    /// Data stored in our lock node (default `hostname:pid`), shown by inspection.
    pub fn data(mut self, data: &[u8]) -> Self {
        self.data = Some(data.to_vec());
        self
    }

    /// Lets the holding thread lock again; the lock is released when its last
    /// guard drops. Off by default: a second lock from the holder is an error.
    pub fn reentrant(mut self, yes: bool) -> Self {
        self.reentrant = yes;
        self
    }

    /// Whether a guard watches its own node (default: yes), so that it
    /// reports `Lost` the moment someone deletes the node. Without the watch,
    /// loss is still reported on session expiry, after reconnects and by
    /// fenced writes, and each acquisition costs one request less.
    pub fn watch_node(mut self, yes: bool) -> Self {
        self.unwatched = !yes;
        self
    }

    pub(crate) fn holder_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(default_holder_data)
    }
}

/// One acquisition, shared by re-entrant guards.
#[derive(Debug)]
pub(crate) struct Holding {
    node: StdMutex<HeldNode>,
    key: Key,
    thread: ThreadId,
}

impl Drop for Holding {
    fn drop(&mut self) {
        registry::remove(&self.key, self.thread);
    }
}

impl Holding {
    fn new(node: HeldNode, key: Key) -> Holding {
        let thread = std::thread::current().id();
        registry::insert(key.clone(), thread);
        Holding {
            node: StdMutex::new(node),
            key,
            thread,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HeldNode) -> T) -> T {
        match self.node.lock() {
            Ok(mut n) => f(&mut n),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

/// A queue lock of one side: the machinery behind Mutex, both halves of
/// RwLock and Election.
#[derive(Debug)]
pub(crate) struct QueueLock {
    pub(crate) queue: LockQueue,
    side: Side,
    reentrant: bool,
    watch_node: bool,
    current: StdMutex<Option<(ThreadId, Weak<Holding>)>>,
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
        crate::validate_path(path, false)?;
        Ok(QueueLock {
            queue: LockQueue {
                client: client.clone(),
                parent: path.to_owned(),
                marker,
                data: options.holder_data(),
                rule,
            },
            side,
            reentrant: options.reentrant,
            watch_node: !options.unwatched,
            current: StdMutex::new(None),
        })
    }

    pub(crate) fn key(&self, side: Side) -> Key {
        (
            self.queue.client.session_id(),
            self.queue.parent.clone(),
            side,
        )
    }

    /// This thread's live holding of this lock object, if any.
    pub(crate) fn held_here(&self) -> Option<Arc<Holding>> {
        let me = std::thread::current().id();
        let cur = self.current.lock().ok()?;
        let (tid, weak) = cur.as_ref()?;
        (*tid == me).then(|| weak.upgrade()).flatten()
    }

    pub(crate) fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        if self.reentrant {
            if let Some(holding) = self.held_here() {
                return Ok(LockGuard { holding });
            }
        }
        if self.side != Side::Lease && registry::held_by_current_thread(&self.key(self.side)) {
            return Err(LockError::WouldDeadlock);
        }
        // A zero wait (try_lock) still gets its one round trip.
        let deadline = deadline.map(|d| d.max(Instant::now() + Duration::from_millis(1)));
        let acquired = self.queue.acquire(Bounds { deadline, cancel })?;
        let held = HeldNode::new(&self.queue.client, acquired, self.watch_node);
        let holding = Arc::new(Holding::new(held, self.key(self.side)));
        if let Ok(mut cur) = self.current.lock() {
            *cur = Some((std::thread::current().id(), Arc::downgrade(&holding)));
        }
        Ok(LockGuard { holding })
    }

    pub(crate) fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        inspect(&self.queue.client, &self.queue.parent).map_err(LockError::from)
    }
}

/// Expands the four std-style lock calls over a `*_with(deadline, cancel)`.
macro_rules! lock_calls {
    ($with:ident, $block:ident, $try:ident, $timeout:ident, $guard:ty, $what:literal) => {
        #[doc = concat!("Blocks until ", $what, " is ours.")]
        pub fn $block(&self) -> Result<$guard, LockError> {
            self.$with(None, None)
        }

        #[doc = concat!("Takes ", $what, " only if that needs no waiting.")]
        pub fn $try(&self) -> Result<Option<$guard>, LockError> {
            match self.$with(Some(Instant::now()), None) {
                Ok(g) => Ok(Some(g)),
                Err(LockError::Timeout) => Ok(None),
                Err(e) => Err(e),
            }
        }

        #[doc = concat!("Waits at most `timeout` for ", $what, " (one deadline for every retry inside).")]
        pub fn $timeout(&self, timeout: Duration) -> Result<$guard, LockError> {
            self.$with(Some(Instant::now() + timeout), None)
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
    inner: QueueLock,
}

impl Mutex {
    /// A mutex on `path` with default options. Nothing is sent until a lock call.
    pub fn new(client: &Client, path: &str) -> Result<Mutex, LockError> {
        Mutex::with_options(client, path, MutexOptions::default())
    }

    /// A mutex on `path` with the given options.
    pub fn with_options(
        client: &Client,
        path: &str,
        options: MutexOptions,
    ) -> Result<Mutex, LockError> {
        Ok(Mutex {
            inner: QueueLock::new(
                client,
                path,
                "-lock-",
                Rule::Queue(predecessor),
                Side::Exclusive,
                &options,
            )?,
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.inner.queue.parent
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
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        self.inner.lock_with(deadline, cancel)
    }

    /// The queue as it stands: holder first, then waiters in order.
    pub fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        self.inner.queue()
    }
}

/// Proof that a lock (or read lock, or leadership) is held; releases on drop.
///
/// It can still be lost while the guard exists (session expiry, a deleted
/// node): check [`LockGuard::state`] or listen to
/// [`LockGuard::state_changes`], and use [`LockGuard::fencing_token`] or
/// [`LockGuard::fenced`] where a stale holder must not write.
#[derive(Debug)]
pub struct LockGuard {
    holding: Arc<Holding>,
}

impl LockGuard {
    pub(crate) fn from_holding(holding: Arc<Holding>) -> LockGuard {
        LockGuard { holding }
    }

    /// Our lock node's path.
    pub fn node_path(&self) -> String {
        self.holding.with(|n| n.path().to_owned())
    }

    /// The lock node's creation zxid: strictly increasing across holders of
    /// every lock in the ensemble. Pass it to the resources you protect and
    /// let them refuse a token lower than one they have seen.
    pub fn fencing_token(&self) -> i64 {
        self.holding.with(|n| n.stat().czxid)
    }

    /// The session that owns our node.
    pub fn owner_session(&self) -> i64 {
        self.holding.with(|n| n.stat().ephemeral_owner)
    }

    /// What the holder can rely on now (see [`LockState`]).
    pub fn state(&self) -> LockState {
        self.holding.with(|n| n.state())
    }

    /// Why the lock was lost, once [`LockGuard::state`] is `Lost`.
    pub fn lost_reason(&self) -> Option<LossReason> {
        self.holding.with(|n| n.lost_reason())
    }

    /// A channel that yields the current state, then every change.
    pub fn state_changes(&self) -> Receiver<LockState> {
        self.holding.with(|n| n.state_changes())
    }

    /// Applies `ops` atomically, only while our lock node exists.
    pub fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        self.holding.with(|n| n.fenced(ops))
    }

    /// Releases now and reports failure (the delete still goes on in the
    /// background if the server was unreachable). Re-entrant guards release
    /// when the last one goes.
    pub fn unlock(self) -> Result<(), LockError> {
        match Arc::try_unwrap(self.holding) {
            Ok(holding) => holding.with(|n| n.release()),
            Err(_) => Ok(()),
        }
    }
}
