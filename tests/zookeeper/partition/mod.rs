//! A holder whose server is cut off from the leader (docs/PARTITION.md).
//!
//! A follower cut off from the leader goes on answering its clients' pings
//! until its own link to the leader times out (`syncLimit × tickTime`),
//! while the leader, which no longer hears the holder's session, expires it
//! after the session timeout and lets another client take the lock. The
//! holder must stop saying Held before that other client is granted.
//!
//! The ensemble runs `tickTime=1000, syncLimit=5`: the follower gives up
//! after 5 s. What decides the hazard is the ratio of the session timeout to
//! that, so the scaled-down tick keeps the file fast and measures the same
//! thing as the production-like `2000 × 5` with 4 s and 12 s timeouts: the
//! tests run 2 s (0.4 of it, as 4 s is of 10 s) and 6 s (1.2 of it, as
//! 12 s is of 10 s).

mod cut_off;
mod delay_line;
mod fenced;
mod recovery;
mod refused_writes;
mod slow_link;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use testkit::zk::{ZkEnsemble, ZkOptions};
use testkit::{children, wait_children};
use zklock::recipes::{Election, LatchEvent, LockGuard, LockState, Mutex, RwLock, Semaphore};
use zklock::Client;

const TICK_MS: u64 = 1000;
const SYNC_LIMIT: u32 = 5;
/// Below and above `SYNC_LIMIT × TICK_MS` (5 s).
const SHORT: Duration = Duration::from_millis(2000);
const LONG: Duration = Duration::from_millis(6000);
const WAIT: Duration = Duration::from_secs(30);

/// One ensemble for the whole file; trials take turns on it.
fn ensemble() -> MutexGuard<'static, ZkEnsemble> {
    static ENSEMBLE: OnceLock<StdMutex<ZkEnsemble>> = OnceLock::new();
    let ens = ENSEMBLE
        .get_or_init(|| {
            let options = ZkOptions::new().tick_ms(TICK_MS);
            StdMutex::new(ZkEnsemble::start_with_links(3, &options, SYNC_LIMIT))
        })
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // A trial that failed may have left a link cut.
    ens.heal_all();
    ens.wait_ready();
    ens
}
