//! A proxy in front of a real server that spoils one server frame per armed
//! [`Mangle`] and passes every other frame through unchanged: how a test
//! shows that malformed bytes cost the client a connection, never its
//! session. The spoiled frames are built with the codec's records.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use jute::primitives::{write_buffer, write_i32};
use jute::{Decode, Encode, ErrorCode, EventType, KeeperState, Reader, ReplyHeader};

/// Length of a reply header (xid, zxid, err): what a truncated reply keeps.
const REPLY_HEADER_LEN: usize = 16;
/// A server frame announcing more than this ends the connection.
const MAX_FRAME: usize = 16 << 20;

/// One way to spoil the byte stream a client receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mangle {
    /// The ConnectResponse is replaced by 5 bytes that do not decode.
    HandshakeGarbage,
    /// Before the next reply: a frame header announcing a negative length.
    NegativeLength,
    /// Before the next reply: a frame header announcing 64 MiB.
    HugeLength,
    /// Before the next reply: a well-formed reply for an xid nobody sent
    /// (0x3fff0000).
    UnknownXid,
    /// Before the next reply: a 3-byte frame, too short for a reply header.
    ShortFrame,
    /// The next reply with a body loses its body (header only).
    TruncatedBody,
    /// Before the next reply: a watch notification whose path is not UTF-8.
    BadWatchEvent,
}

/// The mangling proxy on `127.0.0.1:<free port>`. Dropping it stops
/// accepting and closes every connection.
pub struct Mangler {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    upstream: SocketAddr,
    plan: Mutex<VecDeque<Mangle>>,
    done: Mutex<Vec<Mangle>>,
    /// Signalled when a mangle has been applied.
    changed: Condvar,
    conns: Mutex<Vec<TcpStream>>,
    accepted: AtomicU64,
    stopping: AtomicBool,
}

impl Mangler {
    /// Starts the proxy in front of `upstream`.
    pub fn start(upstream: SocketAddr) -> Mangler {
        let listener = TcpListener::bind("127.0.0.1:0").expect("mangler: binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("mangler: its address");
        let shared = Arc::new(Shared {
            upstream,
            plan: Mutex::new(VecDeque::new()),
            done: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            conns: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
        });
        let s = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                thread::spawn(move || mangle_connection(client, &s));
            }
        });
        Mangler { addr, shared }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `m`: it spoils the first server frame it fits, on any connection.
    pub fn arm(&self, m: Mangle) {
        self.shared.plan.lock().unwrap().push_back(m);
    }

    /// Waits until `n` mangles have been applied in all; returns them in order.
    pub fn wait_done(&self, n: usize, timeout: Duration) -> Vec<Mangle> {
        let deadline = Instant::now() + timeout;
        let mut done = self.shared.done.lock().unwrap();
        while done.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "only {:?} applied within {timeout:?}",
                *done
            );
            done = self.shared.changed.wait_timeout(done, left).unwrap().0;
        }
        done.clone()
    }

    /// Closes every connection made so far, on both sides.
    pub fn cut_all(&self) {
        for s in self.shared.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Mangler {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a throwaway connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        self.cut_all();
    }
}

impl Shared {
    /// The armed mangle, taken if it fits this server frame: the handshake's
    /// answer (`first`, no reply header) or a reply with `header`.
    fn take_fitting(
        &self,
        first: bool,
        header: Option<ReplyHeader>,
        body_len: usize,
    ) -> Option<Mangle> {
        let mut plan = self.plan.lock().unwrap();
        let numbered = header.is_some_and(|h| h.xid > 0);
        let fits = match plan.front()? {
            Mangle::HandshakeGarbage => first,
            Mangle::TruncatedBody => {
                numbered
                    && header.is_some_and(|h| h.err == ErrorCode::Ok)
                    && body_len > REPLY_HEADER_LEN
            }
            _ => numbered,
        };
        if fits {
            plan.pop_front()
        } else {
            None
        }
    }

    fn applied(&self, m: Mangle) {
        self.done.lock().unwrap().push(m);
        self.changed.notify_all();
    }
}

/// Passes the client's bytes on as they come, and the server's frame by
/// frame, spoiling the ones an armed mangle fits.
fn mangle_connection(client: TcpStream, s: &Shared) {
    let Ok(server) = TcpStream::connect_timeout(&s.upstream, Duration::from_secs(2)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    {
        let mut conns = s.conns.lock().unwrap();
        conns.extend(client.try_clone().ok());
        conns.extend(server.try_clone().ok());
    }
    let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(Shutdown::Both);
    });
    let (mut s_read, mut c_write) = (server, client);
    let mut first = true;
    while let Some(body) = read_frame(&mut s_read) {
        let header = if first {
            None
        } else {
            ReplyHeader::decode(&mut Reader::new(&body)).ok()
        };
        let mut out = BytesMut::new();
        match s.take_fitting(first, header, body.len()) {
            None => put_frame(&mut out, &body),
            Some(m) => {
                spoil(m, &body, &mut out);
                s.applied(m);
            }
        }
        first = false;
        if c_write.write_all(&out).is_err() {
            break;
        }
    }
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = s_read.shutdown(Shutdown::Both);
}

/// One whole frame's body, or `None` once the stream ends or lies about a length.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = jute::frame_len(&len, MAX_FRAME).ok()??;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// Writes what the client gets instead of the server frame `body`.
fn spoil(m: Mangle, body: &[u8], out: &mut BytesMut) {
    match m {
        Mangle::HandshakeGarbage => put_frame(out, &[0xde, 0xad, 0xbe, 0xef, 1]),
        Mangle::NegativeLength => {
            out.put_i32(-16);
            put_frame(out, body);
        }
        Mangle::HugeLength => {
            out.put_i32(64 << 20);
            put_frame(out, body);
        }
        Mangle::UnknownXid => {
            jute::encode_frame(out, |b| {
                ReplyHeader {
                    xid: 0x3fff_0000,
                    zxid: 1,
                    err: ErrorCode::Ok,
                }
                .encode(b)
            });
            put_frame(out, body);
        }
        Mangle::ShortFrame => {
            put_frame(out, &[1, 2, 3]);
            put_frame(out, body);
        }
        Mangle::TruncatedBody => put_frame(out, &body[..REPLY_HEADER_LEN]),
        Mangle::BadWatchEvent => {
            // A WatcherEvent but for its path, which a String cannot hold:
            // a buffer has a string's layout on the wire.
            jute::encode_frame(out, |b| {
                ReplyHeader {
                    xid: jute::xid::WATCH_EVENT,
                    zxid: -1,
                    err: ErrorCode::Ok,
                }
                .encode(b);
                write_i32(b, EventType::NodeDataChanged.code());
                write_i32(b, KeeperState::SyncConnected.code());
                write_buffer(b, &[0xff, 0xfe]);
            });
            put_frame(out, body);
        }
    }
}

/// Frames a body that is already encoded.
fn put_frame(out: &mut BytesMut, body: &[u8]) {
    jute::encode_frame(out, |b| b.put_slice(body));
}
