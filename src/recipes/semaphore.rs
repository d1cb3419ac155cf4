//! A counting semaphore in Curator's InterProcessSemaphoreV2 layout:
//! `<path>/locks` is a mutex that admits one waiter at a time, and
//! `<path>/leases` holds one node per lease (`_c_<uuid>-lease-<seq>`).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::mutex::lock_calls;
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::queue_lock::{QueueLock, Start};
use super::registry::Side;
use super::thread_call;
use jute::{CreateRequest, PathWatch, Request, Response, SetDataRequest};

use crate::{Acl, Client, CreateMode, Error, ErrorCode, Watch};

/// At most `max_leases` holders at once.
///
/// The number of leases is stored in the data of the semaphore path (as
/// kazoo does): the first user writes it, and a user asking for another
/// number is refused with [`LockError::MaxLeasesMismatch`], so that no two
/// leases are handed out under different numbers on one path. The path is
/// a container: the server deletes it once it stands empty (its reaper
/// runs every minute by default, `znode.container.checkIntervalMs`), its
/// data with it, and the next user makes it anew with its own number. So
/// the read that finds the number agreeing leaves a watch on the path, and
/// the number is read again whenever that watch has fired (the path was
/// deleted or written): before queueing, once the gate is ours, and once
/// the lease is granted; a lease granted on a path that says another
/// number is released, not handed out. While the watch is quiet no read is
/// made: ZooKeeper tells a session of a change to a watched node before
/// any reply that follows the change, so a lease granted then sits on the
/// path that was checked (its node keeps that path in place while held).
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, recipes::Semaphore};
///
/// let client = Client::connect("127.0.0.1:2181", Duration::from_secs(10))?;
/// let slots = Semaphore::new(&client, "/semaphores/gpu", 4)?;
/// let lease = slots.acquire_timeout(Duration::from_secs(30))?;
/// // ... use one of the four slots; the lease returns when `lease` drops.
/// # drop(lease);
/// # Ok::<(), zklock::recipes::LockError>(())
/// ```
#[derive(Debug)]
pub struct Semaphore {
    gate: QueueLock,
    leases: QueueLock,
    /// The semaphore path, which stores the number of leases (as kazoo's).
    path: String,
    max_leases: usize,
    /// ACL of the semaphore path, when this object creates it.
    acl: Vec<Acl>,
    /// ACL of the folders above it, when this object creates them.
    ancestor_acl: Vec<Acl>,
    /// The watch left by the last read that found the stored number to
    /// agree: while it has not fired, the path is the one that read found,
    /// with the same data.
    checked: Mutex<Option<Watch>>,
}

impl Semaphore {
    /// A semaphore on `path` granting at most `max_leases` leases (at least 1).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path.
    pub fn new(client: &Client, path: &str, max_leases: usize) -> Result<Semaphore, LockError> {
        Semaphore::with_options(client, path, max_leases, MutexOptions::default())
    }

    /// Like [`Semaphore::new`]; the options' data names each lease holder.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`](crate::Error::InvalidPath)
    /// if `path` is not a valid ZooKeeper path, or with
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) if an option
    /// cannot work (a zero [`max_hold`](MutexOptions::max_hold)).
    pub fn with_options(
        client: &Client,
        path: &str,
        max_leases: usize,
        options: MutexOptions,
    ) -> Result<Semaphore, LockError> {
        let base = path.trim_end_matches('/');
        let mut gate_options = options.clone().watch_node(false);
        // The gate admits one waiter at a time to the lease queue and
        // guards no resource: a waiter that ends uncleanly inside it holds
        // no lease, and a delay there would only lock the leases out.
        gate_options.lock_delay = None;
        // Nor a max hold: the gate is held only while a lease is queued,
        // and the leases have theirs.
        gate_options.max_hold = None;
        Ok(Semaphore {
            path: base.to_owned(),
            max_leases: max_leases.max(1),
            acl: options.parent_acl_or_open(),
            ancestor_acl: options.ancestor_acl_or_open(),
            checked: Mutex::new(None),
            gate: QueueLock::new(
                client,
                &format!("{base}/locks"),
                "-lock-",
                Rule::Predecessor,
                Side::Lease,
                &gate_options,
            )?,
            leases: QueueLock::new(
                client,
                &format!("{base}/leases"),
                "-lease-",
                Rule::FirstN(max_leases.max(1)),
                Side::Lease,
                &options,
            )?,
        })
    }

    /// Starts taking a lease and returns at once; see [`PendingLock`]
    /// (a `Future` too). Unlike [`Semaphore::acquire_with`] it passes no
    /// gate, so every waiter watches the lease queue (each change costs
    /// every waiter one listing), and it does not check the number of
    /// leases stored on the path: both would block. Use it for a few
    /// waiters per process, and only where every user of the path asks for
    /// the same number: a check by an earlier [`Semaphore::acquire`] does
    /// not cover the path made anew after the server deleted it idle, nor
    /// does a path this call makes anew get the number written.
    pub fn start_acquire(&self, deadline: Option<Instant>) -> PendingLock {
        self.leases.pending(Start::by(deadline))
    }

    lock_calls!(
        acquire_with,
        acquire,
        try_acquire,
        acquire_timeout,
        LockGuard,
        "a lease"
    );

    /// Waits for a lease until `deadline` or cancellation. The gate mutex is
    /// held only while waiting, so one process at a time watches the leases.
    ///
    /// The stored number is checked as [`Semaphore`] says: read (before
    /// queueing, once the gate is ours, once the lease is granted) only
    /// before this value's first check or once the watch it left has fired.
    ///
    /// # Errors
    /// [`LockError::MaxLeasesMismatch`] if the semaphore path stores another
    /// number of leases; [`LockError::Client`] if the path could not be read
    /// or created, or its data changed on every one of several reads; else
    /// as [`Mutex::lock_with`](super::Mutex::lock_with) (a thread may hold
    /// several leases: never `WouldDeadlock`).
    pub fn acquire_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        // A deadline already past (try_acquire) still gets its round trips.
        let bound = deadline.filter(|d| *d > Instant::now());
        self.check(bound)?;
        let gate = thread_call::lock_with(&self.gate, deadline, cancel)?;
        // The path may have gone and come back since the check, so that
        // the gate node sits on one made anew: refuse before waiting for
        // a lease under another number.
        self.check(bound)?;
        let lease = thread_call::lock_with(&self.leases, deadline, cancel);
        drop(gate);
        let lease = lease?;
        // What the guarantee rests on: the lease node keeps the path it
        // was created on in place, and a watch still quiet now says that
        // is the path checked. Else read it again; on an error the lease
        // goes with the guard.
        self.check(bound)?;
        Ok(lease)
    }

    /// [`Semaphore::check_max_leases`], the caller's deadline reached
    /// reported as a [`LockError::Timeout`].
    fn check(&self, bound: Option<Instant>) -> Result<(), LockError> {
        match self.check_max_leases(bound) {
            Err(LockError::Client(Error::Timeout))
                if bound.is_some_and(|d| Instant::now() >= d) =>
            {
                Err(LockError::Timeout)
            }
            other => other,
        }
    }

    /// Whether the watch left by the last read that found the number to
    /// agree is still quiet; one that fired (or can no longer fire) is
    /// forgotten, so the next check reads again.
    fn still_checked(&self) -> bool {
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(checked.as_ref().map(Watch::try_recv), Some(Ok(None))) {
            return true;
        }
        *checked = None;
        false
    }

    /// The number of leases is stored on the semaphore path: the first user
    /// writes it, later users must agree (kazoo does the same), or two
    /// kinds of users would admit different numbers of holders. Read again
    /// whenever the watch set by the last agreeing read has fired: the
    /// path may have been deleted and made anew with other data.
    fn check_max_leases(&self, deadline: Option<Instant>) -> Result<(), LockError> {
        if self.still_checked() {
            return Ok(());
        }
        let client = &self.gate.client;
        let asked = self.max_leases;
        let ours = asked.to_string().into_bytes();
        let server_path = client.to_server_path(&self.path, false)?;
        // Every call bounded by the caller's deadline, not only the client's.
        let call = |request| client.call_by(request, deadline);
        for _ in 0..5 {
            let read = client.call_watch_by(
                Request::GetData(PathWatch {
                    path: server_path.clone(),
                    watch: true,
                }),
                deadline,
            );
            let (data, stat, watch) = match read {
                Ok((Response::Data { data, stat }, watch)) => (data, stat, watch),
                Ok((other, _)) => return Err(Error::Protocol(format!("{other:?}")).into()),
                Err(e) if e.is_no_node() => {
                    // Made with the number in it (a queue that makes the
                    // path leaves it empty: filled below).
                    for path in crate::path::ancestors(&server_path) {
                        let (data, acl) = if path == server_path {
                            (ours.clone(), self.acl.clone())
                        } else {
                            (Vec::new(), self.ancestor_acl.clone())
                        };
                        let create = Request::CreateContainer(CreateRequest {
                            path,
                            data,
                            acl,
                            mode: CreateMode::Container,
                        });
                        match call(create) {
                            Ok(_) => {}
                            Err(e) if e.is_node_exists() => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if data.is_empty() {
                // Made empty (by a queue's parents, or another library):
                // ours to fill, then read again for a watch on the filled
                // data (our write fires this one).
                let write = Request::SetData(SetDataRequest {
                    path: server_path.clone(),
                    data: ours.clone(),
                    version: stat.version,
                });
                match call(write) {
                    Ok(_) => continue,
                    Err(e) if e.code() == Some(ErrorCode::BadVersion) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            match std::str::from_utf8(&data)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                Some(stored) if stored != asked => {
                    return Err(LockError::MaxLeasesMismatch { stored, asked })
                }
                // Agrees, or data that is not a number: not ours to judge.
                _ => {
                    *self.checked.lock().unwrap_or_else(PoisonError::into_inner) = Some(watch);
                    return Ok(());
                }
            }
        }
        // Deleted or written between every read and the next: no verdict,
        // and no lease without one.
        Err(Error::Protocol(format!(
            "the number of leases on {} changed on every one of 5 reads",
            self.path
        ))
        .into())
    }

    /// Leases currently held or waited for.
    ///
    /// # Errors
    /// [`LockError::Client`] with the client's error (see
    /// [`Client`](crate::Client#errors)); a semaphore path that does not
    /// exist has none.
    pub fn lease_count(&self) -> Result<usize, LockError> {
        Ok(self.leases.queue()?.len())
    }
}
