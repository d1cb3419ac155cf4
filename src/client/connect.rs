//! The first connection: how the builder makes connections (plain or TLS),
//! and waiting for the first session while listening to why connections
//! fail, so that a refusal is reported at once and a timeout says why.

use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};

use super::{Client, ClientBuilder};
use crate::driver::{ConnectFailure, Connector};
use crate::error::{Error, Result};
use crate::session::SessionState;

impl ClientBuilder {
    /// Plain TCP, or TLS with the configuration loaded now: a missing or
    /// unreadable file fails here, before any connection.
    pub(super) fn connector(&self) -> Result<Connector> {
        #[cfg(feature = "tls")]
        if let Some(options) = &self.tls {
            let setup = options.load().map_err(|source| {
                Error::Connect(crate::error::ConnectError::Tls {
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
    /// * at the deadline, [`Error::Connect`] if every attempt was closed by
    ///   the server before its (ZooKeeper or TLS) handshake was answered,
    ///   else [`Error::Timeout`].
    pub(super) fn wait_first_session(&self, timeout: Duration) -> Result<()> {
        let (states, _token) = self.subscribe_scoped();
        let failures: &Receiver<ConnectFailure> = &self.inner.driver.failures;
        let hosts = self.inner.host_count;
        // The latest failure of each server, in the order they first failed
        // (a few servers: a list, not a map).
        let mut latest: Vec<ConnectFailure> = Vec::new();
        let mut all_closed_early = true;
        let deadline = crate::deadline::from_now(timeout);
        loop {
            if let Some(outcome) = settled(self.state()) {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let last = latest.into_iter().next();
                return match last {
                    Some(f) if all_closed_early => Err(Error::Connect(f.error)),
                    _ => Err(Error::Timeout),
                };
            }
            select! {
                recv(states) -> s => if s.is_err() { return Err(Error::Closed) },
                recv(failures) -> f => {
                    let Ok(failure) = f else { return Err(Error::Closed) };
                    all_closed_early &= failure.closed_early();
                    match latest.iter_mut().find(|f| f.addr == failure.addr) {
                        Some(known) => *known = failure,
                        None => latest.push(failure),
                    }
                    if latest.len() >= hosts && latest.iter().all(ConnectFailure::is_definitive) {
                        if let Some(f) = latest.into_iter().next() {
                            return Err(Error::Connect(f.error));
                        }
                        return Err(Error::Timeout);
                    }
                },
                default(left) => {},
            }
        }
    }
}
