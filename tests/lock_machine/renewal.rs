//! A client that opens a new session after its session expired, inside the
//! real core against the simulated server: what it tells the old
//! session's holders, waiters and listeners, and that the same
//! recipe values work on the new session.

use std::time::{Duration, Instant};

use zklock::recipes::{LockError, LockState, LossReason, Mutex};
use zklock::SessionState;

use zklock_sim::zookeeper as sim_zookeeper;

use crate::support::{pump, Peer};

/// The holder of the old session is told Lost (expired) before anything
/// of a new session exists; subscribers hear Expired, then Connecting and
/// Connected on a new id; the same `Mutex` then takes the lock on the new
/// session while the old guard stays Lost for good.
#[test]
fn an_expired_holder_is_lost_for_good_and_the_same_mutex_holds_on_the_new_session() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 11);
    pump(&mut zk, &mut [&mut p], now);
    let first = p.client.session_id();
    assert_ne!(first, 0);
    let m = Mutex::new(&p.client, "/renewed").unwrap();
    let waiter = Mutex::new(&p.client, "/renewed").unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let old = pending.try_take().expect("granted").unwrap();
    let queued = waiter.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    assert!(
        queued.try_take().is_none(),
        "the second waits behind the first"
    );
    let states = p.client.subscribe();
    pump(&mut zk, &mut [&mut p], now);
    assert_eq!(states.try_recv(), Ok(SessionState::Connected));
    let old_changes = old.state_changes();

    zk.expire_session(now, first);
    pump(&mut zk, &mut [&mut p], now);

    assert_eq!(old.state(), LockState::Lost);
    // The server deletes the session's nodes (and fires their watches)
    // before it drops the connection: the holder may hear either first.
    assert!(
        matches!(
            old.lost_reason(),
            Some(LossReason::SessionExpired | LossReason::NodeDeleted)
        ),
        "{:?}",
        old.lost_reason()
    );
    // The waiter failed, or (its blocker's deletion heard before its own)
    // was granted a node already gone: either way it does not hold.
    match queued.try_take() {
        Some(Err(LockError::SessionExpired)) => {}
        Some(Ok(g)) => assert_eq!(g.state(), LockState::Lost),
        other => panic!("the waiter of the old session: {other:?}"),
    }
    let heard: Vec<SessionState> = states.try_iter().collect();
    assert_eq!(
        heard,
        [
            // The server dropped the connection; the next handshake is
            // told the session expired.
            SessionState::Suspended,
            SessionState::Expired,
            SessionState::Connecting,
            SessionState::Connected
        ]
    );
    let second = p.client.session_id();
    assert!(
        second != 0 && second != first,
        "{first:#x} then {second:#x}"
    );
    assert_eq!(p.client.state(), SessionState::Connected);

    let again = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let new = again.try_take().expect("granted").unwrap();
    assert_eq!(new.state(), LockState::Held);
    assert_eq!(new.owner_session(), second);
    assert_eq!(old.state(), LockState::Lost, "never Held again");
    let told: Vec<LockState> = old_changes.try_iter().collect();
    // The state when asked, then one change: Lost, never Held again.
    assert_eq!(told, [LockState::Held, LockState::Lost]);
}

/// The one-session client of `new_session_after_expiry(false)`: after an
/// expiry it stays Expired, and every call fails so.
#[test]
fn a_one_session_client_ends_with_its_session() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::with_renewal(now, 3, false);
    pump(&mut zk, &mut [&mut p], now);
    let m = Mutex::new(&p.client, "/one").unwrap();
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("granted").unwrap();
    zk.expire_session(now, p.client.session_id());
    pump(&mut zk, &mut [&mut p], now);
    assert_eq!(guard.state(), LockState::Lost);
    assert_eq!(p.client.state(), SessionState::Expired);
    assert!(!p.core.wants_connection());
    let again = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    assert!(matches!(
        again.try_take(),
        Some(Err(LockError::SessionExpired))
    ));
}

/// Two expiries in a row: each one ends the session's holders, and the
/// client opens a third session that serves the same recipe.
#[test]
fn two_expiries_in_a_row_leave_a_working_third_session() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 12);
    pump(&mut zk, &mut [&mut p], now);
    let m = Mutex::new(&p.client, "/twice").unwrap();
    let mut seen = vec![p.client.session_id()];
    let mut guards = Vec::new();
    for _ in 0..2 {
        let pending = m.start_lock(None);
        pump(&mut zk, &mut [&mut p], now);
        guards.push(pending.try_take().expect("granted").unwrap());
        zk.expire_session(now, p.client.session_id());
        pump(&mut zk, &mut [&mut p], now);
        seen.push(p.client.session_id());
    }
    assert!(guards.iter().all(|g| g.state() == LockState::Lost));
    let mut distinct = seen.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "three sessions: {seen:x?}");
    let pending = m.start_lock(None);
    pump(&mut zk, &mut [&mut p], now);
    let guard = pending.try_take().expect("granted").unwrap();
    assert_eq!(guard.state(), LockState::Held);
}

/// Not early: a session the client itself gave up on (told Lost when no
/// answer came within its timeout) while the server still keeps it is
/// resumed on the next connection, not replaced: a new session is asked
/// for only once the server said the old one expired.
/// Kills: a new session asked for at the client's own Lost, before the
/// expiry is heard (the server's session, and its nodes, would outlive the
/// client's reach).
#[test]
fn a_session_lost_by_the_clients_clock_but_alive_at_the_server_is_resumed_not_renewed() {
    let now = Instant::now();
    let mut zk = sim_zookeeper::SimZooKeeper::new(now, Duration::from_millis(2000));
    let mut p = Peer::new(now, 5);
    pump(&mut zk, &mut [&mut p], now);
    let first = p.client.session_id();
    assert_ne!(first, 0);
    let states = p.client.subscribe();
    let conn = p.conn.take().expect("connected");
    zk.disconnect(now, conn);
    p.core.handle_disconnected(now);
    p.online = false;
    // Offline until the client's own clock says Lost.
    let mut at = now;
    while p.client.state() != SessionState::Lost {
        at += Duration::from_millis(10);
        assert!(at < now + Duration::from_secs(60), "told Lost in time");
        pump(&mut zk, &mut [&mut p], at);
    }
    assert!(
        zk.session_alive(first),
        "the server keeps the session a little longer (its expiry rounds up to a tick)"
    );
    p.online = true;
    pump(&mut zk, &mut [&mut p], at);
    assert_eq!(p.client.session_id(), first, "the same session");
    assert_eq!(p.client.state(), SessionState::Connected);
    let heard: Vec<SessionState> = states.try_iter().collect();
    assert!(!heard.contains(&SessionState::Expired), "{heard:?}");
}
