//! Proxied connections: accepting them, connecting upstream, and the four
//! pumps per connection that move bytes through the current faults: per
//! direction, a reader that puts what it reads on the direction's line and
//! a writer that delivers it from there.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::frames::{ElectionHello, FrameEvent, FrameScanner};
use super::handshake::HandshakeReader;
use super::line::{Item, Line};
use super::{lock, Shared, Way};

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
    /// Per direction (indexed by `Way`), what is on its way.
    lines: [Line; 2],
    /// The server this connection goes to.
    upstream: SocketAddr,
    /// The server's first frame, read for the session it grants.
    handshake: Mutex<HandshakeReader>,
}

impl Conn {
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Shuts both sockets down, which also unblocks the pumps' reads and
    /// writes, and wakes the pumps waiting on the lines.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(server) = lock(&self.server).as_ref() {
            let _ = server.shutdown(Shutdown::Both);
        }
        self.wake();
    }

    /// Wakes the pumps waiting on the lines, to look at the faults and the
    /// connection again.
    pub(super) fn wake(&self) {
        for line in &self.lines {
            line.wake();
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

/// Connects upstream, starts three pumps (the server-to-client reader and
/// both writers), and runs the client-to-server reader on this thread.
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
        live_pumps: AtomicUsize::new(4),
        lines: [Line::new(), Line::new()],
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
    spawn_pump(&shared, &conn, "s2c-in", move |shared, conn| {
        read_in(shared, conn, Way::ServerToClient, server_read)
    });
    spawn_pump(&shared, &conn, "s2c-out", move |shared, conn| {
        write_out(shared, conn, Way::ServerToClient, client_write)
    });
    spawn_pump(&shared, &conn, "c2s-out", move |shared, conn| {
        write_out(shared, conn, Way::ClientToServer, server)
    });
    read_in(&shared, &conn, Way::ClientToServer, client);
}

/// Runs one of `conn`'s pumps on a thread of its own.
fn spawn_pump(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    name: &str,
    body: impl FnOnce(&Shared, &Conn) + Send + 'static,
) {
    let (worker, conn) = (Arc::clone(shared), Arc::clone(conn));
    let name = format!("proxy-conn-{}-{name}", conn.id);
    shared.spawn(name, move || body(&worker, &conn));
}

/// Whether `conn`'s pumps are to stop.
fn ended(shared: &Shared, conn: &Conn) -> bool {
    conn.is_closed() || shared.shutting_down.load(Ordering::SeqCst)
}

/// Reads what comes one way, as it comes, and puts it on that way's line,
/// until EOF, an error, or the connection is closed. Follows the server's
/// framing for the faults that act on one reply.
fn read_in(shared: &Shared, conn: &Conn, way: Way, mut src: TcpStream) {
    let line = &conn.lines[way as usize];
    let mut buf = vec![0u8; CHUNK_SIZE];
    let mut frames = FrameScanner::default();
    let mut hello =
        (way == Way::ClientToServer && shared.rewrite_election_hello).then(ElectionHello::default);
    loop {
        let n = match src.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.close();
                break;
            }
        };
        if n == 0 {
            if hello.is_some() || (conn.doomed_xid_is_set() && way == Way::ServerToClient) {
                conn.close();
            } else if let Some(admitted) = shared.admit(way, conn) {
                // The half-close travels like data; the writer passes it on.
                line.put(Item::Eof, admitted.stamp, || ended(shared, conn));
            }
            break;
        }
        let mut chunk = buf[..n].to_vec();
        if let Some(h) = hello.as_mut() {
            // Collect the whole hello first, then send it rewritten.
            h.bytes.extend_from_slice(&chunk);
            let Some(rewritten) = h.rewrite() else {
                continue;
            };
            hello = None;
            shared.hellos_rewritten.fetch_add(1, Ordering::SeqCst);
            chunk = rewritten;
        }

        if way == Way::ServerToClient {
            if let Some(session) = lock(&conn.handshake).feed(&chunk, conn.upstream) {
                shared.saw_handshake(session);
            }
            // Scan everything the server sends so reply boundaries stay known.
            let doomed = *lock(&conn.doomed_xid);
            let held = *lock(&conn.hold_xid);
            let mut doomed_reply_done = false;
            let mut held_reply_done = false;
            frames.feed(&chunk, |event| {
                if let FrameEvent::End { xid: Some(xid) } = event {
                    doomed_reply_done |= Some(xid) == doomed;
                    held_reply_done |= Some(xid) == held;
                }
            });
            if held_reply_done {
                // Before the reply is on its way: the client's next request
                // cannot slip through.
                *lock(&conn.hold_xid) = None;
                shared.hold_requests();
            }
            if doomed.is_some() {
                if doomed_reply_done {
                    // What the server said before still reaches the client;
                    // then the connection closes.
                    line.put(Item::Close, shared.stamp_now(), || ended(shared, conn));
                    break;
                }
                continue;
            }
        }

        let Some(admitted) = shared.admit(way, conn) else {
            break;
        };
        if admitted.discard {
            continue;
        }
        if !line.put(Item::Data(chunk), admitted.stamp, || ended(shared, conn)) {
            break;
        }
    }
    pump_done(shared, conn);
}

/// Delivers what falls due on one way's line, in order, until its EOF, an
/// error, or the connection is closed. Follows the client's framing (what
/// the server receives) to arm the faults that act on one reply.
fn write_out(shared: &Shared, conn: &Conn, way: Way, mut dst: TcpStream) {
    let line = &conn.lines[way as usize];
    let mut frames = FrameScanner::default();
    while let Some(item) = line.take(|| ended(shared, conn), || shared.view(way)) {
        let chunk = match item {
            Item::Close => {
                conn.close();
                shared.reply_dropped();
                break;
            }
            Item::Eof => {
                if !shared.blackholed(way) {
                    let _ = dst.shutdown(Shutdown::Write);
                }
                break;
            }
            Item::Data(chunk) => chunk,
        };
        if shared.blackholed(way) {
            continue;
        }

        if way == Way::ClientToServer {
            // Scan only what the server receives, so framing matches its view.
            let (mut doomed, mut held) = (None, None);
            frames.feed(&chunk, |event| {
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
        shared.bytes[way as usize].fetch_add(chunk.len() as u64, Ordering::SeqCst);
        if dst.write_all(&chunk).is_err() {
            conn.close();
            break;
        }
    }
    pump_done(shared, conn);
}

/// One pump less; the last one out deregisters the connection.
fn pump_done(shared: &Shared, conn: &Conn) {
    if conn.live_pumps.fetch_sub(1, Ordering::SeqCst) == 1 {
        lock(&shared.conns).remove(&conn.id);
    }
    shared.notify();
}
