//! Tests of the test kit itself: real ZooKeeper servers (standalone and
//! ensemble), their cleanup when the test process dies, and the
//! fault-injecting proxy, checked with a raw client made of the codec's
//! records (so that they do not depend on the client under test).
//!
//! Run with `cargo test -p zklock-testkit --test servers_and_proxy -- --nocapture`
//! to see start times.

mod ensemble;
mod proxy;
mod proxy_framing;
mod servers;
mod watchdog;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{Acl, CreateMode, CreateRequest, ErrorCode, OpCode, PathWatch, Request};
use testkit::proxy::{Direction, Proxy};
use testkit::raw::RawClient;
use testkit::zk::{self, try_four_letter, ZkEnsemble, ZkServer};
use testkit::{poll_until, process_alive};

/// Generous bound for anything that should happen "now".
const PROMPT: Duration = Duration::from_secs(5);
/// How long we watch for bytes that must NOT arrive.
const QUIET: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------
// A minimal raw ZooKeeper client (just enough for these tests)
// ---------------------------------------------------------------------------

/// The error code of `exists(path)`.
fn exists(client: &mut RawClient, path: &str) -> ErrorCode {
    let request = Request::Exists(PathWatch {
        path: path.to_owned(),
        watch: false,
    });
    client.call(&request).0.err
}

/// The error code of creating `path`.
fn create(client: &mut RawClient, path: &str, data: &[u8]) -> ErrorCode {
    client.call(&create_request(path, data)).0.err
}

fn ping(client: &mut RawClient) {
    let (header, _) = client.call_with(jute::xid::PING, &Request::Ping);
    assert_eq!(header.err, ErrorCode::Ok);
}

/// A persistent node open to anyone.
fn create_request(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.to_owned(),
        data: data.to_vec(),
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
    })
}

/// One framed request, as it goes on the wire.
fn encode(xid: i32, request: &Request) -> BytesMut {
    let mut buf = BytesMut::new();
    jute::encode_request(&mut buf, xid, request);
    buf
}

/// A znode path no other test (or earlier run against the shared server) uses.
fn unique_path(name: &str) -> String {
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "/selftest-{name}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

// ---------------------------------------------------------------------------
// Socket helpers
// ---------------------------------------------------------------------------

/// An upstream that sends `greeting` on accept and then echoes everything.
struct EchoServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
}

impl EchoServer {
    fn start(greeting: &'static [u8]) -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the echo server");
        let addr = listener.local_addr().expect("echo server address");
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                thread::spawn(move || {
                    if stream.write_all(greeting).is_err() {
                        return;
                    }
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 || stream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        EchoServer { addr, stopping }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// An upstream that hands each connection the proxy makes to it to the
/// test, which then plays the server: it sees exactly the bytes the proxy
/// delivers, and sends what it likes when it likes.
struct Tap {
    addr: SocketAddr,
    accepted: mpsc::Receiver<TcpStream>,
}

impl Tap {
    fn start() -> Tap {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the tap");
        let addr = listener.local_addr().expect("the tap's address");
        let (found, accepted) = mpsc::channel();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if found.send(stream).is_err() {
                    break;
                }
            }
        });
        Tap { addr, accepted }
    }

    /// The server side of the proxy's next connection to the tap.
    fn accept(&self) -> TcpStream {
        let stream = self
            .accepted
            .recv_timeout(PROMPT)
            .unwrap_or_else(|_| panic!("the proxy did not connect to the tap within {PROMPT:?}"));
        stream
            .set_read_timeout(Some(PROMPT))
            .expect("setting a read timeout");
        stream.set_nodelay(true).expect("setting TCP_NODELAY");
        stream
    }
}

/// A ZooKeeper frame: `body` after its length, 4 bytes big-endian.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A request's frame: xid, op type, then `payload`.
fn request_frame(xid: i32, op: i32, payload: &[u8]) -> Vec<u8> {
    let mut body = xid.to_be_bytes().to_vec();
    body.extend_from_slice(&op.to_be_bytes());
    body.extend_from_slice(payload);
    frame(&body)
}

/// A reply's frame: xid, zxid, error code 0, then `payload`.
fn reply_frame(xid: i32, zxid: i64, payload: &[u8]) -> Vec<u8> {
    let mut body = xid.to_be_bytes().to_vec();
    body.extend_from_slice(&zxid.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(payload);
    frame(&body)
}

/// A connection through `proxy` to `tap`, past the first frame each way
/// (the handshake, which has no xid): its client and server sides.
fn tapped(proxy: &Proxy, tap: &Tap) -> (TcpStream, TcpStream) {
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    let hello = frame(b"connect request");
    write(&mut client, &hello);
    assert_eq!(read_exact_within(&mut server, hello.len()), hello);
    let welcome = frame(b"connect response");
    write(&mut server, &welcome);
    assert_eq!(read_exact_within(&mut client, welcome.len()), welcome);
    (client, server)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, PROMPT)
        .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    stream
        .set_read_timeout(Some(PROMPT))
        .expect("setting a read timeout");
    stream.set_nodelay(true).expect("setting TCP_NODELAY");
    stream
}

fn write(stream: &mut TcpStream, bytes: &[u8]) {
    stream.write_all(bytes).expect("writing to the proxy");
}

fn read_exact_within(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    stream
        .set_read_timeout(Some(PROMPT))
        .expect("setting a read timeout");
    let mut buf = vec![0u8; len];
    stream
        .read_exact(&mut buf)
        .unwrap_or_else(|e| panic!("expected {len} bytes within {PROMPT:?}: {e}"));
    buf
}

fn assert_round_trip(stream: &mut TcpStream, bytes: &[u8]) {
    write(stream, bytes);
    assert_eq!(read_exact_within(stream, bytes.len()), bytes);
}

/// `bytes` written on `from` arrive as they are on `to`.
fn assert_passes(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) {
    write(from, bytes);
    assert_eq!(read_exact_within(to, bytes.len()), bytes);
}

/// Nothing arrives for a while (and the connection is not closed).
fn assert_quiet(stream: &mut TcpStream) {
    stream
        .set_read_timeout(Some(QUIET))
        .expect("setting a read timeout");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) => {}
        Ok(0) => panic!("connection closed, expected it to stay open"),
        Ok(n) => panic!("received {:?}, expected nothing", &buf[..n]),
        Err(e) => panic!("read failed: {e}, expected nothing"),
    }
}

/// The peer closes the connection (EOF or reset) promptly, without sending anything.
fn assert_closed(stream: &mut TcpStream) {
    stream
        .set_read_timeout(Some(PROMPT))
        .expect("setting a read timeout");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            panic!("connection still open after {PROMPT:?}")
        }
        Err(_) => {} // reset: closed too
        Ok(n) => panic!("received {:?}, expected the connection to close", &buf[..n]),
    }
}
