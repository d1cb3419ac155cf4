//! Tests of the test kit itself: real ZooKeeper servers (standalone and
//! ensemble), their cleanup when the test process dies, and the
//! fault-injecting proxy, checked with a raw client made of the codec's
//! records (so that they do not depend on the client under test).
//!
//! Run with `cargo test -p zklock-testkit --test servers_and_proxy -- --nocapture`
//! to see start times.

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
// Standalone servers
// ---------------------------------------------------------------------------

#[test]
fn standalone_answers_four_letter_words_and_restarts_on_same_port() {
    let started = Instant::now();
    let server = ZkServer::start_with(1000);
    eprintln!("standalone start took {:?}", started.elapsed());

    assert!(server.is_running());
    assert_eq!(server.four_letter("ruok"), "imok");
    let srvr = server.four_letter("srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr answered {srvr:?}");
    let conf = server.four_letter("conf");
    assert!(conf.contains("tickTime=1000"), "conf answered {conf:?}");
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.addr().port())
    );

    // Write something so we can tell the data directory survives a restart.
    let path = unique_path("restart");
    let mut client = RawClient::connect(server.addr(), 10_000);
    assert_eq!(create(&mut client, &path, b"kept"), ErrorCode::Ok);
    drop(client);

    let addr = server.addr();
    server.stop();
    assert!(!server.is_running());
    assert!(
        try_four_letter(addr, "ruok").is_err(),
        "a stopped server must not answer"
    );

    let restarted = Instant::now();
    server.restart();
    eprintln!("standalone restart took {:?}", restarted.elapsed());
    assert!(server.is_running());
    assert_eq!(server.addr(), addr, "restart must reuse the port");
    assert_eq!(server.four_letter("ruok"), "imok");
    let mut client = RawClient::connect(server.addr(), 10_000);
    assert_eq!(
        exists(&mut client, &path),
        ErrorCode::Ok,
        "znode written before the restart is gone"
    );
}

#[test]
fn shared_server_is_started_once() {
    let first = zk::shared();
    let second = zk::shared();
    assert!(std::ptr::eq(first, second));
    assert_eq!(first.four_letter("ruok"), "imok");
    let srvr = first.four_letter("srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr answered {srvr:?}");
}

// ---------------------------------------------------------------------------
// Ensemble
// ---------------------------------------------------------------------------

#[test]
fn ensemble_elects_one_leader_and_survives_losing_it() {
    let started = Instant::now();
    let ensemble = ZkEnsemble::start(3);
    eprintln!("3-member ensemble start took {:?}", started.elapsed());

    assert_eq!(ensemble.len(), 3);
    let expected: Vec<String> = (0..3)
        .map(|i| ensemble.member_addr(i).to_string())
        .collect();
    assert_eq!(ensemble.connect_string(), expected.join(","));
    assert_eq!(count_leaders(&ensemble), 1);
    let old_leader = ensemble.leader().expect("a ready ensemble has a leader");
    for i in (0..3).filter(|&i| i != old_leader) {
        assert_eq!(ensemble.member_mode(i).as_deref(), Some("follower"));
        assert_eq!(ensemble.four_letter(i, "ruok"), "imok");
    }

    let killed = Instant::now();
    ensemble.kill(old_leader);
    assert!(!ensemble.is_running(old_leader));
    ensemble.wait_ready();
    eprintln!(
        "re-election after killing the leader took {:?}",
        killed.elapsed()
    );
    let new_leader = ensemble.leader().expect("the survivors elect a leader");
    assert_ne!(new_leader, old_leader);
    assert_eq!(count_leaders(&ensemble), 1);

    let restarted = Instant::now();
    ensemble.restart(old_leader);
    eprintln!("member restart took {:?}", restarted.elapsed());
    assert!(ensemble.is_running(old_leader));
    assert_eq!(count_leaders(&ensemble), 1);
    assert_eq!(
        ensemble.member_mode(old_leader).as_deref(),
        Some("follower"),
        "the old leader rejoins as a follower"
    );
}

fn count_leaders(ensemble: &ZkEnsemble) -> usize {
    (0..ensemble.len())
        .filter(|&i| ensemble.member_mode(i).as_deref() == Some("leader"))
        .count()
}

// ---------------------------------------------------------------------------
// Servers die with the test process
// ---------------------------------------------------------------------------

const ORPHAN_MODE_VAR: &str = "ZKLOCK_SELFTEST_ORPHAN_MODE";

/// Not a test on its own: run in a child process by the two tests below.
/// Starts a server, reports the JVM's pid and directory, and waits for the
/// parent to have seen the JVM alive: then either it is SIGKILLed, or its
/// stdin closes and it exits without running any destructor.
#[test]
#[ignore = "helper process for the jvm_dies_* tests"]
fn orphan_helper() {
    if std::env::var_os(ORPHAN_MODE_VAR).is_none() {
        return;
    }
    let server = ZkServer::start();
    let pid = server.java_pid().expect("java pid file written at start");
    println!("ORPHAN java_pid={pid} dir={}", server.dir().display());
    io::stdout().flush().expect("flushing stdout");
    // Returns at EOF: the parent's go, or the parent gone.
    let _ = io::stdin().read_to_end(&mut Vec::new());
    std::process::exit(0);
}

#[test]
fn jvm_dies_when_test_process_exits_without_drop() {
    check_orphaned_jvm_dies("exit");
}

#[test]
fn jvm_dies_when_test_process_is_killed() {
    check_orphaned_jvm_dies("kill");
}

fn check_orphaned_jvm_dies(mode: &str) {
    let exe = std::env::current_exe().expect("path of the test binary");
    let mut child = Command::new(exe)
        .args(["orphan_helper", "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(ORPHAN_MODE_VAR, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the orphan helper");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut report = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("reading the helper's stdout");
        // The harness prints "test orphan_helper ... " on the same line first.
        if let Some((_, rest)) = line.split_once("ORPHAN ") {
            report = Some(rest.to_string());
            break;
        }
    }
    let report = report.expect("the helper exited without reporting its server");
    let (pid, dir) = parse_orphan_report(&report);
    assert!(process_alive(pid), "JVM {pid} should be running");

    if mode == "kill" {
        child.kill().expect("SIGKILL the helper");
    } else {
        drop(child.stdin.take());
    }
    let status = child.wait().expect("waiting for the helper");
    eprintln!("orphan helper ({mode}) exited: {status}");

    let gone = poll_until(Duration::from_secs(15), || {
        !process_alive(pid) && !Path::new(&dir).exists()
    });
    assert!(
        gone,
        "JVM {pid} alive: {}, dir {dir} exists: {} after the test process died",
        process_alive(pid),
        Path::new(&dir).exists()
    );
}

fn parse_orphan_report(report: &str) -> (u32, String) {
    let mut pid = None;
    let mut dir = None;
    for field in report.split(' ') {
        if let Some(value) = field.strip_prefix("java_pid=") {
            pid = value.parse().ok();
        } else if let Some(value) = field.strip_prefix("dir=") {
            dir = Some(value.to_string());
        }
    }
    (
        pid.unwrap_or_else(|| panic!("no java_pid in {report:?}")),
        dir.unwrap_or_else(|| panic!("no dir in {report:?}")),
    )
}

// ---------------------------------------------------------------------------
// Proxy against a plain echo server
// ---------------------------------------------------------------------------

#[test]
fn proxy_forwards_four_letter_words_to_zookeeper() {
    let server = zk::shared();
    let proxy = Proxy::start(server.addr());
    assert_eq!(
        try_four_letter(proxy.addr(), "ruok").expect("ruok through the proxy"),
        "imok"
    );
    let srvr = try_four_letter(proxy.addr(), "srvr").expect("srvr through the proxy");
    assert!(srvr.contains("Mode: standalone"), "srvr answered {srvr:?}");
    assert_eq!(proxy.connections_accepted(), 2);
    assert_eq!(proxy.bytes_forwarded(Direction::ClientToServer), 8);
    assert!(proxy.bytes_forwarded(Direction::ServerToClient) > 4);
    assert_eq!(proxy.connect_string(), proxy.addr().to_string());
}

#[test]
fn proxy_cut_all_closes_live_connections() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut a = connect(proxy.addr());
    let mut b = connect(proxy.addr());
    assert_round_trip(&mut a, b"one");
    assert_round_trip(&mut b, b"two");
    assert_eq!(proxy.active_connections(), 2);

    proxy.cut_all();
    assert_closed(&mut a);
    assert_closed(&mut b);
    assert!(poll_until(PROMPT, || proxy.active_connections() == 0));

    // The proxy itself keeps working.
    let mut c = connect(proxy.addr());
    assert_round_trip(&mut c, b"three");
    assert_eq!(proxy.connections_accepted(), 3);
}

#[test]
fn proxy_blackhole_drops_bytes_but_keeps_the_connection() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut client = connect(proxy.addr());
    assert_round_trip(&mut client, b"warm-up");

    proxy.blackhole(Direction::ClientToServer);
    write(&mut client, b"lost-on-the-way-in");
    assert_quiet(&mut client);
    proxy.clear();
    assert_round_trip(&mut client, b"after-clear-1");

    proxy.blackhole(Direction::ServerToClient);
    write(&mut client, b"lost-on-the-way-out");
    assert_quiet(&mut client);
    proxy.clear();
    assert_round_trip(&mut client, b"after-clear-2");

    proxy.blackhole(Direction::Both);
    write(&mut client, b"lost-both-ways");
    assert_quiet(&mut client);
    proxy.clear();
    assert_round_trip(&mut client, b"after-clear-3");
    assert_eq!(proxy.active_connections(), 1);
}

#[test]
fn proxy_stall_holds_bytes_until_cleared() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut client = connect(proxy.addr());
    assert_round_trip(&mut client, b"warm-up");

    proxy.stall();
    write(&mut client, b"held-");
    write(&mut client, b"in-order");
    assert_quiet(&mut client);
    proxy.clear();
    assert_eq!(read_exact_within(&mut client, 13), b"held-in-order");

    // Stalling only the reply direction: the echo server gets the bytes, we don't.
    proxy.stall_direction(Direction::ServerToClient);
    write(&mut client, b"reply-held");
    assert_quiet(&mut client);
    proxy.clear();
    assert_eq!(read_exact_within(&mut client, 10), b"reply-held");
}

#[test]
fn proxy_delay_slows_every_chunk() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut client = connect(proxy.addr());
    assert_round_trip(&mut client, b"warm-up");

    let delay = Duration::from_millis(150);
    proxy.set_delay(delay);
    let sent = Instant::now();
    assert_round_trip(&mut client, b"slow");
    let took = sent.elapsed();
    assert!(
        took >= 2 * delay,
        "round trip took {took:?}, expected >= {:?}",
        2 * delay
    );

    proxy.set_delay(Duration::ZERO);
    assert_round_trip(&mut client, b"fast");
}

#[test]
fn proxy_refuse_closes_new_connections_only() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut existing = connect(proxy.addr());
    assert_round_trip(&mut existing, b"before");

    proxy.refuse(true);
    let mut refused = connect(proxy.addr());
    assert_closed(&mut refused);
    assert_eq!(proxy.connections_refused(), 1);
    assert_round_trip(&mut existing, b"still-open");

    proxy.refuse(false);
    let mut accepted = connect(proxy.addr());
    assert_round_trip(&mut accepted, b"after");
    assert_eq!(proxy.connections_accepted(), 3);
}

#[test]
fn proxy_set_upstream_redirects_new_connections() {
    let first = EchoServer::start(b"A");
    let second = EchoServer::start(b"B");
    let proxy = Proxy::start(first.addr);
    let mut old = connect(proxy.addr());
    assert_eq!(read_exact_within(&mut old, 1), b"A");

    proxy.set_upstream(second.addr);
    assert_eq!(proxy.upstream(), second.addr);
    let mut new = connect(proxy.addr());
    assert_eq!(read_exact_within(&mut new, 1), b"B");
    assert_round_trip(&mut old, b"old-still-works");
}

#[test]
fn proxy_drop_closes_everything_and_returns() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let addr = proxy.addr();
    let mut idle = connect(addr);
    let mut stalled = connect(addr);
    assert_round_trip(&mut idle, b"idle");
    assert_round_trip(&mut stalled, b"stalled");
    proxy.stall();
    write(&mut stalled, b"stuck");
    proxy.set_delay(Duration::from_secs(3600));

    // Drop joins every proxy thread; do it on a helper thread so a hang fails the test.
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        drop(proxy);
        let _ = done_tx.send(());
    });
    done_rx
        .recv_timeout(PROMPT)
        .expect("dropping the proxy must not hang (a pump thread did not exit)");
    assert_closed(&mut idle);
    assert_closed(&mut stalled);
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "the listener must be closed"
    );
}

// ---------------------------------------------------------------------------
// Proxy with ZooKeeper framing: drop_reply_of_next
// ---------------------------------------------------------------------------

#[test]
fn proxy_passes_zookeeper_sessions_through() {
    let server = zk::shared();
    let proxy = Proxy::start(server.addr());
    let mut client = RawClient::connect(proxy.addr(), 10_000);
    assert_eq!(exists(&mut client, "/"), ErrorCode::Ok);
    assert_eq!(
        exists(&mut client, &unique_path("absent")),
        ErrorCode::NoNode
    );
    ping(&mut client);
    assert_eq!(proxy.replies_dropped(), 0);
}

#[test]
fn drop_reply_of_next_loses_the_reply_but_the_request_executes() {
    let server = zk::shared();
    let proxy = Proxy::start(server.addr());
    let path = unique_path("lost-reply");

    let mut client = RawClient::connect(proxy.addr(), 10_000);
    assert_eq!(exists(&mut client, &path), ErrorCode::NoNode);
    // An exists for another op type must not trigger the armed drop.
    proxy.drop_reply_of_next(OpCode::Create.code());
    assert_eq!(exists(&mut client, &path), ErrorCode::NoNode);

    // Send the create in small pieces so the proxy has to reassemble the frame.
    let request = encode(3, &create_request(&path, b"data"));
    for piece in request.chunks(5) {
        client
            .stream()
            .write_all(piece)
            .expect("sending a create piece");
        client.stream().flush().expect("flush");
        thread::sleep(Duration::from_millis(5)); // pacing, to split TCP segments
    }
    assert!(
        proxy.wait_reply_dropped(PROMPT),
        "the create's reply was never seen"
    );
    assert_closed(client.stream());
    assert_eq!(proxy.replies_dropped(), 1);

    // The server did execute it.
    let mut direct = RawClient::connect(server.addr(), 10_000);
    assert_eq!(
        exists(&mut direct, &path),
        ErrorCode::Ok,
        "the create was not executed"
    );

    // Pings work the same way, and the proxy keeps serving new connections.
    let mut client = RawClient::connect(proxy.addr(), 10_000);
    assert_eq!(exists(&mut client, &path), ErrorCode::Ok);
    proxy.drop_reply_of_next(OpCode::Ping.code());
    client.send(jute::xid::PING, &Request::Ping);
    assert!(
        proxy.wait_reply_dropped(PROMPT),
        "the ping's reply was never seen"
    );
    assert_closed(client.stream());
    assert_eq!(proxy.replies_dropped(), 2);
}

#[test]
fn clear_disarms_drop_reply_of_next() {
    let server = zk::shared();
    let proxy = Proxy::start(server.addr());
    proxy.drop_reply_of_next(OpCode::Exists.code());
    proxy.clear();
    assert!(
        proxy.wait_reply_dropped(Duration::ZERO),
        "nothing is armed any more"
    );
    let mut client = RawClient::connect(proxy.addr(), 10_000);
    assert_eq!(exists(&mut client, "/"), ErrorCode::Ok);
}

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
