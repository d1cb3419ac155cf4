//! Faults on one client's link to a standalone server ([`ClientLink`]).

use std::sync::OnceLock;

use zklock_test::{ClientLink, ZkOptions, ZkServer};

use super::*;

/// The session timeout of the holders here, unless a test says otherwise.
const T: Duration = Duration::from_secs(4);
/// For a holder that must get its session back after `3T/4` without a
/// word: the longest the server allows (20 ticks), for the widest margin
/// between the heal and the server's expiry.
const LONG_T: Duration = Duration::from_secs(10);

/// One server for this file's tests, each on lock paths of its own; a short
/// tick, so that sessions may be as short as 1 s and expire on time.
fn server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| ZkServer::start_with_options(&ZkOptions::new().tick_ms(500)))
}

/// A holder connected through a link of its own, the link's `fault`, and
/// once the guard says Suspended, `heal`: the guard must say Held again, on
/// the same session, and nobody else can take the lock meanwhile.
fn suspended_then_held_again(
    path: &str,
    timeout: Duration,
    fault: impl FnOnce(&ClientLink),
    heal: impl FnOnce(&ClientLink),
) {
    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), timeout, path);
    let session = client.session_id();
    let mut states = States::of(&guard);

    fault(&link);
    states.wait_for(LockState::Suspended);
    heal(&link);
    states.wait_for(LockState::Held);
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Held]
    );
    assert_eq!(client.session_id(), session, "the session survived");
    assert!(!lock_is_free(&server().connect_string(), path));
}

#[test]
fn a_dropped_connection_suspends_the_holder_then_it_holds_again() {
    // The client reconnects by itself: nothing to heal.
    suspended_then_held_again("/session/drop", T, ClientLink::drop_connections, |_| {});
}

/// `drop_connections`' times, as its table says: `Suspended` at once (a
/// quarter of `T` at most, where a holder that missed the close would wait
/// for its read timeout, `2T/3`, or the leader check, `3T/4`), and `Held`
/// again well within `T` (half of it).
#[test]
fn a_dropped_connection_suspends_at_once_and_holds_again_well_within_the_timeout() {
    let link = ClientLink::start(&server().connect_string());
    let (_client, guard) = holder(&link.connect_string(), T, "/session/drop-times");
    let mut states = States::of(&guard);
    let dropped = Instant::now();
    link.drop_connections();
    let suspended = states.wait_for_after(LockState::Suspended, dropped);
    assert!(suspended <= T / 4, "Suspended {suspended:?} after the drop");
    let held = states.wait_for_after(LockState::Held, dropped);
    assert!(held <= T / 2, "Held again {held:?} after the drop");
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Held]
    );
}

#[test]
fn an_expired_session_loses_the_lock_and_frees_it_at_once() {
    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), T, "/session/expire");
    assert_eq!(
        link.last_session().map(|s| s.session_id),
        Some(client.session_id())
    );
    let mut states = States::of(&guard);

    link.expire_session();
    // The node went with the session, before the holder may know.
    assert!(lock_is_free(&server().connect_string(), "/session/expire"));
    states.wait_for(LockState::Lost);
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Lost]
    );
    assert_lost(&guard, LossReason::SessionExpired);
}

/// `expire_session`'s `# Errors`: a session the server does not know, a
/// made-up id or a live one with a wrong password, is `NotFound` (not
/// retried into another error), and the live session is left alone. With
/// the right password the call ends the session, its node with it, and
/// asked again the session is gone: `NotFound`.
#[test]
fn expiring_an_unknown_session_or_with_a_wrong_password_is_not_found() {
    let addr = server().addr();
    let err = zklock_test::expire_session(addr, 0x7a6b_0000_0000_0001, &[0; 16])
        .expect_err("a made-up session");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");

    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), T, "/session/expire-errors");
    let seen = link.last_session().expect("the link saw the handshake");
    assert_eq!(seen.session_id, client.session_id());
    let mut wrong = seen.password.clone();
    wrong[0] ^= 1;
    let err =
        zklock_test::expire_session(addr, seen.session_id, &wrong).expect_err("a wrong password");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    assert!(!lock_is_free(
        &server().connect_string(),
        "/session/expire-errors"
    ));

    let mut states = States::of(&guard);
    zklock_test::expire_session(addr, seen.session_id, &seen.password).expect("expiring it");
    assert!(lock_is_free(
        &server().connect_string(),
        "/session/expire-errors"
    ));
    states.wait_for(LockState::Lost);
    let err = zklock_test::expire_session(addr, seen.session_id, &seen.password)
        .expect_err("an expired session");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
}

#[test]
fn an_expired_session_suspends_the_holder_at_once_and_loses_it_at_once_after() {
    let link = ClientLink::start(&server().connect_string());
    let (_client, guard) = holder(&link.connect_string(), T, "/session/expire-times");
    let mut states = States::of(&guard);
    // Not early: nothing changes before the fault is asked for.
    assert_eq!(states.next_within(Duration::ZERO), None);

    let asked = Instant::now();
    link.expire_session();
    // Not late: the server closed the connection, and the client, which
    // reconnects at once, hears the expiry in its first answer.
    let suspended = states.wait_for_after(LockState::Suspended, asked);
    assert_at_once("Suspended after expire_session", suspended, T);
    let lost = states.wait_for_after(LockState::Lost, asked);
    assert_at_once("Lost after expire_session", lost, T);
    assert_lost(&guard, LossReason::SessionExpired);
}

#[test]
fn a_stall_healed_in_time_suspends_then_holds_again() {
    suspended_then_held_again(
        "/session/stall-healed",
        LONG_T,
        ClientLink::stall,
        ClientLink::heal,
    );
}

/// The stall's row of the fault table, timed through the link: the
/// holder's last proof of life is at most `T/2` and a round trip old when
/// the stall begins (docs/PARTITION.md in zklock's repository), so it says
/// Suspended between `T/4` and `3T/4` after (`3T/4` past that proof, or the
/// read timeout's `2T/3` past the last reply, whichever comes first) and
/// Lost between `T/2` and `T` after. The late sides allow `T/8` for a busy
/// machine's scheduling; the early sides allow a loopback round trip.
#[test]
fn a_stall_past_the_session_timeout_loses_the_lock() {
    let link = ClientLink::start(&server().connect_string());
    let (_client, guard) = holder(&link.connect_string(), T, "/session/stall-long");
    let mut states = States::of(&guard);

    let stalled = Instant::now();
    link.stall();
    let suspended = states.wait_for_after(LockState::Suspended, stalled);
    let lost = states.wait_for_after(LockState::Lost, stalled);
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Lost]
    );
    assert_lost(&guard, LossReason::NoContact);
    let round_trip = Duration::from_millis(100);
    assert_between(
        "Suspended after the stall",
        suspended,
        T / 4 - round_trip,
        T * 3 / 4 + T / 8,
    );
    assert_between("Lost after the stall", lost, T / 2 - round_trip, T + T / 8);
    // The server, hearing nothing, expires the session by its own clock;
    // then the lock is free. (Healed before that, the session would live
    // on, and the node would stay until the guard goes: a Lost the client
    // decided never hands the lock on while its guard is kept.)
    zklock_test::wait_until("the server to expire the session", WAIT, || {
        lock_is_free(&server().connect_string(), "/session/stall-long")
    });
    link.heal();
    assert_eq!(guard.state(), LockState::Lost, "Lost is final");
}

#[test]
fn a_blackhole_healed_in_time_suspends_then_holds_again() {
    suspended_then_held_again(
        "/session/blackhole",
        LONG_T,
        ClientLink::blackhole,
        ClientLink::heal,
    );
}

#[test]
fn a_short_delay_leaves_the_holder_held() {
    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), T, "/session/delay");
    let mut states = States::of(&guard);

    link.delay(Duration::from_millis(50));
    // Requests still go through, only later; the leader check keeps
    // proving the session, so for a whole session timeout nothing changes.
    client
        .exists("/session")
        .expect("a read through the delayed link");
    states.assert_quiet_for(T);
    assert_eq!(guard.state(), LockState::Held);
    link.heal();
}

/// Refused, a dropped holder cannot reconnect: it stays Suspended, with
/// no connection through the link, until the server accepts again, then
/// holds on the same session.
#[test]
fn a_refusing_server_keeps_a_dropped_holder_suspended_until_it_accepts() {
    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), LONG_T, "/session/refuse");
    let session = client.session_id();
    let mut states = States::of(&guard);

    link.refuse(true);
    link.drop_connections();
    states.wait_for(LockState::Suspended);
    // Long before LONG_T's Lost, and long enough for several reconnects
    // (the driver's pause after a failed round is at most 2 s).
    states.assert_quiet_for(LONG_T / 4);
    assert!(
        link.proxies().iter().all(|p| p.active_connections() == 0),
        "a connection got through a refusing link"
    );
    link.refuse(false);
    states.wait_for(LockState::Held);
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Held]
    );
    assert_eq!(client.session_id(), session, "the session survived");
    assert!(!lock_is_free(&server().connect_string(), "/session/refuse"));
}

/// `refuse` turns away new connections only: a holder connected before
/// it stays Held on its session for longer than a session timeout, and
/// the lock stays its own.
#[test]
fn a_refusing_link_leaves_a_connected_holder_held() {
    let link = ClientLink::start(&server().connect_string());
    let (client, guard) = holder(&link.connect_string(), T, "/session/refuse-connected");
    let session = client.session_id();
    let mut states = States::of(&guard);

    link.refuse(true);
    states.assert_quiet_for(T + T / 2);
    assert_eq!(states.seen, [LockState::Held]);
    assert_eq!(client.session_id(), session);
    assert!(!lock_is_free(
        &server().connect_string(),
        "/session/refuse-connected"
    ));
    link.refuse(false);
}

#[test]
fn a_server_killed_and_restarted_in_time_gives_the_holder_its_lock_back() {
    let server = ZkServer::start_with_options(&ZkOptions::new().tick_ms(500));
    let (client, guard) = holder(&server.connect_string(), LONG_T, "/session/restart");
    let session = client.session_id();
    let mut states = States::of(&guard);

    server.stop();
    states.wait_for(LockState::Suspended);
    server.restart();
    states.wait_for(LockState::Held);
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Held]
    );
    assert_eq!(client.session_id(), session);
}
