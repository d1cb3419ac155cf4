//! What a connect that got no session says: the servers it tried, the time
//! it waited and the last failure, typed and kept as the error's source.

use super::*;

use std::error::Error as _;

use zklock::{ConnectError, NoSession};

/// The `NoSession` in `r`, or a panic naming what came instead.
fn no_session(r: Result<Client, Error>) -> NoSession {
    match r {
        Err(Error::NoSession(ns)) => *ns,
        other => panic!("expected Error::NoSession, got {other:?}"),
    }
}

#[test]
fn a_closed_port_is_named_with_the_wait_and_the_refusal() {
    init();
    let port = testkit::free_ports(1)[0];
    let server = format!("127.0.0.1:{port}");
    let t = Duration::from_secs(1);
    let r = Client::connect(&server, t);
    let e = r.as_ref().map(|_| ()).unwrap_err().clone();
    let ns = no_session(r);
    assert_eq!(ns.servers, std::slice::from_ref(&server));
    assert_eq!(ns.addresses, [server.parse().unwrap()]);
    // It waited its whole time: a refused port may be a server starting.
    assert!(ns.waited >= t, "gave up after {:?}", ns.waited);
    match &ns.last {
        Some(ConnectError::Io { host, source }) => {
            assert_eq!(host, &server);
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("last failure: {other:?}"),
    }
    // "no ZooKeeper server reachable at 127.0.0.1:P within 1.0s: Connection
    // refused (os error 111)": the server once, then the cause.
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "no ZooKeeper server reachable at {server} within "
        )),
        "{text}"
    );
    assert!(text.contains("refused"), "{text}");
    assert_eq!(text.matches(&server).count(), 1, "{text}");
    // The chain: Error -> ConnectError -> io::Error.
    let cause = e.source().expect("the last failure is the source");
    let io = cause
        .source()
        .and_then(|s| s.downcast_ref::<Arc<std::io::Error>>())
        .expect("the io::Error under it");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_no_io_panic();
}

#[test]
fn servers_that_only_close_are_all_named_with_the_wait() {
    init();
    let (one, two) = (GarbageServer::closing(), GarbageServer::closing());
    let servers = [one.addr().to_string(), two.addr().to_string()];
    let t = Duration::from_secs(1);
    let r = Client::connect(&servers.join(","), t);
    let text = r.as_ref().map(|_| ()).unwrap_err().to_string();
    let ns = no_session(r);
    assert_eq!(ns.servers, servers);
    // Retried to the end: a member not serving yet closes like this.
    assert!(ns.waited >= t, "gave up after {:?}", ns.waited);
    assert!(one.accepted() > 0 && two.accepted() > 0, "both tried");
    match &ns.last {
        Some(ConnectError::ClosedBeforeHandshake { host }) => assert!(servers.contains(host)),
        other => panic!("last failure: {other:?}"),
    }
    assert!(
        text.contains(&format!("{} within", servers.join(",")))
            && text.contains("a TLS port reached without TLS, or a server not serving yet?"),
        "{text}"
    );
    assert_no_io_panic();
}

#[test]
fn a_silent_server_and_a_closed_port_are_both_named() {
    init();
    // Takes the TCP connection (the kernel does) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let closed = format!("127.0.0.1:{}", testkit::free_ports(1)[0]);
    let t = Duration::from_secs(2);
    let r = Client::builder(&format!("{silent_addr},{closed}"))
        .session_timeout(t)
        .connect_timeout(Duration::from_millis(300))
        .connect();
    let text = r.as_ref().map(|_| ()).unwrap_err().to_string();
    let ns = no_session(r);
    assert_eq!(ns.servers, [silent_addr.to_string(), closed.clone()]);
    assert!(ns.waited >= t, "gave up after {:?}", ns.waited);
    // Several servers: the last failure names its own.
    let last = ns.last.expect("a failure within 2 s");
    let host = match &last {
        ConnectError::Io { host, source } => {
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
            host.clone()
        }
        ConnectError::Other { host, reason } => {
            assert!(
                reason.starts_with("no answer to the session handshake within"),
                "{reason}"
            );
            host.clone()
        }
        other => panic!("last failure: {other:?}"),
    };
    assert!(host == silent_addr.to_string() || host == closed, "{host}");
    assert!(
        text.contains(&format!("{silent_addr},{closed} within"))
            && text.contains(&format!("; last: {host}: ")),
        "{text}"
    );
    drop(silent);
    assert_no_io_panic();
}

#[test]
fn a_server_that_talks_garbage_is_the_last_cause() {
    init();
    let garbage = GarbageServer::start();
    let server = garbage.addr().to_string();
    let ns = no_session(Client::connect(&server, Duration::from_secs(1)));
    assert_eq!(ns.servers, std::slice::from_ref(&server));
    match &ns.last {
        Some(ConnectError::Other { host, reason }) => {
            assert_eq!(host, &server);
            assert!(!reason.is_empty());
        }
        Some(ConnectError::Io { host, .. } | ConnectError::ClosedBeforeHandshake { host }) => {
            assert_eq!(host, &server)
        }
        other => panic!("last failure: {other:?}"),
    }
    assert_no_io_panic();
}

/// Kills: `Links::host` `==` → `!=` (a failure named another server's host
/// with its own port).
#[test]
fn each_failure_names_its_own_server() {
    init();
    let ports = testkit::free_ports(2);
    // Two loopback addresses, so that each host differs from the other.
    let servers = [
        format!("127.0.0.1:{}", ports[0]),
        format!("127.0.0.2:{}", ports[1]),
    ];
    let ns = no_session(Client::connect(&servers.join(","), Duration::from_secs(1)));
    match &ns.last {
        Some(ConnectError::Io { host, source }) => {
            assert!(servers.contains(host), "{host} is none of {servers:?}");
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("last failure: {other:?}"),
    }
    assert_no_io_panic();
}

/// Kills: `Driver::ended_because` emptied (a handshake that timed out was
/// reported as a connection that merely ended), and `Driver::act_on_core`'s
/// `!=` → `==` (a connection the session dropped was not reported at all).
#[test]
fn a_silent_server_is_named_with_the_handshake_it_never_answered() {
    init();
    // Takes the TCP connection (the kernel does) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = silent.local_addr().unwrap().to_string();
    let r = Client::builder(&server)
        .session_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_millis(300))
        .connect();
    let ns = no_session(r);
    match &ns.last {
        Some(ConnectError::Other { host, reason }) => {
            assert_eq!(host, &server);
            assert_eq!(
                reason, "no answer to the session handshake within 300ms",
                "{reason}"
            );
        }
        other => panic!("last failure: {other:?}"),
    }
    drop(silent);
    assert_no_io_panic();
}

/// Kills: `Driver::not_started` emptied (a connection the kernel refused to
/// start left the wait with no cause).
#[test]
fn a_connection_that_cannot_even_start_is_named_with_its_cause() {
    init();
    // TCP refuses a broadcast destination in connect() itself, before any
    // packet is sent: nothing leaves the machine.
    let server = "255.255.255.255:2181".to_owned();
    let ns = no_session(Client::connect(&server, Duration::from_secs(1)));
    assert_eq!(ns.servers, std::slice::from_ref(&server));
    match &ns.last {
        Some(ConnectError::Io { host, source }) => {
            assert_eq!(host, &server);
            assert_eq!(source.kind(), std::io::ErrorKind::NetworkUnreachable);
        }
        other => panic!("last failure: {other:?}"),
    }
    assert_no_io_panic();
}

/// A loopback listener whose accept queue is full, its address, and the one
/// connection that fills it: the kernel drops every further SYN, so a
/// connect to it stays half-open.
fn full_accept_queue() -> (socket2::Socket, std::net::SocketAddr, std::net::TcpStream) {
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&any.into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let queued = std::net::TcpStream::connect(addr).unwrap();
    (listener, addr, queued)
}

/// Kills: `Driver::check_connect_deadline` emptied, and its `>=` → `<`
/// (a TCP connection that never completed was never given up).
#[test]
fn a_tcp_connection_that_never_completes_is_given_up_at_the_connect_timeout() {
    init();
    let (listener, addr, _queued) = full_accept_queue();
    let server = addr.to_string();
    let ns = no_session(
        Client::builder(&server)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_millis(300))
            .connect(),
    );
    match &ns.last {
        Some(ConnectError::Other { host, reason }) => {
            assert_eq!(host, &server);
            assert_eq!(reason, "no TCP connection within 300ms", "{reason}");
        }
        other => panic!("last failure: {other:?}"),
    }
    drop(listener);
    assert_no_io_panic();
}

/// Kills: `Driver::maintain_connection`, its first `||` → `&&` (a turn
/// during a TCP handshake, such as a caller's request, abandoned the
/// connection under way and started another, so a slow handshake was never
/// given its connect timeout).
#[test]
fn requests_sent_while_connecting_leave_the_attempt_its_connect_timeout() {
    init();
    let (listener, addr, _queued) = full_accept_queue();
    let client = Client::builder(&addr.to_string())
        .session_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_millis(300))
        .request_timeout(Duration::from_millis(20))
        .wait_connected(false)
        .connect()
        .unwrap();
    let given_up = format!("connection to {addr} lost: connect timed out");
    let count = || {
        LOG_LINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|l| l.contains(&given_up))
            .count()
    };
    // Every request is a turn of the I/O thread while it connects.
    wait_until(
        "two attempts given up at their timeout",
        Duration::from_secs(10),
        || {
            assert!(client.exists("/").is_err(), "no server answers here");
            count() >= 2
        },
    );
    drop(client);
    drop(listener);
    assert_no_io_panic();
}

/// Connects to `junk` alone for two seconds (the session timeout and the
/// connect timeout): its address as the connect string, and what the
/// failed connect says.
fn tried_for_two_seconds(junk: &GarbageServer) -> (String, NoSession) {
    let server = junk.addr().to_string();
    let ns = no_session(
        Client::builder(&server)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .connect(),
    );
    assert!(junk.accepted() > 0, "{server} was never tried");
    (server, ns)
}

/// Kills, in `Driver::read`: the `WouldBlock` guard made `true` or its `==`
/// made `!=` (a reset read as "nothing more yet", the attempt left to its
/// handshake timeout), and the `Interrupted` guard made `true` or its `==`
/// made `!=` (a reset read again, and reported as a close).
#[test]
fn a_server_that_resets_the_connection_is_named_with_the_reset() {
    init();
    let (server, ns) = tried_for_two_seconds(&GarbageServer::resetting());
    match &ns.last {
        Some(ConnectError::Io { host, source }) => {
            assert_eq!(host, &server);
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionReset);
        }
        other => panic!("last failure: {other:?}"),
    }
    assert_no_io_panic();
}

/// Kills, in `Driver::read`, the test that a short read drained the
/// socket: `!` deleted before `peer_closed`, or either `&&` made `||`. Each
/// returns after a short read that came with the server's close, before
/// the read that meets the close; edge-triggered readiness never says it
/// again, so the attempt waits out its handshake timeout and is named
/// with that instead.
#[test]
fn a_server_that_closes_mid_frame_is_named_with_the_close() {
    init();
    let (server, ns) = tried_for_two_seconds(&GarbageServer::closing_mid_frame());
    match &ns.last {
        Some(ConnectError::ClosedBeforeHandshake { host }) => assert_eq!(host, &server),
        other => panic!("last failure: {other:?}"),
    }
    assert_no_io_panic();
}
