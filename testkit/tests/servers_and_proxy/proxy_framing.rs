//! The proxy with ZooKeeper framing: sessions pass through, and
//! `drop_reply_of_next` loses one reply while the request executes.

use super::*;

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

/// The proxy names the newest session a server granted through it, with
/// its password, timeout and server, by the time the client reads it.
///
/// Kills: `Proxy::last_handshake` made `None`; `Shared::saw_handshake`
/// made `()`.
#[test]
fn last_handshake_is_the_newest_session_granted_through_the_proxy() {
    let server = zk::shared();
    let proxy = Proxy::start(server.addr());
    assert_eq!(proxy.last_handshake(), None, "a session before any client");
    for timeout_ms in [10_000, 12_000] {
        let client = RawClient::connect(proxy.addr(), timeout_ms);
        let granted = client.session();
        let seen = proxy.last_handshake().expect("the session granted");
        assert_eq!(seen.session_id, granted.session_id);
        assert_eq!(seen.password, granted.passwd);
        assert_eq!(
            seen.timeout,
            Duration::from_millis(granted.timeout_ms as u64)
        );
        assert_eq!(seen.server, server.addr());
    }
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

/// The op type the framing tests arm their faults on (ZooKeeper's exists).
const EXISTS: i32 = 3;
/// Another op type (getData).
const GET_DATA: i32 = 4;

/// A request whose first bytes had gone through when `drop_reply_of_next`
/// was armed is not the next request: its reply comes back, and the next
/// request of that type loses its reply and closes the connection.
///
/// Kills: `FrameScanner::feed`, `<` → `<=` in the header's copy (the rest
/// of a frame's body, read later, announced its header again).
#[test]
fn a_request_half_through_when_a_drop_is_armed_keeps_its_reply() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let (mut client, mut server) = tapped(&proxy, &tap);

    let request = request_frame(1, EXISTS, b"/half-way");
    let (head, rest) = request.split_at(14);
    write(&mut client, head);
    // The server has it, so the proxy has framed it.
    assert_eq!(read_exact_within(&mut server, head.len()), head);
    proxy.drop_reply_of_next(EXISTS);
    write(&mut client, rest);
    assert_eq!(read_exact_within(&mut server, rest.len()), rest);
    let reply = reply_frame(1, 7, b"stat");
    write(&mut server, &reply);
    assert_eq!(
        read_exact_within(&mut client, reply.len()),
        reply,
        "the reply to the request under way was lost"
    );
    assert_eq!(proxy.replies_dropped(), 0);

    // The next exists is the one.
    let next = request_frame(2, EXISTS, b"/next");
    write(&mut client, &next);
    assert_eq!(read_exact_within(&mut server, next.len()), next);
    write(&mut server, &reply_frame(2, 8, b"stat"));
    assert!(
        proxy.wait_reply_dropped(PROMPT),
        "the next reply was not dropped"
    );
    assert_closed(&mut client);
    assert_closed(&mut server);
    assert_eq!(proxy.replies_dropped(), 1);
}

/// The hello of one version, a server id, then `address` after its length.
fn election_hello(version: i64, sid: i64, address: &[u8]) -> Vec<u8> {
    let mut hello = version.to_be_bytes().to_vec();
    hello.extend_from_slice(&sid.to_be_bytes());
    hello.extend_from_slice(&(address.len() as i32).to_be_bytes());
    hello.extend_from_slice(address);
    hello
}

/// An election link passes each member's hello on with its address made
/// the wildcard, in both versions ZooKeeper speaks: once the whole hello
/// is in (nothing of it before; the hello alone, or with what follows it,
/// which passes as it is), and a hello whose version it does not know
/// (before 3.5, the server id alone) unchanged and at once.
///
/// Kills: `ElectionHello::rewrite` (every mutant: the replaced results,
/// the versions' `-` deleted, `&&` and `!=` in the version check, `<` in
/// each of the three length checks and `+` in the last two).
#[test]
fn an_election_link_rewrites_the_hello_address_as_the_wildcard_once_whole() {
    let tap = Tap::start();
    let proxy = Proxy::start_election_link(tap.addr);
    const V1: i64 = -65536;
    const V2: i64 = -65535;
    let address = b"127.0.0.1:3888";
    let rewritten = |version: i64, sid: i64| election_hello(version, sid, b"0.0.0.0:0");

    // Version 1, in pieces: within the version, within the length, within
    // the address; the last byte comes with what follows the hello.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    let hello = election_hello(V1, 1, address);
    for piece in [&hello[..5], &hello[5..18], &hello[18..hello.len() - 1]] {
        write(&mut client, piece);
        assert_quiet(&mut server);
    }
    let after = b"\0\0\0\x01notification";
    let mut last = vec![hello[hello.len() - 1]];
    last.extend_from_slice(after);
    write(&mut client, &last);
    let expected = rewritten(V1, 1);
    assert_eq!(read_exact_within(&mut server, expected.len()), expected);
    assert_eq!(read_exact_within(&mut server, after.len()), after);
    assert_eq!(proxy.hellos_rewritten(), 1);
    // Past the hello, bytes pass as they are.
    let more = election_hello(V1, 1, address);
    write(&mut client, &more);
    assert_eq!(read_exact_within(&mut server, more.len()), more);

    // Version 2, the hello alone and nothing after it.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    write(&mut client, &election_hello(V2, 2, address));
    let expected = rewritten(V2, 2);
    assert_eq!(read_exact_within(&mut server, expected.len()), expected);
    assert_eq!(proxy.hellos_rewritten(), 2);

    // A hello that names no address is whole after its length.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    write(&mut client, &election_hello(V2, 3, b""));
    let expected = rewritten(V2, 3);
    assert_eq!(read_exact_within(&mut server, expected.len()), expected);
    assert_eq!(proxy.hellos_rewritten(), 3);

    // The server id alone, as before 3.5: unchanged, without waiting for more.
    let mut client = connect(proxy.addr());
    let mut server = tap.accept();
    let old = 4i64.to_be_bytes();
    write(&mut client, &old);
    assert_eq!(read_exact_within(&mut server, old.len()), old);
    assert_passes(&mut client, &mut server, b"as it is");
}

/// `hold_requests_after_reply_of_next`: the armed request, and what is
/// sent before its reply, go through; the reply is delivered, and from
/// then on what the client sends is held (the server's bytes still flow)
/// until `clear`, which delivers it. Each arming is awaited once, and a
/// clear disarms one not yet taken.
///
/// Kills: `Proxy::hold_requests_after_reply_of_next` (made `()`, `+=` →
/// `-=`, `*=`); `Proxy::wait_requests_held` (made `true`, `false`, `>=` →
/// `<`); `Proxy::clear`, the fields `holds_requested` and `holds_done`
/// deleted and `-` → `+`, `/` in the first.
#[test]
fn hold_requests_after_reply_of_next_holds_what_follows_the_reply_until_clear() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let (mut client, mut server) = tapped(&proxy, &tap);

    proxy.hold_requests_after_reply_of_next(EXISTS);
    assert!(
        !proxy.wait_requests_held(Duration::ZERO),
        "held before any request"
    );
    // Another op type, and its reply, go through.
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(1, GET_DATA, b"/other"),
    );
    assert_passes(&mut server, &mut client, &reply_frame(1, 1, b"data"));
    // So do the armed request and one sent before its reply.
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(2, EXISTS, b"/armed"),
    );
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(3, GET_DATA, b"/before"),
    );
    assert!(
        !proxy.wait_requests_held(Duration::ZERO),
        "held before the reply"
    );
    // The reply reaches the client; what the client sends after it does not
    // reach the server, while the server's way still flows.
    assert_passes(&mut server, &mut client, &reply_frame(2, 2, b"stat"));
    assert!(proxy.wait_requests_held(PROMPT), "not held after the reply");
    let held = request_frame(4, GET_DATA, b"/held");
    write(&mut client, &held);
    assert_quiet(&mut server);
    assert_passes(&mut server, &mut client, &reply_frame(3, 3, b"data"));
    proxy.clear();
    assert_eq!(read_exact_within(&mut server, held.len()), held);
    assert!(
        proxy.wait_requests_held(Duration::ZERO),
        "the clear left a hold awaited"
    );

    // Armed again, it is awaited again; cleared before its request, it is
    // awaited no more and holds nothing.
    proxy.hold_requests_after_reply_of_next(EXISTS);
    assert!(
        !proxy.wait_requests_held(Duration::ZERO),
        "the second arming counted as held"
    );
    proxy.clear();
    assert!(
        proxy.wait_requests_held(Duration::ZERO),
        "a cleared arming is still awaited"
    );
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(5, EXISTS, b"/disarmed"),
    );
    assert_passes(&mut server, &mut client, &reply_frame(5, 5, b"stat"));
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(6, GET_DATA, b"/not-held"),
    );
    assert_eq!(proxy.active_connections(), 1);
}

/// `drop_reply_of_next` is awaited once per arming, and its drops stay
/// counted across `clear`: a clear after a drop awaits nothing and keeps
/// the count, an arming after it is awaited until its own reply is dropped,
/// and `wait_reply_dropped` waits for a drop still under way.
///
/// Kills: `Proxy::clear`, the fields `drops_requested` and `drops_done`
/// deleted; `Proxy::wait_faults` (`>=` → `<` in the deadline, `+` → `-`
/// in it, made `false`); `Proxy::wait_reply_dropped` (made `true`, `false`).
#[test]
fn replies_dropped_are_counted_across_clear_and_waited_for() {
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let (mut client, mut server) = tapped(&proxy, &tap);
    proxy.drop_reply_of_next(EXISTS);
    assert!(
        !proxy.wait_reply_dropped(Duration::ZERO),
        "dropped before any request"
    );
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(1, EXISTS, b"/lost"),
    );
    write(&mut server, &reply_frame(1, 1, b"stat"));
    assert!(
        proxy.wait_reply_dropped(PROMPT),
        "the reply was not dropped"
    );
    assert_closed(&mut client);
    assert_eq!(proxy.replies_dropped(), 1);

    proxy.clear();
    assert_eq!(
        proxy.replies_dropped(),
        1,
        "the clear forgot a dropped reply"
    );
    assert!(
        proxy.wait_reply_dropped(Duration::ZERO),
        "the clear left a drop awaited"
    );

    // Armed again, awaited until the reply comes, which the delay keeps
    // under way while the wait begins.
    proxy.drop_reply_of_next(EXISTS);
    assert!(
        !proxy.wait_reply_dropped(Duration::ZERO),
        "the new arming counted as done"
    );
    let (mut client, mut server) = tapped(&proxy, &tap);
    proxy.set_delay(Duration::from_millis(300));
    let request = request_frame(2, EXISTS, b"/lost-again");
    let answering = thread::spawn(move || {
        assert_eq!(read_exact_within(&mut server, request.len()), request);
        write(&mut server, &reply_frame(2, 2, b"stat"));
        server
    });
    write(&mut client, &request_frame(2, EXISTS, b"/lost-again"));
    assert!(
        proxy.wait_reply_dropped(PROMPT),
        "the second reply was not dropped"
    );
    assert_eq!(proxy.replies_dropped(), 2);
    let mut server = answering.join().expect("the server side");
    assert_closed(&mut client);
    assert_closed(&mut server);
}

/// A server that ends the connection after a doomed request, without its
/// reply: the client hears nothing of it but a disconnect, both sides are
/// closed, and no reply counts as dropped.
///
/// Kills: `Conn::doomed_xid_is_set` made `false` (the server's end went on
/// as a half-close, the client's way left open).
#[test]
fn a_server_ending_before_the_doomed_reply_closes_both_sides() {
    use std::net::Shutdown;
    let tap = Tap::start();
    let proxy = Proxy::start(tap.addr);
    let (mut client, mut server) = tapped(&proxy, &tap);
    proxy.drop_reply_of_next(EXISTS);
    assert_passes(
        &mut client,
        &mut server,
        &request_frame(1, EXISTS, b"/unanswered"),
    );
    write(&mut server, &reply_frame(-1, 1, b"a watch event"));
    server
        .shutdown(Shutdown::Write)
        .expect("the server's half-close");
    assert_closed(&mut client);
    assert_closed(&mut server);
    assert_eq!(proxy.replies_dropped(), 0);
    assert!(
        poll_until(PROMPT, || proxy.active_connections() == 0),
        "the connection is still open"
    );
}
