//! One session and the locks on it, wired together: what a driver runs.
//!
//! The lock machine's requests go out on the session, and their replies and
//! watch events come back to it without the driver seeing them; the
//! driver's own requests come back to it as [`Event::Reply`] under the
//! handle it gave. Everything the two machines decide comes out of
//! [`Client::poll_event`] in the order it was decided.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jute::{EventType, Request, Response};

use crate::lock::{AttemptId, LockEvent, LockMachine, LockSpec};
#[cfg(feature = "sasl")]
use crate::session::SaslConfig;
use crate::session::{
    DropReason, RequestError, Session, SessionChange, SessionConfig, SessionEvent, SessionState,
    WatchEvent,
};

/// What a [`Client`] tells its driver.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<R, W> {
    /// A request of the driver's finished (or a close was answered).
    Reply {
        /// The handle given to [`Client::submit`] or [`Client::close`].
        to: R,
        /// The reply body, or why there is none.
        result: Result<Response, RequestError>,
    },
    /// A watch of the driver's fired. A deletion of a held lock's node is
    /// told to its holder (an [`Event::Lock`] before this one) first.
    Watch {
        /// The watcher given to [`Client::submit`].
        to: W,
        /// What fired it.
        event: WatchEvent,
    },
    /// A watch of the driver's will never fire: the session ended first.
    WatchAbandoned {
        /// The watcher given to [`Client::submit`].
        to: W,
        /// Why it will never fire.
        reason: RequestError,
    },
    /// The session changed state. What it did to each lock follows as
    /// [`Event::Lock`]s.
    State(SessionChange),
    /// Close the connection now (the client already counts it as gone);
    /// connect again when [`Client::wants_connection`] says so.
    DropConnection(DropReason),
    /// Something happened to an acquisition.
    Lock(LockEvent),
}

/// Where a reply goes.
enum ReplyTo<R> {
    Driver(R),
    /// The lock machine, under its token.
    Locks(u64),
    /// Nobody (a close asked for without a handle).
    Nobody,
}

/// Where a watch's event goes.
#[derive(Clone)]
enum WatchTo<W> {
    Driver(W),
    /// The lock machine, under the token of the request that set it.
    Locks(u64),
}

/// A ZooKeeper session and the lock machine on it, sans I/O.
///
/// `R` is how the driver names the answer to one of its requests (a
/// channel's sender, a number), `W` the same for a watcher.
///
/// A driver loops:
/// 1. connect a socket when [`Client::wants_connection`], then call
///    [`Client::handle_connected`]; on EOF or an error,
///    [`Client::handle_disconnected`];
/// 2. hand over what arrived ([`Client::handle_input`]), the time
///    ([`Client::handle_timeout`], due at [`Client::poll_timeout`]) and its
///    own requests and lock commands;
/// 3. after every call, drain [`Client::poll_event`] and write
///    [`Client::output`] (then [`Client::consume_output`] what was written).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Instant;
/// use zklock_proto::lock::{LockSpec, Rule};
/// use zklock_proto::session::SessionConfig;
/// use zklock_proto::Client;
///
/// let now = Instant::now();
/// let mut zk: Client<u32, u32> = Client::new(SessionConfig::default(), now);
/// assert!(zk.wants_connection());
/// zk.handle_connected(now);
/// // The handshake is the first thing to send.
/// assert!(!zk.output().is_empty());
/// let spec = Arc::new(LockSpec::new("/locks/job", "-lock-", Rule::Predecessor));
/// zk.acquire(now, 1, spec, "a-uuid".into(), None, false);
/// ```
pub struct Client<R, W> {
    session: Session<ReplyTo<R>, WatchTo<W>>,
    locks: LockMachine,
    events: VecDeque<Event<R, W>>,
    /// Watch notifications heard, the lock machine's included.
    watch_events: u64,
    /// After an expiry, open a new session rather than end.
    renew: bool,
}

impl<R, W> std::fmt::Debug for Client<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session", &self.session)
            .field("locks", &self.locks.len())
            .finish_non_exhaustive()
    }
}

impl<R, W: Clone> Client<R, W> {
    /// A client with no connection yet.
    pub fn new(config: SessionConfig, now: Instant) -> Self {
        Client {
            session: Session::new(config, now),
            locks: LockMachine::new(),
            events: VecDeque::new(),
            watch_events: 0,
            renew: false,
        }
    }

    /// Whether an expired session is followed by a new one (off by
    /// default: the client ends with its first session).
    ///
    /// When on, the expiry is handled as when off — every request and
    /// watch of the old session is answered with
    /// [`RequestError::SessionExpired`], every acquisition fails, every
    /// holder is told `Lost` — and only then, in the same call, a new
    /// session takes its place ([`Session::successor`]): the next
    /// [`Event::State`] is `Connecting`, and [`Client::wants_connection`]
    /// asks for a connection. Nothing of the old session is carried over
    /// but its credentials, so no holder of it can be told `Held` again.
    pub fn set_new_session_after_expiry(&mut self, on: bool) {
        self.renew = on;
    }

    // ---- the connection ------------------------------------------------

    /// The connection is up (TCP, and TLS if any): the handshake goes out.
    pub fn handle_connected(&mut self, now: Instant) {
        self.session.handle_connected(now);
        self.deliver(now);
    }

    /// The connection is gone.
    pub fn handle_disconnected(&mut self, now: Instant) {
        self.session.handle_disconnected(now);
        self.deliver(now);
    }

    /// Bytes from the server, in the order they arrived.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        self.session.handle_input(now, bytes);
        self.deliver(now);
    }

    /// Time passed: runs the session's and the lock machine's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        self.locks.handle_timeout(now);
        self.deliver(now);
    }

    /// Before a new connection: the driver's watches `keep` rejects are
    /// not re-armed on it, nor are the lock machine's that no attempt
    /// needs any more.
    pub fn retain_watches(&mut self, mut keep: impl FnMut(&W) -> bool) {
        let locks = &self.locks;
        self.session.retain_watches(|w| match w {
            WatchTo::Driver(w) => keep(w),
            WatchTo::Locks(token) => locks.wants_watch(*token),
        });
    }

    /// Bytes to send to the server.
    pub fn output(&self) -> &[u8] {
        self.session.output()
    }

    /// `n` bytes of [`Client::output`] were sent.
    pub fn consume_output(&mut self, n: usize) {
        self.session.consume_output(n);
    }

    /// The next thing the driver must act on.
    pub fn poll_event(&mut self) -> Option<Event<R, W>> {
        crate::spare_room::pop_front(&mut self.events)
    }

    /// When [`Client::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.session.poll_timeout(), self.locks.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// No connection is up and the session has not ended: connect one.
    pub fn wants_connection(&self) -> bool {
        self.session.wants_connection()
    }

    /// The session ended and everything it owed was answered.
    pub fn is_finished(&self) -> bool {
        self.session.is_finished()
    }

    // ---- the driver's requests -----------------------------------------

    /// Sends `request`; its reply comes back as [`Event::Reply`] to `to`,
    /// and the watch it sets, if any, as [`Event::Watch`] to `watcher`.
    pub fn submit(&mut self, now: Instant, request: Request, to: R, watcher: Option<W>) {
        self.session.submit(
            now,
            request,
            ReplyTo::Driver(to),
            watcher.map(WatchTo::Driver),
        );
        self.deliver(now);
    }

    /// Closes the session (its nodes go with it); `to` hears when it is
    /// closed.
    pub fn close(&mut self, now: Instant, to: Option<R>) {
        let to = to.map_or(ReplyTo::Nobody, ReplyTo::Driver);
        self.session.close(now, to);
        self.deliver(now);
    }

    /// A persistent watch on `path` lost a watcher: forgets the driver's
    /// watchers `keep` rejects and, once nothing watches `path`, asks the
    /// server to drop its watches there. `to` hears when that is done.
    pub fn release_persistent(
        &mut self,
        now: Instant,
        path: &str,
        mut keep: impl FnMut(&W) -> bool,
        to: R,
    ) {
        self.session.release_persistent(
            now,
            path,
            |w| match w {
                WatchTo::Driver(w) => keep(w),
                WatchTo::Locks(_) => true,
            },
            ReplyTo::Driver(to),
        );
        self.deliver(now);
    }

    // ---- locks ---------------------------------------------------------

    /// Queues for the lock `spec` describes (see [`LockMachine::acquire`]).
    pub fn acquire(
        &mut self,
        now: Instant,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
        no_wait: bool,
    ) {
        self.locks.acquire(now, id, spec, uuid, deadline, no_wait);
        self.deliver(now);
    }

    /// The holder `old` lets go and `id` queues again, in one write (see
    /// [`LockMachine::requeue`]).
    pub fn requeue(
        &mut self,
        now: Instant,
        old: AttemptId,
        id: AttemptId,
        spec: Arc<LockSpec>,
        uuid: String,
        deadline: Option<Instant>,
    ) {
        self.locks.requeue(now, old, id, spec, uuid, deadline);
        self.deliver(now);
    }

    /// Gives up an acquisition still waiting (see [`LockMachine::cancel`]).
    pub fn cancel(&mut self, now: Instant, id: AttemptId) {
        self.locks.cancel(now, id);
        self.deliver(now);
    }

    /// Lets a lock go (see [`LockMachine::release`]).
    pub fn release(&mut self, now: Instant, id: AttemptId, report: bool) {
        self.locks.release(now, id, report);
        self.deliver(now);
    }

    // ---- what it knows -------------------------------------------------

    /// The session's state.
    pub fn state(&self) -> SessionState {
        self.session.state()
    }

    /// The session's id (0 before the first session).
    pub fn session_id(&self) -> i64 {
        self.session.session_id()
    }

    /// The zxid of the latest change the session has seen.
    pub fn last_zxid(&self) -> i64 {
        self.session.last_zxid()
    }

    /// Watch notifications the session has heard, for its driver's and for
    /// the lock machine's watches: a herd-free lock wakes few per release.
    pub fn watch_events(&self) -> u64 {
        self.watch_events
    }

    /// Until when the server cannot have expired the session (see
    /// [`Session::valid_until`]).
    pub fn valid_until(&self) -> Option<Instant> {
        self.session.valid_until()
    }

    /// Acquisitions not yet forgotten (waiting, held, or being cleaned up).
    pub fn lock_attempts(&self) -> usize {
        self.locks.len()
    }

    /// The session timeout the server granted, once it has.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.session.negotiated_timeout()
    }

    /// Whether only the leader's answers count as proof that the session
    /// lives (see [`Session::set_leader_check`]).
    pub fn set_leader_check(&mut self, on: bool) {
        self.session.set_leader_check(on);
    }

    /// Authenticate every connection with SASL (see [`Session::set_sasl`]).
    #[cfg(feature = "sasl")]
    pub fn set_sasl(&mut self, config: Option<SaslConfig>) {
        self.session.set_sasl(config);
    }

    // ---- routing -------------------------------------------------------

    /// Hands every session event to the driver or the lock machine, and
    /// the machine's requests to the session, until both are quiet.
    fn deliver(&mut self, now: Instant) {
        self.take_lock_events();
        loop {
            while let Some(event) = self.session.poll_event() {
                self.route(now, event);
                self.take_lock_events();
            }
            let mut sent = false;
            while let Some(r) = self.locks.poll_request() {
                sent = true;
                let watch = r.watch.then_some(WatchTo::Locks(r.token));
                self.session
                    .submit(now, r.request, ReplyTo::Locks(r.token), watch);
            }
            if !sent && !self.renew_if_expired(now) {
                return;
            }
        }
    }

    /// Puts a new session in place of one that expired and has answered
    /// everything it owed, if asked to; whether it did.
    fn renew_if_expired(&mut self, now: Instant) -> bool {
        if !self.renew
            || self.session.state() != SessionState::Expired
            || !self.session.is_finished()
        {
            return false;
        }
        self.session = self.session.successor(now);
        self.events.push_back(Event::State(SessionChange {
            state: SessionState::Connecting,
            session_id: 0,
        }));
        self.locks.handle_session(now, SessionState::Connecting, 0);
        self.take_lock_events();
        true
    }

    fn route(&mut self, now: Instant, event: SessionEvent<ReplyTo<R>, WatchTo<W>>) {
        match event {
            SessionEvent::Reply { handle, result } => match handle {
                ReplyTo::Driver(to) => self.events.push_back(Event::Reply { to, result }),
                ReplyTo::Locks(token) => self.locks.handle_reply(now, token, result),
                ReplyTo::Nobody => {}
            },
            SessionEvent::Watch { watcher, event } => {
                self.watch_events += 1;
                self.route_watch(now, watcher, event);
            }
            SessionEvent::WatchAbandoned { watcher, reason } => match watcher {
                WatchTo::Driver(to) => self.events.push_back(Event::WatchAbandoned { to, reason }),
                WatchTo::Locks(token) => self.locks.handle_watch(now, token, Err(reason)),
            },
            SessionEvent::State(state) => {
                let session_id = self.session.session_id();
                self.events
                    .push_back(Event::State(SessionChange { state, session_id }));
                self.locks.handle_session(now, state, session_id);
            }
            SessionEvent::DropConnection(reason) => {
                self.events.push_back(Event::DropConnection(reason));
            }
        }
    }

    fn route_watch(&mut self, now: Instant, watcher: WatchTo<W>, event: WatchEvent) {
        match watcher {
            WatchTo::Driver(to) => {
                // A holder whose node this says is gone is told first,
                // so no caller hears of the deletion while its guard
                // still says Held.
                if event.kind == EventType::NodeDeleted {
                    self.locks.handle_deletion(&event.path);
                    self.take_lock_events();
                }
                self.events.push_back(Event::Watch { to, event });
            }
            WatchTo::Locks(token) => self.locks.handle_watch(now, token, Ok(event)),
        }
    }

    /// The lock machine's events so far, in order: taken after every input
    /// to it, so the driver hears everything in the order it happened.
    fn take_lock_events(&mut self) {
        while let Some(e) = self.locks.poll_event() {
            self.events.push_back(Event::Lock(e));
        }
    }
}

#[cfg(test)]
mod tests;
