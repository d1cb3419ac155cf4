//! The fair, herd-free exclusive lock (Curator's InterProcessMutex layout).

use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::acquire::{predecessor, Bounds, LockQueue};
use super::cancel::CancelToken;
use super::error::LockError;
use super::held::{HeldNode, LockState};
use super::inspect::{inspect, QueueEntry};
use super::registry::{self, Key};
use crate::{Client, Op, OpResult};

/// Names the lock node's data: who holds or waits. Default `hostname:pid`.
pub(crate) fn default_holder_data() -> Vec<u8> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id()).into_bytes()
}

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
    queue: LockQueue,
    reentrant: bool,
    watch_node: bool,
    current: StdMutex<Option<(ThreadId, Weak<Holding>)>>,
}

/// Options for a [`Mutex`].
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
}

/// One acquisition, shared by re-entrant guards.
#[derive(Debug)]
pub(crate) struct Holding {
    pub(crate) node: StdMutex<HeldNode>,
    key: Key,
}

impl Drop for Holding {
    fn drop(&mut self) {
        registry::remove(&self.key);
    }
}

impl Holding {
    pub(crate) fn new(client: &Client, node: HeldNode, path: &str) -> Holding {
        let key = (client.session_id(), path.to_owned());
        registry::insert(key.clone());
        Holding {
            node: StdMutex::new(node),
            key,
        }
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut HeldNode) -> T) -> T {
        match self.node.lock() {
            Ok(mut n) => f(&mut n),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

impl Mutex {
    /// A mutex on `path` with default options. Nothing is sent until a lock call.
    pub fn new(client: &Client, path: &str) -> Result<Mutex, LockError> {
        Mutex::with_options(client, path, MutexOptions::default())
    }

    pub fn with_options(
        client: &Client,
        path: &str,
        options: MutexOptions,
    ) -> Result<Mutex, LockError> {
        crate::validate_path(path, false)?;
        Ok(Mutex {
            queue: LockQueue {
                client: client.clone(),
                parent: path.to_owned(),
                marker: "-lock-",
                data: options.data.unwrap_or_else(default_holder_data),
                blocker: predecessor,
            },
            reentrant: options.reentrant,
            watch_node: !options.unwatched,
            current: StdMutex::new(None),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.queue.parent
    }

    /// Blocks until the lock is ours.
    pub fn lock(&self) -> Result<LockGuard, LockError> {
        self.lock_with(None, None)
    }

    /// Takes the lock only if that needs no waiting.
    pub fn try_lock(&self) -> Result<Option<LockGuard>, LockError> {
        match self.lock_with(Some(Instant::now()), None) {
            Ok(g) => Ok(Some(g)),
            Err(LockError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits at most `timeout` (one deadline for every retry inside).
    pub fn lock_timeout(&self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.lock_with(Some(Instant::now() + timeout), None)
    }

    /// Waits until `deadline` (if any) or until `cancel` (if any) is cancelled.
    pub fn lock_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        if let Some(holding) = self.reenter()? {
            return Ok(LockGuard { holding });
        }
        let bounds = Bounds { deadline, cancel };
        // A zero wait (try_lock) still gets its one round trip.
        let acquired = match self.queue.acquire(Bounds {
            deadline: deadline.map(|d| d.max(Instant::now() + Duration::from_millis(1))),
            ..bounds
        }) {
            Ok(a) => a,
            Err(e) => return Err(e),
        };
        let held = HeldNode::new(&self.queue.client, acquired, self.watch_node);
        let holding = Arc::new(Holding::new(&self.queue.client, held, &self.queue.parent));
        if let Ok(mut cur) = self.current.lock() {
            *cur = Some((std::thread::current().id(), Arc::downgrade(&holding)));
        }
        Ok(LockGuard { holding })
    }

    /// The current holding, when this thread may enter again; an error when
    /// it already holds and may not.
    fn reenter(&self) -> Result<Option<Arc<Holding>>, LockError> {
        let me = std::thread::current().id();
        if self.reentrant {
            if let Ok(cur) = self.current.lock() {
                if let Some((tid, weak)) = cur.as_ref() {
                    if *tid == me {
                        if let Some(h) = weak.upgrade() {
                            return Ok(Some(h));
                        }
                    }
                }
            }
        }
        let key = (self.queue.client.session_id(), self.queue.parent.clone());
        if registry::held_by_current_thread(&key) {
            return Err(LockError::WouldDeadlock);
        }
        Ok(None)
    }

    /// The queue as it stands: holder first, then waiters in order.
    pub fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        inspect(&self.queue.client, &self.queue.parent).map_err(LockError::from)
    }
}

/// Proof that the lock is held; releases it on drop.
///
/// The lock can still be lost while a guard exists (session expiry, a
/// deleted node): check [`LockGuard::state`] or listen to
/// [`LockGuard::state_changes`], and use [`LockGuard::fencing_token`] or
/// [`LockGuard::fenced`] where a stale holder must not write.
#[derive(Debug)]
pub struct LockGuard {
    holding: Arc<Holding>,
}

impl LockGuard {
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

    pub fn state(&self) -> LockState {
        self.holding.with(|n| n.state())
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
