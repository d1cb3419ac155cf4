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
