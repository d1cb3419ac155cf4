//! zklock's recipes against real Apache Curator (JVM) and kazoo (CPython)
//! processes contending for the same ZooKeeper paths.
//!
//! Exclusion is judged from wall-clock stamps: peers stamp `acquired` right
//! after acquiring and `released` right before releasing; our own holders
//! stamp the same way (`now_millis()` right after a lock call returns and
//! right before `unlock`). Holders that really exclude each other have
//! `[acquired, released]` intervals that never overlap. "Still waiting" is a
//! short bounded wait that must see nothing.

mod election;
mod lock_delay;
mod mutex;
mod revocation;
mod rwlock;
mod semaphore;
mod sequence_end;
#[cfg(feature = "tls")]
mod tls;

use std::cell::Cell;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use testkit::peers::{acquired_node, line_millis, now_millis, Peer, PeerKind};
use testkit::zk;
use testkit::{children, poll_until};
use zklock::recipes::{
    inspect, Election, LockError, LockGuard, Mutex, NodeKind, NodeOrigin, QueueEntry, RwLock,
    Semaphore,
};
use zklock::Client;

const SESSION: Duration = Duration::from_secs(10);
/// Bound for a hand-over to a waiter (or an uncontended acquire).
const HANDOVER: Duration = Duration::from_secs(15);
/// How long a waiter must stay quiet to count as "still waiting".
const STILL_WAITING: Duration = Duration::from_millis(700);
/// Bound for the queue on the server to reach an expected size.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

fn connect() -> String {
    zk::shared().connect_string()
}

fn client() -> Client {
    Client::connect(&connect(), SESSION).expect("connect to the test server")
}

fn lock_path(name: &str) -> String {
    format!("/interop-{name}-{}", std::process::id())
}

/// Waits (bounded) until `path` has exactly `n` children: a contender we
/// just started has created its node and so has joined the queue.
fn wait_for_queue(c: &Client, path: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    let reached = poll_until(QUEUE_WAIT, || {
        names = children(c, path);
        names.len() == n
    });
    assert!(
        reached,
        "{path}: expected {n} children within {QUEUE_WAIT:?}, have {names:?}"
    );
    names
}

fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn queue(c: &Client, path: &str) -> Vec<QueueEntry> {
    inspect(c, path).unwrap_or_else(|e| panic!("inspect {path}: {e}"))
}

fn describe(q: &[QueueEntry]) -> String {
    q.iter()
        .map(|e| {
            format!(
                "{} ({:?}, {:?}, data {:?})",
                e.name,
                e.kind,
                e.origin,
                String::from_utf8_lossy(&e.data)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Asserts one queue entry's name, kind, origin and (if given) data.
fn assert_entry(
    q: &[QueueEntry],
    i: usize,
    name: Option<&str>,
    kind: NodeKind,
    origin: NodeOrigin,
    data: Option<&[u8]>,
) {
    let e = q
        .get(i)
        .unwrap_or_else(|| panic!("no queue entry {i}: {}", describe(q)));
    if let Some(name) = name {
        assert_eq!(e.name, name, "entry {i}: {}", describe(q));
    }
    assert_eq!(e.kind, kind, "entry {i}: {}", describe(q));
    assert_eq!(e.origin, origin, "entry {i}: {}", describe(q));
    if let Some(data) = data {
        assert_eq!(e.data, data, "entry {i}: {}", describe(q));
    }
    assert_ne!(e.owner_session, 0, "entry {i} is not ephemeral");
}

/// `earlier <= later`, in unix millis, with a readable message.
fn assert_order(earlier: (&str, u64), later: (&str, u64)) {
    assert!(
        earlier.1 <= later.1,
        "{} at {} should not come after {} at {} ({} ms later)",
        earlier.0,
        earlier.1,
        later.0,
        later.1,
        earlier.1 - later.1
    );
}

// ------------------------------------------------------------------- peers

fn peer_acquired(peer: &mut Peer) -> String {
    peer.expect_acquired(HANDOVER)
}

fn peer_still_waiting(peer: &mut Peer) {
    peer.expect_waiting(STILL_WAITING);
}

// ------------------------------------------------------- our own holders

enum Cmd {
    Acquire,
    Release,
}

enum Event {
    Acquired {
        node: String,
        token: i64,
        millis: u64,
    },
    Released(u64),
    Failed(LockError),
}

/// A zklock holder on its own thread, driven like a peer: `acquire` starts
/// a blocking lock call, `wait_acquired` sees its outcome, `release` stamps
/// and unlocks. The thread is detached: if a test fails while it is blocked
/// in a lock call, it simply ends with the test binary.
struct Local {
    label: String,
    /// Fencing token of the last acquisition.
    token: Cell<i64>,
    cmds: Sender<Cmd>,
    events: Receiver<Event>,
}

impl Local {
    fn spawn(
        label: &str,
        take: impl Fn() -> Result<LockGuard, LockError> + Send + 'static,
    ) -> Local {
        let (cmds, cmd_rx) = mpsc::channel::<Cmd>();
        let (ev_tx, events) = mpsc::channel::<Event>();
        thread::Builder::new()
            .name(format!("local-{label}"))
            .spawn(move || {
                let mut held: Option<LockGuard> = None;
                for cmd in cmd_rx {
                    let event = match cmd {
                        Cmd::Acquire => match take() {
                            Ok(guard) => {
                                let millis = now_millis();
                                let node = guard.node_path().to_owned();
                                let token = guard.fencing_token();
                                held = Some(guard);
                                Event::Acquired {
                                    node,
                                    token,
                                    millis,
                                }
                            }
                            Err(e) => Event::Failed(e),
                        },
                        Cmd::Release => {
                            let guard = held.take().expect("release without a held lock");
                            let millis = now_millis();
                            match guard.unlock() {
                                Ok(()) => Event::Released(millis),
                                Err(e) => Event::Failed(e),
                            }
                        }
                    };
                    if ev_tx.send(event).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a local holder thread");
        Local {
            label: label.to_string(),
            token: Cell::new(0),
            cmds,
            events,
        }
    }

    fn acquire(&self) {
        self.cmds.send(Cmd::Acquire).expect("local holder alive");
    }

    /// `Some((node path, acquired millis))`, or `None` if still waiting.
    fn wait_acquired(&self, timeout: Duration) -> Option<(String, u64)> {
        match self.events.recv_timeout(timeout) {
            Ok(Event::Acquired {
                node,
                token,
                millis,
            }) => {
                self.token.set(token);
                Some((node, millis))
            }
            Ok(Event::Released(_)) => panic!("{}: unexpected `released`", self.label),
            Ok(Event::Failed(e)) => panic!("{}: lock call failed: {e:?}", self.label),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("{}: thread died", self.label),
        }
    }

    /// Fencing token of the last acquisition seen by `wait_acquired`.
    fn token(&self) -> i64 {
        self.token.get()
    }

    fn acquired(&self) -> (String, u64) {
        self.wait_acquired(HANDOVER)
            .unwrap_or_else(|| panic!("{}: not acquired within {HANDOVER:?}", self.label))
    }

    fn still_waiting(&self) {
        if let Some((node, millis)) = self.wait_acquired(STILL_WAITING) {
            panic!(
                "{}: acquired {node} at {millis} while it should wait",
                self.label
            );
        }
    }

    /// Releases; returns the millis stamped right before unlocking.
    fn release(&self) -> u64 {
        self.cmds.send(Cmd::Release).expect("local holder alive");
        match self.events.recv_timeout(HANDOVER) {
            Ok(Event::Released(millis)) => millis,
            Ok(Event::Failed(e)) => panic!("{}: unlock failed: {e:?}", self.label),
            Ok(Event::Acquired { .. }) => panic!("{}: unexpected `acquired`", self.label),
            Err(e) => panic!("{}: no release: {e:?}", self.label),
        }
    }
}
