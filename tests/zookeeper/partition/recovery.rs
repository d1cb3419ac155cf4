//! Recovery: a leader cut off from both followers is replaced, and a holder
//! cut off with its server moves to another and keeps the lock.

use super::*;

/// The harness itself: members really talk through the link proxies, the
/// election's call-backs included, so that cutting the leader off from
/// both followers makes them elect one of themselves, and healing brings
/// the old leader back as a member.
#[test]
fn cutting_the_leader_off_from_both_followers_elects_another() {
    let ens = ensemble();
    let old = ens.leader().expect("a leader");
    let followers = ens.followers();
    assert_eq!(followers.len(), 2, "{followers:?}");
    let hellos: u64 = (0..ens.len())
        .flat_map(|a| (a + 1..ens.len()).map(move |b| (a, b)))
        .map(|(a, b)| ens.link_traffic(a, b).1)
        .sum();
    assert!(hellos > 0, "no election hello went through a proxy");
    let direct = ens.direct_member_connections();
    assert!(
        direct.is_empty(),
        "members connected around the proxies (from, to, port): {direct:?}"
    );
    for &f in &followers {
        ens.cut_link(old, f);
    }
    let elected = testkit::poll_until(WAIT, || {
        ens.leader().is_some_and(|l| l != old) && ens.member_mode(old).as_deref() != Some("leader")
    });
    let modes: Vec<_> = (0..ens.len()).map(|i| ens.member_mode(i)).collect();
    ens.heal_all();
    assert!(
        elected,
        "the followers did not elect another leader (modes {modes:?})"
    );
    ens.wait_ready();
    assert_eq!(ens.followers().len(), 2);
    let direct = ens.direct_member_connections();
    assert!(
        direct.is_empty(),
        "after the re-election, members connected around the proxies: {direct:?}"
    );
}

/// The other half of the fix: a holder whose server is cut off from the
/// leader drops that server once the leader stops confirming its session,
/// finds another server while the session still lives, and holds again:
/// Suspended, then Held, never Lost, same node.
#[test]
fn a_holder_cut_off_with_its_server_moves_to_another_and_keeps_the_lock() {
    let ens = ensemble();
    let leader = ens.leader().expect("a leader");
    let followers = ens.followers();
    assert_eq!(followers.len(), 2, "{followers:?}");
    // Both followers, not the leader: whichever the client picks, it is one
    // that can be cut off from the leader.
    let connect = followers
        .iter()
        .map(|&f| ens.member_addr(f).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let client = Client::builder(&connect)
        .session_timeout(LONG)
        .connect()
        .unwrap();
    let sid = format!("sid=0x{:x}", client.session_id());
    let on = *followers
        .iter()
        .find(|&&f| ens.four_letter(f, "cons").contains(&sid))
        .expect("the client's follower");
    let path = format!("/partition-moves-{}", std::process::id());
    let guard = Mutex::new(&client, &path)
        .unwrap()
        .lock_timeout(WAIT)
        .unwrap();
    let node = guard.node_path();
    let changes = guard.state_changes();
    assert_eq!(changes.recv_timeout(WAIT), Ok(LockState::Held));

    let cut = Instant::now();
    ens.cut_link(on, leader);
    let suspended = changes.recv_timeout(LONG * 2);
    let suspended_at = cut.elapsed();
    let back = changes.recv_timeout(LONG * 2);
    let back_at = cut.elapsed();
    let moved_to = followers
        .iter()
        .copied()
        .find(|&f| f != on && ens.four_letter(f, "cons").contains(&sid));
    ens.heal_link(on, leader);
    eprintln!(
        "cut +0: {suspended:?} at +{} ms, then {back:?} at +{} ms, now on member {moved_to:?} (was {on})",
        suspended_at.as_millis(),
        back_at.as_millis()
    );
    assert_eq!(suspended, Ok(LockState::Suspended));
    assert!(
        suspended_at < LONG * 3 / 4,
        "Suspended only at +{suspended_at:?}"
    );
    assert_eq!(back, Ok(LockState::Held), "the holder did not hold again");
    assert!(
        moved_to.is_some(),
        "the client did not move to the other follower"
    );
    assert_eq!(guard.node_path(), node);
    assert!(client.exists(node).unwrap().is_some());
    drop(guard);
    let _ = client.close();
    ens.wait_ready();
}
