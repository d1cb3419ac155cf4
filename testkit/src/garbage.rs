//! A "server" that answers every connection with junk, cycling through four
//! kinds: a host in the list that speaks something else must be skipped,
//! never trusted and never a reason to spin.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use jute::{ConnectResponse, Encode};

/// The junk server on `127.0.0.1:<free port>`; dropping it stops accepting.
pub struct GarbageServer {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
}

impl GarbageServer {
    /// Starts the server: connection `n` gets junk of kind `n % 4`.
    pub fn start() -> GarbageServer {
        GarbageServer::spawn(junk, answer)
    }

    /// Starts a server that reads each connection's first frame (the
    /// handshake) and closes it unanswered, as a member not serving yet
    /// does. Read first, so that the close is a FIN, not a reset.
    pub fn closing() -> GarbageServer {
        GarbageServer::spawn(|_| Vec::new(), read_frame_and_close)
    }

    /// Starts a server that reads each connection's first frame (the
    /// handshake) and resets the connection: a process that dies or
    /// refuses it mid-way.
    pub fn resetting() -> GarbageServer {
        GarbageServer::spawn(|_| Vec::new(), read_frame_and_reset)
    }

    /// Starts a server that reads each connection's first frame (the
    /// handshake), sends the start of an answer whose rest never comes and
    /// closes. The socket is corked, so the bytes and the close travel in
    /// one segment and the client is told of both at once.
    pub fn closing_mid_frame() -> GarbageServer {
        GarbageServer::spawn(|_| Vec::new(), read_frame_and_close_mid_frame)
    }

    fn spawn(junk: fn(u64) -> Vec<u8>, answer: fn(TcpStream, &[u8])) -> GarbageServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("garbage server: binding");
        let addr = listener.local_addr().expect("garbage server: its address");
        let accepted = Arc::new(AtomicU64::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        let (count, stop) = (accepted.clone(), stopping.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || answer(conn, &junk(n)));
            }
        });
        GarbageServer {
            addr,
            accepted,
            stopping,
        }
    }

    /// The address to put in a connect string.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for GarbageServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a throwaway connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Sends `junk`, then (unless there was none: close at once) reads whatever
/// the client says until it gives up.
fn answer(mut conn: TcpStream, junk: &[u8]) {
    let _ = conn.write_all(junk);
    if junk.is_empty() {
        return;
    }
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut sink = [0u8; 1024];
    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
}

/// Reads one length-prefixed frame (or until the client stops), then
/// closes without a word.
fn read_frame_and_close(mut conn: TcpStream, _: &[u8]) {
    read_frame(&mut conn);
}

/// Reads one length-prefixed frame, or until the client stops.
fn read_frame(conn: &mut TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut len = [0u8; 4];
    if conn.read_exact(&mut len).is_ok() {
        let mut frame = vec![0u8; u32::from_be_bytes(len).min(1 << 16) as usize];
        let _ = conn.read_exact(&mut frame);
    }
}

/// Reads one frame, then sends a length that promises 36 bytes and only 4
/// of them, corked, and closes: the close leaves with the bytes.
fn read_frame_and_close_mid_frame(conn: TcpStream, _: &[u8]) {
    let conn = socket2::Socket::from(conn);
    let _ = conn.set_cork(true);
    let mut conn = TcpStream::from(conn);
    read_frame(&mut conn);
    let _ = conn.write_all(&[0, 0, 0, 36, 0, 0, 0, 0]);
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

/// Reads one frame as [`read_frame_and_close`] does, then closes with a
/// reset: no linger, so the kernel sends RST and drops what is unread.
fn read_frame_and_reset(conn: TcpStream, junk: &[u8]) {
    let conn = socket2::Socket::from(conn);
    let _ = conn.set_linger(Some(Duration::ZERO));
    read_frame_and_close(conn.into(), junk);
}

/// What connection `n` is sent.
fn junk(n: u64) -> Vec<u8> {
    match n % 4 {
        0 => b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec(),
        1 => vec![0x80, 0, 0, 0, 1, 2, 3],
        2 => {
            // A ConnectResponse cut inside its password: the length says
            // 1000 bytes follow, the frame ends right after it.
            let mut record = BytesMut::new();
            ConnectResponse {
                protocol_version: jute::PROTOCOL_VERSION,
                timeout_ms: 4000,
                session_id: 0x42,
                passwd: vec![0; 1000],
                read_only: false,
            }
            .encode(&mut record);
            record.truncate(4 + 4 + 8 + 4);
            let mut out = BytesMut::new();
            jute::encode_frame(&mut out, |b| b.put_slice(&record));
            out.to_vec()
        }
        _ => Vec::new(),
    }
}
