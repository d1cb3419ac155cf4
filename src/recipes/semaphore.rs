//! A counting semaphore in Curator's InterProcessSemaphoreV2 layout:
//! `<path>/locks` is a mutex that admits one waiter at a time, and
//! `<path>/leases` holds one node per lease (`_c_<uuid>-lease-<seq>`).

use std::time::{Duration, Instant};

use super::attempt::Rule;
use super::cancel::CancelToken;
use super::error::LockError;
use super::guard::LockGuard;
use super::mutex::{lock_calls, MutexOptions, QueueLock};
use super::registry::Side;
use crate::Client;

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
}

impl Semaphore {
    /// A semaphore on `path` granting at most `max_leases` leases (at least 1).
    pub fn new(client: &Client, path: &str, max_leases: usize) -> Result<Semaphore, LockError> {
        Semaphore::with_options(client, path, max_leases, MutexOptions::default())
    }

    /// Like [`Semaphore::new`]; the options' data names each lease holder.
    pub fn with_options(
        client: &Client,
        path: &str,
        max_leases: usize,
        options: MutexOptions,
    ) -> Result<Semaphore, LockError> {
        let base = path.trim_end_matches('/');
        let gate_options = options.clone().watch_node(false);
        Ok(Semaphore {
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
    pub fn acquire_with(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockGuard, LockError> {
        let gate = self.gate.lock_with(deadline, cancel)?;
        let lease = self.leases.lock_with(deadline, cancel);
        drop(gate);
        lease
    }

    /// Leases currently held or waited for.
    pub fn lease_count(&self) -> Result<usize, LockError> {
        Ok(self.leases.queue()?.len())
    }
}
