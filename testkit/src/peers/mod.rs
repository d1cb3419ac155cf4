//! Interoperability peers: real Apache Curator (Java) and real kazoo (Python)
//! processes that contend for ZooKeeper locks, driven over a line protocol.
//!
//! Peer programs live in `testkit/peers/`; both speak the same protocol:
//!
//! * started as `<connect_string> <lock_path> <kind> <id>`; kinds:
//!   Curator: `mutex`, `read`, `write`, `semaphore:<n>`, `leader`;
//!   kazoo: `mutex` (with `extra_lock_patterns=["-lock-"]`), `mutex-curator`
//!   (same, but nodes named `<uuid>-lock-<seq>` so Curator sees them),
//!   `read`, `write` (kazoo-native, not Curator compatible).
//! * stdout, one line per event: `ready`, `acquired <node> <unix_millis>`,
//!   `timeout`, `released <unix_millis>`, `children <a,b,..>`, `error <msg>`.
//!   `acquired` millis are taken right after acquisition and `released` millis
//!   right before releasing, so the `[acquired, released]` intervals of peers
//!   that really exclude each other never overlap.
//! * stdin commands: `acquire`, `acquire <timeout_ms>`, `release`,
//!   `children`, `quit`. `quit` or EOF releases, closes the session, exits 0.

mod curator;
mod kazoo;

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::scratch::testkit_dir;
pub use curator::curator_classpath;
pub use kazoo::ensure_kazoo;

/// How long a peer may take to start (JVM/interpreter start + ZooKeeper connect).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for replies that do not wait on other lock holders.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound for a peer to exit after `quit` / stdin EOF.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Jars (base names, without version or `.jar`) the Curator peer needs.
/// Determined with `-verbose:class`: no netty, commons-* or jackson needed.
pub const CURATOR_JARS: &[&str] = &[
    "curator-recipes",
    "curator-framework",
    "curator-client",
    "zookeeper",
    "zookeeper-jute",
    "guava",
    "slf4j-api",
    "slf4j-nop",
];

/// Default directory holding [`CURATOR_JARS`] (Debian's layout).
pub const DEFAULT_JAR_DIR: &str = "/usr/share/java";

/// JVM flags for a small, fast-starting peer.
pub const JVM_FLAGS: &[&str] = &[
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
];

const STDERR_TAIL_BYTES: usize = 8 * 1024;
const TRANSCRIPT_LINES: usize = 40;

/// Which real client library a peer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// Apache Curator 5.x recipes on the JVM (`testkit/peers/CuratorPeer.java`).
    Curator,
    /// kazoo on CPython (`testkit/peers/kazoo_peer.py`).
    Kazoo,
}

impl fmt::Display for PeerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerKind::Curator => f.write_str("curator"),
            PeerKind::Kazoo => f.write_str("kazoo"),
        }
    }
}

/// A running peer process. Dropping it kills the process.
pub struct Peer {
    kind: PeerKind,
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<String>>,
    transcript: Vec<String>,
    exited: Option<ExitStatus>,
    startup: Duration,
}

impl Peer {
    /// Starts a peer and waits (bounded by [`READY_TIMEOUT`]) until it prints
    /// `ready`. Panics with the peer's stderr tail if that does not happen.
    pub fn start(
        kind: PeerKind,
        connect: &str,
        lock_path: &str,
        lock_kind: &str,
        id: &str,
    ) -> Peer {
        Self::start_with_jvm_args(kind, &[], &[], connect, lock_path, lock_kind, id)
    }

    /// [`Peer::start`] with extra JVM flags and classpath entries for a
    /// Curator peer (e.g. the ZooKeeper client's TLS properties and Netty);
    /// ignored by kazoo.
    pub fn start_with_jvm_args(
        kind: PeerKind,
        jvm_args: &[String],
        extra_classpath: &[&str],
        connect: &str,
        lock_path: &str,
        lock_kind: &str,
        id: &str,
    ) -> Peer {
        let mut cmd = match kind {
            PeerKind::Curator => curator::command(jvm_args, extra_classpath),
            PeerKind::Kazoo => kazoo::command(),
        };
        cmd.args([connect, lock_path, lock_kind, id])
            .current_dir(testkit_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let label = format!("{kind} peer '{id}' ({lock_kind} on {lock_path})");
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{label}: cannot spawn {cmd:?}: {e}"));

        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        thread::Builder::new()
            .name(format!("peer-stdout-{id}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line.trim_end().to_string()).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn stdout reader thread");

        let stderr = child.stderr.take().expect("piped stderr");
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = Arc::clone(&stderr_tail);
        thread::Builder::new()
            .name(format!("peer-stderr-{id}"))
            .spawn(move || drain_stderr(stderr, &tail))
            .expect("spawn stderr reader thread");

        let mut peer = Peer {
            kind,
            label,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr_tail,
            transcript: Vec::new(),
            exited: None,
            startup: Duration::ZERO,
        };
        let deadline = started + READY_TIMEOUT;
        loop {
            let now = Instant::now();
            if now >= deadline {
                peer.fail(&format!("no `ready` within {READY_TIMEOUT:?}"));
            }
            match peer.next_line(deadline - now) {
                Some(line) if line == "ready" => break,
                Some(line) if line.starts_with("error") => {
                    peer.fail(&format!("failed to start: {line}"))
                }
                Some(_) => {} // recorded in the transcript; keep waiting
                None => {}
            }
        }
        peer.startup = started.elapsed();
        peer
    }

    /// Which library this peer runs.
    pub fn kind(&self) -> PeerKind {
        self.kind
    }

    /// Human-readable description used in panic messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Time from spawn to `ready`.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Sends one raw command line.
    pub fn send(&mut self, command: &str) {
        self.transcript_push(format!("> {command}"));
        let result = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(format!("{command}\n").as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::Error::other("stdin already closed")),
        };
        if let Err(e) = result {
            self.fail(&format!("cannot send `{command}`: {e}"));
        }
    }

    /// Next stdout line within `timeout`, or `None` if none arrived in time.
    /// Panics if the peer exited (stdout closed).
    pub fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                self.transcript_push(format!("< {line}"));
                Some(line)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait_exit(Duration::from_secs(5));
                self.fail(&format!(
                    "stdout closed unexpectedly (exit status {status:?})"
                ))
            }
        }
    }

    /// Starts a blocking acquire (send only); pair with [`Peer::wait_acquired`].
    pub fn acquire(&mut self) {
        self.send("acquire");
    }

    /// Waits up to `timeout` for the `acquired <node> <millis>` line of a
    /// pending acquire. `None` means "still waiting" (nothing arrived).
    /// Panics on any other line (`error ...`, `timeout`, ...).
    pub fn wait_acquired(&mut self, timeout: Duration) -> Option<String> {
        let line = self.next_line(timeout)?;
        if line.starts_with("acquired ") {
            Some(line)
        } else {
            self.fail(&format!("expected `acquired ...`, got `{line}`"))
        }
    }

    /// The `acquired` line of a pending acquire, which must come within
    /// `timeout` (a hand-over); panics with the transcript otherwise.
    pub fn expect_acquired(&mut self, timeout: Duration) -> String {
        match self.wait_acquired(timeout) {
            Some(line) => line,
            None => self.fail(&format!("no `acquired` within {timeout:?}")),
        }
    }

    /// Checks that a pending acquire is still waiting: nothing arrives
    /// within `window` (a bounded wait for an absence).
    pub fn expect_waiting(&mut self, window: Duration) {
        if let Some(line) = self.wait_acquired(window) {
            self.fail(&format!("acquired while it should wait: {line}"));
        }
    }

    /// `acquire <timeout_ms>`: `Some(acquired line)` or `None` if the peer
    /// reported `timeout` (in which case it holds and queues nothing).
    pub fn try_acquire(&mut self, timeout_ms: u64) -> Option<String> {
        self.send(&format!("acquire {timeout_ms}"));
        let bound = Duration::from_millis(timeout_ms) + REPLY_TIMEOUT;
        match self.next_line(bound) {
            Some(line) if line.starts_with("acquired ") => Some(line),
            Some(line) if line == "timeout" => None,
            Some(line) => self.fail(&format!(
                "expected `acquired ...` or `timeout`, got `{line}`"
            )),
            None => self.fail(&format!(
                "no reply to `acquire {timeout_ms}` within {bound:?}"
            )),
        }
    }

    /// Releases the held lock; returns the `released` unix millis (taken by
    /// the peer right before it started releasing).
    pub fn release(&mut self) -> u64 {
        self.send("release");
        let line = self.expect_reply("release");
        match line.strip_prefix("released ") {
            Some(_) => line_millis(&line),
            None => self.fail(&format!("expected `released <millis>`, got `{line}`")),
        }
    }

    /// Child names of the lock path (sorted).
    pub fn children(&mut self) -> Vec<String> {
        self.send("children");
        let line = self.expect_reply("children");
        match line.strip_prefix("children") {
            Some(rest) => rest
                .trim()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            None => self.fail(&format!("expected `children ...`, got `{line}`")),
        }
    }

    /// Sends `quit`, closes stdin and waits (bounded) for a clean exit.
    pub fn quit(&mut self) {
        if self.exited.is_some() {
            return;
        }
        if self.stdin.is_some() {
            self.send("quit");
        }
        self.close_stdin();
        self.expect_clean_exit();
    }

    /// Closes the peer's stdin (as if the test process died); the peer must
    /// then release, close its session and exit.
    pub fn close_stdin(&mut self) {
        if self.stdin.take().is_some() {
            self.transcript_push("> <EOF>".to_string());
        }
    }

    /// Waits up to [`EXIT_TIMEOUT`] for the process to exit with status 0.
    pub fn expect_clean_exit(&mut self) {
        match self.wait_exit(EXIT_TIMEOUT) {
            Some(status) if status.success() => {}
            Some(status) => self.fail(&format!("exited with {status}")),
            None => self.fail(&format!("did not exit within {EXIT_TIMEOUT:?}")),
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited {
                return Some(status);
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.exited = Some(status);
                    return Some(status);
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) => return None,
                Err(e) => panic!("{}: waiting for exit failed: {e}", self.label),
            }
        }
    }

    /// Kills the process (SIGKILL): its session, and so its lock nodes,
    /// survive until the ZooKeeper session times out (~10 s).
    pub fn kill(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
        self.stdin = None;
    }

    /// Last lines of the peer's stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    fn expect_reply(&mut self, what: &str) -> String {
        match self.next_line(REPLY_TIMEOUT) {
            Some(line) if line.starts_with("error") => {
                self.fail(&format!("`{what}` failed: {line}"))
            }
            Some(line) => line,
            None => self.fail(&format!("no reply to `{what}` within {REPLY_TIMEOUT:?}")),
        }
    }

    fn transcript_push(&mut self, entry: String) {
        if self.transcript.len() == TRANSCRIPT_LINES {
            self.transcript.remove(0);
        }
        self.transcript.push(entry);
    }

    fn fail(&mut self, what: &str) -> ! {
        // Give a dying peer a moment so its exit status and stderr are complete.
        let _ = self.wait_exit(Duration::from_millis(300));
        let status = match self.exited {
            Some(s) => format!("exited: {s}"),
            None => "still running (will be killed)".to_string(),
        };
        panic!(
            "{}: {what}\n  process: {status}\n  transcript (last {TRANSCRIPT_LINES}):\n    {}\n  stderr tail:\n{}",
            self.label,
            self.transcript.join("\n    "),
            self.stderr_tail()
        );
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Unix millis in an `acquired <node> <millis>` or `released <millis>` line.
pub fn line_millis(line: &str) -> u64 {
    line.rsplit(' ')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no unix millis at the end of `{line}`"))
}

/// Node name in an `acquired <node> <millis>` line (may be empty).
pub fn acquired_node(line: &str) -> String {
    let rest = line
        .strip_prefix("acquired ")
        .unwrap_or_else(|| panic!("not an `acquired` line: `{line}`"));
    match rest.rsplit_once(' ') {
        Some((node, _millis)) => node.trim().to_string(),
        None => String::new(),
    }
}

/// Current unix time in millis (same clock the peers stamp with).
pub fn now_millis() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock before 1970");
    u64::try_from(since.as_millis()).expect("millis fit in u64")
}

/// Keeps the last [`STDERR_TAIL_BYTES`] of a peer's stderr for failure messages.
fn drain_stderr(mut stderr: impl Read, tail: &Mutex<String>) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let Ok(mut t) = tail.lock() else { break };
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > STDERR_TAIL_BYTES {
                    let mut cut = t.len() - STDERR_TAIL_BYTES;
                    while !t.is_char_boundary(cut) {
                        cut += 1;
                    }
                    t.drain(..cut);
                }
            }
        }
    }
}
