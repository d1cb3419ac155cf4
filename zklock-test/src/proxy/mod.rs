//! A fault-injecting TCP proxy for ZooKeeper client tests (std threads and
//! sockets only, 127.0.0.1 only).
//!
//! Every accepted connection gets two threads per direction, around a
//! delay line (`line.rs`): a reader that reads chunks with blocking reads as
//! they come, passes each through the faults on reading (stall: wait;
//! blackhole: drop) and puts it on the line stamped with its arrival plus
//! the current delay; and a writer that takes the chunks off in order as
//! they fall due, passes each through the faults on delivery (stall: wait;
//! blackhole: drop) and writes it on. Chunks on their way overlap: a delay
//! `d` adds `d` to each chunk's way, whatever else is on the line.
//!
//! Faults live in one mutex with a condvar; changing them also wakes every
//! line, so a change takes effect at once on live connections, and waiting
//! threads wake up when faults are cleared or the connection is cut.
//! Threads stop because their sockets are shut down (which makes a blocked
//! `read` or `write` return) or their connection is closed (which wakes its
//! lines), never by polling.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

mod conn;
mod frames;
mod handshake;
mod line;

use conn::{accept_loop, Conn};
pub use handshake::Handshake;
use line::{Stamp, View};

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
            last_handshake: Mutex::new(None),
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
    /// already set), those on their way through a
    /// [delay](Proxy::set_delay) too. Connections stay open. Undo with
    /// [`Proxy::clear`].
    pub fn blackhole(&self, direction: Direction) {
        self.shared.update(|faults| {
            for &way in direction.ways() {
                faults.blackhole[way as usize] = true;
            }
        });
    }

    /// Holds bytes in both directions, neither forwarding nor dropping them,
    /// until [`Proxy::clear`]; then they are delivered in order. Bytes on
    /// their way through a [delay](Proxy::set_delay) are held too.
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

    /// Delays every chunk by `delay` on its way through the proxy, in both
    /// directions: a latency, not a queue. Each chunk is stamped as it
    /// arrives and leaves `delay` later, however many others are on their
    /// way (they overlap, as on a long wire), so a request and its reply
    /// take `2 * delay` more for every caller at once. Chunks leave in the
    /// order they came, and a new delay applies to the chunks that arrive
    /// after it is set: after a shorter one, they wait for the older ones
    /// to leave first. Zero clears the delay, and so does [`Proxy::clear`]:
    /// what is on its way is delivered at once, in order.
    ///
    /// Each direction of a connection holds at most 1 MiB on its way; a
    /// sender that outruns that (1 MiB per `delay`) is held back as by a
    /// full TCP window, and its bytes wait longer than `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.update(|faults| {
            if delay.is_zero() {
                faults.flushes += 1;
            }
            faults.delay = delay;
        });
    }

    /// While true, new connections are accepted and immediately closed.
    pub fn refuse(&self, refuse: bool) {
        self.shared.update(|faults| faults.refuse = refuse);
    }

    /// Back to a transparent proxy: no blackhole, stall, delay or refusal, and
    /// no pending [`Proxy::drop_reply_of_next`] or
    /// [`Proxy::hold_requests_after_reply_of_next`]. Stalled and delayed
    /// bytes are delivered at once, in order.
    pub fn clear(&self) {
        self.shared.update(|faults| {
            let requested = faults.drops_requested;
            let pending = faults.drop_reply_op.is_some();
            let holds_pending = faults.hold_after_op.is_some();
            *faults = Faults {
                drops_requested: requested - u64::from(pending),
                drops_done: faults.drops_done,
                holds_requested: faults.holds_requested - u64::from(holds_pending),
                holds_done: faults.holds_done,
                flushes: faults.flushes + 1,
                ..Faults::default()
            };
        });
    }

    /// Arms a pause between two requests of one client: the next client
    /// request whose op type is `op_code` goes through, and when the
    /// server's reply to it arrives, everything clients send from then on
    /// is held (as [`Proxy::stall_direction`] toward the server) until
    /// [`Proxy::clear`]; the reply itself is delivered. A test can then
    /// change the server between a client's read and its next request.
    /// Await it with [`Proxy::wait_requests_held`].
    pub fn hold_requests_after_reply_of_next(&self, op_code: i32) {
        self.shared.update(|faults| {
            if faults.hold_after_op.replace(op_code).is_none() {
                faults.holds_requested += 1;
            }
        });
    }

    /// Waits until every armed [`Proxy::hold_requests_after_reply_of_next`]
    /// holds the clients' requests. False on timeout.
    pub fn wait_requests_held(&self, timeout: Duration) -> bool {
        self.wait_faults(timeout, |f| f.holds_done >= f.holds_requested)
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
        self.wait_faults(timeout, |f| f.drops_done >= f.drops_requested)
    }

    /// Waits (bounded) until `done` holds of the faults' state. False on
    /// timeout.
    fn wait_faults(&self, timeout: Duration, done: impl Fn(&Faults) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut faults = lock(&self.shared.faults);
        while !done(&faults) {
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

    /// The newest session a server granted (or re-attached) to a client
    /// through this proxy: its id and password, for
    /// [`expire_session`](crate::expire_session).
    pub fn last_handshake(&self) -> Option<Handshake> {
        lock(&self.shared.last_handshake)
            .as_ref()
            .map(|(_, seen)| seen.clone())
    }

    /// [`Proxy::last_handshake`] with the order it was seen in, across
    /// every proxy of this process.
    pub(crate) fn last_handshake_stamped(&self) -> Option<(u64, Handshake)> {
        lock(&self.shared.last_handshake).clone()
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
    /// The newest session a server granted through this proxy, stamped
    /// with the order it was seen in among all proxies of the process.
    last_handshake: Mutex<Option<(u64, Handshake)>>,
}

#[derive(Default)]
struct Faults {
    blackhole: [bool; 2],
    stall: [bool; 2],
    delay: Duration,
    /// How many times the delay was cleared: what was on its way before
    /// is due at once.
    flushes: u64,
    refuse: bool,
    /// Op type whose reply the next matching request will lose.
    drop_reply_op: Option<i32>,
    drops_requested: u64,
    drops_done: u64,
    /// Op type after whose reply the next matching request holds requests.
    hold_after_op: Option<i32>,
    holds_requested: u64,
    holds_done: u64,
}

/// How a chunk (or an EOF) a reader has read goes on its line.
struct Admission {
    /// A blackhole drops it.
    discard: bool,
    stamp: Stamp,
}

impl Shared {
    fn saw_handshake(&self, seen: Handshake) {
        static ORDER: AtomicU64 = AtomicU64::new(0);
        let stamp = ORDER.fetch_add(1, Ordering::SeqCst);
        *lock(&self.last_handshake) = Some((stamp, seen));
    }

    fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.faults));
        self.changed.notify_all();
        self.wake_lines();
    }

    /// Wakes every connection's lines, to look at the faults again.
    fn wake_lines(&self) {
        let conns: Vec<Arc<Conn>> = lock(&self.conns).values().cloned().collect();
        for conn in conns {
            conn.wake();
        }
    }

    /// Wakes every waiter; taking the lock first means no waiter can miss a
    /// flag set just before (they check flags while holding it).
    fn notify(&self) {
        drop(lock(&self.faults));
        self.changed.notify_all();
    }

    /// A chunk a reader has read, on reading: waits while its direction
    /// is stalled, then stamps it with the delay set now. None once the
    /// connection is closed.
    fn admit(&self, way: Way, conn: &Conn) -> Option<Admission> {
        let mut faults = lock(&self.faults);
        loop {
            if conn.is_closed() || self.shutting_down.load(Ordering::SeqCst) {
                return None;
            }
            if !faults.stall[way as usize] {
                break;
            }
            faults = wait(&self.changed, faults);
        }
        Some(Admission {
            discard: faults.blackhole[way as usize],
            stamp: stamp(&faults),
        })
    }

    /// The stamp of what arrives now, stalled or not.
    fn stamp_now(&self) -> Stamp {
        stamp(&lock(&self.faults))
    }

    /// What the writer of `way` needs to let its head item go.
    fn view(&self, way: Way) -> View {
        let faults = lock(&self.faults);
        View {
            stalled: faults.stall[way as usize],
            flushes: faults.flushes,
        }
    }

    /// Whether what leaves a line in `way` now is dropped.
    fn blackholed(&self, way: Way) -> bool {
        lock(&self.faults).blackhole[way as usize]
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

    /// Consumes the armed hold if `op` is the awaited op type.
    fn take_hold_target(&self, op: i32) -> bool {
        let mut faults = lock(&self.faults);
        if faults.hold_after_op == Some(op) {
            faults.hold_after_op = None;
            true
        } else {
            false
        }
    }

    /// The armed request's reply has come: hold what clients send next.
    fn hold_requests(&self) {
        self.update(|faults| {
            faults.stall[Way::ClientToServer as usize] = true;
            faults.holds_done += 1;
        });
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

/// Locks, recovering from poisoning: a panicking test thread must not wedge the proxy.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Arrival now, plus the delay set now.
fn stamp(faults: &Faults) -> Stamp {
    Stamp {
        due: Instant::now().checked_add(faults.delay),
        flushes: faults.flushes,
    }
}

fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
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
