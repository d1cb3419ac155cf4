//! A fault-injecting TCP proxy for ZooKeeper client tests (std threads and
//! sockets only, 127.0.0.1 only).
//!
//! Every accepted connection gets two pump threads, one per direction, that
//! read a chunk with a blocking read, pass it through the current faults
//! (stall, blackhole, delay) and write it on. Faults live in one mutex with a
//! condvar, so changing them takes effect at once on live connections, and
//! stalled or delayed pumps wake up when faults are cleared or the connection
//! is cut. Threads stop because their sockets are shut down (which makes a
//! blocked `read` return), never by polling.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long the proxy waits to connect to the upstream before giving up on a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const CHUNK_SIZE: usize = 16 * 1024;

/// Which way bytes travel through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ClientToServer,
    ServerToClient,
    Both,
}

impl Direction {
    /// The single directions (`Way`s) this covers.
    fn ways(self) -> &'static [Way] {
        match self {
            Direction::ClientToServer => &[Way::ClientToServer],
            Direction::ServerToClient => &[Way::ServerToClient],
            Direction::Both => &[Way::ClientToServer, Way::ServerToClient],
        }
    }
}

/// One direction of one connection; indexes the per-direction arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    ClientToServer = 0,
    ServerToClient = 1,
}

/// A TCP proxy on `127.0.0.1:<free port>` in front of an upstream server.
///
/// Dropping it closes the listener and every connection and joins all its threads.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy forwarding every accepted connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        Self::start_inner(upstream, false)
    }

    /// A proxy in front of a ZooKeeper member's election port, for the
    /// member that dials through it.
    ///
    /// The first message on an election connection names the dialling
    /// member's own election address. A member that receives a connection
    /// from a lower-numbered one closes it and dials back to that address,
    /// which would go around every proxy. This proxy rewrites the address
    /// as the wildcard `0.0.0.0:0`, which ZooKeeper ignores
    /// (`QuorumCnxManager.InitialMessage.parse`), so the member dials back
    /// through the address in its own `zoo.cfg`: the proxy for that way.
    /// Nothing is bound to or dialled at the wildcard.
    pub fn start_election_link(upstream: SocketAddr) -> Proxy {
        Self::start_inner(upstream, true)
    }

    fn start_inner(upstream: SocketAddr, rewrite_election_hello: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy: binding 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("proxy: local_addr of its listener");
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            faults: Mutex::new(Faults::default()),
            changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            next_conn_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            bytes: [AtomicU64::new(0), AtomicU64::new(0)],
            rewrite_election_hello,
            hellos_rewritten: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("proxy-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, shared))
                .expect("proxy: spawning the accept thread")
        };
        Proxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The address clients should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connect string for a client, `"127.0.0.1:<port>"`.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Where new connections go; existing connections keep their upstream.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *lock(&self.shared.upstream) = upstream;
    }

    /// The current upstream.
    pub fn upstream(&self) -> SocketAddr {
        *lock(&self.shared.upstream)
    }

    /// Closes every current connection now, on both sides (new ones are still accepted).
    pub fn cut_all(&self) {
        let conns: Vec<Arc<Conn>> = lock(&self.shared.conns).values().cloned().collect();
        for conn in conns {
            conn.close();
        }
        self.shared.notify();
    }

    /// Silently drops bytes travelling in `direction` (adds to any blackhole
    /// already set). Connections stay open. Undo with [`Proxy::clear`].
    pub fn blackhole(&self, direction: Direction) {
        self.shared.update(|faults| {
            for &way in direction.ways() {
                faults.blackhole[way as usize] = true;
            }
        });
    }

    /// Holds bytes in both directions, neither forwarding nor dropping them,
    /// until [`Proxy::clear`]; then they are delivered in order.
    pub fn stall(&self) {
        self.stall_direction(Direction::Both);
    }

    /// Like [`Proxy::stall`] for one direction only.
    pub fn stall_direction(&self, direction: Direction) {
        self.shared.update(|faults| {
            for &way in direction.ways() {
                faults.stall[way as usize] = true;
            }
        });
    }

    /// Delays every forwarded chunk by `delay` (in both directions); zero disables.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.update(|faults| faults.delay = delay);
    }

    /// While true, new connections are accepted and immediately closed.
    pub fn refuse(&self, refuse: bool) {
        self.shared.update(|faults| faults.refuse = refuse);
    }

    /// Back to a transparent proxy: no blackhole, stall, delay or refusal, and
    /// no pending [`Proxy::drop_reply_of_next`]. Stalled bytes are delivered.
    pub fn clear(&self) {
        self.shared.update(|faults| {
            let requested = faults.drops_requested;
            let pending = faults.drop_reply_op.is_some();
            *faults = Faults {
                drops_requested: requested - u64::from(pending),
                drops_done: faults.drops_done,
                ..Faults::default()
            };
        });
    }

    /// Arms a "lost reply": the next client request (on any connection) whose
    /// op type is `op_code` is forwarded to the server, but from then on
    /// everything the server sends on that connection is discarded, and once
    /// the server's reply to that request (same xid) has arrived the connection
    /// is closed on both sides. The server executes the request; the client
    /// never hears back and sees a disconnect. Await it with
    /// [`Proxy::wait_reply_dropped`].
    pub fn drop_reply_of_next(&self, op_code: i32) {
        self.shared.update(|faults| {
            if faults.drop_reply_op.replace(op_code).is_none() {
                faults.drops_requested += 1;
            }
        });
    }

    /// Waits until every armed [`Proxy::drop_reply_of_next`] has happened
    /// (reply swallowed and connection closed). False on timeout.
    pub fn wait_reply_dropped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut faults = lock(&self.shared.faults);
        while faults.drops_done < faults.drops_requested {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            faults = wait_timeout(&self.shared.changed, faults, deadline - now);
        }
        true
    }

    /// How many replies have been swallowed by [`Proxy::drop_reply_of_next`].
    pub fn replies_dropped(&self) -> u64 {
        lock(&self.shared.faults).drops_done
    }

    /// Connections accepted so far, including refused ones.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections accepted and closed at once because of [`Proxy::refuse`].
    pub fn connections_refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Election hellos whose address was rewritten
    /// ([`Proxy::start_election_link`]).
    pub fn hellos_rewritten(&self) -> u64 {
        self.shared.hellos_rewritten.load(Ordering::SeqCst)
    }

    /// Connections currently open through the proxy.
    pub fn active_connections(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Bytes forwarded (written to the other side) in `direction` so far;
    /// `Both` is the sum. Blackholed or discarded bytes are not counted.
    pub fn bytes_forwarded(&self, direction: Direction) -> u64 {
        direction
            .ways()
            .iter()
            .map(|&way| self.shared.bytes[way as usize].load(Ordering::SeqCst))
            .sum()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a throwaway connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // No connection can register any more (they check `shutting_down`
        // under the same lock); close the ones that did.
        self.cut_all();
        // Connection threads may still push their second pump's handle, so
        // drain until nothing is left.
        loop {
            let handles = std::mem::take(&mut *lock(&self.shared.threads));
            if handles.is_empty() {
                break;
            }
            for handle in handles {
                let _ = handle.join();
            }
        }
    }
}

/// State shared by the proxy handle and its threads.
struct Shared {
    upstream: Mutex<SocketAddr>,
    faults: Mutex<Faults>,
    /// Signalled whenever faults change, a connection is closed, a reply is
    /// dropped, or the proxy shuts down.
    changed: Condvar,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
    next_conn_id: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    bytes: [AtomicU64; 2],
    /// See [`Proxy::start_election_link`].
    rewrite_election_hello: bool,
    hellos_rewritten: AtomicU64,
}

#[derive(Default)]
struct Faults {
    blackhole: [bool; 2],
    stall: [bool; 2],
    delay: Duration,
    refuse: bool,
    /// Op type whose reply the next matching request will lose.
    drop_reply_op: Option<i32>,
    drops_requested: u64,
    drops_done: u64,
}

/// What a pump should do with a chunk (or an EOF) it has read.
enum Gate {
    Forward,
    Discard,
    Closed,
}

impl Shared {
    fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.faults));
        self.changed.notify_all();
    }

    /// Wakes every waiter; taking the lock first means no waiter can miss a
    /// flag set just before (they check flags while holding it).
    fn notify(&self) {
        drop(lock(&self.faults));
        self.changed.notify_all();
    }

    /// Applies stall (wait), blackhole (discard) and delay (wait) to one chunk.
    fn gate(&self, way: Way, conn: &Conn) -> Gate {
        let mut faults = lock(&self.faults);
        loop {
            if conn.is_closed() || self.shutting_down.load(Ordering::SeqCst) {
                return Gate::Closed;
            }
            if !faults.stall[way as usize] {
                break;
            }
            faults = self
                .changed
                .wait(faults)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        if faults.blackhole[way as usize] {
            return Gate::Discard;
        }
        let deadline = Instant::now() + faults.delay;
        loop {
            if conn.is_closed() || self.shutting_down.load(Ordering::SeqCst) {
                return Gate::Closed;
            }
            let now = Instant::now();
            if now >= deadline {
                return Gate::Forward;
            }
            faults = wait_timeout(&self.changed, faults, deadline - now);
        }
    }

    /// Consumes the armed drop if `op` is the awaited op type.
    fn take_drop_target(&self, op: i32) -> bool {
        let mut faults = lock(&self.faults);
        if faults.drop_reply_op == Some(op) {
            faults.drop_reply_op = None;
            true
        } else {
            false
        }
    }

    fn reply_dropped(&self) {
        self.update(|faults| faults.drops_done += 1);
    }

    fn register(&self, conn: &Arc<Conn>) -> bool {
        let mut conns = lock(&self.conns);
        if self.shutting_down.load(Ordering::SeqCst) {
            return false;
        }
        conns.insert(conn.id, Arc::clone(conn));
        true
    }

    fn spawn(self: &Arc<Self>, name: String, body: impl FnOnce() + Send + 'static) {
        let handle = thread::Builder::new()
            .name(name)
            .spawn(body)
            .expect("proxy: spawning a thread");
        let mut threads = lock(&self.threads);
        threads.retain(|t| !t.is_finished());
        threads.push(handle);
    }
}

/// One proxied connection: the client socket, the upstream socket once
/// connected, and its lost-reply state.
struct Conn {
    id: u64,
    client: TcpStream,
    server: Mutex<Option<TcpStream>>,
    closed: AtomicBool,
    /// Set when a request armed by `drop_reply_of_next` went through: the xid
    /// whose reply ends the connection. While set, server bytes are discarded.
    doomed_xid: Mutex<Option<i32>>,
    /// Pumps still running; the last one out deregisters the connection.
    live_pumps: AtomicUsize,
}

impl Conn {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Shuts both sockets down, which also unblocks both pumps' reads.
    fn close(&self) {
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

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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
    let conn = Arc::new(Conn {
        id,
        client: client_for_conn,
        server: Mutex::new(None),
        closed: AtomicBool::new(false),
        doomed_xid: Mutex::new(None),
        live_pumps: AtomicUsize::new(2),
    });
    if !shared.register(&conn) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let upstream = *lock(&shared.upstream);
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
            // Scan everything the server sends so reply boundaries stay known.
            let doomed = *lock(&conn.doomed_xid);
            let mut doomed_reply_done = false;
            frames.feed(chunk, |event| {
                if let FrameEvent::End { xid: Some(xid) } = event {
                    doomed_reply_done |= Some(xid) == doomed;
                }
            });
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
            let mut doomed = None;
            frames.feed(chunk, |event| {
                if let FrameEvent::Header { xid, op } = event {
                    if doomed.is_none() && shared.take_drop_target(op) {
                        doomed = Some(xid);
                    }
                }
            });
            if let Some(xid) = doomed {
                // Set before forwarding, so the reply cannot slip through.
                lock(&conn.doomed_xid).get_or_insert(xid);
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

/// The first message a member sends on an election connection: protocol
/// version (8 bytes), server id (8), then a length-prefixed `host:port`
/// list; the bytes read so far.
#[derive(Default)]
struct ElectionHello {
    bytes: Vec<u8>,
}

impl ElectionHello {
    /// Address given as the wildcard, once the whole hello is in: the
    /// hello rewritten, followed by whatever came after it. A version this
    /// does not know passes unchanged.
    fn rewrite(&self) -> Option<Vec<u8>> {
        const V1: i64 = -65536;
        const V2: i64 = -65535;
        if self.bytes.len() < 8 {
            return None;
        }
        let version = i64::from_be_bytes(self.bytes[..8].try_into().ok()?);
        if version != V1 && version != V2 {
            return Some(self.bytes.clone());
        }
        if self.bytes.len() < 20 {
            return None;
        }
        let len = usize::try_from(be_i32(&self.bytes[16..20])).ok()?;
        if self.bytes.len() < 20 + len {
            return None;
        }
        let wildcard = b"0.0.0.0:0";
        let mut out = Vec::with_capacity(self.bytes.len());
        out.extend_from_slice(&self.bytes[..16]);
        out.extend_from_slice(&(wildcard.len() as i32).to_be_bytes());
        out.extend_from_slice(wildcard);
        out.extend_from_slice(&self.bytes[20 + len..]);
        Some(out)
    }
}

/// Something the frame scanner noticed.
#[derive(Debug, PartialEq, Eq)]
enum FrameEvent {
    /// The first 8 body bytes of a frame: for a request, xid and op type (for a
    /// reply, xid and half of the zxid).
    Header { xid: i32, op: i32 },
    /// A frame ended; `xid` is its first 4 body bytes, if it had them.
    End { xid: Option<i32> },
}

/// Follows ZooKeeper framing (4-byte big-endian length, then the body) across
/// arbitrary chunk boundaries. The first frame of a connection (connect
/// request / response) has no xid, so it yields only `End { xid: None }`.
#[derive(Default)]
struct FrameScanner {
    frames_done: u64,
    len_buf: [u8; 4],
    len_have: usize,
    body_left: usize,
    head: [u8; 8],
    head_have: usize,
    head_want: usize,
}

impl FrameScanner {
    fn feed(&mut self, mut data: &[u8], mut on_event: impl FnMut(FrameEvent)) {
        while !data.is_empty() {
            if self.len_have < 4 {
                let take = (4 - self.len_have).min(data.len());
                self.len_buf[self.len_have..self.len_have + take].copy_from_slice(&data[..take]);
                self.len_have += take;
                data = &data[take..];
                if self.len_have == 4 {
                    self.body_left = u32::from_be_bytes(self.len_buf) as usize;
                    self.head_have = 0;
                    self.head_want = if self.frames_done == 0 {
                        0
                    } else {
                        self.body_left.min(8)
                    };
                    if self.body_left == 0 {
                        self.end_frame(&mut on_event);
                    }
                }
                continue;
            }
            let take = self.body_left.min(data.len());
            if self.head_have < self.head_want {
                let copy = (self.head_want - self.head_have).min(take);
                self.head[self.head_have..self.head_have + copy].copy_from_slice(&data[..copy]);
                self.head_have += copy;
                if self.head_have == 8 {
                    on_event(FrameEvent::Header {
                        xid: be_i32(&self.head[0..4]),
                        op: be_i32(&self.head[4..8]),
                    });
                }
            }
            self.body_left -= take;
            data = &data[take..];
            if self.body_left == 0 {
                self.end_frame(&mut on_event);
            }
        }
    }

    fn end_frame(&mut self, on_event: &mut impl FnMut(FrameEvent)) {
        let xid = (self.head_have >= 4).then(|| be_i32(&self.head[0..4]));
        on_event(FrameEvent::End { xid });
        self.frames_done += 1;
        self.len_have = 0;
        self.head_have = 0;
        self.head_want = 0;
    }
}

fn be_i32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Locks, recovering from poisoning: a panicking test thread must not wedge the proxy.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}
