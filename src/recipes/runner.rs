//! Runs the lock machine on the client's I/O thread, and the API side's
//! door to it. The runner turns the machine's events into guards, errors
//! and state changes for the threads that wait; it never blocks.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use jute::Response;

use super::attempt::LockSpec;
use super::error::LockError;
use super::guard::LockGuard;
use super::held::{HolderState, LockState};
use super::machine::{AttemptId, LockEvent, LockMachine};
use super::pending::PendingLock;
use crate::client::WeakClient;
use crate::driver::{IoTask, TaskRequest, TaskSender};
use crate::session::{RequestError, SessionState, WatchEvent};
use crate::{oneshot, Client, Error};

/// Where an acquisition's outcome goes.
#[derive(Clone)]
pub(crate) enum Outcome {
    /// The channel of its own [`PendingLock`].
    Alone(Sender<Result<LockGuard, LockError>>),
    /// A [`PendingSet`](super::PendingSet)'s channel, with the set's key.
    InSet(Sender<(u64, Result<LockGuard, LockError>)>, u64),
    /// A thread blocked in `lock()`.
    Blocked(oneshot::Sender<Result<LockGuard, LockError>>),
}

impl Outcome {
    /// Hands the outcome over. If nobody waits any more, it is dropped
    /// here: a guard then releases itself.
    fn send(self, outcome: Result<LockGuard, LockError>) {
        let _ = match self {
            Outcome::Alone(tx) => tx.send(outcome).map_err(drop),
            Outcome::InSet(tx, key) => tx.send((key, outcome)).map_err(drop),
            Outcome::Blocked(tx) => tx.send(outcome).map_err(drop),
        };
    }
}

/// What API threads ask of the runner.
pub(crate) enum Message {
    Acquire {
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
        outcome: Outcome,
    },
    /// The waiter gave up; a guard already sent releases itself on drop.
    Cancel(AttemptId),
    /// A [`PendingSet`](super::PendingSet) gave up a key whose outcome it
    /// has not handed out: a guard already granted will never be read (the
    /// set's own sender keeps it in the channel), so it is released now.
    Withdraw(AttemptId),
    /// The guard let go; `done` hears when the node is gone.
    Release {
        id: AttemptId,
        done: Option<oneshot::Sender<()>>,
    },
}

struct Runner {
    machine: LockMachine,
    client: WeakClient,
    sender: TaskSender,
    waiting: HashMap<AttemptId, Outcome>,
    held: HashMap<AttemptId, Arc<HolderState>>,
    releasing: HashMap<AttemptId, Vec<oneshot::Sender<()>>>,
}

impl Runner {
    /// Hands out what the machine decided.
    fn dispatch(&mut self, now: Instant) {
        while let Some(event) = self.machine.poll_event() {
            match event {
                LockEvent::Acquired { id, path, stat } => {
                    let Some(outcome) = self.waiting.remove(&id) else {
                        // Nobody waits any more.
                        self.machine.release(now, id, false);
                        continue;
                    };
                    let Some(client) = self.client.upgrade() else {
                        self.machine.release(now, id, false);
                        continue;
                    };
                    let state = Arc::new(HolderState::new());
                    self.held.insert(id, state.clone());
                    let guard = LockGuard::new(
                        id,
                        client.to_client_path(&path),
                        stat,
                        state,
                        client,
                        self.sender.clone(),
                    );
                    // If the waiter left meanwhile, the guard comes back
                    // with the error and releases itself as it drops.
                    outcome.send(Ok(guard));
                }
                LockEvent::Failed { id, mut error } => {
                    if let (LockError::SequenceExhausted { path }, Some(client)) =
                        (&mut error, self.client.upgrade())
                    {
                        *path = client.to_client_path(path);
                    }
                    if let Some(outcome) = self.waiting.remove(&id) {
                        outcome.send(Err(error));
                    }
                }
                LockEvent::State { id, state, reason } => {
                    if let Some(holder) = self.held.get(&id) {
                        match (state, reason) {
                            (LockState::Lost, Some(r)) => holder.lose(r),
                            (s, _) => holder.set(s),
                        }
                    }
                    if state == LockState::Lost {
                        self.held.remove(&id);
                    }
                }
                LockEvent::Released { id } => {
                    for done in self.releasing.remove(&id).unwrap_or_default() {
                        let _ = done.send(());
                    }
                }
            }
        }
    }
}

impl Drop for Runner {
    /// The I/O thread is ending (the last client handle went): whoever
    /// still waits hears so, on a [`PendingSet`](super::PendingSet)'s
    /// channel too, which its own sender keeps open.
    fn drop(&mut self) {
        for (_, outcome) in self.waiting.drain() {
            outcome.send(Err(LockError::Client(Error::Closed)));
        }
    }
}

impl IoTask for Runner {
    fn handle_message(&mut self, now: Instant, message: Box<dyn Any + Send>) {
        let Ok(message) = message.downcast::<Message>() else {
            log::error!("lock runner: a message of another type");
            return;
        };
        match *message {
            Message::Acquire {
                id,
                spec,
                uuid,
                deadline,
                no_wait,
                outcome,
            } => {
                self.waiting.insert(id, outcome);
                self.machine.acquire(now, id, spec, uuid, deadline, no_wait);
            }
            Message::Cancel(id) => {
                if self.waiting.remove(&id).is_some() {
                    self.machine.cancel(now, id);
                }
            }
            Message::Withdraw(id) => {
                if self.waiting.remove(&id).is_some() {
                    self.machine.cancel(now, id);
                } else if let Some(state) = self.held.remove(&id) {
                    state.mark_released();
                    self.machine.release(now, id, false);
                }
            }
            Message::Release { id, done } => {
                self.held.remove(&id);
                let report = done.is_some();
                if let Some(done) = done {
                    self.releasing.entry(id).or_default().push(done);
                }
                self.machine.release(now, id, report);
            }
        }
        self.dispatch(now);
    }

    fn handle_reply(&mut self, now: Instant, token: u64, result: Result<Response, RequestError>) {
        self.machine.handle_reply(now, token, result);
        self.dispatch(now);
    }

    fn handle_watch(&mut self, now: Instant, token: u64, event: Result<WatchEvent, RequestError>) {
        self.machine.handle_watch(now, token, event);
        self.dispatch(now);
    }

    fn handle_session(&mut self, now: Instant, state: SessionState, session_id: i64) {
        self.machine.handle_session(now, state, session_id);
        self.dispatch(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now);
        self.dispatch(now);
    }

    fn poll_request(&mut self) -> Option<TaskRequest> {
        self.machine.poll_request().map(|o| TaskRequest {
            token: o.token,
            request: o.request,
            watch: o.watch,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    fn wants_watch(&self, token: u64) -> bool {
        self.machine.wants_watch(token)
    }
}

/// A client's door to its lock runner: starts acquisitions.
#[derive(Debug)]
pub(crate) struct LockService {
    sender: TaskSender,
    next_id: AtomicU64,
    /// Random once per client; attempt ids are derived from it and a
    /// counter, so queueing costs no system call for randomness.
    uuid_seed: u128,
}

impl LockService {
    /// The client's service, starting its runner on first use.
    pub(crate) fn of(client: &Client) -> Result<&LockService, LockError> {
        client
            .extension(|| {
                let sender = client.task_sender();
                let runner = Runner {
                    machine: LockMachine::new(),
                    client: client.downgrade(),
                    sender: sender.clone(),
                    waiting: HashMap::new(),
                    held: HashMap::new(),
                    releasing: HashMap::new(),
                };
                if !client.install_task(Box::new(runner)) {
                    log::warn!("the I/O thread is gone; lock calls will fail");
                }
                LockService {
                    sender,
                    next_id: AtomicU64::new(1),
                    uuid_seed: uuid::Uuid::new_v4().as_u128(),
                }
            })
            .ok_or(LockError::Client(Error::Closed))
    }

    /// A v4-shaped UUID unique to this attempt: the seed mixed with a
    /// bijection of the counter (distinct ids give distinct UUIDs).
    fn attempt_uuid(&self, id: AttemptId) -> String {
        let mixed = u128::from(splitmix64(id)) << 64 | u128::from(splitmix64(!id));
        uuid::Builder::from_random_bytes((self.uuid_seed ^ mixed).to_be_bytes())
            .into_uuid()
            .to_string()
    }

    /// Starts an acquisition on the I/O thread and returns at once.
    pub(crate) fn start(
        &self,
        spec: Arc<LockSpec>,
        deadline: Option<Instant>,
        no_wait: bool,
    ) -> PendingLock {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let id = self.start_to(spec, deadline, no_wait, Outcome::Alone(tx));
        PendingLock::new(id, rx, self.sender.clone())
    }

    /// Starts an acquisition for a thread that blocks until its outcome.
    pub(crate) fn start_blocking(
        &self,
        spec: Arc<LockSpec>,
        deadline: Option<Instant>,
        no_wait: bool,
    ) -> (AttemptId, oneshot::Receiver<Result<LockGuard, LockError>>) {
        let (tx, rx) = oneshot::channel();
        let id = self.start_to(spec, deadline, no_wait, Outcome::Blocked(tx));
        (id, rx)
    }

    /// Gives up an acquisition whose outcome nobody waits for any more (a
    /// guard that still comes releases itself).
    pub(crate) fn cancel(&self, id: AttemptId) {
        self.sender.send(Box::new(Message::Cancel(id)));
    }

    /// Starts an acquisition whose outcome goes to `outcome`; if the I/O
    /// thread is gone, `outcome` hears so at once.
    pub(crate) fn start_to(
        &self,
        spec: Arc<LockSpec>,
        deadline: Option<Instant>,
        no_wait: bool,
        outcome: Outcome,
    ) -> AttemptId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let sent = self.sender.send(Box::new(Message::Acquire {
            id,
            spec,
            uuid: self.attempt_uuid(id),
            deadline,
            no_wait,
            outcome: outcome.clone(),
        }));
        if !sent {
            outcome.send(Err(LockError::Client(Error::Closed)));
        }
        id
    }

    /// The door to this client's runner.
    pub(crate) fn sender(&self) -> &TaskSender {
        &self.sender
    }
}

/// A bijection on u64 that scatters its input (SplitMix64's finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
