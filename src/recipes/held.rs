//! A held queue node: its state (held / suspended / lost), the channel that
//! reports changes, fencing, and release. Curator and kazoo never tell a
//! holder that it lost its lock; we do.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{select, Receiver, Sender};
use jute::EventType;

use super::acquire::{Acquired, Cleanup};
use super::error::LockError;
use crate::{Client, Error, Op, OpResult, SessionState, Stat};

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

/// Shared by the holder and its monitor thread.
#[derive(Debug)]
struct Shared {
    state: AtomicU8,
    released: AtomicBool,
    listeners: Mutex<Vec<Sender<LockState>>>,
}

impl Shared {
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
        let old = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                (old != LOST && old != new).then_some(new)
            });
        if old.is_ok() {
            if let Ok(mut ls) = self.listeners.lock() {
                ls.retain(|l| l.send(state).is_ok());
            }
        }
    }
}

/// The node behind a guard. Releases on drop.
#[derive(Debug)]
pub(crate) struct HeldNode {
    client: Client,
    path: String,
    stat: Stat,
    shared: Arc<Shared>,
    // Dropping this stops the monitor thread.
    _stop: Sender<()>,
    done: bool,
}

impl HeldNode {
    /// `watch_node`: also watch our node, to learn at once if someone deletes
    /// it (one more request per acquisition, and one watch event per release).
    pub(crate) fn new(client: &Client, acquired: Acquired, watch_node: bool) -> HeldNode {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(HELD),
            released: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
        });
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        let monitor = Monitor {
            client: client.clone(),
            path: acquired.path.clone(),
            shared: shared.clone(),
            stop: stop_rx,
            watch_node,
        };
        if let Err(e) = std::thread::Builder::new()
            .name("zklock-holder".into())
            .spawn(move || monitor.run())
        {
            log::error!("cannot watch the held lock {}: {e}", acquired.path);
        }
        HeldNode {
            client: client.clone(),
            path: acquired.path,
            stat: acquired.stat,
            shared,
            _stop: stop_tx,
            done: false,
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn stat(&self) -> &Stat {
        &self.stat
    }

    pub(crate) fn state(&self) -> LockState {
        decode_state(self.shared.state.load(Ordering::SeqCst))
    }

    pub(crate) fn state_changes(&self) -> Receiver<LockState> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let _ = tx.send(self.state());
        if let Ok(mut ls) = self.shared.listeners.lock() {
            ls.push(tx);
        }
        rx
    }

    /// Applies `ops` only if our node still exists: a write that a paused or
    /// partitioned former holder cannot make.
    pub(crate) fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(&self.path, None));
        all.extend_from_slice(ops);
        match self.client.multi(&all) {
            Ok(mut results) => {
                results.remove(0);
                Ok(results)
            }
            Err(Error::MultiFailed { index: 0, .. }) => {
                self.shared.set(LockState::Lost);
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
        let cleanup = Cleanup::Node(self.path.clone());
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
            log::warn!("releasing {}: {e}; retrying in the background", self.path);
        }
    }
}

/// Watches a held node and the session; reports changes of LockState.
struct Monitor {
    client: Client,
    path: String,
    shared: Arc<Shared>,
    stop: Receiver<()>,
    watch_node: bool,
}

impl Monitor {
    fn run(self) {
        let (states, _token) = self.client.subscribe_scoped();
        // The watch armed on our node (re-armed after every event), and
        // whether our node's existence needs checking.
        let mut watch = None;
        let mut unchecked = self.watch_node;
        loop {
            if unchecked && self.client.state() == SessionState::Connected {
                let checked = if self.watch_node {
                    self.client.exists_w(&self.path).map(|(s, w)| {
                        watch = Some(w);
                        s
                    })
                } else {
                    self.client.exists(&self.path)
                };
                match checked {
                    Ok(Some(_)) => {
                        unchecked = false;
                        self.shared.set(LockState::Held);
                    }
                    Ok(None) => return self.shared.set(LockState::Lost),
                    Err(e) if e.is_session_ended() => return self.shared.set(LockState::Lost),
                    Err(_) => {}
                }
            }
            let never = crossbeam_channel::never();
            let watch_rx = watch
                .as_ref()
                .map_or(&never, |w: &crate::Watch| w.receiver());
            select! {
                recv(self.stop) -> _ => return,
                recv(states) -> s => match s {
                    // Back from a disconnect: confirm our node survived.
                    Ok(SessionState::Connected) => {
                        if self.shared.state.load(Ordering::SeqCst) == SUSPENDED {
                            watch = None;
                            unchecked = true;
                        }
                    }
                    Ok(SessionState::Suspended | SessionState::Connecting) => {
                        self.shared.set(LockState::Suspended)
                    }
                    Ok(_) | Err(_) => return self.shared.set(LockState::Lost),
                },
                recv(watch_rx) -> ev => {
                    let outcome = match (ev, &watch) {
                        (Ok(r), Some(w)) => w.event_from(r),
                        _ => Err(Error::Closed),
                    };
                    watch = None;
                    unchecked = true;
                    match outcome {
                        Ok(e) if e.kind == EventType::NodeDeleted => {
                            return self.shared.set(LockState::Lost)
                        }
                        Ok(_) => {}
                        Err(e) if e.is_session_ended() => return self.shared.set(LockState::Lost),
                        Err(_) => {}
                    }
                }
            }
        }
    }
}
