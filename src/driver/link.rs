//! What sits between the socket and the session's bytes: nothing, or TLS
//! (cargo feature `tls`), plus the reports of connections that failed before
//! a session was established, for the caller of `connect`.
//!
//! The TLS side is rustls's sans-I/O connection driven by the mio loop:
//! `read_tls` + `process_new_packets` when the socket is readable, plaintext
//! written into rustls and `write_tls` while it `wants_write`. The session
//! core never knows whether TLS is there.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use mio::net::TcpStream;

use super::{Connection, Driver};
use crate::error::ConnectError;
use crate::machine::status::Status;

/// A connection that failed before its session was established.
#[derive(Debug, Clone)]
pub(crate) struct ConnectFailure {
    /// The server's address.
    pub addr: SocketAddr,
    /// What went wrong.
    pub error: ConnectError,
}

impl ConnectFailure {
    /// Whether trying the same server again cannot help (TLS refused).
    pub(crate) fn is_definitive(&self) -> bool {
        match &self.error {
            #[cfg(feature = "tls")]
            ConnectError::Tls { source, .. } => source.is_definitive(),
            _ => false,
        }
    }
}

/// How every connection of a client is made.
#[derive(Debug, Clone, Default)]
pub(crate) enum Connector {
    /// Plain TCP.
    #[default]
    Plain,
    /// TLS over TCP.
    #[cfg(feature = "tls")]
    Tls(crate::tls::TlsSetup),
}

/// The driver's side of links: how to make one, the host names of the
/// addresses, and where failures are reported.
pub(crate) struct Links {
    connector: Connector,
    /// The connect string's host of each resolved address.
    names: Vec<(SocketAddr, String)>,
    failures: Sender<ConnectFailure>,
    /// Whose waiting tasks hear of each failure (an async connect).
    status: Arc<Status>,
    /// The typed reason of the failure being handled, if known.
    pending: Option<ConnectError>,
}

impl Links {
    pub(crate) fn new(
        connector: Connector,
        names: Vec<(SocketAddr, String)>,
        failures: Sender<ConnectFailure>,
        status: Arc<Status>,
    ) -> Links {
        Links {
            connector,
            names,
            failures,
            status,
            pending: None,
        }
    }

    /// `host:port` as the connect string wrote it.
    fn host(&self, addr: SocketAddr) -> String {
        match self.names.iter().find(|(a, _)| *a == addr) {
            Some((_, name)) => format!("{name}:{}", addr.port()),
            None => addr.to_string(),
        }
    }

    /// A link for a new TCP connection to `addr`.
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub(crate) fn link(&mut self, addr: SocketAddr) -> Result<Link, ConnectError> {
        match &self.connector {
            Connector::Plain => Ok(Link::default()),
            #[cfg(feature = "tls")]
            Connector::Tls(setup) => {
                let name = self
                    .names
                    .iter()
                    .find(|(a, _)| *a == addr)
                    .map_or_else(|| addr.ip().to_string(), |(_, n)| n.clone());
                match setup.connect(&name) {
                    Ok((conn, name)) => Ok(Link {
                        established: false,
                        tls: Some(Box::new(TlsLink {
                            conn,
                            name,
                            drained: false,
                        })),
                    }),
                    Err(source) => Err(ConnectError::Tls {
                        host: self.host(addr),
                        source,
                    }),
                }
            }
        }
    }

    /// A connection ended: if its session was never established, report why.
    pub(crate) fn connection_ended(&mut self, conn: &Connection) {
        let pending = self.pending.take();
        if conn.link.established {
            return;
        }
        let error = pending.unwrap_or_else(|| ConnectError::Other {
            host: self.host(conn.addr),
            reason: "the connection ended before a session was established".into(),
        });
        self.report(conn.addr, error);
    }

    fn report(&self, addr: SocketAddr, error: ConnectError) {
        log::info!("connecting to {addr} failed: {error}");
        // Nobody may be listening (connect returned long ago): never block.
        let _ = self.failures.try_send(ConnectFailure { addr, error });
        self.status.changes.wake_all();
    }
}

/// The transport state of one connection.
#[derive(Debug, Default)]
pub(crate) struct Link {
    /// The session was established (or resumed) on this connection.
    pub(crate) established: bool,
    #[cfg(feature = "tls")]
    tls: Option<Box<TlsLink>>,
}

impl Link {
    /// Reads session bytes: `Ok(0)` when the peer closed, `WouldBlock` when
    /// nothing more is there.
    pub(crate) fn read(&mut self, stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            return tls.read(stream, buf);
        }
        stream.read(buf)
    }

    /// Writes session bytes; returns how many were taken.
    pub(crate) fn write(&mut self, stream: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            return tls.write(stream, data);
        }
        stream.write(data)
    }

    /// Sends what the transport itself has queued (TLS records).
    pub(crate) fn flush(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            return tls.flush(stream);
        }
        let _ = stream;
        Ok(())
    }

    /// Whether a short read means the socket is drained. True for TCP;
    /// with TLS a short read is one batch of records, and the socket is
    /// drained only once it said WouldBlock (or an unread close follows).
    pub(crate) fn drained(&self) -> bool {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_ref() {
            return tls.drained;
        }
        true
    }

    /// The transport has bytes of its own to send.
    pub(crate) fn wants_write(&self) -> bool {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_ref() {
            return tls.conn.wants_write();
        }
        false
    }
}

/// A TLS client connection over the driver's socket.
#[cfg(feature = "tls")]
struct TlsLink {
    conn: rustls::ClientConnection,
    /// The name verified against the server's certificate.
    name: String,
    /// The last socket read said WouldBlock: nothing is left unread.
    drained: bool,
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for TlsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsLink").field("name", &self.name).finish()
    }
}

/// A TLS failure carried through `io::Error` to the driver.
#[cfg(feature = "tls")]
fn tls_failure(e: crate::tls::TlsError) -> io::Error {
    io::Error::other(e)
}

#[cfg(feature = "tls")]
impl TlsLink {
    fn read(&mut self, stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify; the data is complete
                // at record boundaries, which is all ZooKeeper frames need.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let got = self.conn.read_tls(stream);
            self.drained = matches!(&got, Err(e) if e.kind() == io::ErrorKind::WouldBlock);
            match got {
                Ok(0) if self.conn.is_handshaking() => {
                    return Err(tls_failure(crate::tls::TlsError::ClosedDuringHandshake))
                }
                Ok(0) => return Ok(0),
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // Tell the server why (an alert), as far as it goes.
                        let _ = self.conn.write_tls(stream);
                        let e = crate::tls::TlsError::from_rustls(e, &self.name);
                        return Err(tls_failure(e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn write(&mut self, stream: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(data)?;
        match self.flush(stream) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            if self.conn.write_tls(stream)? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

impl Driver {
    /// The transport or the socket failed: report a TLS failure with its
    /// type and any other with its `io::Error`, then drop the connection as
    /// any other failure.
    pub(super) fn link_failed(&mut self, now: Instant, e: io::Error) {
        let why = e.to_string();
        if let Some(conn) = &self.conn {
            let host = self.links.host(conn.addr);
            #[cfg(feature = "tls")]
            if let Some(source) = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<crate::tls::TlsError>())
            {
                self.links.pending = Some(ConnectError::Tls {
                    host,
                    source: source.clone(),
                });
                return self.lost_connection(now, &why);
            }
            self.links.pending = Some(ConnectError::Io {
                host,
                source: std::sync::Arc::new(e),
            });
        }
        self.lost_connection(now, &why);
    }

    /// The connection ended for a reason of the driver's or the session's
    /// own (no answer in time): report it, unless a typed one came first.
    pub(super) fn ended_because(&mut self, reason: String) {
        if let Some(conn) = &self.conn {
            if !conn.link.established && self.links.pending.is_none() {
                self.links.pending = Some(ConnectError::Other {
                    host: self.links.host(conn.addr),
                    reason,
                });
            }
        }
    }

    /// A connection could not even be started: report why.
    pub(super) fn not_started(&mut self, addr: SocketAddr, e: io::Error) {
        let error = ConnectError::Io {
            host: self.links.host(addr),
            source: std::sync::Arc::new(e),
        };
        self.links.report(addr, error);
    }

    /// The server closed the connection.
    pub(super) fn closed_by_server(&mut self, now: Instant) {
        if let Some(conn) = &self.conn {
            if !conn.link.established {
                self.links.pending = Some(ConnectError::ClosedBeforeHandshake {
                    host: self.links.host(conn.addr),
                });
            }
        }
        self.lost_connection(now, "closed by the server");
    }
}
