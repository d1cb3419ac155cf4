//! A service meant to run for months: a worker that takes one lock per job
//! and a leader that keeps campaigning, both on one client that outlives
//! its sessions. A job's work runs only while its guard says `Held`, waits
//! while `Suspended`, and is given up once `Lost` (someone else may hold
//! the job now); a job given up is tried again. After a session expiry the
//! client opens a new session by itself, and the same `Mutex` values and
//! the same latch carry on on it: nothing is rebuilt.
//!
//! Run alone it does `ZKLOCK_JOBS` jobs (default 3) while it leads, then
//! stops; `ZKLOCK_CONNECT` names the server (default 127.0.0.1:2181). Its
//! test expires the session twice under it with zklock-test
//! (`zklock-test/tests/failover/long_running.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zklock::recipes::{
    CloseMode, Election, LatchEvent, LeaderLatch, LockError, LockState, LossReason, Mutex,
};
use zklock::Client;

/// How long a job waits for its lock before the worker moves on.
const JOB_WAIT: Duration = Duration::from_secs(30);

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEnd {
    /// Its work is done and its lock released.
    Done,
    /// The lock was lost under it (why, when known): try the job again.
    Lost(Option<LossReason>),
    /// The lock could not be taken (busy past the wait, or the session
    /// ended while waiting): try the job again.
    NotTaken(LockError),
}

/// Runs a job of `units` units under `mutex`: `unit` is called with the
/// fencing token for each unit while the lock is held (pass the token to
/// the storage the job writes, so that it refuses a former holder).
pub fn run_job(mutex: &Mutex, units: u32, mut unit: impl FnMut(i64)) -> JobEnd {
    let guard = match mutex.lock_timeout(JOB_WAIT) {
        Ok(guard) => guard,
        Err(e) => return JobEnd::NotTaken(e),
    };
    let changes = guard.state_changes();
    let mut done = 0;
    while done < units {
        match guard.state() {
            LockState::Held => {
                unit(guard.fencing_token());
                done += 1;
            }
            // Not ours for now: do nothing until the state changes.
            LockState::Suspended => {
                let _ = changes.recv_timeout(Duration::from_secs(1));
            }
            LockState::Lost => return JobEnd::Lost(guard.lost_reason()),
        }
    }
    // The work is done; a release the server did not confirm in time goes
    // on in the background (or with the session).
    if let Err(e) = guard.unlock() {
        println!("the release is not confirmed yet: {e}");
    }
    JobEnd::Done
}

/// Follows `latch` until `stop` is set or the latch stops for good,
/// telling `leading` each time leadership comes or goes.
pub fn follow_leadership(latch: &LeaderLatch, stop: &AtomicBool, mut leading: impl FnMut(bool)) {
    while !stop.load(Ordering::SeqCst) {
        match latch.events().recv_timeout(Duration::from_millis(200)) {
            Ok(LatchEvent::Gained { .. } | LatchEvent::Resumed) => leading(true),
            Ok(LatchEvent::Suspended | LatchEvent::Lost { .. }) => leading(false),
            Ok(LatchEvent::Stopped(_) | LatchEvent::Closed) => return leading(false),
            Ok(_) | Err(_) => {}
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let jobs: u32 = std::env::var("ZKLOCK_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    let latch = Election::new(&client, "/examples/service/leader", b"worker-1")?.latch();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            follow_leadership(&latch, &stop, |leads| {
                println!("{}", if leads { "leading" } else { "not leading" });
            });
        });
        let mut finished = 0;
        let mut job = 0;
        while finished < jobs {
            let mutex = Mutex::new(&client, &format!("/examples/service/jobs/{job}"))?;
            match run_job(&mutex, 3, |token| {
                println!("job {job}: a unit under token {token}")
            }) {
                JobEnd::Done => {
                    finished += 1;
                    job += 1;
                }
                other => println!("job {job}: {other:?}; trying it again"),
            }
        }
        stop.store(true, Ordering::SeqCst);
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    latch.close(CloseMode::Silent)?;
    client.close()?;
    Ok(())
}
