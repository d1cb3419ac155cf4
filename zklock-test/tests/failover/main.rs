//! Each fault zklock-test offers, on a real ZooKeeper, and what a holder's
//! guard then reports: the behaviour the crate's documentation promises,
//! shown with its public API and zklock's only.

use std::time::{Duration, Instant};

use zklock::crossbeam_channel::{Receiver, RecvTimeoutError};
use zklock::recipes::{LockGuard, LockState, LossReason, Mutex};
use zklock::Client;

mod delay;
mod ensemble;
mod long_running;
mod serve;
mod servers;
mod service;
mod session;

/// Bound for anything a test waits for that should come within a session
/// timeout or two.
const WAIT: Duration = Duration::from_secs(30);

/// Every state a guard reports, in order, from its state channel.
struct States {
    changes: Receiver<LockState>,
    seen: Vec<LockState>,
}

impl States {
    fn of(guard: &LockGuard) -> States {
        let mut states = States {
            changes: guard.state_changes(),
            seen: Vec::new(),
        };
        // The channel starts with the current state.
        states.next_within(WAIT);
        states
    }

    /// The next change, if one comes within `timeout`.
    fn next_within(&mut self, timeout: Duration) -> Option<LockState> {
        match self.changes.recv_timeout(timeout) {
            Ok(state) => {
                self.seen.push(state);
                Some(state)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the guard's channel closed: {:?}", self.seen)
            }
        }
    }

    /// Waits for `state`, after whatever comes first; panics with the
    /// states seen if it does not come within `WAIT`.
    fn wait_for(&mut self, state: LockState) {
        let deadline = Instant::now() + WAIT;
        while self.seen.last() != Some(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.next_within(left).is_none() {
                panic!("no {state:?} within {WAIT:?}; states seen: {:?}", self.seen);
            }
        }
    }

    /// [`States::wait_for`], and how long after `since` the state came: a
    /// fault's "at once" is held against it. Read while waiting, so the
    /// time is the state's arrival (a state read later would only seem
    /// later, never earlier).
    fn wait_for_after(&mut self, state: LockState, since: Instant) -> Duration {
        self.wait_for(state);
        since.elapsed()
    }

    /// Asserts that no change comes within `quiet`: the guard stays as it is.
    fn assert_quiet_for(&mut self, quiet: Duration) {
        if let Some(state) = self.next_within(quiet) {
            panic!(
                "the guard changed to {state:?}; states seen: {:?}",
                self.seen
            );
        }
    }
}

/// A client of `connect` and the lock it holds at `path`.
fn holder(connect: &str, timeout: Duration, path: &str) -> (Client, LockGuard) {
    let client = Client::connect(connect, timeout).expect("connecting the holder");
    let guard = Mutex::new(&client, path)
        .expect("a mutex")
        .lock_timeout(WAIT)
        .expect("taking the lock");
    assert_eq!(guard.state(), LockState::Held);
    (client, guard)
}

/// Whether another session can take the lock at `path` now (and releases it).
fn lock_is_free(connect: &str, path: &str) -> bool {
    let other =
        Client::connect(connect, Duration::from_secs(10)).expect("connecting another client");
    let free = Mutex::new(&other, path)
        .expect("a mutex")
        .try_lock()
        .expect("trying the lock")
        .is_some();
    let _ = other.close();
    free
}

/// A fault whose guard changes "at once" does so within half the session
/// timeout `t`: a silent fault is noticed only at `3t/4` (docs/PARTITION.md
/// in zklock's repository), so a change by then came from the fault's own
/// loud act (a closed connection), not from a timeout.
fn assert_at_once(what: &str, took: Duration, t: Duration) {
    assert!(
        took <= t / 2,
        "{what} took {took:?}, not at once (within {:?}, half of T = {t:?})",
        t / 2
    );
}

/// A timing promise held from both sides: `took` is not before `early`
/// and not after `late`.
fn assert_between(what: &str, took: Duration, early: Duration, late: Duration) {
    assert!(
        took >= early && took <= late,
        "{what} took {took:?}, outside [{early:?}, {late:?}]"
    );
}

fn assert_lost(guard: &LockGuard, reason: LossReason) {
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(guard.lost_reason(), Some(reason));
}
