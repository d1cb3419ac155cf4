//! A three-member ensemble: one leader, re-election when it is killed, and the
//! old leader rejoining as a follower.

use super::*;

#[test]
fn ensemble_elects_one_leader_and_survives_losing_it() {
    let started = Instant::now();
    let ensemble = ZkEnsemble::start(3);
    eprintln!("3-member ensemble start took {:?}", started.elapsed());

    assert_eq!(ensemble.len(), 3);
    let expected: Vec<String> = (0..3)
        .map(|i| ensemble.member_addr(i).to_string())
        .collect();
    assert_eq!(ensemble.connect_string(), expected.join(","));
    assert_eq!(count_leaders(&ensemble), 1);
    let old_leader = ensemble.leader().expect("a ready ensemble has a leader");
    for i in (0..3).filter(|&i| i != old_leader) {
        assert_eq!(ensemble.member_mode(i).as_deref(), Some("follower"));
        assert_eq!(ensemble.four_letter(i, "ruok"), "imok");
    }

    let killed = Instant::now();
    ensemble.kill(old_leader);
    assert!(!ensemble.is_running(old_leader));
    ensemble.wait_ready();
    eprintln!(
        "re-election after killing the leader took {:?}",
        killed.elapsed()
    );
    let new_leader = ensemble.leader().expect("the survivors elect a leader");
    assert_ne!(new_leader, old_leader);
    assert_eq!(count_leaders(&ensemble), 1);

    let restarted = Instant::now();
    ensemble.restart(old_leader);
    eprintln!("member restart took {:?}", restarted.elapsed());
    assert!(ensemble.is_running(old_leader));
    assert_eq!(count_leaders(&ensemble), 1);
    assert_eq!(
        ensemble.member_mode(old_leader).as_deref(),
        Some("follower"),
        "the old leader rejoins as a follower"
    );
}

fn count_leaders(ensemble: &ZkEnsemble) -> usize {
    (0..ensemble.len())
        .filter(|&i| ensemble.member_mode(i).as_deref() == Some("leader"))
        .count()
}
