//! Bounded waits for a condition: the one way tests here wait for each other
//! (never a sleep that hopes the other side is done).

use std::thread;
use std::time::{Duration, Instant};

/// Pause between two looks at a condition: short next to any timeout in the
/// tests, long enough that a look which asks a server or starts a process
/// does not load the machine.
const POLL: Duration = Duration::from_millis(10);

/// Looks at `cond` until it holds (true) or `timeout` has passed (false).
/// For callers that fail with their own message, or wait for an absence.
pub fn poll_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
}

/// Looks at `cond` until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, cond: impl FnMut() -> bool) {
    assert!(
        poll_until(timeout, cond),
        "timed out after {timeout:?} waiting for {what}"
    );
}
