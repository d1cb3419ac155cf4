//! The first connection: how the builder makes connections (plain or TLS),
//! and waiting for the first session while listening to why connections
//! fail, so that a refusal is reported at once and a timeout says why.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};

use super::{Client, ClientBuilder};
use crate::driver::{ConnectFailure, Connector};
use crate::error::{ConnectError, Error, NoSession, Result};
use crate::session::SessionState;

impl ClientBuilder {
    /// Plain TCP, or TLS with the configuration loaded now: a missing or
    /// unreadable file fails here, before any connection.
    pub(super) fn connector(&self) -> Result<Connector> {
        #[cfg(feature = "tls")]
        if let Some(options) = &self.tls {
            let setup = options.load().map_err(|source| {
                Error::Connect(ConnectError::Tls {
                    host: self.connect_string.clone(),
                    source,
                })
            })?;
            return Ok(Connector::Tls(setup));
        }
        Ok(Connector::Plain)
    }
}

/// What a wait for a session ends with in `state`: `None` while it may
/// still connect.
pub(super) fn settled(state: SessionState) -> Option<Result<()>> {
    match state {
        SessionState::Connected => Some(Ok(())),
        SessionState::Expired => Some(Err(Error::SessionExpired)),
        SessionState::AuthFailed => Some(Err(Error::AuthFailed)),
        SessionState::Closed => Some(Err(Error::Closed)),
        _ => None,
    }
}

/// A wait for the first session: what it has heard of the connections
/// that failed, and when it gives up. Both the blocking connect and the
/// async one look through it, so both end the same way:
/// * the terminal state, if the session ends (`AuthFailed`, ...);
/// * [`Error::Connect`] as soon as every server refused us for a reason
///   retrying cannot cure (TLS: unknown CA, name mismatch, an alert, not
///   TLS);
/// * at the deadline, [`Error::NoSession`]: `hosts` (the connect string's,
///   as resolved), the time spent and the last failure (a close before the
///   handshake was answered included: a TLS port reached without TLS looks
///   like a server not serving yet).
pub(super) struct FirstSession {
    hosts: Vec<(String, SocketAddr)>,
    started: Instant,
    pub(super) deadline: Instant,
    /// The latest failure of each server, in the order they first failed
    /// (a few servers: a list, not a map).
    latest: Vec<ConnectFailure>,
    last: Option<ConnectError>,
}

impl FirstSession {
    pub(super) fn new(timeout: Duration, hosts: Vec<(String, SocketAddr)>) -> FirstSession {
        FirstSession {
            hosts,
            started: Instant::now(),
            deadline: crate::deadline::from_now(timeout),
            latest: Vec::new(),
            last: None,
        }
    }

    /// How the wait ends now, if it does: the failures that came are read
    /// first.
    pub(super) fn look(&mut self, client: &Client) -> Option<Result<()>> {
        while let Ok(failure) = client.inner.driver.failures.try_recv() {
            if let Some(end) = self.note(client, failure) {
                return Some(end);
            }
        }
        if let Some(outcome) = settled(client.state()) {
            return Some(outcome);
        }
        if Instant::now() >= self.deadline {
            return Some(Err(self.no_session()));
        }
        None
    }

    /// A connection failed: the end, once every server refused for good.
    fn note(&mut self, client: &Client, failure: ConnectFailure) -> Option<Result<()>> {
        self.last = Some(failure.error.clone());
        match self.latest.iter_mut().find(|f| f.addr == failure.addr) {
            Some(known) => *known = failure,
            None => self.latest.push(failure),
        }
        let definitive = self.latest.len() >= client.inner.host_count
            && self.latest.iter().all(ConnectFailure::is_definitive);
        definitive.then(|| match self.latest.first() {
            Some(f) => Err(Error::Connect(f.error.clone())),
            None => Err(self.no_session()),
        })
    }

    fn no_session(&self) -> Error {
        Error::NoSession(Box::new(NoSession {
            servers: servers(&self.hosts),
            addresses: self.hosts.iter().map(|(_, a)| *a).collect(),
            waited: self.started.elapsed(),
            last: self.last.clone(),
        }))
    }
}

impl Client {
    /// Waits until the first session is established; see [`FirstSession`].
    pub(super) fn wait_first_session(&self, mut wait: FirstSession) -> Result<()> {
        let (states, _token) = self.subscribe_scoped();
        let failures: &Receiver<ConnectFailure> = &self.inner.driver.failures;
        loop {
            if let Some(end) = wait.look(self) {
                return end;
            }
            let left = wait.deadline.saturating_duration_since(Instant::now());
            select! {
                recv(states) -> s => if s.is_err() { return Err(Error::Closed) },
                recv(failures) -> f => {
                    let Ok(failure) = f else { return Err(Error::Closed) };
                    if let Some(end) = wait.note(self, failure) {
                        return end;
                    }
                },
                default(left) => {},
            }
        }
    }

    /// The same wait, as a future: woken by the I/O thread when the state
    /// changes or a connection fails, and by the core's timer at the
    /// deadline.
    pub(super) fn first_session(
        &self,
        mut wait: FirstSession,
    ) -> impl std::future::Future<Output = Result<()>> + Send + '_ {
        let mut timer_set = false;
        std::future::poll_fn(move |cx| {
            if !timer_set {
                timer_set = true;
                if !self.wake_at(wait.deadline, cx.waker().clone()) {
                    return std::task::Poll::Ready(Err(Error::Closed));
                }
            }
            // Registered before the look: a change after it wakes us.
            self.inner.driver.status.changes.register(cx.waker());
            match wait.look(self) {
                Some(end) => std::task::Poll::Ready(end),
                None => std::task::Poll::Pending,
            }
        })
    }
}

/// The connect string's servers as `host:port`, each once, in its order
/// (a host that resolved to several addresses is one server).
fn servers(hosts: &[(String, SocketAddr)]) -> Vec<String> {
    let mut servers: Vec<String> = Vec::new();
    for (name, addr) in hosts {
        // `host:port`, bracketed when the host is an IPv6 literal.
        let server = if name.contains(':') {
            format!("[{name}]:{}", addr.port())
        } else {
            format!("{name}:{}", addr.port())
        };
        if !servers.contains(&server) {
            servers.push(server);
        }
    }
    servers
}
