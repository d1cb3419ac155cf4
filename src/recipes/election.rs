//! Leader election on a lock queue: the lowest candidate leads (Curator's
//! LeaderLatch naming, `_c_<uuid>-latch-<seq>`).

use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::inspect::inspect;
use super::mutex::lock_calls;
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::queue::sorted_contenders;
use super::queue_lock::{QueueLock, Start};
use super::registry::Side;
use super::thread_call;
use crate::{Client, Watch};

/// A candidate in an election. Each candidate watches only the one before
/// it, so a change of leader wakes one process.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::Election};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let election = Election::new(&client, "/election/scheduler", b"node-a")?;
/// let leadership = election.campaign()?;
/// // Lead until the guard drops or reports Lost.
/// println!("leading with token {}", leadership.fencing_token());
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct Election {
    inner: QueueLock,
}

/// The current leader, as others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The id the leader campaigned with.
    pub id: Vec<u8>,
    /// The leader's node name under the election path.
    pub node: String,
    /// The leader's session: leadership belongs to a session, not a position.
    pub session: i64,
}

impl Election {
    /// A candidate that will announce itself as `id` (stored in its node).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str, id: &[u8]) -> Result<Election, LockError> {
        Election::with_options(client, path, id, MutexOptions::default())
    }

    /// Like [`Election::new`], with options (ACLs,
    /// [lock-delay](MutexOptions::lock_delay), a
    /// [max hold](MutexOptions::max_hold) of leadership); `id` replaces the
    /// options' data, and a candidate always watches its node.
    ///
    /// # Errors
    /// As [`Election::new`]; [`LockError::Client`] with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        path: &str,
        id: &[u8],
        options: MutexOptions,
    ) -> Result<Election, LockError> {
        let options = options.data(id).watch_node(true);
        Ok(Election {
            inner: QueueLock::new(
                client,
                path,
                "-latch-",
                Rule::Predecessor,
                Side::Exclusive,
                &options,
            )?,
        })
    }

    lock_calls!(
        campaign_with,
        campaign,
        try_campaign,
        campaign_timeout,
        LockGuard,
        "leadership"
    );

    /// Starts campaigning and returns at once; the outcome arrives on the
    /// [`PendingLock`] (leadership as a guard, or why not). `deadline`: when
    /// to give up with [`LockError::Timeout`]. Each call queues a candidate
    /// of its own.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, recipes::Election};
    ///
    /// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
    /// let election = Election::new(&client, "/election/scheduler", b"node-a")?;
    /// let pending = election.start_campaign(None);
    /// // ... other work; then:
    /// let leadership = pending.wait_timeout(Duration::from_secs(30))?;
    /// # Ok::<(), zklock::recipes::LockError>(())
    /// ```
    pub fn start_campaign(&self, deadline: Option<Instant>) -> PendingLock {
        self.inner.pending(Start::by(deadline))
    }

    /// Campaigns until leader, `deadline` or cancellation. The guard reports
    /// `Lost` if our session expires or our node disappears.
    ///
    /// # Errors
    /// [`LockError::Lost`] if the node that won is not our session's
    /// (campaign again); else as
    /// [`Mutex::lock_with`](super::Mutex::lock_with).
    #[inline]
    pub fn campaign_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        let guard = thread_call::lock_with(&self.inner, deadline, cancel)?;
        // Leadership belongs to our session, not just to the first position.
        if !self.is_ours(&guard) {
            return Err(LockError::Lost);
        }
        Ok(guard)
    }

    /// The leader updates the value it campaigned with (its node's data),
    /// keeping leadership; observers see the new value (etcd's Proclaim).
    ///
    /// # Errors
    /// [`LockError::Lost`] if `guard`'s node is gone (leadership already
    /// ended; the guard reports `Lost` too); [`LockError::Client`] with the
    /// client's error otherwise.
    pub fn proclaim(&self, guard: &LockGuard, value: &[u8]) -> Result<(), LockError> {
        match self.inner.client.set_data(guard.node_path(), value, None) {
            Ok(_) => Ok(()),
            Err(e) if e.is_no_node() => Err(LockError::Lost),
            Err(e) => Err(e.into()),
        }
    }

    /// Follows the leadership without campaigning (etcd's Observe): each
    /// [`LeaderObserver::next`] returns the leader (or none) once it differs
    /// from the last one returned, a new value proclaimed included.
    pub fn observe(&self) -> LeaderObserver<'_> {
        LeaderObserver {
            election: self,
            last: None,
            first: true,
        }
    }

    /// Whether `guard`'s node is owned by this client's session.
    pub(crate) fn is_ours(&self, guard: &LockGuard) -> bool {
        guard.owner_session() == self.inner.client.session_id()
    }

    pub(crate) fn queue_lock(&self) -> &QueueLock {
        &self.inner
    }

    /// The current leader, if any.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)); a lock path that does not exist
    /// has no leader.
    pub fn leader(&self) -> Result<Option<Leader>, LockError> {
        let queue = inspect(&self.inner.client, &self.inner.path)?;
        Ok(queue.into_iter().next().map(|e| Leader {
            id: e.data,
            node: e.name,
            session: e.owner_session,
        }))
    }

    /// The current leader and a watch that fires when leadership may have
    /// changed: the leader's node is deleted or its value proclaimed anew,
    /// or, with no leader, a candidate appears. Look again after it fires.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)).
    pub fn watch_leader(&self) -> Result<(Option<Leader>, Watch), LockError> {
        let client = &self.inner.client;
        let parent = &self.inner.path;
        loop {
            // Each answer comes from the read that set its watch, so no
            // change can fall between what we saw and what we watch.
            let first = match client.get_children_and_watch(parent) {
                Ok((children, _, w)) => match sorted_contenders(&children).into_iter().next() {
                    Some(first) => first,
                    None => return Ok((None, w)),
                },
                Err(e) if e.is_no_node() => match client.exists_and_watch(parent)? {
                    (None, w) => return Ok((None, w)),
                    // Created in between: look again.
                    (Some(_), _) => continue,
                },
                Err(e) => return Err(e.into()),
            };
            let path = format!("{}/{}", parent.trim_end_matches('/'), first.name);
            match client.get_data_and_watch(&path) {
                Ok((id, stat, w)) => {
                    let leader = Leader {
                        id,
                        node: first.name,
                        session: stat.ephemeral_owner,
                    };
                    return Ok((Some(leader), w));
                }
                // Stepped down since the listing: look again.
                Err(e) if e.is_no_node() => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Leader changes, read by any client without campaigning; see
/// [`Election::observe`]. The caller's thread waits on one watch at a time.
#[derive(Debug)]
pub struct LeaderObserver<'a> {
    election: &'a Election,
    last: Option<Leader>,
    first: bool,
}

impl LeaderObserver<'_> {
    /// Waits at most `timeout` for the leadership to differ from the last
    /// answer (the first call answers at once): `Ok(Some(leader))`, or
    /// `Ok(None)` when nobody leads.
    ///
    /// # Errors
    /// [`LockError::Timeout`] if nothing changed in time;
    /// [`LockError::Client`] with the client's error.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Leader>, LockError> {
        let deadline = crate::deadline::after(Instant::now(), timeout);
        loop {
            let (leader, watch) = self.election.watch_leader()?;
            if self.first || leader != self.last {
                self.first = false;
                self.last = leader.clone();
                return Ok(leader);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match watch.recv_timeout(left) {
                Ok(_) => continue,
                Err(crate::Error::Timeout) => return Err(LockError::Timeout),
                // The connection dropped: the watch is re-armed; look again.
                Err(e) if e.is_connection_loss() => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
