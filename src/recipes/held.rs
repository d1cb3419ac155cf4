//! A held queue node: its state (held / suspended / lost), the channel that
//! reports changes, fencing, and release. Curator and kazoo never tell a
//! holder that it lost its lock; we do.
//!
//! One monitor thread per client follows every node the client holds: it
//! hears session state changes once for all of them and keeps a data watch
//! on each node, so acquiring costs no thread of its own.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Select, Sender};
use jute::EventType;

use super::acquire::{Acquired, Cleanup};
use super::error::LockError;
use crate::client::WeakClient;
use crate::session::{RequestError, WatchedEvent};
use crate::{Client, Error, Op, OpResult, SessionState, Stat, Watch};

/// What a holder can rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockState {
    /// Our node exists and our session is connected.
    Held,
    /// The connection dropped: the lock is ours only if the session survives.
    /// Stop acting as the holder until `Held` again.
    Suspended,
    /// The session expired or went silent for a whole session timeout, or our
    /// node was deleted. Final: act as if someone else holds the lock.
    Lost,
}

/// Why a lock was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossReason {
    /// The server expired our session: its nodes are gone.
    SessionExpired,
    /// No contact with any server for a whole session timeout: the server
    /// has most likely expired the session, and another holder may exist.
    NoContact,
    /// Our lock node was deleted by someone else.
    NodeDeleted,
    /// The client was closed, or its I/O thread ended.
    ClientClosed,
}

impl LossReason {
    fn from_session(state: SessionState) -> LossReason {
        match state {
            SessionState::Expired => LossReason::SessionExpired,
            SessionState::Lost => LossReason::NoContact,
            _ => LossReason::ClientClosed,
        }
    }

    fn from_error(e: &Error) -> LossReason {
        match e {
            Error::SessionExpired => LossReason::SessionExpired,
            _ => LossReason::ClientClosed,
        }
    }
}

const HELD: u8 = 0;
const SUSPENDED: u8 = 1;
const LOST: u8 = 2;

fn decode_state(v: u8) -> LockState {
    match v {
        HELD => LockState::Held,
        SUSPENDED => LockState::Suspended,
        _ => LockState::Lost,
    }
}

/// Shared by a holder and the client's monitor.
#[derive(Debug)]
struct Shared {
    path: String,
    watch_node: bool,
    state: AtomicU8,
    released: AtomicBool,
    reason: Mutex<Option<LossReason>>,
    listeners: Mutex<Vec<Sender<LockState>>>,
}

impl Shared {
    /// Marks the lock lost for `reason`; the first reason given stays.
    fn lose(&self, reason: LossReason) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
        self.set(LockState::Lost);
    }

    fn reason(&self) -> Option<LossReason> {
        self.reason.lock().ok().and_then(|r| *r)
    }

    fn current(&self) -> LockState {
        decode_state(self.state.load(Ordering::SeqCst))
    }

    fn set(&self, state: LockState) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        let new = match state {
            LockState::Held => HELD,
            LockState::Suspended => SUSPENDED,
            LockState::Lost => LOST,
        };
        // Lost is final.
        let changed = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                (old != LOST && old != new).then_some(new)
            })
            .is_ok();
        if changed {
            if let Ok(mut ls) = self.listeners.lock() {
                ls.retain(|l| l.send(state).is_ok());
            }
        }
    }

    fn is_done(&self) -> bool {
        self.released.load(Ordering::SeqCst) || self.current() == LockState::Lost
    }
}

/// The node behind a guard. Releases on drop.
#[derive(Debug)]
pub(crate) struct HeldNode {
    client: Client,
    stat: Stat,
    shared: Arc<Shared>,
    done: bool,
}

impl HeldNode {
    /// `watch_node`: also watch our node, to learn at once if someone deletes
    /// it (one more request per acquisition, one watch event per release).
    pub(crate) fn new(client: &Client, acquired: Acquired, watch_node: bool) -> HeldNode {
        let shared = Arc::new(Shared {
            path: acquired.path,
            watch_node,
            state: AtomicU8::new(HELD),
            released: AtomicBool::new(false),
            reason: Mutex::new(None),
            listeners: Mutex::new(Vec::new()),
        });
        match client.extension(|| HolderMonitor::start(client)) {
            Some(monitor) => monitor.follow(shared.clone()),
            None => log::error!("holder monitor slot holds another type"),
        }
        HeldNode {
            client: client.clone(),
            stat: acquired.stat,
            shared,
            done: false,
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.shared.path
    }

    pub(crate) fn stat(&self) -> &Stat {
        &self.stat
    }

    pub(crate) fn state(&self) -> LockState {
        self.shared.current()
    }

    pub(crate) fn lost_reason(&self) -> Option<LossReason> {
        self.shared.reason()
    }

    pub(crate) fn state_changes(&self) -> Receiver<LockState> {
        let (tx, rx) = crossbeam_channel::unbounded();
        if let Ok(mut ls) = self.shared.listeners.lock() {
            let _ = tx.send(self.shared.current());
            ls.push(tx);
        }
        rx
    }

    /// Applies `ops` only if our node still exists: a write that a paused or
    /// partitioned former holder cannot make.
    pub(crate) fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(self.path(), None));
        all.extend_from_slice(ops);
        match self.client.multi(&all) {
            Ok(mut results) => {
                results.remove(0);
                Ok(results)
            }
            Err(Error::MultiFailed { index: 0, .. }) => {
                self.shared.lose(LossReason::NodeDeleted);
                Err(LockError::Lost)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes our node. On a transient failure the delete goes on in the
    /// background while the session lives, and the error is returned.
    pub(crate) fn release(&mut self) -> Result<(), LockError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        self.shared.released.store(true, Ordering::SeqCst);
        let cleanup = Cleanup::Node(self.path().to_owned());
        match cleanup.run_once(&self.client) {
            Ok(()) => Ok(()),
            Err(e) if e.is_session_ended() => Ok(()),
            Err(e) => {
                cleanup.spawn(self.client.clone());
                Err(e.into())
            }
        }
    }
}

impl Drop for HeldNode {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("releasing {}: {e}; retrying in the background", self.path());
        }
    }
}

/// The per-client monitor's mailbox.
struct HolderMonitor {
    tx: Sender<Arc<Shared>>,
}

impl HolderMonitor {
    fn start(client: &Client) -> HolderMonitor {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (states, token) = client.subscribe_scoped();
        let weak = client.downgrade();
        let spawned = std::thread::Builder::new()
            .name("zklock-holders".into())
            .spawn(move || {
                let _token = token;
                Monitor {
                    client: weak,
                    holders: Vec::new(),
                }
                .run(&rx, &states)
            });
        if let Err(e) = spawned {
            log::error!("cannot start the holder monitor: {e}");
        }
        HolderMonitor { tx }
    }

    fn follow(&self, shared: Arc<Shared>) {
        if self.tx.send(shared).is_err() {
            log::warn!("holder monitor is gone; lock state follows only fenced writes");
        }
    }
}

struct Followed {
    shared: Arc<Shared>,
    watch: Option<Watch>,
    /// Existence must be (re)confirmed: new, or back from a disconnect.
    unchecked: bool,
}

/// What woke the monitor.
enum Woke {
    New(Option<Arc<Shared>>),
    State(Option<SessionState>),
    Watch(
        usize,
        Option<std::result::Result<WatchedEvent, RequestError>>,
    ),
}

struct Monitor {
    client: WeakClient,
    holders: Vec<Followed>,
}

impl Monitor {
    fn run(mut self, new: &Receiver<Arc<Shared>>, states: &Receiver<SessionState>) {
        loop {
            self.holders.retain(|h| !h.shared.is_done());
            self.check_unchecked();
            let woke = {
                let mut sel = Select::new();
                sel.recv(new);
                sel.recv(states);
                // Watch receivers, paired with their holder's index.
                let mut watched = Vec::new();
                for (i, h) in self.holders.iter().enumerate() {
                    if let Some(w) = &h.watch {
                        sel.recv(w.receiver());
                        watched.push(i);
                    }
                }
                let op = sel.select();
                match op.index() {
                    0 => Woke::New(op.recv(new).ok()),
                    1 => Woke::State(op.recv(states).ok()),
                    n => {
                        let i = watched[n - 2];
                        match &self.holders[i].watch {
                            Some(w) => Woke::Watch(i, op.recv(w.receiver()).ok()),
                            None => Woke::Watch(i, None),
                        }
                    }
                }
            };
            match woke {
                Woke::New(Some(shared)) => self.holders.push(Followed {
                    unchecked: shared.watch_node,
                    shared,
                    watch: None,
                }),
                Woke::New(None) => return,
                Woke::State(Some(state)) => self.on_state(state),
                // The client's I/O thread is gone.
                Woke::State(None) => return self.all_lost(LossReason::ClientClosed),
                Woke::Watch(i, msg) => {
                    let h = &mut self.holders[i];
                    let outcome = match (msg, &h.watch) {
                        (Some(r), Some(w)) => w.event_from(r),
                        _ => Err(Error::Closed),
                    };
                    h.watch = None;
                    h.unchecked = true;
                    match outcome {
                        Ok(e) if e.kind == EventType::NodeDeleted => {
                            h.shared.lose(LossReason::NodeDeleted)
                        }
                        Err(e) if e.is_session_ended() => h.shared.lose(LossReason::from_error(&e)),
                        // Data changed, or the watch was lost with a
                        // connection: look again.
                        _ => {}
                    }
                }
            }
        }
    }

    fn on_state(&mut self, state: SessionState) {
        match state {
            SessionState::Connected => {
                for h in &mut self.holders {
                    if h.shared.current() == LockState::Suspended {
                        h.unchecked = true;
                        h.watch = None;
                    }
                }
            }
            SessionState::Suspended | SessionState::Connecting => {
                for h in &self.holders {
                    h.shared.set(LockState::Suspended);
                }
            }
            // No contact for a whole session timeout, or the session ended.
            other => self.all_lost(LossReason::from_session(other)),
        }
    }

    fn all_lost(&mut self, reason: LossReason) {
        for h in self.holders.drain(..) {
            h.shared.lose(reason);
        }
    }

    /// Confirms that nodes we have not seen since (re)connecting still
    /// exist, leaving a data watch where asked. getData, unlike exists,
    /// leaves no watch behind on a node that is already gone.
    fn check_unchecked(&mut self) {
        if !self.holders.iter().any(|h| h.unchecked) {
            return;
        }
        let Some(client) = self.client.upgrade() else {
            return self.all_lost(LossReason::ClientClosed);
        };
        if client.state() != SessionState::Connected {
            return;
        }
        for h in self.holders.iter_mut().filter(|h| h.unchecked) {
            // Some(watch or not) if the node exists, None if it is gone.
            let found = if h.shared.watch_node {
                match client.get_data_w(&h.shared.path) {
                    Ok((_, _, w)) => Ok(Some(Some(w))),
                    Err(e) if e.is_no_node() => Ok(None),
                    Err(e) => Err(e),
                }
            } else {
                client.exists(&h.shared.path).map(|s| s.map(|_| None))
            };
            match found {
                Ok(Some(w)) => {
                    h.unchecked = false;
                    h.watch = w;
                    h.shared.set(LockState::Held);
                }
                Ok(None) => h.shared.lose(LossReason::NodeDeleted),
                Err(e) if e.is_session_ended() => h.shared.lose(LossReason::from_error(&e)),
                // Transient: tried again after the next state change.
                Err(_) => {}
            }
        }
    }
}
