//! The one typed sans-I/O core of a client: the protocol crate's session
//! and lock machine, routed to the API threads' channels.
//!
//! The mio I/O thread drives it, and so can anyone else (the deterministic
//! simulator does): it is told the time, handed the bytes that arrived and
//! the connection's changes, and asked for the bytes to send, the events
//! its driver must act on and its next deadline. Every input runs the same
//! code whoever drives it; only sockets and the clock stay outside.

use std::collections::VecDeque;
#[cfg(feature = "testing")]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::command::{command_queue, Command, CommandReceiver, CommandSender, Wake};
use super::locks::Locks;
use super::observer::Observer;
use super::recipient::{ReplySender, WatchSender};
use super::status::Status;
use super::subscriber::Subscriber;
#[cfg(feature = "sasl")]
use crate::session::SaslConfig;
use crate::session::{DropReason, SessionChange, SessionConfig, SessionState};
use zklock_proto::Event;

/// The protocol crate's client, as this core runs it: replies go to a
/// blocked caller's channel, watch events to a watcher's.
type Protocol = zklock_proto::Client<ReplySender, WatchSender>;

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
    #[cfg(feature = "testing")]
    pub watch_events: Arc<AtomicU64>,
}

/// The client's sans-I/O core: told the time, handed the bytes that
/// arrived and the connection's changes, asked for the bytes to send, the
/// events its driver must act on and its next deadline. Every client's I/O
/// thread drives one; with the unstable feature `testing`,
/// `ClientBuilder::build_manual` hands one to a caller that drives it
/// itself (the project's deterministic simulator).
///
/// A driver loops: feed what happened (`handle_*`, and [`Core::turn`] for
/// the time and the callers' commands), then drain [`Core::poll_event`],
/// write [`Core::output`] and sleep until [`Core::poll_timeout`] or I/O.
pub struct Core {
    protocol: Protocol,
    locks: Locks,
    commands: CommandReceiver,
    subscribers: Vec<(Subscriber, Option<Weak<()>>)>,
    status: Arc<Status>,
    /// Watch events received, for `Client::watch_events_received`.
    #[cfg(feature = "testing")]
    watch_events: Arc<AtomicU64>,
    /// A Client remains (no shutdown asked for yet).
    commands_open: bool,
    events: VecDeque<CoreEvent>,
    observer: Option<Arc<dyn Observer>>,
    /// A state change whose subscribers are told once the holders have
    /// heard what it did to them.
    unannounced: Vec<SessionChange>,
    /// Tasks to wake at their deadline, soonest first.
    timers: Vec<(Instant, std::task::Waker)>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field(
                "session_id",
                &format_args!("{:#x}", self.protocol.session_id()),
            )
            .field("state", &self.protocol.state())
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
        let (sender, rx) = command_queue(wake);
        let protocol = Protocol::new(config, now);
        let status = Arc::new(Status::new(now));
        #[cfg(feature = "testing")]
        let watch_events = Arc::new(AtomicU64::new(0));
        let core = Core {
            protocol,
            locks: Locks::new(sender.clone(), observer.clone()),
            commands: rx,
            subscribers: Vec::new(),
            status: status.clone(),
            #[cfg(feature = "testing")]
            watch_events: watch_events.clone(),
            commands_open: true,
            events: VecDeque::new(),
            observer,
            unannounced: Vec::new(),
            timers: Vec::new(),
        };
        core.publish();
        let handles = CoreHandles {
            sender,
            status,
            #[cfg(feature = "testing")]
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
        self.wake_due(now);
        self.protocol.handle_timeout(now);
        self.deliver(now);
        self.publish();
    }

    /// The connection is up (TCP, and TLS if any): the handshake goes out.
    pub fn handle_connected(&mut self, now: Instant) {
        self.protocol.handle_connected(now);
        self.deliver(now);
        self.publish();
    }

    /// The connection is gone.
    pub fn handle_disconnected(&mut self, now: Instant) {
        self.protocol.handle_disconnected(now);
        self.deliver(now);
        self.publish();
    }

    /// Bytes from the server.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        self.protocol.handle_input(now, bytes);
        self.deliver(now);
        self.publish();
    }

    /// Before a new connection: watches nobody waits for any more (their
    /// call timed out, the watch was dropped, the lock attempt ended) are
    /// not re-armed on it.
    pub fn prepare_connection(&mut self) {
        self.protocol.retain_watches(WatchSender::is_wanted);
    }

    /// The driver cannot go on (its poll failed): close the session now.
    pub fn abort(&mut self, now: Instant) {
        self.protocol.close(now, None);
        self.deliver(now);
        self.publish();
    }

    // ---- outputs ------------------------------------------------------

    /// Bytes to send to the server.
    pub fn output(&self) -> &[u8] {
        self.protocol.output()
    }

    /// `n` bytes of [`Core::output`] were sent.
    pub fn consume_output(&mut self, n: usize) {
        self.protocol.consume_output(n);
    }

    /// The next thing the driver must act on.
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    /// When [`Core::turn`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.first().map(|(at, _)| *at);
        match (self.protocol.poll_timeout(), timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the core wants a connection (none is up, and the session
    /// has not ended).
    pub fn wants_connection(&self) -> bool {
        self.protocol.wants_connection()
    }

    /// The session ended and everything it owed was answered.
    pub fn is_finished(&self) -> bool {
        self.protocol.is_finished()
    }

    /// Finished, and no Client is left to ask anything: the driver may end.
    pub fn is_done(&self) -> bool {
        !self.commands_open && self.protocol.is_finished()
    }

    /// Whether callers queued commands that [`Core::turn`] has not run yet.
    pub fn has_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// The session's state.
    #[cfg(feature = "testing")]
    pub fn state(&self) -> SessionState {
        self.protocol.state()
    }

    /// The session's id (0 before the first session).
    #[cfg(feature = "testing")]
    pub fn session_id(&self) -> i64 {
        self.protocol.session_id()
    }

    /// Lock acquisitions not yet forgotten (waiting, held, or being
    /// cleaned up).
    #[cfg(feature = "testing")]
    pub fn lock_attempts(&self) -> usize {
        self.protocol.lock_attempts()
    }

    /// Session-state listeners the core still keeps: a scoped one goes at
    /// the next subscription after its token drops, any other at the first
    /// state change it can no longer receive.
    #[cfg(feature = "testing")]
    pub fn state_listeners(&self) -> usize {
        self.subscribers.len()
    }

    /// Whether only the leader's answers count as proof that the session
    /// lives (on by default; see
    /// [`Session::set_leader_check`](zklock_proto::session::Session::set_leader_check)).
    pub fn set_leader_check(&mut self, on: bool) {
        self.protocol.set_leader_check(on);
    }

    /// Whether an expired session is followed by a new one (see
    /// [`zklock_proto::Client::set_new_session_after_expiry`]).
    pub fn set_new_session_after_expiry(&mut self, on: bool) {
        self.protocol.set_new_session_after_expiry(on);
    }

    /// Authenticate every connection with SASL (see
    /// [`Session::set_sasl`](zklock_proto::session::Session::set_sasl)).
    #[cfg(feature = "sasl")]
    pub(crate) fn set_sasl(&mut self, config: Option<SaslConfig>) {
        self.protocol.set_sasl(config);
    }

    // ---- routing ------------------------------------------------------

    fn drain_commands(&mut self, now: Instant) {
        loop {
            match self.commands.next() {
                Some(Command::Submit {
                    request,
                    reply,
                    watcher,
                }) => self.protocol.submit(now, request, reply, watcher),
                Some(Command::Close { reply }) => self.protocol.close(now, Some(reply)),
                Some(Command::ReleasePersistent { path, reply }) => self
                    .protocol
                    .release_persistent(now, &path, WatchSender::is_wanted, reply),
                Some(Command::Lock(command)) => {
                    // The machine's requests go out at once: a caller that
                    // hears back and asks again finds them ahead.
                    self.locks.handle_command(now, command, &mut self.protocol);
                    self.deliver(now);
                }
                Some(Command::Subscribe(subscriber, token)) => {
                    self.subscribers
                        .retain(|(_, t)| t.as_ref().is_none_or(|t| t.strong_count() > 0));
                    subscriber.tell(SessionChange {
                        state: self.protocol.state(),
                        session_id: self.protocol.session_id(),
                    });
                    self.subscribers.push((subscriber, token));
                }
                Some(Command::Shutdown) => self.shut_down(now),
                Some(Command::WakeAt(at, waker)) => {
                    let i = self.timers.partition_point(|(t, _)| *t <= at);
                    self.timers.insert(i, (at, waker));
                }
                None => return,
            }
        }
    }

    /// Wakes the tasks whose deadline has come.
    fn wake_due(&mut self, now: Instant) {
        let due = self.timers.partition_point(|(t, _)| *t <= now);
        for (_, waker) in self.timers.drain(..due) {
            waker.wake();
        }
    }

    /// Every Client is gone: end the session politely.
    fn shut_down(&mut self, now: Instant) {
        if self.commands_open {
            self.commands_open = false;
            self.protocol.close(now, None);
        }
    }

    /// Hands out what the protocol decided: replies and watch events to
    /// the callers, lock events to the holders and waiters, state changes
    /// to the subscribers and the driver.
    fn deliver(&mut self, now: Instant) {
        while let Some(event) = self.protocol.poll_event() {
            if !matches!(event, Event::Lock(_)) {
                self.announce();
            }
            match event {
                Event::Reply { to, result } => {
                    // A caller that reads the zxid after its reply must
                    // see the reply's.
                    self.status.set_last_zxid(self.protocol.last_zxid());
                    let _ = to.send(result);
                }
                Event::Watch { to, event } => {
                    #[cfg(feature = "testing")]
                    self.count_watch_events();
                    to.deliver(Ok(event));
                }
                Event::WatchAbandoned { to, reason } => to.deliver(Err(reason)),
                Event::State(change) => {
                    let state = change.state;
                    log::info!("session {:#x}: {state:?}", change.session_id);
                    if let Some(o) = &self.observer {
                        o.session_state(state);
                    }
                    self.publish();
                    self.unannounced.push(change);
                    self.events.push_back(CoreEvent::State(state));
                }
                Event::DropConnection(reason) => {
                    if let Some(o) = &self.observer {
                        o.connection_dropped(&reason);
                    }
                    self.events.push_back(CoreEvent::DropConnection(reason));
                }
                Event::Lock(event) => {
                    if let Some(id) = self.locks.handle_event(now, event) {
                        // A grant nobody waits for any more.
                        self.protocol.release(now, id, false);
                    }
                }
                // A kind this version of the core does not know yet.
                _ => {}
            }
        }
        self.announce();
    }

    /// Tells the subscribers of the state changes whose holders have heard.
    /// A listener that fell a whole channel behind misses a change
    /// (`Client::state` stays current); one that is gone is forgotten.
    fn announce(&mut self) {
        for change in self.unannounced.drain(..) {
            self.subscribers.retain(|(s, _)| s.tell(change));
        }
    }

    fn publish(&self) {
        self.status.store(&self.protocol);
        #[cfg(feature = "testing")]
        self.count_watch_events();
    }

    #[cfg(feature = "testing")]
    fn count_watch_events(&self) {
        self.watch_events
            .store(self.protocol.watch_events(), Ordering::Relaxed);
    }
}
