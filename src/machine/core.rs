//! The one typed sans-I/O core of a client: the session and the lock
//! machine, and the routing between them and the API threads' channels.
//!
//! The mio I/O thread drives it, and so can anyone else (the deterministic
//! simulator does): it is told the time, handed the bytes that arrived and
//! the connection's changes, and asked for the bytes to send, the events
//! its driver must act on and its next deadline. Every input runs the same
//! code whoever drives it; only sockets and the clock stay outside.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::command::{Command, CommandSender, Wake};
use super::locks::Locks;
use super::observer::Observer;
use super::recipient::{ReplyTo, WatchOutcome, WatchTo};
use super::status::Status;
use crate::oneshot;
#[cfg(feature = "sasl")]
use crate::session::SaslConfig;
use crate::session::{DropReason, Session, SessionConfig, SessionEvent, SessionState};

/// What the core's driver must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreEvent {
    /// The session changed state (`Connected`: the connection serves a
    /// session now).
    State(SessionState),
    /// Close the connection (and, unless the session ended, connect again
    /// when [`Core::wants_connection`] says so).
    DropConnection(DropReason),
}

/// What the layers above keep of a core: the door for commands and what
/// the core publishes.
pub(crate) struct CoreHandles {
    pub sender: CommandSender,
    pub status: Arc<Status>,
    pub watch_events: Arc<AtomicU64>,
}

/// The client's sans-I/O core: see the module docs.
///
/// A driver loops: feed what happened (`handle_*`, and [`Core::turn`] for
/// the time and the callers' commands), then drain [`Core::poll_event`],
/// write [`Core::output`] and sleep until [`Core::poll_timeout`] or I/O.
pub struct Core {
    session: Session<ReplyTo, WatchTo>,
    locks: Locks,
    commands: Receiver<Command>,
    subscribers: Vec<(Sender<SessionState>, Option<Weak<()>>)>,
    status: Arc<Status>,
    watch_events: Arc<AtomicU64>,
    /// A Client remains (no shutdown asked for yet).
    commands_open: bool,
    events: VecDeque<CoreEvent>,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field(
                "session_id",
                &format_args!("{:#x}", self.session.session_id()),
            )
            .field("state", &self.session.state())
            .finish()
    }
}

impl Core {
    pub(crate) fn new(
        config: SessionConfig,
        now: Instant,
        wake: Arc<dyn Wake>,
        observer: Option<Arc<dyn Observer>>,
    ) -> (Core, CoreHandles) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let sender = CommandSender::new(tx, wake);
        let session = Session::new(config, now);
        let status = Arc::new(Status::new(now));
        let watch_events = Arc::new(AtomicU64::new(0));
        let core = Core {
            session,
            locks: Locks::new(sender.clone(), observer.clone()),
            commands: rx,
            subscribers: Vec::new(),
            status: status.clone(),
            watch_events: watch_events.clone(),
            commands_open: true,
            events: VecDeque::new(),
            observer,
        };
        core.publish();
        let handles = CoreHandles {
            sender,
            status,
            watch_events,
        };
        (core, handles)
    }

    // ---- inputs -------------------------------------------------------

    /// Time passed, and the callers may have asked for things: runs their
    /// commands, the session's and the lock machine's timers, and hands
    /// out everything that follows.
    pub fn turn(&mut self, now: Instant) {
        self.drain_commands(now);
        self.session.handle_timeout(now);
        self.locks.handle_timeout(now);
        self.deliver(now);
        self.publish();
    }

    /// The connection is up (TCP, and TLS if any): the handshake goes out.
    pub fn handle_connected(&mut self, now: Instant) {
        self.session.handle_connected(now);
        self.deliver(now);
        self.publish();
    }

    /// The connection is gone.
    pub fn handle_disconnected(&mut self, now: Instant) {
        self.session.handle_disconnected(now);
        self.deliver(now);
        self.publish();
    }

    /// Bytes from the server.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        self.session.handle_input(now, bytes);
        self.deliver(now);
        self.publish();
    }

    /// Before a new connection: watches nobody waits for any more (their
    /// call timed out, the watch was dropped, the lock attempt ended) are
    /// not re-armed on it.
    pub fn prepare_connection(&mut self) {
        let locks = &self.locks;
        self.session.retain_watches(|w| match w {
            WatchTo::Caller(w) => w.is_wanted(),
            WatchTo::Task(token) => locks.wants_watch(*token),
        });
    }

    /// The driver cannot go on (its poll failed): close the session now.
    pub fn abort(&mut self, now: Instant) {
        self.session
            .close(now, ReplyTo::Caller(oneshot::channel().0));
        self.deliver(now);
        self.publish();
    }

    // ---- outputs ------------------------------------------------------

    /// Bytes to send to the server.
    pub fn output(&self) -> &[u8] {
        self.session.output()
    }

    /// `n` bytes of [`Core::output`] were sent.
    pub fn consume_output(&mut self, n: usize) {
        self.session.consume_output(n);
    }

    /// The next thing the driver must act on.
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    /// When [`Core::turn`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.session.poll_timeout(), self.locks.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the core wants a connection (none is up, and the session
    /// has not ended).
    pub fn wants_connection(&self) -> bool {
        self.session.wants_connection()
    }

    /// The session ended and everything it owed was answered.
    pub fn is_finished(&self) -> bool {
        self.session.is_finished()
    }

    /// Finished, and no Client is left to ask anything: the driver may end.
    pub fn is_done(&self) -> bool {
        !self.commands_open && self.session.is_finished()
    }

    /// Whether callers queued commands that [`Core::turn`] has not run yet.
    pub fn has_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// The session's state.
    pub fn state(&self) -> SessionState {
        self.session.state()
    }

    /// The session's id (0 before the first session).
    pub fn session_id(&self) -> i64 {
        self.session.session_id()
    }

    /// Lock acquisitions not yet forgotten (waiting, held, or being
    /// cleaned up).
    pub fn lock_attempts(&self) -> usize {
        self.locks.len()
    }

    /// Session-state listeners the core still keeps: a scoped one goes at
    /// the next subscription after its token drops, any other at the first
    /// state change it can no longer receive.
    pub fn state_listeners(&self) -> usize {
        self.subscribers.len()
    }

    /// Whether only the leader's answers count as proof that the session
    /// lives (on by default; see
    /// [`Session::set_leader_check`](crate::session::Session::set_leader_check)).
    pub fn set_leader_check(&mut self, on: bool) {
        self.session.set_leader_check(on);
    }

    /// Authenticate every connection with SASL (see
    /// [`Session::set_sasl`](crate::session::Session::set_sasl)).
    #[cfg(feature = "sasl")]
    pub(crate) fn set_sasl(&mut self, config: Option<SaslConfig>) {
        self.session.set_sasl(config);
    }

    // ---- routing ------------------------------------------------------

    fn drain_commands(&mut self, now: Instant) {
        loop {
            match self.commands.try_recv() {
                Ok(Command::Submit {
                    request,
                    reply,
                    watcher,
                }) => self.session.submit(
                    now,
                    request,
                    ReplyTo::Caller(reply),
                    watcher.map(WatchTo::Caller),
                ),
                Ok(Command::Close { reply }) => self.session.close(now, ReplyTo::Caller(reply)),
                Ok(Command::ReleasePersistent { path, reply }) => self.session.release_persistent(
                    now,
                    &path,
                    |w| match w {
                        WatchTo::Caller(w) => w.is_wanted(),
                        WatchTo::Task(_) => true,
                    },
                    ReplyTo::Caller(reply),
                ),
                Ok(Command::Lock(command)) => {
                    self.locks.handle_command(now, command);
                    // Before any later command: a caller that hears back
                    // and asks again must find these requests ahead.
                    self.submit_lock_requests(now);
                }
                Ok(Command::Subscribe(tx, token)) => {
                    self.subscribers
                        .retain(|(_, t)| t.as_ref().is_none_or(|t| t.strong_count() > 0));
                    let _ = tx.send(self.session.state());
                    self.subscribers.push((tx, token));
                }
                Ok(Command::Shutdown) => self.shut_down(now),
                Err(TryRecvError::Empty) => return,
                // Unreachable while the core holds a sender (its grants'),
                // but harmless: nobody can ask anything any more.
                Err(TryRecvError::Disconnected) => return self.shut_down(now),
            }
        }
    }

    /// Every Client is gone: end the session politely.
    fn shut_down(&mut self, now: Instant) {
        if self.commands_open {
            self.commands_open = false;
            self.session
                .close(now, ReplyTo::Caller(oneshot::channel().0));
        }
    }

    /// Hands every session event to its caller, watcher or the lock
    /// machine, and the machine's requests to the session, until both are
    /// quiet.
    fn deliver(&mut self, now: Instant) {
        loop {
            self.deliver_session_events(now);
            if !self.submit_lock_requests(now) {
                return;
            }
        }
    }

    /// `true` if the lock machine had anything to send.
    fn submit_lock_requests(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(r) = self.locks.poll_request() {
            any = true;
            let watch = r.watch.then_some(WatchTo::Task(r.token));
            self.session
                .submit(now, r.request, ReplyTo::Task(r.token), watch);
        }
        any
    }

    fn deliver_session_events(&mut self, now: Instant) {
        while let Some(event) = self.session.poll_event() {
            match event {
                SessionEvent::Reply { handle, result } => match handle {
                    ReplyTo::Caller(tx) => {
                        // A caller that reads the zxid after its reply
                        // must see the reply's.
                        self.status.set_last_zxid(self.session.last_zxid());
                        let _ = tx.send(result);
                    }
                    ReplyTo::Task(token) => self.locks.handle_reply(now, token, result),
                },
                SessionEvent::Watch { watcher, event } => {
                    self.watch_events.fetch_add(1, Ordering::Relaxed);
                    self.deliver_watch(now, watcher, Ok(event));
                }
                SessionEvent::WatchAbandoned { watcher, reason } => {
                    self.deliver_watch(now, watcher, Err(reason));
                }
                SessionEvent::State(state) => {
                    log::info!("session {:#x}: {state:?}", self.session.session_id());
                    if let Some(o) = &self.observer {
                        o.session_state(state);
                    }
                    self.publish();
                    self.locks
                        .handle_session(now, state, self.session.session_id());
                    // A listener that fell a whole channel behind misses
                    // this change (`Client::state` stays current); one that
                    // is gone is forgotten.
                    self.subscribers.retain(|(s, _)| {
                        !matches!(s.try_send(state), Err(TrySendError::Disconnected(_)))
                    });
                    self.events.push_back(CoreEvent::State(state));
                }
                SessionEvent::DropConnection(reason) => {
                    if let Some(o) = &self.observer {
                        o.connection_dropped(&reason);
                    }
                    self.events.push_back(CoreEvent::DropConnection(reason));
                }
            }
        }
    }

    fn deliver_watch(&mut self, now: Instant, watcher: WatchTo, event: WatchOutcome) {
        match watcher {
            WatchTo::Caller(w) => {
                // A holder whose node this says is gone is told first, so
                // no caller sees the deletion while the guard says Held.
                if let Ok(e) = &event {
                    if e.kind == jute::EventType::NodeDeleted {
                        self.locks.handle_deletion(now, &e.path);
                    }
                }
                w.deliver(event)
            }
            WatchTo::Task(token) => self.locks.handle_watch(now, token, event),
        }
    }

    fn publish(&self) {
        self.status.store(&self.session);
    }
}
