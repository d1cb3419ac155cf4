//! The I/O thread: one mio event loop per client that moves bytes between a
//! socket and the session core, and answers callers over channels.
//!
//! It owns no protocol logic. Each turn it feeds the core what happened
//! (socket readiness, commands, the time), then drains the core's events,
//! output and next deadline, and sleeps in `poll` until one of those is due.
//! An idle client wakes only to ping.

use std::any::Any;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use jute::Request;
use mio::net::TcpStream;
use mio::{Events, Poll, Token, Waker};

use crate::oneshot;
use crate::session::{DropReason, SaslConfig, Session, SessionConfig, SessionEvent, SessionState};

mod hosts;
mod link;
mod recipient;
mod socket;
mod status;
mod task;
use hosts::HostList;
pub(crate) use link::{ConnectFailure, Connector};
pub(crate) use recipient::WatchSender;
use recipient::{ReplySender, ReplyTo, WatchOutcome, WatchTo};
use status::Status;
pub(crate) use task::{IoTask, TaskRequest, TaskSender};

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);
/// One socket read. Replies are small but for listings; a long listing
/// takes a few more reads rather than every client keeping a large buffer
/// (a process with a hundred sessions).
const READ_CHUNK: usize = 16 * 1024;
/// A connection that lasted this long was not a failure.
const HEALTHY_CONNECTION: Duration = Duration::from_secs(1);

/// What API threads ask of the I/O thread.
pub(crate) enum Command {
    /// Runs `task` on the I/O thread from now on (the first one only).
    InstallTask(Box<dyn IoTask>),
    /// A message for the installed task.
    TaskMessage(Box<dyn Any + Send>),
    Submit {
        request: Request,
        reply: ReplySender,
        watcher: Option<WatchSender>,
    },
    Close {
        reply: ReplySender,
    },
    /// The last Client is gone: close the session and end the thread. Sent
    /// as a command (not left to the channel's disconnection, which wakes
    /// nobody) so a sleeping loop is woken for it.
    Shutdown,
    /// A persistent watch's owner dropped it.
    ReleasePersistent {
        path: String,
        reply: ReplySender,
    },
    /// Adds a listener for state changes. With a liveness token, the
    /// listener is forgotten as soon as the token is dropped; without one,
    /// at the first state change after its receiver is gone.
    Subscribe(Sender<SessionState>, Option<Weak<()>>),
}

pub(crate) struct DriverConfig {
    pub hosts: Vec<SocketAddr>,
    pub session: SessionConfig,
    /// The connect string's host of each address (the TLS server name).
    pub names: Vec<(SocketAddr, String)>,
    pub connector: Connector,
    pub sasl: Option<SaslConfig>,
}

/// The API side's handle on the I/O thread.
pub(crate) struct DriverHandle {
    pub sender: CommandSender,
    pub status: Arc<Status>,
    pub watch_events: Arc<AtomicU64>,
    pub thread: Option<std::thread::JoinHandle<()>>,
    /// Connections that failed before a session was established.
    pub failures: Receiver<ConnectFailure>,
}

impl DriverHandle {
    /// Queues a command and wakes the loop. `false` if the thread is gone.
    pub(crate) fn send(&self, cmd: Command) -> bool {
        self.sender.send(cmd)
    }
}

/// Queues commands for the I/O thread and wakes it. Holding one does not
/// keep the session open.
#[derive(Clone)]
pub(crate) struct CommandSender {
    commands: Sender<Command>,
    waker: Arc<Waker>,
    /// Set by the I/O thread just before it sleeps in `poll`.
    asleep: Arc<AtomicBool>,
}

impl std::fmt::Debug for CommandSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandSender")
    }
}

impl CommandSender {
    /// Queues a command and wakes the loop. `false` if the thread is gone.
    pub(crate) fn send(&self, cmd: Command) -> bool {
        if self.commands.send(cmd).is_err() {
            return false;
        }
        // Only the first command after the loop went to sleep pays for the
        // wake-up syscall; the rest are drained in the same turn.
        if self.asleep.swap(false, Ordering::SeqCst) {
            return self.waker.wake().is_ok();
        }
        true
    }
}

pub(crate) fn spawn(config: DriverConfig) -> io::Result<DriverHandle> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let (tx, rx) = crossbeam_channel::unbounded();
    let now = Instant::now();
    let status = Arc::new(Status::default());
    let watch_events = Arc::new(AtomicU64::new(0));
    let asleep = Arc::new(AtomicBool::new(false));
    let (failures_tx, failures) = crossbeam_channel::bounded(64);
    let mut session = Session::new(config.session.clone(), now);
    session.set_sasl(config.sasl);
    let mut driver = Driver {
        links: link::Links::new(config.connector, config.names, failures_tx),
        asleep: asleep.clone(),
        watch_events: watch_events.clone(),
        poll,
        commands: rx,
        session,
        hosts: HostList::new(config.hosts, now),
        connect_timeout: config.session.connect_timeout,
        keepalive_idle: (config.session.session_timeout / 3).max(Duration::from_secs(1)),
        conn: None,
        task: None,
        subscribers: Vec::new(),
        status: status.clone(),
        commands_open: true,
        read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
    };
    let thread = std::thread::Builder::new()
        .name("zklock-io".into())
        .spawn(move || driver.run())?;
    Ok(DriverHandle {
        sender: CommandSender {
            commands: tx,
            waker,
            asleep,
        },
        status,
        watch_events,
        thread: Some(thread),
        failures,
    })
}

struct Connection {
    stream: TcpStream,
    addr: SocketAddr,
    /// TCP handshake still under way, and until when we wait for it.
    connecting: Option<Instant>,
    opened: Instant,
    writable_interest: bool,
    link: link::Link,
}

struct Driver {
    poll: Poll,
    commands: Receiver<Command>,
    session: Session<ReplyTo, WatchTo>,
    task: Option<Box<dyn IoTask>>,
    hosts: HostList,
    connect_timeout: Duration,
    keepalive_idle: Duration,
    conn: Option<Connection>,
    subscribers: Vec<(Sender<SessionState>, Option<Weak<()>>)>,
    status: Arc<Status>,
    watch_events: Arc<AtomicU64>,
    asleep: Arc<AtomicBool>,
    commands_open: bool,
    links: link::Links,
    /// Where socket reads land: allocated once, not zeroed per event.
    read_buf: Box<[u8]>,
}

impl Driver {
    fn run(&mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            let now = Instant::now();
            self.drain_commands(now);
            self.session.handle_timeout(now);
            if let Some(task) = self.task.as_mut() {
                task.handle_timeout(now);
            }
            self.check_connect_deadline(now);
            self.deliver();
            self.maintain_connection(now);
            self.flush(now);
            self.deliver();
            self.publish();
            // A finished session keeps its thread while a Client remains, so
            // later calls hear "expired" (or "closed") from the core itself.
            if !self.commands_open && self.session.is_finished() {
                break;
            }
            // Announce the sleep, then look once more: a command sent in
            // between either is seen here or finds `asleep` set and wakes us.
            self.asleep.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if !self.commands.is_empty() {
                self.asleep.store(false, Ordering::SeqCst);
                continue;
            }
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            let polled = self.poll.poll(&mut events, timeout);
            self.asleep.store(false, Ordering::SeqCst);
            if let Err(e) = polled {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                log::error!("poll failed, stopping the I/O thread: {e}");
                self.session
                    .close(Instant::now(), ReplyTo::Caller(oneshot::channel().0));
                self.deliver();
                break;
            }
            let now = Instant::now();
            for event in events.iter() {
                if event.token() == SOCKET {
                    self.on_socket(
                        now,
                        event.is_writable(),
                        event.is_readable() || event.is_read_closed(),
                        event.is_read_closed(),
                    );
                }
            }
        }
        if let Some(conn) = self.conn.take() {
            let _ = self.poll.registry().deregister(&mut { conn.stream });
        }
        self.publish();
        log::debug!("I/O thread finished");
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut deadline = self.session.poll_timeout();
        if let Some(at) = self.task.as_ref().and_then(|t| t.poll_timeout()) {
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
        if let Some(Connection {
            connecting: Some(until),
            ..
        }) = &self.conn
        {
            deadline = Some(deadline.map_or(*until, |d| d.min(*until)));
        }
        if self.conn.is_none() && self.session.wants_connection() {
            let nb = self.hosts.not_before;
            deadline = Some(deadline.map_or(nb, |d| d.min(nb)));
        }
        deadline
    }

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
                Ok(Command::InstallTask(mut task)) => {
                    if self.task.is_none() {
                        task.handle_session(now, self.session.state(), self.session.session_id());
                        self.task = Some(task);
                    }
                }
                Ok(Command::TaskMessage(message)) => {
                    if let Some(task) = self.task.as_mut() {
                        task.handle_message(now, message);
                    }
                    // Before any later command: a caller that hears back
                    // and asks again must find the task's requests ahead.
                    self.submit_task_requests();
                }
                Ok(Command::Subscribe(tx, token)) => {
                    self.subscribers
                        .retain(|(_, t)| t.as_ref().is_none_or(|t| t.strong_count() > 0));
                    let _ = tx.send(self.session.state());
                    self.subscribers.push((tx, token));
                }
                Ok(Command::Shutdown) => self.shut_down(now),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => return self.shut_down(now),
            }
        }
    }

    /// Every Client is gone: end the session politely, then the thread.
    fn shut_down(&mut self, now: Instant) {
        if self.commands_open {
            self.commands_open = false;
            self.session
                .close(now, ReplyTo::Caller(oneshot::channel().0));
        }
    }

    /// Hands every session event to its caller, watcher or the task, and
    /// the task's requests to the session, until both are quiet.
    fn deliver(&mut self) {
        loop {
            self.deliver_session_events();
            if !self.submit_task_requests() {
                return;
            }
        }
    }

    /// `true` if the task had anything to send.
    fn submit_task_requests(&mut self) -> bool {
        let Some(task) = self.task.as_mut() else {
            return false;
        };
        let now = Instant::now();
        let mut any = false;
        while let Some(r) = task.poll_request() {
            any = true;
            let watch = r.watch.then_some(WatchTo::Task(r.token));
            self.session
                .submit(now, r.request, ReplyTo::Task(r.token), watch);
        }
        any
    }

    fn deliver_session_events(&mut self) {
        let now = Instant::now();
        while let Some(event) = self.session.poll_event() {
            match event {
                SessionEvent::Reply { handle, result } => match handle {
                    ReplyTo::Caller(tx) => {
                        // A caller that reads the zxid after its reply
                        // must see the reply's.
                        self.status
                            .last_zxid
                            .store(self.session.last_zxid(), Ordering::Release);
                        let _ = tx.send(result);
                    }
                    ReplyTo::Task(token) => {
                        if let Some(task) = self.task.as_mut() {
                            task.handle_reply(now, token, result);
                        }
                    }
                },
                SessionEvent::Watch { watcher, event } => {
                    self.watch_events.fetch_add(1, Ordering::Relaxed);
                    self.deliver_watch(now, watcher, Ok(event));
                }
                SessionEvent::WatchAbandoned { watcher, reason } => {
                    self.deliver_watch(now, watcher, Err(reason));
                }
                SessionEvent::State(state) => {
                    if let (SessionState::Connected, Some(conn)) = (state, self.conn.as_mut()) {
                        conn.link.established = true;
                    }
                    log::info!("session {:#x}: {state:?}", self.session.session_id());
                    self.publish();
                    if let Some(task) = self.task.as_mut() {
                        task.handle_session(now, state, self.session.session_id());
                    }
                    self.subscribers.retain(|(s, _)| s.send(state).is_ok());
                }
                SessionEvent::DropConnection(reason) => {
                    log::warn!("dropping connection: {reason:?}");
                    if reason != DropReason::SessionEnded {
                        self.account_connection_end(Instant::now());
                    }
                    self.close_socket();
                }
            }
        }
    }

    fn deliver_watch(&mut self, now: Instant, watcher: WatchTo, event: WatchOutcome) {
        match watcher {
            WatchTo::Caller(w) => (w.deliver)(event),
            WatchTo::Task(token) => {
                if let Some(task) = self.task.as_mut() {
                    task.handle_watch(now, token, event);
                }
            }
        }
    }

    fn publish(&self) {
        self.status.store(&self.session);
    }
}
