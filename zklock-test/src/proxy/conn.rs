//! Proxied connections: accepting them, connecting upstream, and the two
//! pumps per connection that move bytes through the current faults.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::frames::{ElectionHello, FrameEvent, FrameScanner};
use super::handshake::HandshakeReader;
use super::{lock, Gate, Shared, Way};

/// How long the proxy waits to connect to the upstream before giving up on a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const CHUNK_SIZE: usize = 16 * 1024;

/// One proxied connection: the client socket, the upstream socket once
/// connected, and its lost-reply state.
pub(super) struct Conn {
    pub(super) id: u64,
    client: TcpStream,
    server: Mutex<Option<TcpStream>>,
    closed: AtomicBool,
    /// Set when a request armed by `drop_reply_of_next` went through: the xid
    /// whose reply ends the connection. While set, server bytes are discarded.
    doomed_xid: Mutex<Option<i32>>,
    /// Set when a request armed by `hold_requests_after_reply_of_next` went
    /// through: the xid whose reply holds the clients' requests.
    hold_xid: Mutex<Option<i32>>,
    /// Pumps still running; the last one out deregisters the connection.
    live_pumps: AtomicUsize,
    /// The server this connection goes to.
    upstream: SocketAddr,
    /// The server's first frame, read for the session it grants.
    handshake: Mutex<HandshakeReader>,
}

impl Conn {
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Shuts both sockets down, which also unblocks both pumps' reads.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(server) = lock(&self.server).as_ref() {
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    fn doomed_xid_is_set(&self) -> bool {
        lock(&self.doomed_xid).is_some()
    }

    /// Records the upstream socket; false if the connection was closed meanwhile.
    fn set_server(&self, server: &TcpStream) -> io::Result<bool> {
        let mut slot = lock(&self.server);
        *slot = Some(server.try_clone()?);
        if self.is_closed() {
            let _ = server.shutdown(Shutdown::Both);
            return Ok(false);
        }
        Ok(true)
    }
}

pub(super) fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.shutting_down.load(Ordering::SeqCst) {
            break;
        }
        let client = match incoming {
            Ok(client) => client,
            Err(_) => {
                // E.g. out of file descriptors: back off instead of spinning.
                thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if lock(&shared.faults).refuse {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let id = shared.next_conn_id.fetch_add(1, Ordering::SeqCst);
        let worker = Arc::clone(&shared);
        shared.spawn(format!("proxy-conn-{id}"), move || {
            run_connection(id, client, worker)
        });
    }
}

/// Connects upstream, starts the server-to-client pump, and runs the
/// client-to-server pump on this thread.
fn run_connection(id: u64, client: TcpStream, shared: Arc<Shared>) {
    let Ok(client_for_conn) = client.try_clone() else {
        return;
    };
    let upstream = *lock(&shared.upstream);
    let conn = Arc::new(Conn {
        id,
        client: client_for_conn,
        server: Mutex::new(None),
        closed: AtomicBool::new(false),
        doomed_xid: Mutex::new(None),
        hold_xid: Mutex::new(None),
        live_pumps: AtomicUsize::new(2),
        upstream,
        handshake: Mutex::new(HandshakeReader::new()),
    });
    if !shared.register(&conn) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let server = match TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(server) => server,
        Err(_) => {
            // Like a server that is down: the client sees its connection close.
            conn.close();
            lock(&shared.conns).remove(&id);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let streams = (|| {
        let ok = conn.set_server(&server)?;
        Ok::<_, io::Error>((ok, server.try_clone()?, client.try_clone()?))
    })();
    let (server_read, client_write) = match streams {
        Ok((true, server_read, client_write)) => (server_read, client_write),
        _ => {
            conn.close();
            lock(&shared.conns).remove(&id);
            return;
        }
    };
    {
        let shared = Arc::clone(&shared);
        let conn = Arc::clone(&conn);
        let name = format!("proxy-conn-{id}-s2c");
        Arc::clone(&shared).spawn(name, move || {
            pump(
                &shared,
                &conn,
                Way::ServerToClient,
                server_read,
                client_write,
            )
        });
    }
    pump(&shared, &conn, Way::ClientToServer, client, server);
}

/// Moves bytes one way until EOF, an error, or the connection is closed.
fn pump(shared: &Shared, conn: &Conn, way: Way, mut src: TcpStream, mut dst: TcpStream) {
    let mut buf = vec![0u8; CHUNK_SIZE];
    let mut frames = FrameScanner::default();
    let mut hello =
        (way == Way::ClientToServer && shared.rewrite_election_hello).then(ElectionHello::default);
    loop {
        if let Some(h) = hello.as_mut() {
            // Collect the whole hello first, then send it rewritten.
            match src.read(&mut buf) {
                Ok(0) | Err(_) => {
                    conn.close();
                    break;
                }
                Ok(n) => h.bytes.extend_from_slice(&buf[..n]),
            }
            let Some(rewritten) = h.rewrite() else {
                continue;
            };
            hello = None;
            shared.hellos_rewritten.fetch_add(1, Ordering::SeqCst);
            match shared.gate(way, conn) {
                Gate::Closed => break,
                Gate::Discard => continue,
                Gate::Forward => {}
            }
            shared.bytes[way as usize].fetch_add(rewritten.len() as u64, Ordering::SeqCst);
            if dst.write_all(&rewritten).is_err() {
                conn.close();
                break;
            }
            continue;
        }
        let n = match src.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.close();
                break;
            }
        };
        if n == 0 {
            // EOF: pass the half-close on, subject to the same faults as data.
            if conn.doomed_xid_is_set() && way == Way::ServerToClient {
                conn.close();
            } else if let Gate::Forward = shared.gate(way, conn) {
                let _ = dst.shutdown(Shutdown::Write);
            }
            break;
        }
        let chunk = &buf[..n];

        if way == Way::ServerToClient {
            if let Some(session) = lock(&conn.handshake).feed(chunk, conn.upstream) {
                shared.saw_handshake(session);
            }
            // Scan everything the server sends so reply boundaries stay known.
            let doomed = *lock(&conn.doomed_xid);
            let held = *lock(&conn.hold_xid);
            let mut doomed_reply_done = false;
            let mut held_reply_done = false;
            frames.feed(chunk, |event| {
                if let FrameEvent::End { xid: Some(xid) } = event {
                    doomed_reply_done |= Some(xid) == doomed;
                    held_reply_done |= Some(xid) == held;
                }
            });
            if held_reply_done {
                // Before the reply is forwarded: the client's next request
                // cannot slip through.
                *lock(&conn.hold_xid) = None;
                shared.hold_requests();
            }
            if doomed.is_some() {
                if doomed_reply_done {
                    conn.close();
                    shared.reply_dropped();
                    break;
                }
                continue;
            }
        }

        match shared.gate(way, conn) {
            Gate::Closed => break,
            Gate::Discard => continue,
            Gate::Forward => {}
        }

        if way == Way::ClientToServer {
            // Scan only what the server receives, so framing matches its view.
            let (mut doomed, mut held) = (None, None);
            frames.feed(chunk, |event| {
                if let FrameEvent::Header { xid, op } = event {
                    if doomed.is_none() && shared.take_drop_target(op) {
                        doomed = Some(xid);
                    }
                    if held.is_none() && shared.take_hold_target(op) {
                        held = Some(xid);
                    }
                }
            });
            if let Some(xid) = doomed {
                // Set before forwarding, so the reply cannot slip through.
                lock(&conn.doomed_xid).get_or_insert(xid);
            }
            if let Some(xid) = held {
                lock(&conn.hold_xid).get_or_insert(xid);
            }
        }

        // Counted before writing so that a peer that has seen the bytes also sees the count.
        shared.bytes[way as usize].fetch_add(n as u64, Ordering::SeqCst);
        if dst.write_all(chunk).is_err() {
            conn.close();
            break;
        }
    }
    if conn.live_pumps.fetch_sub(1, Ordering::SeqCst) == 1 {
        lock(&shared.conns).remove(&conn.id);
    }
    shared.notify();
}
