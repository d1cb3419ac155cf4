//! Connecting: the options of a client and the connect string.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use super::{Client, Inner};
use crate::deadline;
use crate::driver::{self, DriverConfig};
use crate::error::{Error, Result};
use crate::machine::Observer;
use crate::path::Chroot;
#[cfg(feature = "sasl")]
use crate::session::SaslConfig;
use crate::session::SessionConfig;

/// The smallest frame limit [`ClientBuilder::max_frame`] accepts: 1 KiB,
/// room for a handshake and a reply naming a few paths.
pub const MIN_MAX_FRAME: usize = 1024;

/// The longest session timeout the handshake can carry (`i32::MAX` ms).
const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Options for [`Client`] beyond the connect string and session timeout.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(super) connect_string: String,
    pub(super) session_timeout: Duration,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) request_timeout: Option<Duration>,
    pub(super) max_frame: usize,
    pub(super) persistent_watch_capacity: usize,
    pub(super) wait_connected: bool,
    #[cfg(feature = "sasl")]
    pub(super) sasl: Option<SaslConfig>,
    pub(super) observer: Option<ObserverRef>,
    pub(super) leader_check: bool,
    pub(super) new_session_after_expiry: bool,
    #[cfg(feature = "tls")]
    pub(super) tls: Option<crate::TlsOptions>,
}

/// An observer as the builder keeps it (a trait object has no Debug).
#[derive(Clone)]
pub(super) struct ObserverRef(pub(super) Arc<dyn Observer>);

impl std::fmt::Debug for ObserverRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl ClientBuilder {
    /// The session timeout to ask for (the server clamps it to 2..20 ticks).
    /// Any value is accepted: the wire carries at most `i32::MAX`
    /// milliseconds (about 24.8 days), and a longer one is asked as that.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    /// Per-host connect timeout; default: session timeout / number of hosts.
    /// Clamped to at least 100 ms; any longer value (`Duration::MAX`
    /// included) is accepted and means "until the session timeout ends the
    /// wait".
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    /// Deadline of every call; default: the session timeout (at least 1 s,
    /// as the server grants a session of some seconds whatever is asked). Zero is
    /// refused by [`ClientBuilder::connect`] (every call would time out
    /// unanswered); `Duration::MAX` means no deadline of the client's own.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = Some(t);
        self
    }

    /// Largest frame sent or accepted (the server's `jute.maxbuffer`). Below
    /// [`MIN_MAX_FRAME`] no ordinary reply fits, and
    /// [`ClientBuilder::connect`] refuses it.
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// How many unread events each [`PersistentWatch`](crate::PersistentWatch)
    /// keeps (default [`DEFAULT_PERSISTENT_WATCH_CAPACITY`](crate::DEFAULT_PERSISTENT_WATCH_CAPACITY)):
    /// past it, the unread events are replaced by one "re-read" event, so a
    /// slow reader or a flooding server costs bounded memory. At least 2;
    /// [`ClientBuilder::connect`] refuses less.
    pub fn persistent_watch_capacity(mut self, events: usize) -> Self {
        self.persistent_watch_capacity = events;
        self
    }

    /// Whether `connect` waits for the first session (default) or returns at once.
    pub fn wait_connected(mut self, wait: bool) -> Self {
        self.wait_connected = wait;
        self
    }

    /// Authenticates every connection with SASL (e.g.
    /// [`SaslConfig::digest_md5`]) before any request is sent. A refused
    /// login ends the session in `AuthFailed`. Cargo feature `sasl` (on by
    /// default).
    #[cfg(feature = "sasl")]
    pub fn sasl(mut self, config: SaslConfig) -> Self {
        self.sasl = Some(config);
        self
    }

    /// Whether the session counts only answers the ZooKeeper leader itself
    /// gave as proof that it lives (default on). On, it sends a `sync` every
    /// twelfth of the session timeout, never says Suspended on a healthy
    /// server answering within an eighth of the timeout (a twelfth with a
    /// DIGEST-MD5 login, whose round trips come first), and a holder whose
    /// server is cut off from the leader is told
    /// Suspended before the leader can expire the session (docs/PARTITION.md).
    /// Off, a follower answering pings by itself keeps a holder saying Held
    /// while the leader expires the session. Turn it off only for a
    /// standalone server where no request may be spared.
    pub fn leader_check(mut self, on: bool) -> Self {
        self.leader_check = on;
        self
    }

    /// Whether the client opens a new session when its session expires
    /// (default on), as Curator's and kazoo's clients do: on the same
    /// hosts, with the same credentials, SASL login, chroot and options.
    ///
    /// Before the new session is asked for, everything of the old one has
    /// ended: every guard of it is `Lost` (reason
    /// [`SessionExpired`](crate::recipes::LossReason::SessionExpired)) for
    /// good, every acquisition waiting on it failed, every watch set on it
    /// ended with [`Error::SessionExpired`], and subscribers heard
    /// [`SessionState::Expired`](crate::SessionState::Expired). Then they
    /// hear `Connecting` and, once it is open, `Connected`, with
    /// [`Client::session_id`] the new session's. The recipes' values
    /// (`Mutex`, `RwLock`, `Semaphore`, `MultiLock`, `BatchMutex`,
    /// `Election`) work on the new session as they are, and a
    /// [`LeaderLatch`](crate::recipes::LeaderLatch) campaigns again on it.
    ///
    /// Off, the client ends with its first session: after an expiry every
    /// call fails with [`Error::SessionExpired`], and a new client is
    /// needed.
    pub fn new_session_after_expiry(mut self, on: bool) -> Self {
        self.new_session_after_expiry = on;
        self
    }

    /// Tells `observer` what the client sees: session changes, dropped
    /// connections, and every lock acquisition's wait, outcome, holder
    /// states and hold time (see [`Observer`]). For metrics and logs.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(ObserverRef(observer));
        self
    }

    /// Connects with TLS, verifying each server against the connect
    /// string's host (cargo feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, options: crate::TlsOptions) -> Self {
        self.tls = Some(options);
        self
    }

    /// Resolves the hosts, starts the I/O thread and, unless
    /// `wait_connected(false)`, waits up to the session timeout (at least 1 s)
    /// for the first session.
    ///
    /// # Errors
    /// * [`Error::InvalidConnectString`]: no hosts, or a port of 0;
    ///   [`Error::Resolve`]: a host that does not resolve;
    ///   [`Error::InvalidPath`]: a bad chroot;
    /// * [`Error::InvalidSetting`]: `max_frame` below [`MIN_MAX_FRAME`], a
    ///   zero `request_timeout`, a `persistent_watch_capacity` below 2;
    /// * [`Error::Io`]: the I/O thread could not be started;
    /// * [`Error::Connect`]: every server refused us for a reason a retry
    ///   cannot cure (TLS), or a TLS file could not be loaded;
    /// * [`Error::NoSession`]: no session within the wait, for no reason
    ///   that rules every server out (none reachable, or each closed the
    ///   connection before answering); it names the servers, the time spent
    ///   and the last failure;
    /// * [`Error::AuthFailed`]: the SASL login was refused.
    pub fn connect(self) -> Result<Client> {
        let (client, wait) = self.start()?;
        if let Some(wait) = wait {
            client.wait_first_session(wait)?;
        }
        Ok(client)
    }

    /// [`ClientBuilder::connect`] as a future: the wait for the first
    /// session is awaited, woken by the client's I/O thread (when the
    /// session opens, a connection fails, or the wait runs out), on any
    /// executor or none. The settings are checked, the connect string's
    /// host names resolved and the I/O thread started when this is called;
    /// only a name lookup blocks (an IP address needs none).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::Client;
    ///
    /// # async fn run() -> Result<(), zklock::Error> {
    /// let client = Client::builder("127.0.0.1:2181")
    ///     .session_timeout(Duration::from_secs(10))
    ///     .connect_async()
    ///     .await?;
    /// println!("session {:#x}", client.session_id());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    pub fn connect_async(self) -> impl std::future::Future<Output = Result<Client>> + Send {
        let started = self.start();
        async move {
            let (client, wait) = started?;
            if let Some(wait) = wait {
                client.first_session(wait).await?;
            }
            Ok(client)
        }
    }

    /// Checks the settings, resolves the hosts and starts the I/O thread;
    /// the wait for the first session, unless `wait_connected(false)`.
    fn start(self) -> Result<(Client, Option<super::connect::FirstSession>)> {
        self.check_settings()?;
        // Every duration kept is one a deadline can be computed from.
        let session_timeout = self.session_timeout.min(MAX_SESSION_TIMEOUT);
        let request_timeout = self.capped_request_timeout();
        let (named, chroot) = parse_connect_string(&self.connect_string)?;
        let hosts: Vec<SocketAddr> = named.iter().map(|(_, a)| *a).collect();
        let connector = self.connector()?;
        let host_count = distinct_hosts(&hosts);
        let connect_timeout = self.connect_timeout_for(session_timeout, hosts.len());
        let config = DriverConfig {
            hosts,
            session: SessionConfig {
                session_timeout,
                connect_timeout,
                max_frame: self.max_frame,
            },
            names: named.iter().map(|(n, a)| (*a, n.clone())).collect(),
            observer: self.observer.as_ref().map(|o| o.0.clone()),
            leader_check: self.leader_check,
            new_session_after_expiry: self.new_session_after_expiry,
            connector,
            #[cfg(feature = "sasl")]
            sasl: self.sasl.clone(),
        };
        let driver = driver::spawn(config)?;
        let client = Client {
            inner: Arc::new(Inner {
                driver,
                chroot,
                request_timeout,
                max_frame: self.max_frame,
                persistent_watch_capacity: self.persistent_watch_capacity,
                host_count,
                attempts: super::AttemptIds::new(),
                renews: self.new_session_after_expiry,
            }),
        };
        let wait = self.wait_connected.then(|| {
            super::connect::FirstSession::new(session_timeout.max(Duration::from_secs(1)), named)
        });
        Ok((client, wait))
    }

    /// How long one connection attempt may take: the setting, or
    /// [`default_connect_timeout`].
    fn connect_timeout_for(&self, session_timeout: Duration, hosts: usize) -> Duration {
        self.connect_timeout
            .unwrap_or_else(|| default_connect_timeout(session_timeout, hosts))
            .clamp(Duration::from_millis(100), deadline::FAR_FUTURE)
    }

    /// Refuses the settings no client can work with.
    fn check_settings(&self) -> Result<()> {
        if self.max_frame < MIN_MAX_FRAME {
            return Err(Error::InvalidSetting {
                setting: "max_frame",
                reason: "below 1 KiB (MIN_MAX_FRAME) no reply fits",
            });
        }
        if self.persistent_watch_capacity < 2 {
            return Err(Error::InvalidSetting {
                setting: "persistent_watch_capacity",
                reason: "below 2 there is no room for a re-read event and the end",
            });
        }
        if self.request_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidSetting {
                setting: "request_timeout",
                reason: "zero: every call would time out",
            });
        }
        Ok(())
    }

    /// The request timeout asked, or the session timeout (at least 1 s),
    /// capped so that a deadline can be computed from it.
    fn capped_request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or(
                self.session_timeout
                    .min(MAX_SESSION_TIMEOUT)
                    .max(Duration::from_secs(1)),
            )
            .min(deadline::FAR_FUTURE)
    }
}

#[cfg(feature = "testing")]
impl ClientBuilder {
    /// **Unstable** (feature `testing`, for this project's simulator and
    /// tests; no semver promise). A client whose core the caller drives
    /// instead of an I/O thread: the deterministic simulator runs every
    /// recipe this way, on virtual time.
    /// Nothing connects by itself; the caller moves bytes between
    /// [`Core::output`](crate::testing::Core::output) and its own
    /// transport and calls [`Core::turn`](crate::testing::Core::turn) after
    /// anything a client handle did. Blocking calls on such a client wait
    /// on the real clock for a core that only moves when driven: use the
    /// non-blocking ones (`start_*`, [`PendingLock`](crate::recipes::PendingLock),
    /// [`PendingSet`](crate::recipes::PendingSet), guards) from the driving thread.
    ///
    /// `seed` stands for the client's randomness (the UUIDs in its lock
    /// nodes' names), so that a simulated run replays exactly.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`] for the settings and the connect
    /// string (its hosts are only checked; the chroot applies).
    pub fn build_manual(
        self,
        now: std::time::Instant,
        seed: u128,
    ) -> Result<(Client, crate::testing::Core)> {
        self.check_settings()?;
        let (named, chroot) = parse_connect_string(&self.connect_string)?;
        let hosts: Vec<SocketAddr> = named.iter().map(|(_, a)| *a).collect();
        let session_timeout = self.session_timeout.min(MAX_SESSION_TIMEOUT);
        let config = SessionConfig {
            session_timeout,
            connect_timeout: self.connect_timeout_for(session_timeout, hosts.len()),
            max_frame: self.max_frame,
        };
        let (mut core, handles) = crate::machine::Core::new(
            config,
            now,
            Arc::new(crate::machine::NoWake),
            self.observer.as_ref().map(|o| o.0.clone()),
        );
        core.set_leader_check(self.leader_check);
        core.set_new_session_after_expiry(self.new_session_after_expiry);
        #[cfg(feature = "sasl")]
        core.set_sasl(self.sasl.clone());
        let client = Client {
            inner: Arc::new(Inner {
                driver: crate::driver::DriverHandle::manual(handles),
                chroot,
                request_timeout: self.capped_request_timeout(),
                max_frame: self.max_frame,
                persistent_watch_capacity: self.persistent_watch_capacity,
                host_count: distinct_hosts(&hosts),
                attempts: super::AttemptIds::with_seed(seed),
                renews: self.new_session_after_expiry,
            }),
        };
        Ok((client, core))
    }
}

/// T / hosts, as ZooKeeper's client, but never more than T / 3: a silent
/// host must leave time to reach another before the session expires.
fn default_connect_timeout(session_timeout: Duration, hosts: usize) -> Duration {
    let divisor = u32::try_from(hosts.max(1)).unwrap_or(u32::MAX);
    (session_timeout / divisor).min(session_timeout / 3)
}

/// Distinct addresses, counted without sorting (a few hosts; a sort of
/// SocketAddr is code of its own).
fn distinct_hosts(hosts: &[SocketAddr]) -> usize {
    hosts
        .iter()
        .enumerate()
        .filter(|(i, a)| !hosts[..*i].contains(a))
        .count()
}

/// Splits `host:port[,host:port...][/chroot]` and resolves every host.
/// Each address comes with the host that named it.
pub(super) fn parse_connect_string(s: &str) -> Result<(Vec<(String, SocketAddr)>, Chroot)> {
    let bad = |why: String| Error::InvalidConnectString(why);
    let (hosts_part, chroot) = match s.find('/') {
        Some(i) => (&s[..i], Some(s[i..].to_owned())),
        None => (s, None),
    };
    let chroot = Chroot::new(chroot)?;
    let mut addrs = Vec::new();
    for host in hosts_part
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        let port = host
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok());
        if port == Some(0) {
            return Err(bad(format!("port 0 in {host:?}: no server listens there")));
        }
        let with_port = if port.is_some() {
            host.to_owned()
        } else {
            format!("{host}:2181")
        };
        let resolved = with_port.to_socket_addrs().map_err(|e| Error::Resolve {
            host: host.to_owned(),
            source: Arc::new(e),
        })?;
        let name = with_port
            .rsplit_once(':')
            .map_or(host, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        addrs.extend(resolved.map(|a| (name.clone(), a)));
    }
    if addrs.is_empty() {
        return Err(bad(format!("no hosts in {s:?}")));
    }
    Ok((addrs, chroot))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use super::{default_connect_timeout, distinct_hosts};

    #[test]
    fn a_host_named_twice_counts_once() {
        let a: SocketAddr = "127.0.0.1:2181".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2182".parse().unwrap();
        assert_eq!(distinct_hosts(&[]), 0);
        assert_eq!(distinct_hosts(&[a, b]), 2);
        assert_eq!(distinct_hosts(&[a, b, a, a]), 2);
    }

    #[test]
    fn each_attempt_gets_its_share_of_the_session_timeout_and_never_more_than_a_third() {
        let t = Duration::from_secs(12);
        assert_eq!(default_connect_timeout(t, 0), t / 3);
        assert_eq!(default_connect_timeout(t, 1), t / 3);
        assert_eq!(default_connect_timeout(t, 2), t / 3);
        assert_eq!(default_connect_timeout(t, 3), t / 3);
        assert_eq!(default_connect_timeout(t, 4), t / 4);
        assert_eq!(default_connect_timeout(t, 6), t / 6);
    }
}
