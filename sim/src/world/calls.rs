//! The application's blocking calls whose outcome the world checks:
//! fenced writes, revocation, proclaiming and observing a leader, closing
//! a leader latch. Each runs on one of the world's caller threads
//! (writes.rs); the world stays deterministic by waiting for the thread at
//! the two moments that matter to the run: until its request is queued
//! for the core (which the world then writes at once, noting its xids),
//! and, once every request it wrote has been answered on that connection,
//! until the thread either returns or queues its next request. A call
//! whose connection went meanwhile is no longer waited for (its thread
//! hears of the loss from the core and returns; its outcome is read when
//! it is there).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use zklock::recipes::{Leader, LockGuard};
use zklock::OpResult;

use super::*;

/// What a call returned.
pub(super) enum Outcome {
    Fenced(Result<Vec<OpResult>, LockError>),
    Revoke(Result<bool, LockError>),
    RevokeHolder(Result<Option<String>, LockError>),
    Proclaim(Result<(), LockError>),
    Observe(Result<Option<Leader>, LockError>),
    Close(Result<(), LockError>),
}

/// What the world checks a call's outcome against.
pub(super) enum Purpose {
    /// A fenced write by the holder `id` of `node` (fenced.rs).
    Fenced {
        id: AttemptId,
        node: String,
        kind: fenced::FencedKind,
        /// Whether the guard's node was there, ours and first in its
        /// queue when the world last looked (after the last step).
        holder_before: bool,
        /// The guard, shared with the call's thread.
        guard: Arc<LockGuard>,
        /// What the write puts in `FENCED_NODE` (unique to it), and
        /// whether the world saw it land.
        data: Vec<u8>,
        applied: bool,
    },
    /// A request that a lock's holder let go (revocation.rs).
    Revoke { node: Option<String> },
    /// The holder `id` proclaims `value` (observe.rs).
    Proclaim { value: Vec<u8> },
    /// A look at the election's leader: every (head, its data) the world
    /// saw since the call began (observe.rs).
    Observe {
        seen: Vec<Option<(String, Vec<u8>)>>,
        healthy_at_start: bool,
    },
    /// A latch closed (latches.rs): its session, its events, and whether
    /// it led when closed.
    Close {
        mode: zklock::recipes::CloseMode,
        session: i64,
        events: crossbeam_channel::Receiver<zklock::recipes::LatchEvent>,
        was_leader: bool,
    },
}

pub(super) struct Running {
    pub(super) client: usize,
    pub(super) generation: u32,
    pub(super) started: Instant,
    busy: Arc<AtomicBool>,
    outcome: Arc<StdMutex<Option<Outcome>>>,
    /// The connection its last request went out on, and the xids written
    /// with it; `None` once it is no longer waited for.
    awaiting: Option<(ConnId, Vec<i32>)>,
    /// Left alone while its thread was still busy (see [`THREAD_WAIT`]):
    /// its pace is then the machine's, not the seed's, and bounds on its
    /// virtual duration (O2) do not apply.
    pub(super) unpaced: bool,
    pub(super) purpose: Purpose,
}

impl Running {
    fn kind(&self) -> &'static str {
        match self.purpose {
            Purpose::Fenced { .. } => "fenced",
            Purpose::Revoke { .. } => "revoke",
            Purpose::Proclaim { .. } => "proclaim",
            Purpose::Observe { .. } => "observe",
            Purpose::Close { .. } => "close",
        }
    }
}

/// The most a thread is waited for once its reply is in: a call that
/// waits on something else (a watch, a reconnect) is then left alone; so
/// is one whose thread a loaded machine did not run for that long.
const THREAD_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl World {
    /// Runs `call` for client `c` on a caller thread, if the client is
    /// connected and its core has nothing queued: `false` if not run.
    pub(super) fn start_call(
        &mut self,
        c: usize,
        purpose: Purpose,
        call: impl FnOnce() -> Outcome + Send + 'static,
    ) -> bool {
        let now = self.now;
        self.clients[c].core.turn(now);
        let client = &self.clients[c];
        let connected = client.core.state() == zklock::SessionState::Connected
            && client.link.as_ref().is_some_and(|l| l.heard_handshake);
        if !connected || client.core.has_commands() {
            return false;
        }
        let outcome = Arc::new(StdMutex::new(None));
        let slot = outcome.clone();
        let busy = self.callers.run(Box::new(move || {
            let o = call();
            if let Ok(mut s) = slot.lock() {
                *s = Some(o);
            }
        }));
        let awaiting = self.send_call_request(c, &busy);
        let unpaced = awaiting.is_none() && busy.load(Ordering::Acquire);
        let generation = self.clients[c].generation;
        self.calls.push(Running {
            client: c,
            generation,
            started: now,
            busy,
            outcome,
            awaiting,
            unpaced,
            purpose,
        });
        true
    }

    /// What the holder `id` of client `c`, granted now for `hold`, calls
    /// (no draw: seeds replay as before): every other mutex holder writes
    /// fenced halfway; every other holder of lock 0 (a multi-lock's too) is asked
    /// to let go a quarter in, by the next client; every other campaign's
    /// winner proclaims halfway.
    pub(super) fn plan_holder_calls(&mut self, c: usize, id: AttemptId, hold: Duration) {
        let now = self.now;
        let generation = self.clients[c].generation;
        let Some(t) = self.clients[c].attempts.get(&id) else {
            return;
        };
        // None long after the faults: a call over a slow link (a round trip
        // of up to a fifth of a 40 s timeout) must end well before the
        // horizon, its guard's release waiting for it.
        if now > self.faults_until + Duration::from_secs(60) {
            return;
        }
        let lock = t.lock;
        let guard = matches!(t.handle, Handle::Guard(_));
        let multi = matches!(t.handle, Handle::MultiHeld(_));
        let mutex = matches!(self.clients[c].locks[lock], SimLock::Mutex(_));
        // (Half of them: those before a fault, which race a loss, are
        // all made.)
        if guard && mutex && id % 6 < 3 {
            let kind = match id % 3 {
                0 => fenced::FencedKind::Accepted,
                1 => fenced::FencedKind::CreateExisting,
                _ => fenced::FencedKind::WrongVersion,
            };
            let action = Action::Fenced {
                client: c,
                generation,
                id,
                kind,
            };
            self.schedule(now + hold / 2, action);
        }
        if (guard || multi) && lock == revocation::REVOKED_LOCK && id % 2 == 0 {
            let action = Action::Revoke {
                by: (c + 1) % self.clients.len(),
                client: c,
                generation,
                id,
                by_holder: id % 4 == 0,
            };
            self.schedule(now + hold / 4, action);
        }
        if guard && lock == ELECTION_LOCK && id % 2 == 0 {
            let action = Action::Proclaim {
                client: c,
                generation,
                id,
            };
            self.schedule(now + hold / 2, action);
        }
    }

    /// Waits until the call's thread has queued its request (or returned),
    /// and writes what the core then sends: the xids written.
    fn send_call_request(&mut self, c: usize, busy: &AtomicBool) -> Option<(ConnId, Vec<i32>)> {
        let started = std::time::Instant::now();
        while !self.clients[c].core.has_commands() && busy.load(Ordering::Acquire) {
            if started.elapsed() > THREAD_WAIT {
                return None;
            }
            std::thread::yield_now();
        }
        if !self.clients[c].core.has_commands() {
            return None;
        }
        let now = self.now;
        self.clients[c].core.turn(now);
        let before = self.clients[c].link.as_ref()?.unanswered.len();
        self.send_output(c, now);
        let link = self.clients[c].link.as_ref()?;
        let xids: Vec<i32> = link
            .unanswered
            .iter()
            .skip(before)
            .filter_map(|(x, _)| *x)
            .collect();
        // Nothing written (not connected yet): not waited for.
        (!xids.is_empty()).then_some((link.conn, xids))
    }

    /// After every step: calls whose replies are in are waited for (until
    /// they return or send again), and the outcomes of those that returned
    /// are checked.
    pub(super) fn settle_calls(&mut self) -> Result<(), Violation> {
        if self.calls.is_empty() {
            return Ok(());
        }
        let mut i = 0;
        while i < self.calls.len() {
            let call = &self.calls[i];
            let c = call.client;
            let same_session = self.clients[c].generation == call.generation;
            let gone = call.awaiting.as_ref().is_some_and(|(conn, _)| {
                self.clients[c]
                    .link
                    .as_ref()
                    .is_none_or(|l| l.conn != *conn)
            });
            if gone || !same_session {
                self.calls[i].awaiting = None;
            }
            self.observe_during_call(i)?;
            let done = self.calls[i].outcome.lock().ok().and_then(|mut o| o.take());
            match done {
                Some(outcome) => {
                    let call = self.calls.remove(i);
                    self.call_returned(call, outcome)?;
                }
                None => {
                    self.call_pending(i)?;
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// Before client `c`'s core moves on from what it just heard: a call
    /// whose replies are all in is waited for until it returns or queues
    /// its next request, which goes out now (else the core's next turn
    /// would take it or not, as the thread's timing fell).
    pub(super) fn calls_replied(&mut self, c: usize) {
        for i in 0..self.calls.len() {
            let call = &self.calls[i];
            if call.client != c || self.clients[c].generation != call.generation {
                continue;
            }
            let answered = call.awaiting.as_ref().is_some_and(|(conn, xids)| {
                self.clients[c].link.as_ref().is_some_and(|l| {
                    l.conn == *conn
                        && !l
                            .unanswered
                            .iter()
                            .any(|(x, _)| x.is_some_and(|x| xids.contains(&x)))
                })
            });
            if !answered {
                continue;
            }
            let busy = self.calls[i].busy.clone();
            self.calls[i].awaiting = None;
            let started = std::time::Instant::now();
            while busy.load(Ordering::Acquire) && !self.clients[c].core.has_commands() {
                if started.elapsed() > THREAD_WAIT {
                    break;
                }
                std::thread::yield_now();
            }
            if busy.load(Ordering::Acquire) {
                self.calls[i].awaiting = self.send_call_request(c, &busy);
                self.calls[i].unpaced |=
                    self.calls[i].awaiting.is_none() && busy.load(Ordering::Acquire);
            }
        }
    }

    /// What a call's purpose notes while it runs.
    fn observe_during_call(&mut self, i: usize) -> Result<(), Violation> {
        match &self.calls[i].purpose {
            Purpose::Observe { .. } => {
                let head = self.election_head();
                if let Purpose::Observe { seen, .. } = &mut self.calls[i].purpose {
                    if seen.last() != Some(&head) {
                        seen.push(head);
                    }
                }
                Ok(())
            }
            Purpose::Fenced { .. } => self.fenced_look(i),
            _ => Ok(()),
        }
    }

    /// A call still running: bounds on how long it may take.
    fn call_pending(&self, i: usize) -> Result<(), Violation> {
        let call = &self.calls[i];
        if let Purpose::Observe {
            healthy_at_start: true,
            ..
        } = call.purpose
        {
            return self.observe_bound_check(call);
        }
        Ok(())
    }

    fn call_returned(&mut self, call: Running, outcome: Outcome) -> Result<(), Violation> {
        let c = call.client;
        match (call.purpose, outcome) {
            (purpose @ Purpose::Fenced { .. }, Outcome::Fenced(r)) => {
                self.fenced_returned(c, purpose, r)
            }
            (Purpose::Revoke { node }, Outcome::Revoke(r)) => {
                self.note(|| format!("c{c}: revoke {node:?}: {r:?}"));
                Ok(())
            }
            (Purpose::Revoke { .. }, Outcome::RevokeHolder(r)) => {
                self.note(|| format!("c{c}: revoke_holder: {r:?}"));
                Ok(())
            }
            (Purpose::Proclaim { value }, Outcome::Proclaim(r)) => {
                let value = String::from_utf8_lossy(&value).into_owned();
                self.note(|| format!("c{c}: proclaimed {value:?}: {r:?}"));
                Ok(())
            }
            (Purpose::Observe { seen, .. }, Outcome::Observe(r)) => {
                self.observed(c, call.started, &seen, r)
            }
            (
                Purpose::Close {
                    mode,
                    session,
                    events,
                    was_leader,
                },
                Outcome::Close(r),
            ) => self.latch_closed(c, mode, session, events, was_leader, r),
            _ => unreachable!("an outcome of another call"),
        }
    }
}
