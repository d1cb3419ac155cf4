//! Fault and resilience tests for the client (issue #4): leader failover
//! under writes, cut connections with requests and watches outstanding,
//! session expiry, malformed bytes from a server, server restarts, host-list
//! failover, SetWatches re-arming thousands of watches, and a refused
//! release's error.
//!
//! Every wait is bounded and waits for a condition or an event, never for a
//! fixed time (the only fixed pauses pace a writer or are the measuring
//! window of a CPU or attempt-rate check). Servers use a 500 ms tick so
//! 1–10 s sessions are allowed. Malformed bytes come from two fakes in
//! testkit: `Mangler`, a frame-aware proxy in front of a real server that
//! spoils one server frame per armed fault, and `GarbageServer`.
//!
//! Set `RESILIENCE_LOG=1` to see the client's log on stderr.
//!
//! A binary of its own, though it needs only a real ZooKeeper: it installs
//! the process's logger, whose lines the tests search for what their
//! client logged, and a panic hook that counts panics on any I/O thread of
//! the process. In a binary shared with other tests, their clients would
//! log into the capture and their I/O threads' panics would be counted here.

mod bad_servers;
mod connect_errors;
mod cuts;
mod failover;
mod heal;
mod host_list;
mod refused_release;
mod set_watches;

use std::collections::HashMap;
use std::net::{Shutdown, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use testkit::garbage::GarbageServer;
use testkit::mangler::{Mangle, Mangler};
use testkit::proxy::{Direction, Proxy};
use testkit::zk::{ZkEnsemble, ZkServer};
use testkit::{io_thread_ids, thread_cpu_over, wait_until};
use zklock::{Client, CreateMode, Error, EventType, Op, SessionState, Watch};

/// tickTime of every server these tests start: sessions of 1–10 s are allowed.
const TICK_MS: u64 = 500;

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

/// One standalone server with a short tick, shared by the tests that do not
/// stop it. Tests sharing it use their own znode roots.
fn fast() -> &'static ZkServer {
    static FAST: OnceLock<ZkServer> = OnceLock::new();
    FAST.get_or_init(|| ZkServer::start_with(TICK_MS))
}

/// Panics seen on the client's I/O threads (the panic hook counts them).
static IO_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Everything the client logged at info level or above, for assertions.
static LOG_LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct CaptureLog;

impl log::Log for CaptureLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("zklock")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!(
            "{:?} [{}] {}: {}",
            Instant::now(),
            thread::current().name().unwrap_or("?"),
            record.level(),
            record.args()
        );
        if std::env::var_os("RESILIENCE_LOG").is_some() {
            eprintln!("{line}");
        }
        let mut lines = LOG_LINES.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() < 50_000 {
            lines.push(line);
        }
    }

    fn flush(&self) {}
}

static LOGGER: CaptureLog = CaptureLog;

/// Installs the log capture and the I/O-thread panic counter (once per binary).
fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if thread::current().name() == Some("zklock-io") {
                IO_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

fn assert_no_io_panic() {
    assert_eq!(
        IO_PANICS.load(Ordering::SeqCst),
        0,
        "a client I/O thread panicked (see the panic message above)"
    );
}

fn logged(needle: &str) -> bool {
    LOG_LINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|l| l.contains(needle))
}

/// A fresh persistent root, unique to this test and process.
fn root(c: &Client, name: &str) -> String {
    let path = format!("/res-{name}-{}", std::process::id());
    c.create(&path, b"", CreateMode::Persistent)
        .unwrap_or_else(|e| panic!("creating test root {path}: {e:?}"));
    path
}

/// A client's stream of session states, with everything seen so far.
struct States {
    rx: Receiver<SessionState>,
    seen: Vec<SessionState>,
}

impl States {
    fn of(c: &Client) -> States {
        let rx = c.subscribe();
        let first = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("subscribe() sends the current state first");
        States {
            rx,
            seen: vec![first],
        }
    }

    fn current(&self) -> SessionState {
        *self.seen.last().expect("at least the first state")
    }

    /// Waits until the latest state is `want` (at once if it already is);
    /// returns how long that took.
    fn wait_for(&mut self, want: SessionState, timeout: Duration) -> Duration {
        let start = Instant::now();
        let deadline = start + timeout;
        while self.current() != want {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(s) => self.seen.push(s),
                Err(e) => panic!(
                    "state {want:?} not reached within {timeout:?} ({e:?}); states seen: {:?}",
                    self.seen
                ),
            }
        }
        start.elapsed()
    }

    /// Takes every state already sent.
    fn drain(&mut self) -> &[SessionState] {
        while let Ok(s) = self.rx.try_recv() {
            self.seen.push(s);
        }
        &self.seen
    }

    /// Asserts that no state change comes within `window` (bounded wait for
    /// absence). After a terminal state the channel may also just close.
    fn assert_quiet(&mut self, window: Duration) {
        match self.rx.recv_timeout(window) {
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if self.current().is_terminal() => {}
            other => panic!(
                "unexpected state change {other:?}; states seen: {:?}",
                self.seen
            ),
        }
    }
}

/// Receives a watch's one event and checks it.
fn expect_event(w: &Watch, kind: EventType, path: &str, timeout: Duration) {
    match w.recv_timeout(timeout) {
        Ok(ev) => assert_eq!(
            (ev.kind, ev.path.as_str()),
            (kind, path),
            "wrong event for the watch on {path}"
        ),
        Err(e) => panic!("watch on {path} did not fire {kind:?} within {timeout:?}: {e:?}"),
    }
}

/// After a round trip, a watch that fired once must be spent: no second event.
fn expect_spent(w: &Watch, path: &str) {
    assert_eq!(
        w.try_recv(),
        Err(Error::Closed),
        "the watch on {path} fired again or is still armed"
    );
}

/// Joins a thread, passing its panic on.
fn join<T>(h: thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}
