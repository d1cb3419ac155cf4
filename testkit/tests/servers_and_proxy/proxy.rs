//! The proxy against a plain echo server: cutting, blackholing, stalling,
//! delaying, refusing, redirecting, and dropping the proxy.

use super::*;

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

/// [`Proxy::cut_all`] ends a connection whatever its bytes wait for, a
/// stall (both ways) or a delay: both sides closed, nothing held
/// delivered, and no connection left open at the proxy (its threads
/// ended).
///
/// Kills: `Shared::notify` made `()` (a reader held by the stall slept on).
#[test]
fn cut_all_ends_connections_whose_bytes_are_held() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    assert_passes(&mut client, &mut server, b"warm-up");
    proxy.stall();
    if !cut_ends_a_held_connection(&proxy, &mut client, &mut server, b"held") {
        // Its drop would wait for the thread that never ends.
        std::mem::forget(proxy);
        panic!("a stalled connection is still open after the cut");
    }

    proxy.clear();
    proxy.set_delay(Duration::from_secs(3600));
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    if !cut_ends_a_held_connection(&proxy, &mut client, &mut server, b"delayed") {
        std::mem::forget(proxy);
        panic!("a delayed connection is still open after the cut");
    }
}

/// Bytes written both ways on a connection whose bytes `proxy` holds
/// arrive nowhere; `cut_all` then closes both sides, and whether the
/// proxy's connection ended in time.
fn cut_ends_a_held_connection(
    proxy: &Proxy,
    client: &mut TcpStream,
    server: &mut TcpStream,
    what: &[u8],
) -> bool {
    write(client, what);
    write(server, what);
    assert_quiet(server);
    assert_quiet(client);
    proxy.cut_all();
    assert_closed(client);
    assert_closed(server);
    poll_until(PROMPT, || proxy.active_connections() == 0)
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

/// A client that goes away with a reset (it closes with bytes unread)
/// ends its connection at the proxy: the server hears the end, and no
/// connection is left open.
///
/// Kills: `read_in`, the `Interrupted` guard made `true` and its `==` →
/// `!=` (the reset read again as an end, the server's way left open).
#[test]
fn a_client_reset_ends_the_connection_on_both_sides() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    assert_passes(&mut client, &mut server, b"warm-up");
    write(&mut server, b"never read");
    let mut unread = [0u8; 1];
    assert_eq!(client.peek(&mut unread).expect("the bytes are there"), 1);
    // Closed with bytes unread: TCP sends a reset, not an end.
    drop(client);
    assert_closed(&mut server);
    assert!(
        poll_until(PROMPT, || proxy.active_connections() == 0),
        "the reset connection is still open"
    );
}

/// A black hole drops the bytes already on their way through a delay too,
/// when they would leave, and counts none of them as forwarded.
///
/// Kills: `Shared::blackholed` made `false`.
#[test]
fn a_blackhole_drops_what_is_on_its_way_through_a_delay() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    assert_passes(&mut client, &mut server, b"warm-up");
    let forwarded = proxy.bytes_forwarded(Direction::Both);

    proxy.set_delay(Duration::from_secs(3600));
    write(&mut client, b"lost-in");
    write(&mut server, b"lost-out");
    assert_quiet(&mut server);
    proxy.blackhole(Direction::Both);
    // Due now, into the black hole.
    proxy.set_delay(Duration::ZERO);
    assert_quiet(&mut server);
    assert_quiet(&mut client);
    assert_eq!(proxy.bytes_forwarded(Direction::Both), forwarded);
    proxy.clear();
    assert_passes(&mut client, &mut server, b"after-in");
    assert_passes(&mut server, &mut client, b"after-out");
}

/// A half-close travels like the bytes before it: after them, one way
/// only (the other way still flows, and ends on its own), and a black hole
/// drops it (the far side then hears nothing, not an end).
///
/// A half-closed connection is still open, and `cut_all` closes it.
///
/// Kills: `write_out`, `delete !` before `blackholed` (a black hole passed
/// the end on); `read_in`, `&&` → `||` in the end's test for a doomed
/// reply (a server's half-close closed both ways); `pump_done`, `==` →
/// `!=` (the first pump to end let go of the connection, which `cut_all`
/// then left open).
#[test]
fn a_half_close_goes_one_way_after_the_bytes_before_it() {
    use std::net::Shutdown;
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);

    // The server ends first; the client still talks, then ends too.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    write(&mut server, b"last-words");
    server
        .shutdown(Shutdown::Write)
        .expect("the server's half-close");
    assert_eq!(read_exact_within(&mut client, 10), b"last-words");
    assert_closed(&mut client);
    assert_passes(&mut client, &mut server, b"after-your-end");
    assert_eq!(proxy.active_connections(), 1);
    client
        .shutdown(Shutdown::Write)
        .expect("the client's half-close");
    assert_closed(&mut server);

    // Half-closed, then cut: the way still open closes too.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    server
        .shutdown(Shutdown::Write)
        .expect("the server's half-close");
    assert_closed(&mut client);
    proxy.cut_all();
    assert_closed(&mut server);
    assert!(
        poll_until(PROMPT, || proxy.active_connections() == 0),
        "a cut connection is still open"
    );

    // Under a black hole toward the server, the client's end is lost.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    proxy.blackhole(Direction::ClientToServer);
    client
        .shutdown(Shutdown::Write)
        .expect("the client's half-close");
    assert_quiet(&mut server);
    proxy.clear();
    assert_passes(&mut server, &mut client, b"still-open");
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

/// [`Proxy::clear`] delivers at once, and in order, what a delay and a
/// stall hold; so does a zero delay, each time it is set.
///
/// Kills: `Proxy::clear`, the field `flushes` deleted and `+` → `*` in it
/// (cleared bytes waited out their delay); `Proxy::set_delay`, `+=` → `*=`
/// (a zero delay after a clear did not flush).
#[test]
fn clear_and_a_zero_delay_deliver_what_is_on_its_way_at_once() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut client = connect(proxy.addr());
    assert_round_trip(&mut client, b"warm-up");
    // Longer than any test: bytes that wait it out never come back.
    let long = Duration::from_secs(3600);

    proxy.set_delay(long);
    write(&mut client, b"delayed");
    assert_quiet(&mut client);
    proxy.stall();
    write(&mut client, b"-then-stalled");
    assert_quiet(&mut client);
    proxy.clear();
    assert_eq!(read_exact_within(&mut client, 20), b"delayed-then-stalled");

    for bytes in [&b"once"[..], b"and-again"] {
        proxy.set_delay(long);
        write(&mut client, bytes);
        assert_quiet(&mut client);
        proxy.set_delay(Duration::ZERO);
        assert_eq!(read_exact_within(&mut client, bytes.len()), bytes);
    }
}

/// Kills: `Proxy::connections_refused` made `1` (none refused before `refuse`).
#[test]
fn proxy_refuse_closes_new_connections_only() {
    let upstream = EchoServer::start(b"");
    let proxy = Proxy::start(upstream.addr);
    let mut existing = connect(proxy.addr());
    assert_round_trip(&mut existing, b"before");
    assert_eq!(proxy.connections_refused(), 0);

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
