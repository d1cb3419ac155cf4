//! A fake server on loopback that grants a session, then floods one path
//! with watch notifications as fast as the socket takes them: how a test
//! shows that a server sending more than the application reads costs the
//! client bounded memory.
//!
//! It answers a ping, a close and an addWatch with success, and
//! every other request with NoNode (a reply every op can carry): a request
//! sent after the flood is answered after every notification, in order, so
//! its reply says the client has taken them all.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use jute::{
    ConnectRequest, ConnectResponse, Decode, Encode, ErrorCode, EventType, KeeperState, OpCode,
    ReplyHeader, WatcherEvent,
};

/// Notifications written per `write_all`.
const BATCH: u64 = 1024;
/// A client frame announcing more than this ends the connection.
const MAX_FRAME: usize = 1 << 20;
/// A client silent this long is given up.
const IDLE: Duration = Duration::from_secs(60);

/// The flooding server on `127.0.0.1:<free port>`. Dropping it stops
/// accepting and closes every connection.
pub struct FloodServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    path: String,
    events: u64,
    sent: AtomicU64,
    stopping: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

impl FloodServer {
    /// Starts the server: on each connection, after the first addWatch is
    /// answered, `events` NodeDataChanged notifications for `path`.
    pub fn start(path: &str, events: u64) -> FloodServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("flood server: binding");
        let addr = listener.local_addr().expect("flood server: its address");
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            events,
            sent: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                if let Ok(copy) = conn.try_clone() {
                    s.conns.lock().unwrap().push(copy);
                }
                let s = s.clone();
                thread::spawn(move || {
                    let _ = serve(conn, &s);
                });
            }
        });
        FloodServer { addr, shared }
    }

    /// The address to put in a connect string.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Notifications written so far, over every connection.
    pub fn sent(&self) -> u64 {
        self.shared.sent.load(Ordering::SeqCst)
    }
}

impl Drop for FloodServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        for c in self.shared.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// One connection: the handshake, then requests answered in order; the
/// flood starts on its own thread once an addWatch is answered.
fn serve(mut conn: TcpStream, s: &Arc<Shared>) -> io::Result<()> {
    conn.set_read_timeout(Some(IDLE))?;
    conn.set_nodelay(true)?;
    let hello = read_frame(&mut conn)?;
    let asked = ConnectRequest::decode_exact(&hello)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut out = BytesMut::new();
    jute::encode_frame(&mut out, |b| {
        ConnectResponse {
            protocol_version: jute::PROTOCOL_VERSION,
            timeout_ms: asked.timeout_ms.clamp(4000, 40_000),
            session_id: 0x0f10_0d00,
            passwd: vec![7; 16],
            read_only: false,
        }
        .encode(b)
    });
    let writer = Arc::new(Mutex::new(conn.try_clone()?));
    writer.lock().unwrap().write_all(&out)?;
    let mut flooding = false;
    loop {
        let frame = read_frame(&mut conn)?;
        let (header, _) = jute::decode_request_header(&frame)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let err = match header.op {
            OpCode::Ping | OpCode::CloseSession | OpCode::AddWatch => ErrorCode::Ok,
            _ => ErrorCode::NoNode,
        };
        let mut out = BytesMut::new();
        jute::encode_frame(&mut out, |b| {
            ReplyHeader {
                xid: header.xid,
                zxid: 1,
                err,
            }
            .encode(b);
            // addWatch's reply body is an ErrorResponse.
            if header.op == OpCode::AddWatch {
                jute::primitives::write_i32(b, 0);
            }
        });
        writer.lock().unwrap().write_all(&out)?;
        if header.op == OpCode::AddWatch && !flooding {
            flooding = true;
            let (w, s) = (writer.clone(), s.clone());
            thread::spawn(move || flood(&w, &s));
        }
        if header.op == OpCode::CloseSession {
            return Ok(());
        }
    }
}

/// Writes the notifications in batches, the writer lock taken per batch so
/// that replies slip in between.
fn flood(writer: &Mutex<TcpStream>, s: &Shared) {
    let mut left = s.events;
    while left > 0 && !s.stopping.load(Ordering::SeqCst) {
        let n = left.min(BATCH);
        let mut out = BytesMut::new();
        for _ in 0..n {
            jute::encode_frame(&mut out, |b| {
                ReplyHeader {
                    xid: jute::xid::WATCH_EVENT,
                    zxid: -1,
                    err: ErrorCode::Ok,
                }
                .encode(b);
                WatcherEvent {
                    kind: EventType::NodeDataChanged,
                    state: KeeperState::SyncConnected,
                    path: s.path.clone(),
                }
                .encode(b);
            });
        }
        if writer.lock().unwrap().write_all(&out).is_err() {
            return;
        }
        s.sent.fetch_add(n, Ordering::SeqCst);
        left -= n;
    }
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = jute::frame_len(&len, MAX_FRAME)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short length"))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}
