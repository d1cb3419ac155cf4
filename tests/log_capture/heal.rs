//! After the network heals (docs/PARTITION.md): a client whose session
//! lives is Connected again within `connect_timeout + 2 s + n × (round
//! trip + lag)`, `n` the servers in its connect string, whatever its
//! attempts met meanwhile. The simulator holds the same bound as A5; this
//! is the driver's half: its pause between rounds, its handshake limit.

use super::*;

/// A round trip to a loopback server, lag included, with room for a busy
/// machine (the bound's `round trip + lag`).
const ROUND_TRIP: Duration = Duration::from_millis(500);

#[test]
fn after_the_network_heals_a_live_session_is_connected_again_within_the_stated_bound() {
    init();
    let server = fast();
    let proxies: Vec<Proxy> = (0..3).map(|_| Proxy::start(server.addr())).collect();
    let hosts: Vec<String> = proxies.iter().map(|p| p.addr().to_string()).collect();
    let connect_timeout = Duration::from_millis(1500);
    let c = Client::builder(&hosts.join(","))
        .session_timeout(Duration::from_secs(10))
        .connect_timeout(connect_timeout)
        .connect()
        .unwrap();
    let id = c.session_id();
    let mut states = States::of(&c);
    assert_eq!(states.current(), SessionState::Connected);

    // The partition, first as refused connections: every attempt fails at
    // once, so the driver goes round the hosts and its pause between
    // rounds grows (four rounds: 50 ms doubling, with jitter).
    for p in &proxies {
        p.refuse(true);
    }
    for p in &proxies {
        p.cut_all();
    }
    states.wait_for(SessionState::Suspended, Duration::from_secs(5));
    let refused = || proxies.iter().map(Proxy::connections_refused).sum::<u64>();
    wait_until(
        "four rounds of refused attempts",
        Duration::from_secs(5),
        || refused() >= 12,
    );
    // Then silent: an attempt is accepted and its handshake goes nowhere,
    // so the heal finds it waiting out its handshake limit (or pausing).
    let accepted = || proxies.iter().map(Proxy::connections_accepted).sum::<u64>();
    let before = accepted();
    for p in &proxies {
        p.blackhole(Direction::Both);
        p.refuse(false);
    }
    wait_until(
        "an attempt stuck in a silent handshake",
        Duration::from_secs(5),
        || accepted() > before,
    );

    for p in &proxies {
        p.clear();
    }
    let bound = connect_timeout + Duration::from_secs(2) + 3 * ROUND_TRIP;
    // A session the partition outlived would show Expired here, not
    // Connected (the wait fails and lists the states seen).
    let took = states.wait_for(SessionState::Connected, bound);
    assert_eq!(c.session_id(), id, "the same session, resumed");
    assert!(
        took <= bound,
        "Connected {took:?} after the heal (bound {bound:?})"
    );
    // And it serves.
    c.exists("/").unwrap();
    assert_no_io_panic();
}
