//! The connection side of the I/O thread: connecting to the next host,
//! the socket's readiness, reads into the session core and writes out of it,
//! and what a lost connection means for the backoff.

use std::io;
use std::time::Instant;

use mio::net::TcpStream;
use mio::Interest;

use super::{Connection, Driver, HEALTHY_CONNECTION, SOCKET};

impl Driver {
    pub(super) fn close_socket(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The connection failed or ended: tell the core and move to the next host.
    pub(super) fn lost_connection(&mut self, now: Instant, why: &str) {
        if let Some(conn) = &self.conn {
            log::info!("connection to {} lost: {why}", conn.addr);
        }
        self.account_connection_end(now);
        self.close_socket();
        self.core.handle_disconnected(now);
    }

    /// A connection that served for a while resets the backoff; one that
    /// failed early (refused, silent, or a server that talks garbage right
    /// after the handshake) counts as a failure, so no host is hammered.
    pub(super) fn account_connection_end(&mut self, now: Instant) {
        let Some(conn) = &self.conn else { return };
        self.links.connection_ended(conn);
        let healthy = conn.connecting.is_none()
            && now.saturating_duration_since(conn.opened) >= HEALTHY_CONNECTION;
        if healthy {
            self.hosts.succeeded();
        } else {
            self.hosts.failed(now);
        }
    }

    pub(super) fn check_connect_deadline(&mut self, now: Instant) {
        if let Some(Connection {
            connecting: Some(until),
            ..
        }) = &self.conn
        {
            if now >= *until {
                self.ended_because(format!(
                    "no TCP connection within {:?}",
                    self.connect_timeout
                ));
                self.lost_connection(now, "connect timed out");
            }
        }
    }

    pub(super) fn maintain_connection(&mut self, now: Instant) {
        if self.conn.is_some() || !self.core.wants_connection() || now < self.hosts.not_before {
            return;
        }
        self.core.prepare_connection();
        let addr = self.hosts.take();
        let link = match self.links.link(addr) {
            Ok(link) => link,
            Err(e) => {
                log::warn!("cannot connect to {addr}: {e}");
                self.hosts.failed(now);
                return;
            }
        };
        match TcpStream::connect(addr) {
            Ok(mut stream) => {
                let _ = stream.set_nodelay(true);
                // Keepalive finds a dead peer even when our pings cannot
                // be sent (a full send buffer); the kernel's 2 h default is
                // useless here, so probe after the ping interval.
                let keepalive = socket2::TcpKeepalive::new()
                    .with_time(self.keepalive_idle)
                    .with_interval(self.keepalive_idle);
                if let Err(e) = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive) {
                    log::debug!("cannot enable TCP keepalive for {addr}: {e}");
                }
                if let Err(e) = self.poll.registry().register(
                    &mut stream,
                    SOCKET,
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    log::warn!("cannot register socket for {addr}: {e}");
                    self.not_started(addr, e);
                    self.hosts.failed(now);
                    return;
                }
                log::debug!("connecting to {addr}");
                self.conn = Some(Connection {
                    stream,
                    addr,
                    connecting: Some(crate::deadline::after(now, self.connect_timeout)),
                    opened: now,
                    writable_interest: true,
                    link,
                });
            }
            Err(e) => {
                log::info!("connect to {addr} failed: {e}");
                self.not_started(addr, e);
                self.hosts.failed(now);
            }
        }
    }

    /// `peer_closed`: the event also said the server closed its side; then
    /// the read goes on to the end of the stream.
    pub(super) fn on_socket(
        &mut self,
        now: Instant,
        writable: bool,
        readable: bool,
        peer_closed: bool,
    ) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if conn.connecting.is_some() {
            if !writable && !readable {
                return;
            }
            match conn.stream.take_error() {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => return self.link_failed(now, e),
            }
            match conn.stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => return self.link_failed(now, e),
            }
            conn.connecting = None;
            log::debug!("TCP connected to {}", conn.addr);
            self.core.handle_connected(now);
        }
        if readable {
            self.read(now, peer_closed);
        }
        if writable {
            self.flush(now);
        }
    }

    pub(super) fn read(&mut self, now: Instant, peer_closed: bool) {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return;
            };
            match conn.link.read(&mut conn.stream, &mut self.read_buf) {
                Ok(0) => return self.closed_by_server(now),
                Ok(n) => {
                    self.core.handle_input(now, &self.read_buf[..n]);
                    // The core may have asked for the connection to go.
                    self.act_on_core();
                    if self.core.is_finished() {
                        self.close_socket();
                        return;
                    }
                    // A short read drained the socket: with edge-triggered
                    // readiness, more data brings a new event. Saves the
                    // read that would only say WouldBlock (unless the peer
                    // closed too: no event would come for that again).
                    if n < self.read_buf.len()
                        && !peer_closed
                        && self.conn.as_ref().is_some_and(|c| c.link.drained())
                    {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.link_failed(now, e),
            }
        }
    }

    pub(super) fn flush(&mut self, now: Instant) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if conn.connecting.is_some() {
            return;
        }
        match conn.link.flush(&mut conn.stream) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return self.link_failed(now, e),
            _ => {}
        }
        while !self.core.output().is_empty() {
            match conn.link.write(&mut conn.stream, self.core.output()) {
                Ok(0) => return self.lost_connection(now, "write returned 0"),
                Ok(n) => self.core.consume_output(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.link_failed(now, e),
            }
        }
        let want_writable = !self.core.output().is_empty() || conn.link.wants_write();
        if want_writable != conn.writable_interest {
            let interest = if want_writable {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if let Err(e) = self
                .poll
                .registry()
                .reregister(&mut conn.stream, SOCKET, interest)
            {
                return self.lost_connection(now, &e.to_string());
            }
            conn.writable_interest = want_writable;
        }
    }
}
