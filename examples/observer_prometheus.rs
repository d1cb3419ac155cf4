//! Lock metrics in Prometheus' text exposition format, from the observer
//! hook: counters and summed wait and hold times, rendered on demand (serve
//! the text on /metrics with any HTTP server). `ZKLOCK_CONNECT` names the
//! server (default 127.0.0.1:2181).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zklock::recipes::{LockError, LockState, Mutex};
use zklock::{Client, DropReason, Observer, SessionState};

/// Counters only: the I/O thread adds, a scrape reads.
#[derive(Default)]
struct Metrics {
    acquired: AtomicU64,
    failed: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    suspended: AtomicU64,
    dropped_connections: AtomicU64,
    session_changes: AtomicU64,
    wait_micros: AtomicU64,
    hold_micros: AtomicU64,
}

impl Observer for Metrics {
    fn session_state(&self, _state: SessionState) {
        self.session_changes.fetch_add(1, Ordering::Relaxed);
    }
    fn connection_dropped(&self, _reason: &DropReason) {
        self.dropped_connections.fetch_add(1, Ordering::Relaxed);
    }
    fn lock_acquired(&self, _node: &str, waited: Duration) {
        self.acquired.fetch_add(1, Ordering::Relaxed);
        self.wait_micros
            .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
    }
    fn lock_failed(&self, _lock_path: &str, _error: &LockError, waited: Duration) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.wait_micros
            .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
    }
    fn holder_state(&self, _node: &str, state: LockState) {
        let counter = match state {
            LockState::Lost => &self.lost,
            LockState::Suspended => &self.suspended,
            LockState::Held => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    fn lock_released(&self, _node: &str, held: Duration, _refused: bool) {
        self.released.fetch_add(1, Ordering::Relaxed);
        self.hold_micros
            .fetch_add(held.as_micros() as u64, Ordering::Relaxed);
    }
}

impl Metrics {
    /// The exposition text, one metric family after another.
    fn render(&self) -> String {
        let mut out = String::new();
        let counters = [
            (
                "zklock_locks_acquired_total",
                "Locks granted.",
                &self.acquired,
            ),
            (
                "zklock_locks_failed_total",
                "Acquisitions that ended without the lock.",
                &self.failed,
            ),
            (
                "zklock_locks_released_total",
                "Holds that ended.",
                &self.released,
            ),
            (
                "zklock_locks_lost_total",
                "Holders told they lost the lock.",
                &self.lost,
            ),
            (
                "zklock_locks_suspended_total",
                "Holders suspended by a lost connection.",
                &self.suspended,
            ),
            (
                "zklock_connections_dropped_total",
                "Connections dropped.",
                &self.dropped_connections,
            ),
            (
                "zklock_session_changes_total",
                "Session state changes.",
                &self.session_changes,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        for (name, help, micros) in [
            (
                "zklock_lock_wait_seconds_total",
                "Time spent waiting for locks.",
                &self.wait_micros,
            ),
            (
                "zklock_lock_hold_seconds_total",
                "Time locks were held.",
                &self.hold_micros,
            ),
        ] {
            let seconds = micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {seconds}"
            );
        }
        out
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let metrics = Arc::new(Metrics::default());
    let client = Client::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .observer(metrics.clone())
        .connect()?;
    let mutex = Mutex::new(&client, "/examples/metrics")?;
    for _ in 0..5 {
        mutex.lock_timeout(Duration::from_secs(30))?.unlock()?;
    }
    print!("{}", metrics.render());
    client.close()?;
    Ok(())
}
