//! A server that is behind the zxid we have seen refuses our session; the
//! client must skip it, keep its session and find a server that has it.

use std::time::Duration;

use testkit::proxy::Proxy;
use testkit::zk::ZkServer;
use zklock::{Client, CreateMode, SessionState};

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn a_server_behind_our_zxid_is_skipped_and_the_session_kept() {
    let ours = ZkServer::start();
    let stale = ZkServer::start();
    // Two routes; the one to the stale server stays shut until our client
    // has a session (and a zxid) from `ours`.
    let to_ours = Proxy::start(ours.addr());
    let to_stale = Proxy::start(stale.addr());
    to_stale.refuse(true);
    let connect = format!("{},{}", to_ours.connect_string(), to_stale.connect_string());
    let c = Client::connect(&connect, Duration::from_secs(10)).unwrap();
    let states = c.subscribe();
    for i in 0..50 {
        c.create(&format!("/n{i}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    let id = c.session_id();
    let seen = c.last_zxid();
    assert!(seen > 50, "zxid {seen}");

    // Now only the stale server answers: it must refuse us (its last zxid
    // is lower than ours), and the client must not take a session from it.
    to_ours.refuse(true);
    to_stale.refuse(false);
    let attempts_before = to_stale.connections_accepted();
    to_ours.cut_all();
    testkit::wait_until("the stale server to be tried", WAIT, || {
        to_stale.connections_accepted() >= attempts_before + 2
    });
    assert_ne!(c.state(), SessionState::Connected);
    assert_eq!(c.session_id(), id);
    // Our server comes back: same session, our data.
    to_ours.refuse(false);
    c.wait_connected(WAIT).unwrap();
    assert_eq!(c.session_id(), id);
    assert!(c.exists("/n49").unwrap().is_some());
    let seen_states: Vec<SessionState> = states.try_iter().collect();
    assert!(
        !seen_states.contains(&SessionState::Expired),
        "{seen_states:?}"
    );
    // The stale server never granted us anything.
    let cons = stale.four_letter("cons");
    assert!(
        !cons.contains(&format!("sid=0x{id:x}")),
        "stale server holds our session: {cons}"
    );
    assert!(
        stale.log_tail(200).contains("Refusing session request"),
        "stale server did not refuse on zxid"
    );
}
