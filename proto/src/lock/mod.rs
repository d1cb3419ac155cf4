//! The lock protocol as a sans-I/O state machine.
//!
//! It is handed replies, watch events, session state changes and the time,
//! and says which requests to send and what happened to each acquisition.
//! It never touches a socket, a thread or a clock, so the same code runs on
//! the client's I/O thread and in the deterministic simulator.
//!
//! Every acquisition ([`LockMachine::acquire`]) ends in exactly one of
//! [`LockEvent::Acquired`] or [`LockEvent::Failed`]; a granted one then
//! reports [`LockEvent::State`] changes until released. Whatever way an
//! acquisition ends, its nodes are removed (by attempt id, so every create
//! of the attempt is found) for as long as the session lives.
//!
//! Inputs: [`LockMachine::acquire`], [`LockMachine::cancel`],
//! [`LockMachine::release`], [`LockMachine::handle_reply`],
//! [`LockMachine::handle_watch`], [`LockMachine::handle_session`],
//! [`LockMachine::handle_timeout`]. Outputs: [`LockMachine::poll_request`],
//! [`LockMachine::poll_event`], [`LockMachine::poll_timeout`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::id_hash::IdMap;
use std::sync::Arc;
use std::time::Instant;

mod attempt;
mod delay;
mod error;
mod grant;
mod holding;
mod ids;
mod pass;
mod phase;
mod purpose;
mod queue;
mod queueing;
mod recovery;
mod replies;
mod requeue;
mod state;
mod tenure;

use jute::{ErrorCode, PathWatch, Request, Stat};

use attempt::Attempt;
use phase::{OwnSeen, Phase};
use purpose::Purpose;

use crate::session::SessionState;
pub use attempt::{LockSpec, Rule};
pub use error::LockError;
pub use ids::AttemptIds;
pub use queue::{
    past_the_end, sequence_order, sorted_contenders, tenure_path, Contender, NodeKind, NodeOrigin,
    SEQUENCE_WARNING, TENURE_MARK,
};
pub use state::{LockState, LossReason};

/// What a third party writes into a holder's node to ask it to let go
/// (Curator's `LockInternals.REVOKE_MESSAGE`).
pub const REVOKE: &[u8] = b"__REVOKE__";

/// Names one acquisition; chosen by the caller, unique per machine.
pub type AttemptId = u64;

/// A request the machine wants sent. Its reply goes back through
/// [`LockMachine::handle_reply`] with `token`; if `watch`, the watch it
/// leaves reports through [`LockMachine::handle_watch`] with the same token.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Names the reply (and the watch).
    pub token: u64,
    /// What to send.
    pub request: Request,
    /// Whether the request leaves a watch the machine wants to hear of.
    pub watch: bool,
}

/// What happened to an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockEvent {
    /// Our node's sequence is past [`SEQUENCE_WARNING`]:
    /// the lock path's counter is near its end, where acquisitions fail
    /// closed. Recreate the path (or move to a new one) before then.
    NearSequenceEnd {
        /// The acquisition.
        id: AttemptId,
        /// Our node, as the server names it.
        node: String,
        /// Its sequence.
        sequence: i32,
    },
    /// The lock is ours: our node's server path and Stat (czxid is the
    /// fencing token).
    Acquired {
        /// The acquisition.
        id: AttemptId,
        /// Our node, as the server names it.
        path: String,
        /// Our node's Stat.
        stat: Stat,
        /// With lock-delay: a holder before us ended uncleanly, and the
        /// delay was served before this grant.
        after_unclean_end: bool,
        /// With a max hold ([`LockSpec::max_hold`]): when it ends, and the
        /// holder is told `Lost` ([`LossReason::MaxHold`]).
        max_hold_end: Option<Instant>,
    },
    /// The acquisition ended without the lock; its nodes are being removed.
    Failed {
        /// The acquisition.
        id: AttemptId,
        /// Why.
        error: LockError,
    },
    /// A granted lock's state changed. `Lost` is final.
    State {
        /// The acquisition.
        id: AttemptId,
        /// The new state.
        state: LockState,
        /// Why it was lost, with `Lost`.
        reason: Option<LossReason>,
    },
    /// Someone asked a revocable holder to let go (wrote
    /// [`REVOKE`] into its node).
    RevocationRequested {
        /// The acquisition.
        id: AttemptId,
    },
    /// A waiter's blocker (the node it waited for) was deleted and the
    /// waiter looks again: one per deletion in a fair queue, where only the
    /// node right behind is woken.
    Woken {
        /// The acquisition.
        id: AttemptId,
        /// Our node, as the server names it.
        node: String,
        /// The deleted blocker, as the server names it.
        blocker: String,
    },
    /// A release asked with `report` finished: the node is gone (or will go
    /// with the session), unless the server refused to delete it.
    Released {
        /// The acquisition.
        id: AttemptId,
        /// The server's refusal of our delete (an ACL without DELETE on the
        /// lock path): the node stays until the session ends.
        refused: Option<ErrorCode>,
    },
}

/// The lock protocol for every acquisition of one session. See the module
/// docs.
#[derive(Debug, Default)]
pub struct LockMachine {
    /// Boxed: a map node then holds pointers, not whole records, and its
    /// leaves (half full under ids that only grow) waste little, so a held
    /// lock costs less memory (bench/FIGURES.md).
    attempts: BTreeMap<AttemptId, Box<Attempt>>,
    /// Request token → the attempt and why.
    pending: IdMap<u64, (AttemptId, Purpose)>,
    /// Watch token → the attempt it wakes.
    watches: IdMap<u64, AttemptId>,
    /// Server path of every granted node → its attempt: a deletion heard
    /// through any watch tells its holder at once. On the cheap hasher: it
    /// has one key per node this session holds, so however the server names
    /// them, no one can fill it with keys that collide.
    held_nodes: IdMap<String, AttemptId>,
    /// Lock paths with creates sent and no listing sent behind them yet →
    /// the token kept for the one listing that will follow them all.
    listings_wanted: BTreeMap<String, u64>,
    /// A listing's token (sent or kept) → the attempts whose creates it
    /// follows.
    shared_listings: IdMap<u64, Vec<AttemptId>>,
    /// Shared listings sent and not yet answered → their lock path. While
    /// one is out, that path's next waits for its reply: creates that come
    /// meanwhile share one listing, not one each (10 000 waiters queueing
    /// on one session listed thousands of children thousands of times).
    listings_out: IdMap<u64, String>,
    deadlines: BTreeSet<(Instant, AttemptId)>,
    /// Lock-delays being served: when each attempt may make its mark.
    delays: BTreeSet<(Instant, AttemptId)>,
    /// Holders with a max hold: when each is to be told Lost and let go.
    max_holds: BTreeSet<(Instant, AttemptId)>,
    outgoing: VecDeque<Outgoing>,
    events: VecDeque<LockEvent>,
    next_token: u64,
    session: Option<SessionState>,
    session_id: i64,
}

impl LockMachine {
    /// A machine with no acquisitions.
    pub fn new() -> Self {
        LockMachine::default()
    }

    /// Acquisitions not yet forgotten (waiting, held, or being cleaned up).
    pub fn len(&self) -> usize {
        self.attempts.len()
    }

    /// Whether nothing is tracked at all.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    // ---- commands -----------------------------------------------------

    /// Starts an acquisition. `uuid` is the attempt's protected id (a fresh
    /// v4 UUID in text form). `deadline`: when to give up with
    /// [`LockError::Timeout`]. `no_wait`: give up with `Timeout` as soon as
    /// the queue shows the lock taken (try-lock: one round trip).
    pub fn acquire(
        &mut self,
        now: Instant,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
    ) {
        if let Some(reason) = self.session.and_then(ended) {
            self.events
                .push_back(LockEvent::Failed { id, error: reason });
            return;
        }
        if let Some(d) = deadline {
            self.deadlines.insert((d, id));
        }
        self.attempts
            .insert(id, Box::new(Attempt::new(spec, uuid, deadline, no_wait)));
        self.handle_timeout(now);
        self.step(id);
    }

    /// The caller gave up waiting (or dropped its handle): fail with
    /// [`LockError::Cancelled`] if still waiting.
    pub fn cancel(&mut self, _now: Instant, id: AttemptId) {
        let Some(a) = self.attempts.get(&id) else {
            return;
        };
        if a.phase.is_queueing() {
            self.fail(id, LockError::Cancelled);
        }
        // A granted lock's guard exists (sent, or dropped unread): it
        // releases, not the waiter.
    }

    /// The holder lets go. With `report`, [`LockEvent::Released`] says when
    /// the node is gone.
    pub fn release(&mut self, _now: Instant, id: AttemptId, report: bool) {
        let Some(a) = self.attempts.get_mut(&id) else {
            if report {
                self.events
                    .push_back(LockEvent::Released { id, refused: None });
            }
            return;
        };
        match &mut a.phase {
            Phase::Queueing(_) => self.give_up(id, LockError::Cancelled, report),
            Phase::Held(_) => self.begin_release(id, report),
            Phase::Releasing(r) => r.report |= report,
        }
    }

    // ---- inputs -------------------------------------------------------

    /// The session changed state; `session_id` is its id (the owner our
    /// nodes must show).
    pub fn handle_session(&mut self, _now: Instant, state: SessionState, session_id: i64) {
        self.session = Some(state);
        if state != SessionState::Connected {
            // The connection that set our own-node watches is gone: what
            // comes on the next one is no longer in order with them.
            for a in self.attempts.values_mut() {
                let own = a.phase.as_queueing().and_then(|q| q.own_watch.as_mut());
                if let Some(own) = own {
                    if own.seen == OwnSeen::Set {
                        own.seen = OwnSeen::Rearmed;
                    }
                }
            }
        }
        if session_id != 0 {
            self.session_id = session_id;
        }
        if let Some(error) = ended(state) {
            let reason = match state {
                SessionState::Expired => LossReason::SessionExpired,
                _ => LossReason::ClientClosed,
            };
            return self.end_all(error, reason);
        }
        let ids: Vec<AttemptId> = self.attempts.keys().copied().collect();
        for id in ids {
            let Some(a) = self.attempts.get_mut(&id).and_then(|a| a.phase.as_held()) else {
                continue;
            };
            match state {
                // Back from a disconnect: confirm the node before saying
                // Held again. All holders' checks leave in this one turn.
                SessionState::Connected if a.state == LockState::Suspended => self.confirm(id),
                SessionState::Suspended | SessionState::Connecting => {
                    self.set_state(id, LockState::Suspended, None);
                }
                // Our own judgement, not the server's: if the session turns
                // out alive, its node still stands for the holder, whose work
                // may still run. It goes when the guard goes (or with the
                // session, if the server expired it).
                SessionState::Lost => self.lose_keeping_node(id, LossReason::NoContact),
                _ => {}
            }
        }
    }

    /// Time passed: deadlines, lock-delays, max holds.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.remove(&(at, id));
            if let Some(a) = self.attempts.get(&id) {
                if let Phase::Queueing(_) = a.phase {
                    self.fail(id, LockError::Timeout);
                }
            }
        }
        self.serve_delays(now);
        self.end_max_holds(now);
    }

    // ---- outputs ------------------------------------------------------

    /// The next request to send.
    pub fn poll_request(&mut self) -> Option<Outgoing> {
        if let Some(o) = crate::spare_room::pop_front(&mut self.outgoing) {
            return Some(o);
        }
        // Creates on one lock path share the listing behind them: one reply
        // serves the lot. One at a time per path: the next goes out when
        // the last is answered, behind every create sent meanwhile.
        let out = &self.listings_out;
        let parent = self
            .listings_wanted
            .keys()
            .find(|p| !out.values().any(|o| o == *p))?
            .clone();
        let token = self.listings_wanted.remove(&parent)?;
        let request = list(&parent, false);
        self.listings_out.insert(token, parent);
        Some(Outgoing {
            token,
            request,
            watch: false,
        })
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<LockEvent> {
        crate::spare_room::pop_front(&mut self.events)
    }

    /// When [`LockMachine::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [&self.deadlines, &self.delays, &self.max_holds]
            .into_iter()
            .filter_map(|timers| timers.first().map(|(at, _)| *at))
            .min()
    }

    fn send_main(&mut self, id: AttemptId, purpose: Purpose, request: Request) {
        let token = self.send(id, purpose, request, false);
        if let Some(a) = self.attempts.get_mut(&id) {
            *a.phase.awaited_mut() = Some(token);
        }
    }

    /// `id`'s create just went out on `parent`: the shared listing sent
    /// next on that path answers it (see [`LockMachine::poll_request`]).
    fn want_listing(&mut self, parent: &str, id: AttemptId) {
        let token = match self.listings_wanted.get(parent) {
            Some(&token) => token,
            None => {
                self.next_token += 1;
                self.listings_wanted
                    .insert(parent.to_owned(), self.next_token);
                self.next_token
            }
        };
        self.shared_listings.entry(token).or_default().push(id);
        let q = self
            .attempts
            .get_mut(&id)
            .and_then(|a| a.phase.as_queueing());
        if let Some(c) = q.and_then(|q| q.step.creating()) {
            c.listing = Some(token);
        }
    }

    fn send(&mut self, id: AttemptId, purpose: Purpose, request: Request, watch: bool) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        self.pending.insert(token, (id, purpose));
        if watch {
            self.watches.insert(token, id);
        }
        self.outgoing.push_back(Outgoing {
            token,
            request,
            watch,
        });
        token
    }
}

impl Rule {
    fn is_first_n(self) -> bool {
        matches!(self, Rule::FirstN(_))
    }
}

fn list(parent: &str, watch: bool) -> Request {
    Request::GetChildren(PathWatch {
        path: parent.to_owned(),
        watch,
    })
}

/// The error that ends every acquisition in this terminal state.
fn ended(state: SessionState) -> Option<LockError> {
    match state {
        SessionState::Expired => Some(LockError::SessionExpired),
        SessionState::Closed => Some(LockError::Closed),
        SessionState::AuthFailed => Some(LockError::AuthFailed),
        _ => None,
    }
}
