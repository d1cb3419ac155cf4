//! The I/O thread: one mio event loop per client that moves bytes between a
//! socket and the session core, and answers callers over channels.
//!
//! It owns no protocol logic. Each turn it feeds the core what happened
//! (socket readiness, commands, the time), then drains the core's events,
//! output and next deadline, and sleeps in `poll` until one of those is due.
//! An idle client wakes only to ping.

use std::io;
use std::net::SocketAddr;
#[cfg(feature = "testing")]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::net::TcpStream;
use mio::{Events, Poll, Token, Waker};

use crate::machine::status::Status;
#[cfg(feature = "testing")]
use crate::machine::CoreHandles;
use crate::machine::{Command, CommandSender, Core, CoreEvent, Observer, Wake};
#[cfg(feature = "sasl")]
use crate::session::SaslConfig;
use crate::session::{DropReason, SessionConfig, SessionState};

mod hosts;
mod link;
mod socket;
use hosts::HostList;
pub(crate) use link::{ConnectFailure, Connector};

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);
/// One socket read. Replies are small but for listings; a long listing
/// takes a few more reads rather than every client keeping a large buffer
/// (a process with a hundred sessions).
const READ_CHUNK: usize = 16 * 1024;
/// A connection that lasted this long was not a failure.
const HEALTHY_CONNECTION: Duration = Duration::from_secs(1);

pub(crate) struct DriverConfig {
    pub hosts: Vec<SocketAddr>,
    pub session: SessionConfig,
    /// The connect string's host of each address (the TLS server name).
    pub names: Vec<(SocketAddr, String)>,
    pub connector: Connector,
    #[cfg(feature = "sasl")]
    pub sasl: Option<SaslConfig>,
    pub observer: Option<Arc<dyn Observer>>,
    pub leader_check: bool,
    pub new_session_after_expiry: bool,
}

/// The API side's handle on the core and on the thread that drives it.
pub(crate) struct DriverHandle {
    pub sender: CommandSender,
    pub status: Arc<Status>,
    /// What `Client::watch_events_received` reads (feature `testing`).
    #[cfg(feature = "testing")]
    pub watch_events: Arc<AtomicU64>,
    /// The I/O thread; `None` for a core driven by hand.
    pub thread: Option<std::thread::JoinHandle<()>>,
    /// Connections that failed before a session was established.
    pub failures: Receiver<ConnectFailure>,
}

impl DriverHandle {
    /// For a core someone else drives: no thread, no connections of ours.
    #[cfg(feature = "testing")]
    pub(crate) fn manual(core: CoreHandles) -> DriverHandle {
        DriverHandle {
            sender: core.sender,
            status: core.status,
            watch_events: core.watch_events,
            thread: None,
            failures: crossbeam_channel::never(),
        }
    }

    /// Queues a command and wakes the core's driver. `false` if it is gone.
    pub(crate) fn send(&self, cmd: Command) -> bool {
        self.sender.send(cmd)
    }
}

/// Wakes the I/O thread's poll, but only the first command after it went
/// to sleep pays for the syscall; the rest are drained in the same turn.
struct PollWaker {
    waker: Waker,
    /// Set by the I/O thread just before it sleeps in `poll`.
    asleep: Arc<AtomicBool>,
}

impl Wake for PollWaker {
    fn wake(&self) -> bool {
        if self.asleep.swap(false, Ordering::SeqCst) {
            return self.waker.wake().is_ok();
        }
        true
    }
}

pub(crate) fn spawn(config: DriverConfig) -> io::Result<DriverHandle> {
    let poll = Poll::new()?;
    let asleep = Arc::new(AtomicBool::new(false));
    let waker = Arc::new(PollWaker {
        waker: Waker::new(poll.registry(), WAKER)?,
        asleep: asleep.clone(),
    });
    let now = Instant::now();
    // Room for a failure from every server: the connect call waits for one
    // of each before it gives up early. A bounded channel allocates all its
    // room up front, so a client with few servers keeps few slots
    // (bench/FIGURES.md).
    let room = config.hosts.len().clamp(4, 64);
    let (failures_tx, failures) = crossbeam_channel::bounded(room);
    let (mut core, handles) = Core::new(config.session.clone(), now, waker, config.observer);
    core.set_leader_check(config.leader_check);
    core.set_new_session_after_expiry(config.new_session_after_expiry);
    #[cfg(feature = "sasl")]
    core.set_sasl(config.sasl);
    let mut driver = Driver {
        links: link::Links::new(
            config.connector,
            config.names,
            failures_tx,
            handles.status.clone(),
        ),
        asleep,
        poll,
        core,
        hosts: HostList::new(config.hosts, now),
        connect_timeout: config.session.connect_timeout,
        keepalive_idle: (config.session.session_timeout / 3).max(Duration::from_secs(1)),
        conn: None,
        read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
    };
    let thread = std::thread::Builder::new()
        .name("zklock-io".into())
        .spawn(move || driver.run())?;
    Ok(DriverHandle {
        sender: handles.sender,
        status: handles.status,
        #[cfg(feature = "testing")]
        watch_events: handles.watch_events,
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
    core: Core,
    hosts: HostList,
    connect_timeout: Duration,
    keepalive_idle: Duration,
    conn: Option<Connection>,
    asleep: Arc<AtomicBool>,
    links: link::Links,
    /// Where socket reads land: allocated once, not zeroed per event.
    read_buf: Box<[u8]>,
}

impl Driver {
    fn run(&mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            let now = Instant::now();
            self.core.turn(now);
            self.check_connect_deadline(now);
            self.act_on_core();
            self.maintain_connection(now);
            self.flush(now);
            self.act_on_core();
            // A finished session keeps its thread while a Client remains, so
            // later calls hear "expired" (or "closed") from the core itself.
            if self.core.is_done() {
                break;
            }
            // Announce the sleep, then look once more: a command sent in
            // between either is seen here or finds `asleep` set and wakes us.
            self.asleep.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.core.has_commands() {
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
                self.core.abort(Instant::now());
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
        log::debug!("I/O thread finished");
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut deadline = self.core.poll_timeout();
        if let Some(Connection {
            connecting: Some(until),
            ..
        }) = &self.conn
        {
            deadline = Some(deadline.map_or(*until, |d| d.min(*until)));
        }
        if self.conn.is_none() && self.core.wants_connection() {
            let nb = self.hosts.not_before;
            deadline = Some(deadline.map_or(nb, |d| d.min(nb)));
        }
        deadline
    }

    /// What the core asked of its driver.
    fn act_on_core(&mut self) {
        while let Some(event) = self.core.poll_event() {
            match event {
                CoreEvent::State(SessionState::Connected) => {
                    if let Some(conn) = self.conn.as_mut() {
                        conn.link.established = true;
                    }
                }
                CoreEvent::State(_) => {}
                CoreEvent::DropConnection(reason) => {
                    log::warn!("dropping connection: {reason:?}");
                    if reason != DropReason::SessionEnded {
                        self.ended_because(self.dropped_because(&reason));
                        self.account_connection_end(Instant::now());
                    }
                    self.close_socket();
                }
            }
        }
    }
}

impl Driver {
    /// Why the session core dropped a connection, as a connect failure says
    /// it.
    fn dropped_because(&self, reason: &DropReason) -> String {
        match reason {
            DropReason::HandshakeTimeout => format!(
                "no answer to the session handshake within {:?}",
                self.connect_timeout
            ),
            DropReason::ReadTimeout => "nothing heard for two thirds of the session timeout".into(),
            DropReason::Protocol(what) => format!("protocol violation: {what}"),
            DropReason::ReadOnlyServer => "a read-only server".into(),
            other => format!("{other:?}"),
        }
    }
}
