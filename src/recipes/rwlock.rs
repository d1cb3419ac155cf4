//! The read/write lock, in Curator's InterProcessReadWriteLock layout: read
//! and write nodes (`_c_<uuid>-__READ__<seq>`, `_c_<uuid>-__WRIT__<seq>`)
//! queue together under one path.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::inspect::QueueEntry;
use super::mutex::lock_calls;
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::queue_lock::{QueueLock, Start};
use super::registry::Side;
use super::thread_call::{self, Target, ThreadCall};
use crate::Client;

/// Many readers or one writer.
///
/// A thread holding the write lock may take the read lock (a downgrade),
/// as Curator's `InterProcessReadWriteLock` allows: the read queues a read
/// node of its own behind the write node and holds at once, since that
/// write node is the thread's own. While the write guard stands nobody
/// else gets in; once it goes, the thread holds a read lock like any
/// other: other readers share it, writers wait for it. The read guard's
/// fencing token is its own node's. If another writer queued while the
/// write lock was held, it waits for the write node, and a read node
/// behind it could not keep it out: the read guard then shares the write
/// node instead (and its token), and nobody else gets in until both guards
/// are gone. A thread that holds a read lock and not the write lock is
/// refused the write lock with [`LockError::UpgradeRefused`]: two readers
/// upgrading would wait for each other forever.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::RwLock};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let lock = RwLock::new(&client, "/locks/config")?;
/// {
///     let _r = lock.read()?;
///     // read the shared state
/// }
/// let w = lock.write_timeout(Duration::from_secs(5))?;
/// println!("writing with token {}", w.fencing_token());
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct RwLock {
    read: Arc<QueueLock>,
    write: Arc<QueueLock>,
}

impl RwLock {
    /// A read/write lock on `path` with default options.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str) -> Result<RwLock, LockError> {
        RwLock::with_options(client, path, MutexOptions::default())
    }

    /// A read/write lock on `path`; the options apply to both sides.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path, or with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        path: &str,
        options: MutexOptions,
    ) -> Result<RwLock, LockError> {
        Ok(RwLock {
            read: Arc::new(QueueLock::new(
                client,
                path,
                "-__READ__",
                Rule::NearestWriter,
                Side::Shared,
                &options,
            )?),
            write: Arc::new(QueueLock::new(
                client,
                path,
                "-__WRIT__",
                Rule::Predecessor,
                Side::Exclusive,
                &options,
            )?),
        })
    }

    lock_calls!(
        read_with,
        read,
        try_read,
        read_timeout,
        LockGuard,
        "a read lock"
    );
    lock_calls!(
        write_with,
        write,
        try_write,
        write_timeout,
        LockGuard,
        "the write lock"
    );

    /// A read lock, waiting until `deadline` or cancellation for the
    /// nearest writer below us to go. Called while this thread holds the
    /// write lock, a downgrade (see [`RwLock`]): held at once, by a read
    /// node of its own that this thread's write node does not block (or, if
    /// another writer waits behind that write node, by a share of it).
    ///
    /// # Errors
    /// As [`Mutex::lock_with`](super::Mutex::lock_with).
    #[inline]
    pub fn read_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        let (read, write) = (&*self.read, &*self.write);
        let me = std::thread::current().id();
        ThreadCall::new(Target::Read { read, write }, me, deadline).run(cancel, None)
    }

    /// The write lock, waiting until `deadline` or cancellation for every
    /// node below us to go.
    ///
    /// # Errors
    /// [`LockError::UpgradeRefused`] if this thread holds a read lock and
    /// not the write lock; else as [`Mutex::lock_with`](super::Mutex::lock_with).
    #[inline]
    pub fn write_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        let (read, write) = (&*self.read, &*self.write);
        let me = std::thread::current().id();
        ThreadCall::new(Target::Write { read, write }, me, deadline).run(cancel, None)
    }

    pub(crate) fn read_side(&self) -> &QueueLock {
        &self.read
    }

    pub(crate) fn write_side(&self) -> &QueueLock {
        &self.write
    }

    /// Starts taking a read lock and returns at once; see [`PendingLock`].
    /// No downgrade: each call queues a read node of its own, which waits
    /// for every writer below it, this thread's included.
    pub fn start_read(&self, deadline: Option<Instant>) -> PendingLock {
        self.read.pending(Start::by(deadline))
    }

    /// Starts taking the write lock and returns at once; see [`PendingLock`].
    pub fn start_write(&self, deadline: Option<Instant>) -> PendingLock {
        self.write.pending(Start::by(deadline))
    }

    /// Starts taking a read lock for `thread` and returns at once, as
    /// [`Mutex::start_lock_for`](super::Mutex::start_lock_for) does: a
    /// downgrade, re-entry and refusal as `thread`'s own
    /// [`RwLock::read_with`] decides them.
    pub fn start_read_for(&self, thread: ThreadId, deadline: Option<Instant>) -> PendingLock {
        let (read, write) = (self.read.clone(), self.write.clone());
        thread_call::start(Target::Read { read, write }, thread, deadline)
    }

    /// Starts taking the write lock for `thread` and returns at once, as
    /// [`Mutex::start_lock_for`](super::Mutex::start_lock_for) does:
    /// [`LockError::UpgradeRefused`], re-entry and refusal as `thread`'s
    /// own [`RwLock::write_with`] decides them.
    pub fn start_write_for(&self, thread: ThreadId, deadline: Option<Instant>) -> PendingLock {
        let (read, write) = (self.read.clone(), self.write.clone());
        thread_call::start(Target::Write { read, write }, thread, deadline)
    }

    /// The queue: holders first, then waiters, readers and writers together.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)); a lock path that does not exist
    /// has an empty queue.
    pub fn queue(&self) -> Result<Vec<QueueEntry>, LockError> {
        self.write.queue()
    }
}
