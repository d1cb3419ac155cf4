//! A counting semaphore in Curator's InterProcessSemaphoreV2 layout:
//! `<path>/locks` is a mutex that admits one waiter at a time, and
//! `<path>/leases` holds one node per lease (`_c_<uuid>-lease-<seq>`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::mutex::lock_calls;
use super::options::MutexOptions;
use super::pending::PendingLock;
use super::pending_thread;
use super::queue_lock::{QueueLock, Start};
use super::registry::Side;
use jute::{CreateRequest, PathWatch, Request, Response, SetDataRequest};

use crate::{Acl, Client, CreateMode, Error, ErrorCode};

/// At most `max_leases` holders at once.
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
    /// The stored number was found to agree (checked once per object).
    checked: AtomicBool,
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
    /// if `path` is not a valid ZooKeeper path.
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
        Ok(Semaphore {
            path: base.to_owned(),
            max_leases: max_leases.max(1),
            acl: options.parent_acl_or_open(),
            ancestor_acl: options.ancestor_acl_or_open(),
            checked: AtomicBool::new(false),
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
    /// waiters per process, or once [`Semaphore::acquire`] has run.
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
    /// # Errors
    /// [`LockError::MaxLeasesMismatch`] if the semaphore path stores another
    /// number of leases; [`LockError::Client`] if the path could not be read
    /// or created; else as [`Mutex::lock_with`](super::Mutex::lock_with)
    /// (a thread may hold several leases: never `WouldDeadlock`).
    pub fn acquire_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        // A deadline already past (try_acquire) still gets its round trips.
        let bound = deadline.filter(|d| *d > Instant::now());
        match self.check_max_leases(bound) {
            Err(LockError::Client(Error::Timeout))
                if bound.is_some_and(|d| Instant::now() >= d) =>
            {
                return Err(LockError::Timeout)
            }
            other => other?,
        }
        let gate = pending_thread::lock_with(&self.gate, deadline, cancel)?;
        let lease = pending_thread::lock_with(&self.leases, deadline, cancel);
        drop(gate);
        lease
    }

    /// The number of leases is stored on the semaphore path: the first user
    /// writes it, later users must agree (kazoo does the same), or two
    /// kinds of users would admit different numbers of holders.
    fn check_max_leases(&self, deadline: Option<Instant>) -> Result<(), LockError> {
        if self.checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let client = &self.gate.client;
        let asked = self.max_leases;
        let ours = asked.to_string().into_bytes();
        let server_path = client.to_server_path(&self.path, false)?;
        // Every call bounded by the caller's deadline, not only the client's.
        let call = |request| client.call_by(request, deadline);
        for _ in 0..5 {
            let read = call(Request::GetData(PathWatch {
                path: server_path.clone(),
                watch: false,
            }));
            let (data, stat) = match read {
                Ok(Response::Data { data, stat }) => (data, stat),
                Ok(other) => return Err(Error::Protocol(format!("{other:?}")).into()),
                Err(e) if e.is_no_node() => {
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
                let write = Request::SetData(SetDataRequest {
                    path: server_path.clone(),
                    data: ours.clone(),
                    version: stat.version,
                });
                match call(write) {
                    Ok(_) => break,
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
                _ => break,
            }
        }
        self.checked.store(true, Ordering::Release);
        Ok(())
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
