//! Faults on an ensemble under a holder: members killed and restarted, a
//! follower cut off from the leader silently or with resets, then healed.

use zklock_test::{ClientLink, LinkState, ZkEnsemble, ZkOptions};

use super::*;

/// Long enough that a holder moves to another member, or waits out an
/// election, before it must give up on its session, even on a loaded
/// machine.
const T: Duration = Duration::from_secs(15);
/// A holder that must give up on its session within a test.
const SHORT_T: Duration = Duration::from_secs(4);

/// The ensemble's tick, and how many ticks a follower waits for a word
/// from a silent leader before it gives up (`syncLimit`).
const TICK: Duration = Duration::from_millis(1000);
const SYNC_LIMIT: u32 = 2;

/// Three members whose member links can be cut.
fn ensemble() -> ZkEnsemble {
    ZkEnsemble::start_with_links(
        3,
        &ZkOptions::new().tick_ms(TICK.as_millis() as u64),
        SYNC_LIMIT,
    )
}

/// A holder connected through `link` to member `member` first: the other
/// members refuse it until it holds, then it may move to any of them.
fn holder_on(link: &ClientLink, member: usize, path: &str) -> (Client, LockGuard) {
    for (i, proxy) in link.proxies().iter().enumerate() {
        proxy.refuse(i != member);
    }
    let held = holder(&link.connect_string(), T, path);
    link.refuse(false);
    assert_eq!(member_of(link), Some(member));
    held
}

/// The member the link's one client is connected to now.
fn member_of(link: &ClientLink) -> Option<usize> {
    link.proxies()
        .iter()
        .position(|proxy| proxy.active_connections() > 0)
}

#[test]
fn a_follower_cut_off_from_the_leader_silently_then_with_resets() {
    let ensemble = ensemble();
    let leader = ensemble.leader().expect("a leader");
    let follower = ensemble.followers()[0];
    let link = ClientLink::start(&ensemble.connect_string());
    let (client, guard) = holder_on(&link, follower, "/ensemble/cut");
    let session = client.session_id();
    let mut states = States::of(&guard);

    // Silent: the follower answers pings until it gives up on the leader;
    // the holder stops saying Held, moves to a member that has a leader,
    // and holds again with the same session.
    let cut = Instant::now();
    ensemble.cut_link(leader, follower);
    let suspended = states.wait_for_after(LockState::Suspended, cut);
    // Not early: the follower gives up only `syncLimit` ticks after the
    // leader's last word, which comes every half tick (a whole tick of
    // margin here, for a leader late with its pings on a busy machine), so
    // the holder stays Held until then. Not late: by then the leader check
    // would have suspended it (`3T/4`).
    let give_up = TICK * (SYNC_LIMIT - 1);
    assert!(
        suspended >= give_up && suspended <= T * 3 / 4,
        "Suspended {suspended:?} after the cut, not within [{give_up:?}, 3T/4]"
    );
    states.wait_for(LockState::Held);
    assert_ne!(member_of(&link), Some(follower));
    assert_eq!(client.session_id(), session);
    ensemble.heal_all();
    ensemble.wait_ready();
    // The cut-off member rejoined; nothing for the holder elsewhere, at
    // the moment the ensemble is ready again.
    assert_eq!(states.next_within(Duration::ZERO), None);
    assert_eq!(guard.state(), LockState::Held);

    // Loud: the follower's connections to the leader are reset at once.
    let follower = ensemble.followers()[0];
    let leader = ensemble.leader().expect("a leader");
    drop((guard, client));
    let (client, guard) = holder_on(&link, follower, "/ensemble/cut");
    let mut states = States::of(&guard);
    let asked = Instant::now();
    ensemble.reset_link(leader, follower);
    let suspended = states.wait_for_after(LockState::Suspended, asked);
    assert_at_once("Suspended after reset_link", suspended, T);
    states.wait_for(LockState::Held);
    assert_ne!(member_of(&link), Some(follower));
    assert_eq!(
        states.seen,
        [LockState::Held, LockState::Suspended, LockState::Held]
    );
    drop(client);
    ensemble.heal_all();
    ensemble.wait_ready();
}

#[test]
fn killed_members_and_a_killed_leader_leave_the_holder_holding() {
    let ensemble = ensemble();
    let link = ClientLink::start(&ensemble.connect_string());
    let follower = ensemble.followers()[0];
    let (client, guard) = holder_on(&link, follower, "/ensemble/kill");
    let session = client.session_id();
    let mut states = States::of(&guard);

    // The holder's own member crashes: it moves to another.
    let asked = Instant::now();
    ensemble.kill(follower);
    let suspended = states.wait_for_after(LockState::Suspended, asked);
    assert_at_once("Suspended after killing the holder's member", suspended, T);
    states.wait_for(LockState::Held);
    // A member coming back is nothing to a holder elsewhere, and it serves
    // again with its data: the holder's node, taken before it crashed.
    ensemble.restart(follower);
    assert_eq!(states.next_within(Duration::ZERO), None);
    let direct = Client::connect(&ensemble.member_addr(follower).to_string(), T)
        .expect("connecting to the restarted member alone");
    let queue = zklock::recipes::inspect(&direct, "/ensemble/kill").expect("listing the lock");
    assert_eq!(
        queue.first().map(|e| (e.name.as_str(), e.owner_session)),
        guard.node_path().rsplit('/').next().map(|n| (n, session)),
        "the restarted member serves the holder's node"
    );
    drop(direct);

    // The leader crashes: the others elect a new one, the holder reconnects.
    let leader = ensemble.leader().expect("a leader");
    let held_on = member_of(&link);
    let asked = Instant::now();
    ensemble.kill(leader);
    let suspended = states.wait_for_after(LockState::Suspended, asked);
    // Every member drops its clients when it loses the leader.
    assert_at_once(
        &format!("Suspended after killing the leader {leader} (held on {held_on:?})"),
        suspended,
        T,
    );
    states.wait_for(LockState::Held);
    ensemble.restart(leader);
    assert_eq!(client.session_id(), session);
    assert_eq!(guard.state(), LockState::Held);
    assert!(!lock_is_free(&ensemble.connect_string(), "/ensemble/kill"));

    use LockState::{Held, Suspended};
    assert_eq!(states.seen, [Held, Suspended, Held, Suspended, Held]);

    // A majority crashes: no member serves, and a whole session timeout
    // later a holder can no longer be sure of anything (a second holder,
    // with a short timeout).
    let (_short, short_guard) = holder(&ensemble.connect_string(), SHORT_T, "/ensemble/majority");
    let mut short_states = States::of(&short_guard);
    let survivor = ensemble.leader().expect("a leader");
    let asked = Instant::now();
    for i in (0..ensemble.len()).filter(|&i| i != survivor) {
        ensemble.kill(i);
    }
    let suspended = short_states.wait_for_after(LockState::Suspended, asked);
    assert_at_once("Suspended after killing a majority", suspended, SHORT_T);
    let lost = short_states.wait_for_after(LockState::Lost, asked);
    // Lost at T after the last proof of life. The leader check's syncs (one
    // per T/12) keep that proof within T/2 and a round trip of the last
    // answer, and the surviving leader answers them for a while after the
    // kills, until it steps down: not before 2T/3, and, on a loaded
    // machine, not past 3T/2.
    assert!(
        lost >= SHORT_T * 2 / 3 && lost <= SHORT_T * 3 / 2,
        "Lost {lost:?} after killing a majority, not within [2T/3, 3T/2] of T = {SHORT_T:?}"
    );
    assert_lost(&short_guard, LossReason::NoContact);
    states.wait_for(LockState::Suspended);
}

/// `stall_link`'s own postcondition, between the leader and a follower:
/// the link says `Stalled`, no byte crosses it while it is (the leader's
/// pings and a write's proposal are held), the follower keeps its clients
/// (it has not given up on the leader: a stall shorter than `syncLimit`),
/// and once healed the held bytes arrive: the write made meanwhile is on
/// the follower, without a reconnect.
#[test]
fn a_stalled_member_link_holds_its_bytes_then_delivers_them() {
    // A syncLimit long enough that a stall of a second and a half, on a
    // loaded machine, stays well inside it.
    let ensemble =
        ZkEnsemble::start_with_links(3, &ZkOptions::new().tick_ms(TICK.as_millis() as u64), 8);
    let leader = ensemble.leader().expect("a leader");
    let follower = ensemble.followers()[0];
    let on_leader = Client::connect(&ensemble.member_addr(leader).to_string(), T)
        .expect("a client of the leader");
    let on_follower = Client::connect(&ensemble.member_addr(follower).to_string(), T)
        .expect("a client of the follower");
    let follower_session = on_follower.session_id();
    let changes = on_follower.subscribe();
    // The channel starts with the current state.
    assert_eq!(
        changes.recv_timeout(WAIT).ok(),
        Some(zklock::SessionState::Connected)
    );

    ensemble.stall_link(leader, follower);
    assert_eq!(ensemble.link_state(leader, follower), LinkState::Stalled);
    let before = ensemble.link_traffic(leader, follower).0;
    on_leader
        .create("/stalled", b"", zklock::CreateMode::Persistent)
        .expect("a write the leader commits with the other follower");
    // Two of the leader's ping rounds (one each half tick) and the
    // proposal would have crossed by now.
    std::thread::sleep(TICK);
    assert_eq!(
        ensemble.link_traffic(leader, follower).0,
        before,
        "bytes crossed a stalled link"
    );
    assert_eq!(
        on_follower
            .exists("/stalled")
            .expect("a read on the follower"),
        None,
        "the follower saw a write whose proposal the stall holds"
    );

    ensemble.heal_link(leader, follower);
    assert_eq!(ensemble.link_state(leader, follower), LinkState::Up);
    zklock_test::wait_until("the held write to reach the follower", WAIT, || {
        on_follower.exists("/stalled").ok().flatten().is_some()
    });
    assert!(ensemble.link_traffic(leader, follower).0 > before);
    assert_eq!(on_follower.session_id(), follower_session);
    let seen: Vec<_> = changes.try_iter().collect();
    assert!(
        seen.is_empty(),
        "the follower's client saw {seen:?}: the follower dropped it, as after giving up on the leader"
    );
}
