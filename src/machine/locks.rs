//! The lock machine's side of the core: it turns the machine's events into
//! grants, errors and holder states for the threads that wait, in the same
//! turn as the session change or reply that causes them. It never blocks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::command::{CommandSender, LockCommand};
use super::error::LockError;
use super::held::{HolderState, LockState};
use super::holding::{GrantSink, Holding, ReleaseDoor};
use super::observer::Observer;
use super::recipient::{ReplySender, WatchSender};
use crate::oneshot;
use crate::Error;

/// The protocol crate's client the commands go to.
type Protocol = zklock_proto::Client<ReplySender, WatchSender>;
use zklock_proto::id_hash::IdMap;
use zklock_proto::lock::{AttemptId, LockEvent};

pub(crate) struct Locks {
    observer: Option<Arc<dyn Observer>>,
    /// With an observer: when each attempt started, and its lock path.
    started: IdMap<AttemptId, (Instant, String)>,
    /// With an observer: when each holder was granted, and its node.
    granted: IdMap<AttemptId, (Instant, String)>,
    /// For grants: where their release goes (the core's command channel).
    door: Arc<dyn ReleaseDoor>,
    waiting: IdMap<AttemptId, GrantSink>,
    held: IdMap<AttemptId, Arc<HolderState>>,
    /// Releases under way: who waits to hear how they end, and the
    /// holder's state, told if the server refuses the delete.
    releasing: IdMap<AttemptId, Vec<oneshot::Sender<Result<(), LockError>>>>,
    releasing_states: IdMap<AttemptId, Arc<HolderState>>,
}

impl Locks {
    pub(crate) fn new(sender: CommandSender, observer: Option<Arc<dyn Observer>>) -> Self {
        Locks {
            observer,
            started: IdMap::default(),
            granted: IdMap::default(),
            door: Arc::new(sender),
            waiting: IdMap::default(),
            held: IdMap::default(),
            releasing: IdMap::default(),
            releasing_states: IdMap::default(),
        }
    }

    pub(crate) fn handle_command(
        &mut self,
        now: Instant,
        command: LockCommand,
        machine: &mut Protocol,
    ) {
        match command {
            LockCommand::Acquire {
                id,
                spec,
                uuid,
                deadline,
                no_wait,
                outcome,
            } => {
                self.waiting.insert(id, outcome);
                if self.observer.is_some() {
                    self.started.insert(id, (now, spec.parent.clone()));
                }
                machine.acquire(now, id, spec, uuid, deadline, no_wait);
            }
            LockCommand::Requeue {
                old,
                id,
                spec,
                uuid,
                deadline,
                outcome,
            } => {
                if let Some(state) = self.held.remove(&old) {
                    state.mark_released();
                    self.releasing_states.insert(old, state);
                }
                self.waiting.insert(id, outcome);
                if self.observer.is_some() {
                    self.started.insert(id, (now, spec.parent.clone()));
                }
                machine.requeue(now, old, id, spec, uuid, deadline);
            }
            LockCommand::Cancel(id) => {
                if self.waiting.remove(&id).is_some() {
                    machine.cancel(now, id);
                }
            }
            LockCommand::Withdraw(id) => {
                if self.waiting.remove(&id).is_some() {
                    machine.cancel(now, id);
                } else if let Some(state) = self.held.remove(&id) {
                    state.mark_released();
                    self.releasing_states.insert(id, state);
                    machine.release(now, id, true);
                }
            }
            LockCommand::Release { id, done } => {
                if let Some(state) = self.held.remove(&id) {
                    self.releasing_states.insert(id, state);
                }
                if let Some(done) = done {
                    self.releasing.entry(id).or_default().push(done);
                }
                // Always told how it ends: a refused delete is reported.
                machine.release(now, id, true);
            }
        }
    }

    /// Hands out what the machine decided. Returns an acquisition granted
    /// that nobody waits for any more: its lock is to be released.
    pub(crate) fn handle_event(&mut self, now: Instant, event: LockEvent) -> Option<AttemptId> {
        match event {
            LockEvent::Acquired {
                id,
                path,
                stat,
                after_unclean_end,
                max_hold_end,
            } => {
                let Some(outcome) = self.waiting.remove(&id) else {
                    return Some(id);
                };
                if let Some(o) = &self.observer {
                    let waited = self
                        .started
                        .remove(&id)
                        .map_or(Duration::ZERO, |(at, _)| now - at);
                    o.lock_acquired(&path, waited);
                    self.granted.insert(id, (now, path.clone()));
                }
                let state = Arc::new(HolderState::new());
                self.held.insert(id, state.clone());
                // If the waiter left meanwhile, the holding comes back and
                // releases itself as it drops.
                let holding = Holding::new(id, path, stat, state, self.door.clone())
                    .after_unclean_end(after_unclean_end)
                    .with_max_hold_end(max_hold_end);
                outcome(Ok(holding));
            }
            LockEvent::Failed { id, error } => {
                let error = LockError::from(error);
                if let (Some(o), Some((at, path))) = (&self.observer, self.started.remove(&id)) {
                    o.lock_failed(&path, &error, now - at);
                }
                if let Some(outcome) = self.waiting.remove(&id) {
                    outcome(Err(error));
                }
            }
            LockEvent::State { id, state, reason } => {
                if let (Some(o), Some((_, node))) = (&self.observer, self.granted.get(&id)) {
                    o.holder_state(node, state);
                }
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
            LockEvent::RevocationRequested { id } => {
                if let Some(holder) = self.held.get(&id) {
                    holder.request_revocation();
                }
            }
            LockEvent::Woken { node, blocker, .. } => {
                if let Some(o) = &self.observer {
                    o.waiter_woken(&node, &blocker);
                }
            }
            LockEvent::NearSequenceEnd { node, sequence, .. } => {
                if let Some(o) = &self.observer {
                    o.sequence_near_end(&node, sequence);
                }
            }
            LockEvent::Released { id, refused } => {
                if let (Some(o), Some((at, node))) = (&self.observer, self.granted.remove(&id)) {
                    o.lock_released(&node, now - at, refused.is_some());
                }
                // The caller of unlock names its node (path filled in
                // on its side, which knows the chroot).
                let result = match refused {
                    Some(code) => Err(LockError::ReleaseRefused {
                        path: String::new(),
                        code,
                    }),
                    None => Ok(()),
                };
                for done in self.releasing.remove(&id).unwrap_or_default() {
                    let _ = done.send(result.clone());
                }
                if let Some(state) = self.releasing_states.remove(&id) {
                    state.finish_release(refused.is_some());
                }
            }
            // A kind this version of the core does not know yet.
            _ => {}
        }
        None
    }
}

impl Drop for Locks {
    /// The core is going (the last client handle went): whoever still
    /// waits hears so, on a channel its own sender keeps open too.
    fn drop(&mut self) {
        for (_, outcome) in self.waiting.drain() {
            outcome(Err(LockError::Client(Error::Closed)));
        }
    }
}
