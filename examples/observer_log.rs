//! Every session change and lock event written to the `log` facade (here
//! printed by a ten-line logger). `ZKLOCK_CONNECT` names the server
//! (default 127.0.0.1:2181).

use std::sync::Arc;
use std::time::Duration;

use zklock::recipes::{LockError, LockState, Mutex};
use zklock::{Client, DropReason, Observer, SessionState};

/// Hands each event to `log` at a level that fits it.
struct LogObserver;

impl Observer for LogObserver {
    fn session_state(&self, state: SessionState) {
        log::info!(target: "zklock::observer", "session {state:?}");
    }
    fn connection_dropped(&self, reason: &DropReason) {
        log::warn!(target: "zklock::observer", "connection dropped: {reason:?}");
    }
    fn lock_acquired(&self, node: &str, waited: Duration) {
        log::info!(target: "zklock::observer", "acquired {node} after {waited:?}");
    }
    fn lock_failed(&self, lock_path: &str, error: &LockError, waited: Duration) {
        log::warn!(target: "zklock::observer", "{lock_path}: {error} after {waited:?}");
    }
    fn holder_state(&self, node: &str, state: LockState) {
        log::warn!(target: "zklock::observer", "{node} is now {state:?}");
    }
    fn lock_released(&self, node: &str, held: Duration, refused: bool) {
        log::info!(target: "zklock::observer", "released {node} after {held:?} (refused: {refused})");
    }
}

/// Prints observer records to stderr; everything else is left out.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == "zklock::observer"
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("{:5} {}", record.level(), record.args());
        }
    }
    fn flush(&self) {}
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    log::set_logger(&StderrLogger).map_err(|e| e.to_string())?;
    log::set_max_level(log::LevelFilter::Info);
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .observer(Arc::new(LogObserver))
        .connect()?;
    let mutex = Mutex::new(&client, "/examples/observed")?;
    for _ in 0..3 {
        mutex.lock_timeout(Duration::from_secs(30))?.unlock()?;
    }
    client.close()?;
    Ok(())
}
