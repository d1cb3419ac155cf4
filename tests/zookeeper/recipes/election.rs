//! Elections: campaigns in order, without blocking, the leader latch, observers
//! and close modes.

use super::*;

#[test]
fn election_elects_in_order_and_reports_the_leader() {
    let p = path("election");
    let (a, b) = (client(), client());
    let ea = Election::new(&a, &p, b"alpha").unwrap();
    let eb = Election::new(&b, &p, b"beta").unwrap();
    let (none, appeared) = eb.watch_leader().unwrap();
    assert!(none.is_none());
    let lead = ea.campaign().unwrap();
    appeared.recv_timeout(WAIT).unwrap();
    let (leader, change) = eb.watch_leader().unwrap();
    let leader = leader.unwrap();
    assert_eq!(leader.id, b"alpha");
    assert_eq!(leader.session, a.session_id());
    assert!(leader.node.contains("-latch-"));
    assert_eq!(eb.try_campaign().unwrap().map(|_| ()), None);
    let b_wins = std::thread::spawn(move || {
        let g = eb.campaign_timeout(WAIT).unwrap();
        (g.state(), g.fencing_token())
    });
    wait_children(&a, &p, 2);
    let first_token = lead.fencing_token();
    drop(lead);
    assert_eq!(
        change.recv_timeout(WAIT).unwrap().kind,
        EventType::NodeDeleted
    );
    let (state, token) = b_wins.join().unwrap();
    assert_eq!(state, LockState::Held);
    assert!(token > first_token);
}

#[test]
fn election_campaign_started_without_blocking() {
    let p = path("election-start");
    let (a, b) = (client(), client());
    let ea = Election::new(&a, &p, b"alpha").unwrap();
    let eb = Election::new(&b, &p, b"beta").unwrap();
    let lead = ea.start_campaign(None).wait_timeout(WAIT).unwrap();
    let pending = eb.start_campaign(None);
    wait_children(&a, &p, 2);
    assert!(pending.try_take().is_none());
    let first_token = lead.fencing_token();
    drop(lead);
    let next = pending.wait_timeout(WAIT).unwrap();
    assert_eq!(next.state(), LockState::Held);
    assert!(next.fencing_token() > first_token);
    assert_eq!(eb.leader().unwrap().unwrap().id, b"beta");
}

/// A latch campaigns again after a loss and reports each gain and loss;
/// dropping it withdraws.
#[test]
fn leader_latch_requeues_after_a_loss() {
    use zklock::recipes::LatchEvent;
    let p = path("latch");
    let (a, b) = (client(), client());
    let latch_a = Election::new(&a, &p, b"a").unwrap().latch();
    let first = latch_a.events().recv_timeout(WAIT).unwrap();
    let LatchEvent::Gained { fencing_token } = first else {
        panic!("{first:?}");
    };
    assert!(latch_a.is_leader());
    let latch_b = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    // A third party removes the leader's node: A is told, B leads, A
    // queues again behind B.
    let leader_node = Election::new(&a, &p, b"x")
        .unwrap()
        .leader()
        .unwrap()
        .unwrap()
        .node;
    client()
        .delete(&format!("{p}/{leader_node}"), None)
        .unwrap();
    assert!(matches!(
        latch_a.events().recv_timeout(WAIT).unwrap(),
        LatchEvent::Lost {
            reason: Some(zklock::recipes::LossReason::NodeDeleted)
        }
    ));
    b_leads_then_a_again(&a, &p, latch_a, latch_b, fencing_token);
}

/// A's latch lost its leadership, B's queued behind it: B leads, A waits
/// in line behind it, and once B goes A leads again, with a higher token
/// than `fencing_token`; dropped, A leaves no node.
fn b_leads_then_a_again(
    a: &Client,
    p: &str,
    latch_a: zklock::recipes::LeaderLatch,
    latch_b: zklock::recipes::LeaderLatch,
    fencing_token: i64,
) {
    use zklock::recipes::LatchEvent;
    assert!(matches!(
        latch_b.events().recv_timeout(WAIT).unwrap(),
        LatchEvent::Gained { .. }
    ));
    wait_children(a, p, 2);
    assert!(!latch_a.is_leader(), "queued behind the new leader");
    drop(latch_b);
    let again = latch_a.events().recv_timeout(WAIT).unwrap();
    assert!(
        matches!(again, LatchEvent::Gained { fencing_token: t } if t > fencing_token),
        "{again:?}"
    );
    drop(latch_a);
    testkit::wait_no_children(a, p, WAIT);
}

/// A latch whose leadership has a max hold gives it up at the end, told
/// why, and campaigns again behind the candidate already queued, which
/// leads next; alone again, it leads again with a higher token.
#[test]
fn a_leader_latch_gives_up_leadership_at_its_max_hold_and_campaigns_again() {
    use zklock::recipes::{LatchEvent, LossReason, MutexOptions};
    let p = path("latch-max-hold");
    let (a, b) = (client(), client());
    let capped = MutexOptions::default().max_hold(Duration::from_secs(1));
    let latch_a = Election::with_options(&a, &p, b"a", capped)
        .unwrap()
        .latch();
    let first = latch_a.events().recv_timeout(WAIT).unwrap();
    let LatchEvent::Gained { fencing_token } = first else {
        panic!("{first:?}");
    };
    let latch_b = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    let lost = latch_a.events().recv_timeout(WAIT).unwrap();
    assert_eq!(
        lost,
        LatchEvent::Lost {
            reason: Some(LossReason::MaxHold)
        }
    );
    b_leads_then_a_again(&a, &p, latch_a, latch_b, fencing_token);
}

/// Any client follows the leadership without campaigning, new values
/// proclaimed by the leader included; a latch's holder can wait for
/// leadership with a deadline.
#[test]
fn observers_follow_leaders_and_what_they_proclaim() {
    let p = path("observe");
    let (a, b, watcher) = (client(), client(), client());
    let observed = Election::new(&watcher, &p, b"never campaigns").unwrap();
    let mut observer = observed.observe();
    assert_eq!(observer.next(WAIT).unwrap(), None, "nobody leads yet");
    let ea = Election::new(&a, &p, b"a").unwrap();
    let ga = ea.campaign_timeout(WAIT).unwrap();
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"a");
    ea.proclaim(&ga, b"a, second term").unwrap();
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"a, second term");
    // B's latch waits behind A; A steps down and B leads.
    let latch_b = Election::new(&b, &p, b"b").unwrap().latch();
    wait_children(&a, &p, 2);
    assert!(!latch_b.is_leader());
    drop(ga);
    assert!(latch_b.await_leadership(WAIT));
    assert_eq!(observer.next(WAIT).unwrap().unwrap().id, b"b");
    drop(latch_b);
    assert_eq!(observer.next(WAIT).unwrap(), None, "B withdrew");
    // A leader whose node is gone cannot proclaim.
    let ga = ea.campaign_timeout(WAIT).unwrap();
    client().delete(ga.node_path(), None).unwrap();
    assert_eq!(ea.proclaim(&ga, b"too late"), Err(LockError::Lost));
}

/// Curator's close modes: NotifyLeader tells a leader's readers `Lost`, then
/// `Closed`; Silent just ends the events. Either way the node is gone when
/// `close` returns, and the next candidate leads.
#[test]
fn close_modes_tell_readers_or_not_and_hand_over_at_once() {
    let client = client();
    let path = format!("/latch-close-{}", std::process::id());
    for mode in [CloseMode::NotifyLeader, CloseMode::Silent] {
        let leader = Election::new(&client, &path, b"first").unwrap().latch();
        let reader = leader.events().clone();
        assert!(matches!(
            reader.recv_timeout(WAIT),
            Ok(LatchEvent::Gained { .. })
        ));
        let next = Election::new(&client, &path, b"next").unwrap().latch();
        testkit::wait_children(&client, &path, 2, WAIT);
        leader.close(mode).unwrap();
        assert_eq!(
            testkit::children(&client, &path).len(),
            1,
            "{mode:?}: the leader's node is gone when close returns"
        );
        let told: Vec<_> = reader.try_iter().collect();
        match mode {
            CloseMode::NotifyLeader => assert_eq!(
                told,
                [LatchEvent::Lost { reason: None }, LatchEvent::Closed],
                "{mode:?}"
            ),
            _ => assert!(told.is_empty(), "{mode:?}: {told:?}"),
        }
        assert!(matches!(
            next.events().recv_timeout(WAIT),
            Ok(LatchEvent::Gained { .. })
        ));
        // A candidate that never led hears only Closed.
        let waiting = Election::new(&client, &path, b"third").unwrap().latch();
        let third = waiting.events().clone();
        testkit::wait_children(&client, &path, 2, WAIT);
        waiting.close(CloseMode::NotifyLeader).unwrap();
        assert_eq!(third.try_iter().collect::<Vec<_>>(), [LatchEvent::Closed]);
        drop(next);
        testkit::wait_no_children(&client, &path, WAIT);
    }
}
