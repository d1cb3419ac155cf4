//! Fault and resilience tests for the client (issue #4): leader failover
//! under writes, cut connections with requests and watches outstanding,
//! session expiry, malformed bytes from a server, server restarts, host-list
//! failover, and SetWatches re-arming thousands of watches.
//!
//! Every wait is bounded and waits for a condition or an event, never for a
//! fixed time (the only fixed pauses pace a writer or are the measuring
//! window of a CPU or attempt-rate check). Servers use a 500 ms tick so
//! 1–10 s sessions are allowed. Malformed bytes come from two fakes in
//! testkit: `Mangler`, a frame-aware proxy in front of a real server that
//! spoils one server frame per armed fault, and `GarbageServer`.
//!
//! Set `RESILIENCE_LOG=1` to see the client's log on stderr.

use std::collections::HashMap;
use std::net::{Shutdown, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use testkit::garbage::GarbageServer;
use testkit::mangler::{Mangle, Mangler};
use testkit::proxy::{Direction, Proxy};
use testkit::zk::{ZkEnsemble, ZkServer};
use testkit::{io_thread_ids, thread_cpu, wait_until};
use zklock::{Client, CreateMode, Error, EventType, Op, SessionState, Watch};

/// tickTime of every server these tests start: sessions of 1–10 s are allowed.
const TICK_MS: u64 = 500;

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

/// One standalone server with a short tick, shared by the tests that do not
/// stop it. Tests sharing it use their own znode roots.
fn fast() -> &'static ZkServer {
    static FAST: OnceLock<ZkServer> = OnceLock::new();
    FAST.get_or_init(|| ZkServer::start_with(TICK_MS))
}

/// Panics seen on the client's I/O threads (the panic hook counts them).
static IO_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Everything the client logged at info level or above, for assertions.
static LOG_LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct CaptureLog;

impl log::Log for CaptureLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("zklock")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!(
            "{:?} [{}] {}: {}",
            Instant::now(),
            thread::current().name().unwrap_or("?"),
            record.level(),
            record.args()
        );
        if std::env::var_os("RESILIENCE_LOG").is_some() {
            eprintln!("{line}");
        }
        let mut lines = LOG_LINES.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() < 50_000 {
            lines.push(line);
        }
    }

    fn flush(&self) {}
}

static LOGGER: CaptureLog = CaptureLog;

/// Installs the log capture and the I/O-thread panic counter (once per binary).
fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if thread::current().name() == Some("zklock-io") {
                IO_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

fn assert_no_io_panic() {
    assert_eq!(
        IO_PANICS.load(Ordering::SeqCst),
        0,
        "a client I/O thread panicked (see the panic message above)"
    );
}

fn logged(needle: &str) -> bool {
    LOG_LINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|l| l.contains(needle))
}

/// A fresh persistent root, unique to this test and process.
fn root(c: &Client, name: &str) -> String {
    let path = format!("/res-{name}-{}", std::process::id());
    c.create(&path, b"", CreateMode::Persistent)
        .unwrap_or_else(|e| panic!("creating test root {path}: {e:?}"));
    path
}

/// A client's stream of session states, with everything seen so far.
struct States {
    rx: Receiver<SessionState>,
    seen: Vec<SessionState>,
}

impl States {
    fn of(c: &Client) -> States {
        let rx = c.subscribe();
        let first = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("subscribe() sends the current state first");
        States {
            rx,
            seen: vec![first],
        }
    }

    fn current(&self) -> SessionState {
        *self.seen.last().expect("at least the first state")
    }

    /// Waits until the latest state is `want` (at once if it already is);
    /// returns how long that took.
    fn wait_for(&mut self, want: SessionState, timeout: Duration) -> Duration {
        let start = Instant::now();
        let deadline = start + timeout;
        while self.current() != want {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(s) => self.seen.push(s),
                Err(e) => panic!(
                    "state {want:?} not reached within {timeout:?} ({e:?}); states seen: {:?}",
                    self.seen
                ),
            }
        }
        start.elapsed()
    }

    /// Takes every state already sent.
    fn drain(&mut self) -> &[SessionState] {
        while let Ok(s) = self.rx.try_recv() {
            self.seen.push(s);
        }
        &self.seen
    }

    /// Asserts that no state change comes within `window` (bounded wait for
    /// absence). After a terminal state the channel may also just close.
    fn assert_quiet(&mut self, window: Duration) {
        match self.rx.recv_timeout(window) {
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if self.current().is_terminal() => {}
            other => panic!(
                "unexpected state change {other:?}; states seen: {:?}",
                self.seen
            ),
        }
    }
}

/// Receives a watch's one event and checks it.
fn expect_event(w: &Watch, kind: EventType, path: &str, timeout: Duration) {
    match w.recv_timeout(timeout) {
        Ok(ev) => assert_eq!(
            (ev.kind, ev.path.as_str()),
            (kind, path),
            "wrong event for the watch on {path}"
        ),
        Err(e) => panic!("watch on {path} did not fire {kind:?} within {timeout:?}: {e:?}"),
    }
}

/// After a round trip, a watch that fired once must be spent: no second event.
fn expect_spent(w: &Watch, path: &str) {
    assert_eq!(
        w.try_recv(),
        Err(Error::Closed),
        "the watch on {path} fired again or is still armed"
    );
}

/// Joins a thread, passing its panic on.
fn join<T>(h: thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Length on the wire (frame header included) of one request.
fn frame_len(req: &jute::Request) -> u64 {
    let mut buf = BytesMut::new();
    jute::encode_request(&mut buf, 1, req);
    buf.len() as u64
}

// ---------------------------------------------------------------------------
// 1. Leader killed while a client writes
// ---------------------------------------------------------------------------

#[derive(Default, Debug)]
struct WriterLog {
    /// Writes acknowledged with Ok: (index, path the server returned).
    acked: Vec<(usize, String)>,
    /// Writes whose attempt failed with ConnectionLoss/Timeout and that were
    /// then found applied (so not sent again).
    found_after_loss: Vec<usize>,
    /// Attempts whose outcome was unknown (ConnectionLoss or Timeout).
    uncertain: usize,
    /// Uncertain attempts found not applied and therefore sent again.
    resent: usize,
}

/// Learns whether the write with `prefix` was applied. `sync` first, so the
/// server we ask has caught up with everything the leader decided.
fn write_applied(c: &Client, root: &str, prefix: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "could not learn within 60 s whether {prefix} was applied"
        );
        match c.sync(root).and_then(|()| c.get_children(root)) {
            Ok(kids) => return kids.iter().any(|k| k.starts_with(prefix)),
            Err(e) if e.is_outcome_unknown() => continue,
            Err(e) => panic!("checking whether {prefix} was applied: {e:?}"),
        }
    }
}

/// Sequential creates with unique names and payloads until `stop`; an
/// uncertain outcome is resolved by looking for the write before resending.
fn write_loop(c: &Client, root: &str, stop: &AtomicBool, done: &AtomicUsize) -> WriterLog {
    let mut log = WriterLog::default();
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let prefix = format!("w{i:05}-");
        let payload = format!("payload-{i}");
        loop {
            match c.create(
                &format!("{root}/{prefix}"),
                payload.as_bytes(),
                CreateMode::PersistentSequential,
            ) {
                Ok(path) => {
                    log.acked.push((i, path));
                    break;
                }
                Err(e) if e.is_outcome_unknown() => {
                    log.uncertain += 1;
                    if write_applied(c, root, &prefix) {
                        log.found_after_loss.push(i);
                        break;
                    }
                    log.resent += 1;
                }
                Err(e) => panic!(
                    "write {i} failed with {e:?} (session {:#x})",
                    c.session_id()
                ),
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
        i += 1;
        // Pace the writer; not a synchronisation.
        thread::sleep(Duration::from_millis(5));
    }
    log
}

#[test]
fn leader_killed_during_writes_keeps_session_and_every_write_exactly_once() {
    init();
    let started = Instant::now();
    let ens = ZkEnsemble::start_with(3, TICK_MS);
    let t = Duration::from_secs(8);
    let c = Client::connect(&ens.connect_string(), t).expect("connect to the ensemble");
    let id = c.session_id();
    let mut states = States::of(&c);
    let root = root(&c, "failover");
    let eph = c
        .create(&format!("{root}-eph"), b"", CreateMode::Ephemeral)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (c, root, stop, done) = (c.clone(), root.clone(), stop.clone(), done.clone());
        thread::spawn(move || write_loop(&c, &root, &stop, &done))
    };
    let progress = |what: &str, n: usize, timeout: Duration| {
        let target = done.load(Ordering::SeqCst) + n;
        wait_until(what, timeout, || {
            writer.is_finished() || done.load(Ordering::SeqCst) >= target
        });
    };

    progress("the first writes", 20, Duration::from_secs(30));
    let mut killed = Vec::new();
    for round in 0..2 {
        let mut leader = None;
        wait_until("a leader", Duration::from_secs(30), || {
            leader = ens.leader();
            leader.is_some()
        });
        let leader = leader.unwrap();
        killed.push(leader);
        ens.kill(leader);
        progress(
            &format!("writes after killing leader {leader} (round {round})"),
            20,
            Duration::from_secs(45),
        );
        ens.restart(leader);
        progress(
            &format!("writes after member {leader} rejoined (round {round})"),
            10,
            Duration::from_secs(30),
        );
    }
    stop.store(true, Ordering::SeqCst);
    let log = writer
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));

    states.drain();
    assert!(
        !states.seen.contains(&SessionState::Expired),
        "the session expired: {:?}",
        states.seen
    );
    assert!(
        states.seen.contains(&SessionState::Suspended),
        "killing the leader should have cost the client its connection: {:?}",
        states.seen
    );
    c.wait_connected(t).expect("connected at the end");
    assert_eq!(c.session_id(), id, "a new session was created");

    c.sync(&root).unwrap();
    let kids = c.get_children(&root).unwrap();
    let total = log.acked.len() + log.found_after_loss.len();
    let mut by_write: HashMap<&str, Vec<&String>> = HashMap::new();
    for k in &kids {
        by_write.entry(&k[..7]).or_default().push(k);
    }
    for i in 0..total {
        let prefix = format!("w{i:05}-");
        let n = by_write.get(prefix.as_str()).map_or(0, Vec::len);
        assert_eq!(n, 1, "write {i} is present {n} times (lost or doubled)");
    }
    assert_eq!(kids.len(), total, "children that no write accounts for");
    for (i, path) in &log.acked {
        let (data, _) = c.get_data(path).unwrap();
        assert_eq!(data, format!("payload-{i}").as_bytes(), "{path}");
    }
    let stat = c.exists(&eph).unwrap().expect("the ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
    assert_no_io_panic();
    eprintln!(
        "failover: killed {killed:?}; {} writes ({} acked, {} found applied after a loss), \
         {} uncertain outcomes, {} resent; states {:?}; {:?}",
        total,
        log.acked.len(),
        log.found_after_loss.len(),
        log.uncertain,
        log.resent,
        states.seen,
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// 2. Connection cut with requests and watches outstanding
// ---------------------------------------------------------------------------

#[test]
fn cut_fails_in_flight_requests_and_watches_fire_for_changes_made_while_away() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(6);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let r = root(&other, "cut");
    let (a, b, kids, d, e) = (
        format!("{r}/a"),
        format!("{r}/b"),
        format!("{r}/kids"),
        format!("{r}/d"),
        format!("{r}/e"),
    );
    for p in [&a, &kids, &d, &e] {
        other.create(p, b"0", CreateMode::Persistent).unwrap();
    }
    let (_, _, wa) = c.get_data_and_watch(&a).unwrap();
    let (none, wb) = c.exists_and_watch(&b).unwrap();
    assert!(none.is_none());
    let (_, _, wc) = c.get_children_and_watch(&kids).unwrap();
    let (_, _, wd) = c.get_data_and_watch(&d).unwrap();
    let (_, _, we) = c.get_data_and_watch(&e).unwrap();
    let id = c.session_id();
    let mut states = States::of(&c);
    assert_eq!(states.current(), SessionState::Connected);

    // Hold the server's replies; let requests through so they are surely in flight.
    proxy.stall_direction(Direction::ServerToClient);
    let big = vec![7u8; 2000];
    let in_flight = [
        jute::Request::SetData(jute::SetDataRequest {
            path: e.clone(),
            data: big.clone(),
            version: -1,
        }),
        jute::Request::GetData(jute::PathWatch {
            path: a.clone(),
            watch: true,
        }),
        jute::Request::Exists(jute::PathWatch {
            path: r.clone(),
            watch: false,
        }),
    ];
    let expected_bytes: u64 = in_flight.iter().map(frame_len).sum();
    let sent_before = proxy.bytes_forwarded(Direction::ClientToServer);
    let set = {
        let (c, e, big) = (c.clone(), e.clone(), big.clone());
        thread::spawn(move || c.set_data(&e, &big, None))
    };
    let get_w = {
        let (c, a) = (c.clone(), a.clone());
        thread::spawn(move || c.get_data_and_watch(&a).map(|_| ()))
    };
    let ex = {
        let (c, r) = (c.clone(), r.clone());
        thread::spawn(move || c.exists(&r))
    };
    wait_until(
        "the three requests to reach the server",
        Duration::from_secs(3),
        || proxy.bytes_forwarded(Direction::ClientToServer) >= sent_before + expected_bytes,
    );
    // Keep the client away while another client changes things, then cut.
    proxy.refuse(true);
    proxy.cut_all();
    assert_eq!(
        join(set).unwrap_err(),
        Error::ConnectionLoss,
        "setData in flight"
    );
    assert_eq!(
        join(get_w).unwrap_err(),
        Error::ConnectionLoss,
        "getData+watch in flight"
    );
    assert_eq!(
        join(ex).unwrap_err(),
        Error::ConnectionLoss,
        "exists in flight"
    );
    states.wait_for(SessionState::Suspended, t);

    // A request made while disconnected waits and is sent after the reconnect.
    let queued = {
        let (c, p) = (c.clone(), format!("{r}/queued"));
        thread::spawn(move || c.create(&p, b"q", CreateMode::Persistent))
    };
    other.set_data(&a, b"1", None).unwrap();
    other.create(&b, b"", CreateMode::Persistent).unwrap();
    other
        .create(&format!("{kids}/k"), b"", CreateMode::Persistent)
        .unwrap();
    other.delete(&d, None).unwrap();
    // The in-flight setData was applied although its caller saw ConnectionLoss.
    assert_eq!(other.get_data(&e).unwrap().0, big);
    for w in [&wa, &wb, &wc, &wd, &we] {
        assert_eq!(w.try_recv(), Ok(None), "a watch fired while disconnected");
    }

    proxy.clear();
    states.wait_for(SessionState::Connected, t);
    assert_eq!(c.session_id(), id, "the session changed");
    expect_event(&wa, EventType::NodeDataChanged, &a, t);
    expect_event(&wb, EventType::NodeCreated, &b, t);
    expect_event(&wc, EventType::NodeChildrenChanged, &kids, t);
    expect_event(&wd, EventType::NodeDeleted, &d, t);
    // Its event was sent on the stalled connection and lost; SetWatches re-fires it.
    expect_event(&we, EventType::NodeDataChanged, &e, t);
    assert_eq!(join(queued).unwrap(), format!("{r}/queued"));

    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (w, p) in [(&wa, &a), (&wb, &b), (&wc, &kids), (&wd, &d), (&we, &e)] {
        expect_spent(w, p);
    }
    assert_eq!(
        states.drain(),
        &[
            SessionState::Connected,
            SessionState::Suspended,
            SessionState::Connected
        ]
    );
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 3. Expiry
// ---------------------------------------------------------------------------

#[test]
fn session_expired_while_blackholed_is_reported_and_never_replaced() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(60))
        .connect()
        .unwrap();
    let t = c.negotiated_timeout().expect("negotiated");
    assert_eq!(t, Duration::from_secs(3));
    let other = Client::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    let r = root(&other, "expiry");
    let eph = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, gone) = other.exists_and_watch(&eph).unwrap();
    let never = format!("{r}/never");
    let (_, pending_watch) = c.exists_and_watch(&never).unwrap();
    let (_, _, pending_data_watch) = c.get_data_and_watch(&r).unwrap();
    let id = c.session_id();
    let mut states = States::of(&c);

    proxy.blackhole(Direction::Both);
    let cut_at = Instant::now();
    states.wait_for(SessionState::Suspended, t * 2);
    states.wait_for(SessionState::Lost, t * 2);
    let lost_after = cut_at.elapsed();
    assert!(
        lost_after >= t - Duration::from_millis(t.as_millis() as u64 / 3 + 50),
        "Lost reported after {lost_after:?}, before a whole session timeout {t:?}"
    );
    // The server expires the session: its ephemeral goes.
    expect_event(&gone, EventType::NodeDeleted, &eph, t * 3);

    // Calls made while away stay pending (request timeout 60 s) until the
    // client learns the session's fate.
    let pending_calls: Vec<_> = (0..3)
        .map(|i| {
            let c = c.clone();
            let p = format!("{r}/late{i}");
            thread::spawn(move || c.create(&p, b"", CreateMode::Persistent))
        })
        .collect();
    for h in &pending_calls {
        assert!(
            !h.is_finished(),
            "a call ended while the server was unreachable"
        );
    }

    // Contact returns. The client may be in a handshake whose bytes the
    // blackhole ate: it began 2T/3 after the last contact and is given at
    // most T, so it ends within 2T/3 of now (we are past Lost, T after the
    // last contact); the next attempt learns of the expiry.
    proxy.clear();
    let cleared = Instant::now();
    states.wait_for(SessionState::Expired, t * 3);
    let expired_after = cleared.elapsed();
    eprintln!(
        "expiry: Lost after {lost_after:?}, Expired {expired_after:?} after contact returned; \
         states {:?}",
        states.seen
    );
    let seen = states.drain().to_vec();
    let lost = seen.iter().position(|s| *s == SessionState::Lost);
    let expired = seen.iter().position(|s| *s == SessionState::Expired);
    assert!(
        matches!((lost, expired), (Some(l), Some(x)) if l < x),
        "Lost must come before Expired: {seen:?}"
    );
    assert!(
        !seen[lost.unwrap()..].contains(&SessionState::Connected),
        "reconnected between Lost and Expired: {seen:?}"
    );
    assert!(
        expired_after <= t,
        "Expired reported {expired_after:?} after contact returned; session timeout is {t:?}"
    );

    for h in pending_calls {
        assert_eq!(
            h.join().unwrap().unwrap_err(),
            Error::SessionExpired,
            "pending call"
        );
    }
    assert_eq!(
        pending_watch.recv_timeout(t).unwrap_err(),
        Error::SessionExpired
    );
    assert_eq!(
        pending_data_watch.recv_timeout(t).unwrap_err(),
        Error::SessionExpired
    );
    // Calls after the expiry (checked at the end, after the other invariants).
    let after_calls = [
        ("exists", c.exists(&r).map(drop)),
        (
            "create",
            c.create(&format!("{r}/after"), b"", CreateMode::Persistent)
                .map(drop),
        ),
        ("exists_and_watch", c.exists_and_watch(&r).map(drop)),
        ("get_data", c.get_data(&r).map(drop)),
    ];
    let first_state_of_new_subscription = c.subscribe().recv_timeout(Duration::from_secs(5));

    // No new session: no connection is attempted any more, nothing changes.
    let accepted = proxy.connections_accepted();
    states.assert_quiet(Duration::from_millis(1500));
    assert_eq!(
        proxy.connections_accepted(),
        accepted,
        "the client reconnected after Expired"
    );
    assert_eq!(c.state(), SessionState::Expired);
    assert_eq!(c.session_id(), id, "the session id changed");
    assert_eq!(
        other.exists(&eph).unwrap(),
        None,
        "the ephemeral is still there"
    );
    assert!(other.exists(&format!("{r}/late0")).unwrap().is_none());
    assert_no_io_panic();
    for (what, result) in after_calls {
        assert_eq!(
            result,
            Err(Error::SessionExpired),
            "{what} on an expired client (state() says {:?})",
            c.state()
        );
    }
    assert_eq!(
        first_state_of_new_subscription,
        Ok(SessionState::Expired),
        "subscribe() on an expired client must start with the current state"
    );
}

// ---------------------------------------------------------------------------
// 4. Malformed bytes from a server
// ---------------------------------------------------------------------------

#[test]
fn malformed_server_bytes_drop_the_connection_and_the_client_recovers() {
    init();
    let server = fast();
    let mangler = Mangler::start(server.addr());
    let t = Duration::from_secs(6);
    let c = Client::connect(&mangler.addr().to_string(), t).unwrap();
    let id = c.session_id();
    let node = root(&c, "mangle");
    c.set_data(&node, b"intact", None).unwrap();
    let mut states = States::of(&c);

    let modes = [
        Mangle::NegativeLength,
        Mangle::HugeLength,
        Mangle::UnknownXid,
        Mangle::ShortFrame,
        Mangle::TruncatedBody,
        Mangle::BadWatchEvent,
    ];
    for (i, mode) in modes.into_iter().enumerate() {
        let accepted = mangler.accepted();
        mangler.arm(mode);
        assert_eq!(
            c.get_data(&node).unwrap_err(),
            Error::ConnectionLoss,
            "the call whose reply was spoiled by {mode:?}"
        );
        assert_eq!(mangler.wait_done(i + 1, t).last(), Some(&mode));
        states.wait_for(SessionState::Suspended, t);
        states.wait_for(SessionState::Connected, t);
        assert!(mangler.accepted() > accepted, "{mode:?}: no reconnect");
        assert_eq!(c.get_data(&node).unwrap().0, b"intact", "after {mode:?}");
        assert_eq!(c.session_id(), id, "after {mode:?}");
    }

    // A spoiled handshake on the reconnect: dropped, and the next one works.
    let accepted = mangler.accepted();
    mangler.arm(Mangle::HandshakeGarbage);
    mangler.cut_all();
    states.wait_for(SessionState::Suspended, t);
    mangler.wait_done(modes.len() + 1, t);
    states.wait_for(SessionState::Connected, t);
    assert!(
        mangler.accepted() >= accepted + 2,
        "expected a refused handshake and a good one"
    );
    assert_eq!(c.get_data(&node).unwrap().0, b"intact");
    assert_eq!(c.session_id(), id);

    let seen = states.drain();
    assert!(
        !seen.contains(&SessionState::Expired) && !seen.contains(&SessionState::Lost),
        "{seen:?}"
    );
    for needle in [
        "bad frame: negative frame length -16",
        "bad frame: frame of 67108864 bytes exceeds",
        "reply for xid 1073676288 while xid",
        "reply: unexpected end of input",
        "reply body: unexpected end of input",
        "reply: string is not valid UTF-8",
        "connect response: ",
    ] {
        assert!(logged(needle), "nothing logged containing {needle:?}");
    }
    assert_no_io_panic();
}

#[test]
fn garbage_speaking_hosts_in_the_list_are_skipped() {
    init();
    let server = fast();
    let garbage = GarbageServer::start();

    // Only garbage: never connected, keeps retrying (every kind of junk), no panic.
    let t = Duration::from_secs(2);
    let start = Instant::now();
    let r = Client::connect(&garbage.addr().to_string(), t);
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    assert!(start.elapsed() < t + Duration::from_secs(2));
    let c = Client::builder(&garbage.addr().to_string())
        .session_timeout(t)
        .wait_connected(false)
        .connect()
        .unwrap();
    let before = garbage.accepted();
    wait_until(
        "four more attempts on the garbage host",
        Duration::from_secs(15),
        || garbage.accepted() >= before + 4,
    );
    assert_eq!(c.state(), SessionState::Connecting);
    assert_eq!(c.session_id(), 0);
    drop(c);

    // Garbage plus a real server: every client ends up on the real one.
    let cs = format!("{},{}", garbage.addr(), server.addr());
    for i in 0..4 {
        let c = Client::connect(&cs, Duration::from_secs(4))
            .unwrap_or_else(|e| panic!("client {i}: {e:?}"));
        assert!(c.exists("/").unwrap().is_some());
        assert_eq!(c.state(), SessionState::Connected);
    }
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 5. Standalone server restart
// ---------------------------------------------------------------------------

#[test]
fn server_restart_within_the_session_timeout_keeps_session_and_watches() {
    init();
    let server = ZkServer::start_with(TICK_MS);
    let t = Duration::from_secs(10);
    let c = Client::connect(&server.connect_string(), t).unwrap();
    let id = c.session_id();
    let r = root(&c, "restart");
    let (a, b, kids) = (format!("{r}/a"), format!("{r}/b"), format!("{r}/kids"));
    c.create(&a, b"0", CreateMode::Persistent).unwrap();
    c.create(&kids, b"", CreateMode::Persistent).unwrap();
    let eph = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, _, wa) = c.get_data_and_watch(&a).unwrap();
    let (_, wb) = c.exists_and_watch(&b).unwrap();
    let (_, _, wc) = c.get_children_and_watch(&kids).unwrap();
    let mut states = States::of(&c);

    let down = Instant::now();
    server.stop();
    states.wait_for(SessionState::Suspended, t);
    // A call made while the server is down waits for it.
    let queued = {
        let (c, p) = (c.clone(), format!("{r}/queued"));
        thread::spawn(move || c.create(&p, b"", CreateMode::Persistent))
    };
    server.restart();
    let restarted = down.elapsed();
    states.wait_for(SessionState::Connected, t);
    let outage = down.elapsed();
    eprintln!("restart: server back after {restarted:?}, client connected after {outage:?}");
    assert!(
        outage < t,
        "outage {outage:?} not within the session timeout"
    );
    assert_eq!(c.session_id(), id);
    assert_eq!(queued.join().unwrap().unwrap(), format!("{r}/queued"));

    let other = Client::connect(&server.connect_string(), t).unwrap();
    let stat = other.exists(&eph).unwrap().expect("the ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
    other.set_data(&a, b"1", None).unwrap();
    other.create(&b, b"", CreateMode::Persistent).unwrap();
    other
        .create(&format!("{kids}/k"), b"", CreateMode::Persistent)
        .unwrap();
    expect_event(&wa, EventType::NodeDataChanged, &a, t);
    expect_event(&wb, EventType::NodeCreated, &b, t);
    expect_event(&wc, EventType::NodeChildrenChanged, &kids, t);
    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (w, p) in [(&wa, &a), (&wb, &b), (&wc, &kids)] {
        expect_spent(w, p);
    }
    let seen = states.drain();
    assert!(
        !seen.contains(&SessionState::Expired) && !seen.contains(&SessionState::Lost),
        "{seen:?}"
    );
    assert_no_io_panic();
}

/// A reconnect whose handshake is never answered must not cost a session
/// that another attempt could still resume. ZooKeeper 3.8.0 itself produces
/// such connections: one accepted while the server is starting gets "not
/// running", and `NIOServerCnxn.close()` then throws a NullPointerException
/// (no database yet) before closing the socket, which stays open and silent.
/// The session core drops a silent connection after 2T/3 so that T/3 is left
/// to reconnect; a handshake allowed a whole T (T / number of hosts) uses
/// all of it.
#[test]
fn an_unanswered_handshake_does_not_cost_the_session() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    // Accepts TCP connections (the kernel does) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let t = Duration::from_secs(4);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let id = c.session_id();
    let r = root(&c, "unanswered-handshake");
    let eph = c
        .create(&format!("{r}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let mut states = States::of(&c);

    proxy.set_upstream(silent.local_addr().unwrap());
    let accepted = proxy.connections_accepted();
    // Fresh contact: the server's clock for the session starts about now.
    c.exists(&r).unwrap();
    let cut_at = Instant::now();
    proxy.cut_all();
    states.wait_for(SessionState::Suspended, t);
    // Two handshakes go unanswered; then the real server is reachable again.
    wait_until(
        "two reconnect attempts on the unresponsive server",
        t * 3,
        || proxy.connections_accepted() >= accepted + 2,
    );
    let second_attempt = cut_at.elapsed();
    proxy.set_upstream(server.addr());
    eprintln!("unanswered handshake: second attempt {second_attempt:?} after the cut");
    states.wait_for(SessionState::Connected, t * 3);
    assert_eq!(c.session_id(), id);
    let resumed = cut_at.elapsed();
    assert!(resumed < t, "resumed only {resumed:?} after the cut");
    let stat = c.exists(&eph).unwrap().expect("the ephemeral survived");
    assert_eq!(stat.ephemeral_owner, id);
    drop(silent);
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 6. Multi-host failover
// ---------------------------------------------------------------------------

#[test]
fn dead_and_silent_hosts_are_skipped_and_all_dead_fails_in_bounded_time_without_spinning() {
    init();
    let server = fast();
    let dead = testkit::free_ports(2);
    // Listens (the kernel completes TCP handshakes) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();

    let t = Duration::from_secs(3);
    let cs = format!("127.0.0.1:{},{silent_addr},{}", dead[0], server.addr());
    for i in 0..3 {
        let start = Instant::now();
        let c = Client::connect(&cs, t).unwrap_or_else(|e| panic!("client {i}: {e:?}"));
        assert!(start.elapsed() < t, "took {:?}", start.elapsed());
        assert!(c.exists("/").unwrap().is_some());
    }

    // Every host dead: connect gives up with Timeout after about the session timeout.
    let all_dead = format!("127.0.0.1:{},127.0.0.1:{}", dead[0], dead[1]);
    let start = Instant::now();
    let r = Client::connect(&all_dead, t);
    let took = start.elapsed();
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    assert!(took < t + Duration::from_secs(2), "connect took {took:?}");

    // And its I/O thread sleeps between attempts. Find the thread of a new
    // client (retrying if another test spawned one at the same moment).
    let mut probe = None;
    for _ in 0..5 {
        let before = io_thread_ids();
        let c = Client::builder(&all_dead)
            .session_timeout(t)
            .wait_connected(false)
            .connect()
            .unwrap();
        // A new thread names itself once it runs: wait for that.
        let mut new = Vec::new();
        let named = Instant::now();
        while new.is_empty() && named.elapsed() < Duration::from_secs(2) {
            new = io_thread_ids().difference(&before).copied().collect();
            thread::sleep(Duration::from_millis(5));
        }
        if let [tid] = new[..] {
            probe = Some((c, tid));
            break;
        }
    }
    let (c, tid) = probe.expect("could not single out the new client's I/O thread");
    // Let its backoff reach the steady state, then measure over a second.
    wait_until("the backoff to settle", Duration::from_secs(5), || {
        Instant::now() >= start + took + Duration::from_secs(2)
    });
    let cpu0 = thread_cpu(tid).expect("cpu of the I/O thread");
    let wall0 = Instant::now();
    let measure = Duration::from_millis(1500);
    wait_until("the measuring window", measure * 2, || {
        wall0.elapsed() >= measure
    });
    let used = thread_cpu(tid).expect("cpu of the I/O thread") - cpu0;
    assert_eq!(c.state(), SessionState::Connecting);
    assert!(
        used < Duration::from_millis(50),
        "the I/O thread used {used:?} of CPU in {measure:?} with every host dead"
    );
    drop(c);
    // Dropping a client that never connected ends its I/O thread.
    wait_until(
        "the dropped client's I/O thread to end",
        Duration::from_secs(5),
        || !io_thread_ids().contains(&tid),
    );

    // A host that accepts and closes at once: attempts are paced by the backoff.
    let closer = TcpListener::bind("127.0.0.1:0").unwrap();
    let closer_addr = closer.local_addr().unwrap();
    let attempts = Arc::new(AtomicU64::new(0));
    {
        let attempts = attempts.clone();
        thread::spawn(move || {
            for conn in closer.incoming().flatten() {
                attempts.fetch_add(1, Ordering::SeqCst);
                let _ = conn.shutdown(Shutdown::Both);
            }
        });
    }
    let c = Client::builder(&closer_addr.to_string())
        .session_timeout(t)
        .wait_connected(false)
        .connect()
        .unwrap();
    wait_until("a few attempts", Duration::from_secs(10), || {
        attempts.load(Ordering::SeqCst) >= 3
    });
    let (a0, w0) = (attempts.load(Ordering::SeqCst), Instant::now());
    wait_until("the measuring window", measure * 2, || {
        w0.elapsed() >= measure * 2
    });
    let rate = (attempts.load(Ordering::SeqCst) - a0) as f64 / w0.elapsed().as_secs_f64();
    eprintln!("failover: all-dead connect failed after {took:?}; idle I/O thread used {used:?}; {rate:.1} attempts/s on a closing host");
    assert!(rate < 10.0, "{rate:.1} connection attempts per second");
    drop(c);
    drop(silent);
    assert_no_io_panic();
}

// ---------------------------------------------------------------------------
// 7. SetWatches re-arms thousands of watches
// ---------------------------------------------------------------------------

#[test]
fn set_watches_after_reconnect_rearms_thousands_of_watches() {
    init();
    let server = fast();
    let proxy = Proxy::start(server.addr());
    let t = Duration::from_secs(8);
    let c = Client::connect(&proxy.connect_string(), t).unwrap();
    let other = Client::connect(&server.connect_string(), t).unwrap();
    let r = root(&other, "many-watches");
    let pad = "x".repeat(200);
    const DATA: usize = 2000;
    const MISSING: usize = 300;
    const CHILD: usize = 100;
    let data_paths: Vec<String> = (0..DATA).map(|i| format!("{r}/n{i:04}-{pad}")).collect();
    let missing_paths: Vec<String> = (0..MISSING).map(|i| format!("{r}/m{i:04}-{pad}")).collect();
    for chunk in data_paths.chunks(100) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p, b"0", CreateMode::Persistent))
            .collect();
        other.multi(&ops).unwrap();
    }

    // Register the watches from four threads.
    let register = |paths: Vec<String>, how: fn(&Client, &str) -> Watch| {
        let per = paths.len().div_ceil(4);
        let handles: Vec<_> = paths
            .chunks(per)
            .map(|chunk| {
                let (c, chunk) = (c.clone(), chunk.to_vec());
                thread::spawn(move || {
                    chunk
                        .into_iter()
                        .map(|p| {
                            let w = how(&c, &p);
                            (p, w)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    };
    let data_watches = register(data_paths.clone(), |c, p| {
        c.get_data_and_watch(p).unwrap().2
    });
    let exist_watches = register(missing_paths.clone(), |c, p| {
        let (s, w) = c.exists_and_watch(p).unwrap();
        assert!(s.is_none());
        w
    });
    let child_watches = register(data_paths[..CHILD].to_vec(), |c, p| {
        c.get_children_and_watch(p).unwrap().2
    });
    let rearm_bytes: usize = data_paths
        .iter()
        .chain(&missing_paths)
        .chain(&data_paths[..CHILD])
        .map(|p| 4 + p.len())
        .sum();
    assert!(
        rearm_bytes > 3 * 128 * 1024,
        "the re-arm should need several 128 KiB batches, needs {rearm_bytes} bytes"
    );
    let id = c.session_id();
    let mut states = States::of(&c);

    proxy.refuse(true);
    proxy.cut_all();
    states.wait_for(SessionState::Suspended, t);
    for chunk in data_paths.chunks(100) {
        let ops: Vec<Op> = chunk.iter().map(|p| Op::set_data(p, b"1", None)).collect();
        other.multi(&ops).unwrap();
    }
    for chunk in missing_paths.chunks(100) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p, b"", CreateMode::Persistent))
            .collect();
        other.multi(&ops).unwrap();
    }
    let ops: Vec<Op> = data_paths[..CHILD]
        .iter()
        .map(|p| Op::create(&format!("{p}/k"), b"", CreateMode::Persistent))
        .collect();
    other.multi(&ops).unwrap();

    let sent_before = proxy.bytes_forwarded(Direction::ClientToServer);
    proxy.clear();
    states.wait_for(SessionState::Connected, t);
    assert_eq!(c.session_id(), id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut missing_events = Vec::new();
    for (list, kind) in [
        (&data_watches, EventType::NodeDataChanged),
        (&exist_watches, EventType::NodeCreated),
        (&child_watches, EventType::NodeChildrenChanged),
    ] {
        for (p, w) in list {
            match w.recv_timeout(left()) {
                Ok(ev) => assert_eq!((ev.kind, ev.path.as_str()), (kind, p.as_str())),
                Err(e) => missing_events.push((kind, p[..r.len() + 6].to_string(), e)),
            }
        }
    }
    let rearm_sent = proxy.bytes_forwarded(Direction::ClientToServer) - sent_before;
    assert!(
        missing_events.is_empty(),
        "{} of {} watches did not fire after the reconnect (SetWatches sent {rearm_sent} bytes \
         for {rearm_bytes} bytes of paths); first few: {:?}",
        missing_events.len(),
        DATA + MISSING + CHILD,
        &missing_events[..missing_events.len().min(5)]
    );
    assert!(
        rearm_sent >= rearm_bytes as u64,
        "only {rearm_sent} bytes sent after reconnect"
    );
    c.sync(&r).unwrap();
    c.exists(&r).unwrap();
    for (p, w) in data_watches
        .iter()
        .chain(&exist_watches)
        .chain(&child_watches)
    {
        expect_spent(w, p);
    }
    assert_eq!(
        states.drain(),
        &[
            SessionState::Connected,
            SessionState::Suspended,
            SessionState::Connected
        ]
    );
    assert_no_io_panic();
}
