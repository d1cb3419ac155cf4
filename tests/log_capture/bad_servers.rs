//! Servers that misbehave on the wire: malformed bytes, a handshake never
//! answered.

use super::*;

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
