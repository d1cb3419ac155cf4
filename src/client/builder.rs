//! Connecting: the options of a client and the connect string.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Client, Inner};
use crate::driver::{self, DriverConfig, DriverHandle};
use crate::error::{Error, Result};
use crate::path::Chroot;
use crate::session::{SaslConfig, SessionConfig};

/// Options for [`Client`] beyond the connect string and session timeout.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(super) connect_string: String,
    pub(super) session_timeout: Duration,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) request_timeout: Option<Duration>,
    pub(super) max_frame: usize,
    pub(super) wait_connected: bool,
    pub(super) sasl: Option<SaslConfig>,
    #[cfg(feature = "tls")]
    pub(super) tls: Option<crate::TlsOptions>,
}

impl ClientBuilder {
    /// The session timeout to ask for (the server clamps it to 2..20 ticks).
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    /// Per-host connect timeout; default: session timeout / number of hosts.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    /// Deadline of every call; default: the session timeout.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = Some(t);
        self
    }

    /// Largest frame sent or accepted (the server's `jute.maxbuffer`).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// Whether `connect` waits for the first session (default) or returns at once.
    pub fn wait_connected(mut self, wait: bool) -> Self {
        self.wait_connected = wait;
        self
    }

    /// Authenticates every connection with SASL (e.g.
    /// [`SaslConfig::digest_md5`]) before any request is sent. A refused
    /// login ends the session in `AuthFailed`.
    pub fn sasl(mut self, config: SaslConfig) -> Self {
        self.sasl = Some(config);
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
    /// * [`Error::InvalidConnectString`]: no hosts; [`Error::Resolve`]: a
    ///   host that does not resolve; [`Error::InvalidPath`]: a bad chroot;
    /// * [`Error::Io`]: the I/O thread could not be started;
    /// * [`Error::Connect`]: the servers said why no session can be had (TLS
    ///   refused, or every server closed the connection before answering),
    ///   or a TLS file could not be loaded;
    /// * [`Error::Timeout`]: no session within the wait, for no reason a
    ///   server gave (none reachable, say);
    /// * [`Error::AuthFailed`]: the SASL login was refused.
    pub fn connect(self) -> Result<Client> {
        let (named, chroot) = parse_connect_string(&self.connect_string)?;
        let hosts: Vec<SocketAddr> = named.iter().map(|(_, a)| *a).collect();
        let connector = self.connector()?;
        let host_count = {
            let mut distinct = hosts.clone();
            distinct.sort();
            distinct.dedup();
            distinct.len()
        };
        // T / hosts, as ZooKeeper's client, but never more than T / 3: a
        // silent host must leave time to reach another before expiry.
        let connect_timeout = self
            .connect_timeout
            .unwrap_or(
                (self.session_timeout / hosts.len().max(1) as u32).min(self.session_timeout / 3),
            )
            .max(Duration::from_millis(100));
        let config = DriverConfig {
            hosts,
            session: SessionConfig {
                session_timeout: self.session_timeout,
                connect_timeout,
                max_frame: self.max_frame,
            },
            names: named.iter().map(|(n, a)| (*a, n.clone())).collect(),
            connector,
            sasl: self.sasl.clone(),
        };
        let driver = driver::spawn(config)?;
        let client = Client {
            inner: Arc::new(Inner {
                driver,
                chroot,
                request_timeout: self.request_timeout.unwrap_or(self.session_timeout),
                max_frame: self.max_frame,
                host_count,
                attempts: super::AttemptIds::new(),
            }),
        };
        if self.wait_connected {
            client.wait_first_session(self.session_timeout.max(Duration::from_secs(1)))?;
        }
        Ok(client)
    }
}

impl ClientBuilder {
    /// A client whose core the caller drives instead of an I/O thread: the
    /// deterministic simulator runs every recipe this way, on virtual time.
    /// Nothing connects by itself; the caller moves bytes between
    /// [`Core::output`](crate::machine::Core::output) and its own
    /// transport and calls [`Core::turn`](crate::machine::Core::turn) after
    /// anything a client handle did. Blocking calls on such a client wait
    /// on the real clock for a core that only moves when driven: use the
    /// non-blocking ones (`start_*`, [`PendingLock`](crate::recipes::PendingLock),
    /// [`PendingSet`](crate::recipes::PendingSet), guards) from the driving thread.
    ///
    /// `seed` stands for the client's randomness (the UUIDs in its lock
    /// nodes' names), so that a simulated run replays exactly.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`] for the connect string (its hosts are
    /// only checked; the chroot applies).
    pub fn build_manual(self, now: Instant, seed: u128) -> Result<(Client, crate::machine::Core)> {
        let (named, chroot) = parse_connect_string(&self.connect_string)?;
        let config = SessionConfig {
            session_timeout: self.session_timeout,
            connect_timeout: self
                .connect_timeout
                .unwrap_or(self.session_timeout / 3)
                .max(Duration::from_millis(100)),
            max_frame: self.max_frame,
        };
        let (core, handles) = crate::machine::Core::new(
            config,
            self.sasl.clone(),
            now,
            Arc::new(crate::machine::NoWake),
        );
        let client = Client {
            inner: Arc::new(Inner {
                driver: DriverHandle::manual(handles),
                chroot,
                request_timeout: self.request_timeout.unwrap_or(self.session_timeout),
                max_frame: self.max_frame,
                host_count: named.len(),
                attempts: super::AttemptIds::with_seed(seed),
            }),
        };
        Ok((client, core))
    }
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
        let with_port = if host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
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
