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

impl Client {
    /// Waits until the first session is established, failing with:
    /// * the terminal state, if the session ends (`AuthFailed`, ...);
    /// * [`Error::Connect`] as soon as every server refused us for a reason
    ///   retrying cannot cure (TLS: unknown CA, name mismatch, an alert, not
    ///   TLS);
    /// * at the deadline, [`Error::NoSession`]: `hosts` (the connect
    ///   string's, as resolved), the time spent and the last failure (a
    ///   close before the handshake was answered included: a TLS port
    ///   reached without TLS looks like a server not serving yet).
    pub(super) fn wait_first_session(
        &self,
        timeout: Duration,
        hosts: &[(String, SocketAddr)],
    ) -> Result<()> {
        let started = Instant::now();
        let (states, _token) = self.subscribe_scoped();
        let failures: &Receiver<ConnectFailure> = &self.inner.driver.failures;
        let host_count = self.inner.host_count;
        // The latest failure of each server, in the order they first failed
        // (a few servers: a list, not a map).
        let mut latest: Vec<ConnectFailure> = Vec::new();
        let mut last: Option<ConnectError> = None;
        let deadline = crate::deadline::from_now(timeout);
        let no_session = |last| {
            Error::NoSession(Box::new(NoSession {
                servers: servers(hosts),
                addresses: hosts.iter().map(|(_, a)| *a).collect(),
                waited: started.elapsed(),
                last,
            }))
        };
        loop {
            if let Some(outcome) = settled(self.state()) {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(no_session(last));
            }
            select! {
                recv(states) -> s => if s.is_err() { return Err(Error::Closed) },
                recv(failures) -> f => {
                    let Ok(failure) = f else { return Err(Error::Closed) };
                    last = Some(failure.error.clone());
                    match latest.iter_mut().find(|f| f.addr == failure.addr) {
                        Some(known) => *known = failure,
                        None => latest.push(failure),
                    }
                    if latest.len() >= host_count
                        && latest.iter().all(ConnectFailure::is_definitive)
                    {
                        return match latest.into_iter().next() {
                            Some(f) => Err(Error::Connect(f.error)),
                            None => Err(no_session(last)),
                        };
                    }
                },
                default(left) => {},
            }
        }
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
