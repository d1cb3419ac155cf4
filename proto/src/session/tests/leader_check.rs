//! Liveness confirmed by the leader: syncs as probes, touches, and a model
//! of ZooKeeper's follower/leader session tracking.

use super::*;

// ---- liveness confirmed by the leader ----------------------------------

/// Answers pings only, as a follower cut off from the leader does: a sync
/// stays forwarded to a leader that never sees it.
fn answer_pings_only(h: &mut Harness) {
    for (xid, request) in h.sent_requests() {
        if request == Request::Ping {
            h.reply(xid, 9, ErrorCode::Ok, Response::Empty);
        }
    }
}

/// A follower cut off from the leader, as ZooKeeper answers one session:
/// in order, so everything sent after the first sync it forwarded waits
/// behind that sync, which never comes back. Before it, pings and reads
/// are answered.
#[derive(Default)]
struct CutFollower {
    stuck: bool,
}

impl CutFollower {
    fn answer(&mut self, h: &mut Harness) {
        for (xid, request) in h.sent_requests() {
            self.stuck |= matches!(request, Request::Sync(_));
            if self.stuck {
                continue;
            }
            let body = match request {
                Request::Exists(_) => Response::Stat(Stat::default()),
                _ => Response::Empty,
            };
            h.reply(xid, 9, ErrorCode::Ok, body);
        }
    }
}

/// Answers pings and reads, and every sync `Throttled`, as a follower
/// whose throttle refuses it by itself (the leader never sees it): the
/// session keeps hearing answers in order, so only the leader check's own
/// deadline can end it. (A follower cut off from the leader answers
/// nothing after the first sync it forwards, `CutFollower`; that silence
/// trips the read timeout at about the same moment.)
fn answer_all_but_syncs(h: &mut Harness) {
    for (xid, request) in h.sent_requests() {
        let (err, body) = match request {
            Request::Sync(_) => (ErrorCode::Throttled, Response::Empty),
            Request::Exists(_) => (ErrorCode::Ok, Response::Stat(Stat::default())),
            _ => (ErrorCode::Ok, Response::Empty),
        };
        h.reply(xid, 9, err, body);
    }
}

fn sync_count(sent: &[(i32, Request)]) -> usize {
    sent.iter()
        .filter(|(_, r)| matches!(r, Request::Sync(_)))
        .count()
}

#[test]
fn a_healthy_session_syncs_once_per_probe_period_and_never_suspends() {
    // Round trips up to T/8 (1125 ms here) are healthy; the probes do not
    // wait for each other's answers, so their number does not depend on
    // the round trip.
    for rtt_ms in [0u64, 20, 400, 900, 1100] {
        let mut h = Harness::new();
        h.connect(1, 9000);
        h.events();
        let start = h.now;
        let step = Duration::from_millis(50);
        let mut line = ServerLine::new(Duration::from_millis(rtt_ms));
        while h.now < start + T * 10 {
            h.advance(step);
            line.carry(&mut h);
        }
        let ev = h.events();
        // At most one touch per T/64 since the oldest still needed, and
        // the probes' own.
        assert!(h.s.touches.len() <= 64 + 3, "{} touches", h.s.touches.len());
        assert_eq!(states(&ev), vec![], "rtt {rtt_ms} ms");
        assert_eq!(drops(&ev), 0, "rtt {rtt_ms} ms");
        // One sync per T/12 (120 in 10 T), give or take the step.
        let syncs = line.syncs_sent;
        assert!(
            (118..=120).contains(&syncs),
            "rtt {rtt_ms} ms: {syncs} syncs"
        );
    }
}

/// With the leader check on, an idle session sends no ping at any round
/// trip within the bound: its own syncs, one per T/12, keep the connection
/// busy, so none falls due (docs/PARTITION.md, "Cost").
#[test]
fn an_idle_session_sends_its_syncs_and_no_pings() {
    for rtt_ms in [0u64, 20, 400, 900, 1100] {
        let mut h = Harness::new();
        h.connect(1, 9000);
        h.events();
        let start = h.now;
        let mut line = ServerLine::new(Duration::from_millis(rtt_ms));
        while h.now < start + T * 10 {
            h.advance(Duration::from_millis(50));
            line.carry(&mut h);
        }
        assert_eq!(states(&h.events()), vec![], "rtt {rtt_ms} ms");
        assert!(
            line.syncs_sent >= 118,
            "rtt {rtt_ms} ms: {} syncs",
            line.syncs_sent
        );
        assert_eq!(line.pings_sent, 0, "rtt {rtt_ms} ms");
    }
}

/// The first probe goes `T/12` after the handshake was sent, not before;
/// a session that opens later than that sends it as it opens
/// (docs/PARTITION.md, "No false alarm").
#[test]
fn the_first_probe_goes_a_period_after_the_handshake_was_sent_or_as_the_session_opens() {
    let period = T / 12;
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.advance(period - Duration::from_millis(1));
    assert_eq!(sync_count(&h.sent_requests()), 0, "a probe before T/12");
    h.advance(Duration::from_millis(1));
    assert_eq!(sync_count(&h.sent_requests()), 1, "no probe at T/12");

    // The handshake answered half a second after the first probe was due.
    let mut h = Harness::new();
    h.s.handle_connected(h.now);
    h.sent();
    h.advance(period + Duration::from_millis(500));
    assert!(
        h.sent_requests().is_empty(),
        "sent before the session opened"
    );
    h.s.handle_input(h.now, &handshake_answer(1, 9000, vec![7; 16]));
    assert_eq!(states(&h.events()), vec![SessionState::Connected]);
    h.s.handle_timeout(h.now);
    assert_eq!(
        sync_count(&h.sent_requests()),
        1,
        "no probe as the session opened late"
    );
}

/// A healthy server behind a link with a steady round trip: answers each
/// request, pings and syncs alike, `rtt` after it was sent, in order.
struct ServerLine {
    rtt: Duration,
    /// (when the answer lands, xid, request), oldest first.
    in_flight: std::collections::VecDeque<(Instant, i32, Request)>,
    syncs_sent: usize,
    pings_sent: usize,
}

impl ServerLine {
    fn new(rtt: Duration) -> Self {
        ServerLine {
            rtt,
            in_flight: Default::default(),
            syncs_sent: 0,
            pings_sent: 0,
        }
    }

    /// Takes what the session wrote, then delivers every answer due by now.
    fn carry(&mut self, h: &mut Harness) {
        for (xid, request) in h.sent_requests() {
            self.syncs_sent += usize::from(matches!(request, Request::Sync(_)));
            self.pings_sent += usize::from(matches!(request, Request::Ping));
            self.in_flight.push_back((h.now + self.rtt, xid, request));
        }
        while self.in_flight.front().is_some_and(|(at, ..)| *at <= h.now) {
            let Some((_, xid, request)) = self.in_flight.pop_front() else {
                break;
            };
            let body = match request {
                Request::Sync(path) => Response::Path(path),
                Request::Exists(_) => Response::Stat(Stat::default()),
                _ => Response::Empty,
            };
            h.reply(xid, 9, ErrorCode::Ok, body);
        }
    }
}

/// Runs a session against a server `rtt` away, the handshake included, in
/// steps of 1 ms for `span`; returns the states it announced.
fn run_at_round_trip(rtt: Duration, span: Duration) -> Vec<SessionState> {
    let mut h = Harness::new();
    // The handshake takes the round trip too.
    h.s.handle_connected(h.now);
    h.sent();
    h.now += rtt;
    h.s.handle_input(h.now, &handshake_answer(1, 9000, vec![7; 16]));
    let mut seen = states(&h.events());
    assert_eq!(seen, vec![SessionState::Connected]);
    seen.clear();
    let start = h.now;
    let mut line = ServerLine::new(rtt);
    while h.now < start + span {
        // Answers due now are read before the timers are looked at.
        h.now += Duration::from_millis(1);
        line.carry(&mut h);
        h.s.handle_timeout(h.now);
        line.carry(&mut h);
        seen.extend(states(&h.events()));
        if !seen.is_empty() {
            break;
        }
    }
    seen
}

/// The promise's edge: every answer within T/8 of its request, and the
/// session never leaves Connected (the first proof after the handshake
/// lands before 3T/4); 10 ms later than that, it lands past 3T/4 and the
/// session is Suspended within a timeout.
#[test]
fn a_steady_round_trip_of_an_eighth_of_the_timeout_is_healthy_and_no_more() {
    let bound = T / 8;
    let at_bound = run_at_round_trip(bound - Duration::from_millis(1), T * 6);
    assert_eq!(at_bound, vec![], "round trip T/8 less 1 ms");
    let past = run_at_round_trip(bound + Duration::from_millis(10), T * 2);
    assert_eq!(
        past,
        vec![SessionState::Suspended],
        "round trip T/8 + 10 ms"
    );
}

#[test]
fn pings_answered_without_the_leader_suspend_then_lose_the_session() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    // The follower answers a read every step, and never a sync.
    let step = Duration::from_millis(10);
    let mut token = 0;
    while h.now < handshake + T * 3 / 4 - step {
        h.advance(step);
        h.s.submit(h.now, exists("/r", false), token, None);
        token += 1;
        answer_all_but_syncs(&mut h);
        assert!(
            states(&h.events()).is_empty(),
            "still within 3T/4 of the handshake"
        );
    }
    assert_eq!(h.s.poll_timeout(), Some(handshake + T * 3 / 4));
    h.advance(handshake + T * 3 / 4 - h.now);
    let ev = h.events();
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::DropConnection(DropReason::LeaderUnconfirmed)
    )));
    assert_eq!(states(&ev), vec![SessionState::Suspended]);
    // Lost a whole timeout after the handshake, the last leader touch.
    assert_eq!(h.s.poll_timeout(), Some(handshake + T));
    h.advance(handshake + T - h.now - Duration::from_millis(1));
    assert!(h.events().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(states(&h.events()), vec![SessionState::Lost]);
}

/// Kills: `leader_ordered` → true (a read a cut-off follower answers from
/// its own copy taken for the leader's word: the holder says Held for up
/// to a probe period longer than the leader's proof allows).
#[test]
fn reads_answered_without_the_leader_prove_nothing() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let cut = h.now + T;
    let step = Duration::from_millis(10);
    let (mut token, mut last_sync_sent, mut sync_stuck) = (100, h.now, false);
    // A read every step. Healthy until `cut`; then the follower answers
    // pings, and the reads it gets before the first sync it forwards (a
    // session's requests are answered in order: none after that sync).
    let suspended_at = loop {
        h.advance(step);
        h.s.submit(h.now, exists("/r", false), token, None);
        token += 1;
        for (xid, request) in h.sent_requests() {
            match request {
                Request::Sync(path) if h.now < cut => {
                    last_sync_sent = h.now;
                    h.reply(xid, 9, ErrorCode::Ok, Response::Path(path));
                }
                Request::Sync(_) => sync_stuck = true,
                Request::Exists(_) if !sync_stuck => {
                    h.reply(xid, 9, ErrorCode::Ok, Response::Stat(Stat::default()));
                }
                Request::Exists(_) => {}
                _ => h.reply(xid, 9, ErrorCode::Ok, Response::Empty),
            }
        }
        if states(&h.events()).contains(&SessionState::Suspended) {
            break h.now;
        }
        assert!(h.now < cut + T, "never Suspended");
    };
    // The last answered sync proved the touches answered the gap before it
    // was sent (each in the step it went); Suspended 3T/4 after those (give
    // or take a touch's grain).
    let bound = last_sync_sent - h.s.leader_gap() + T * 3 / 4 + T / 64 + step;
    assert!(
        suspended_at <= bound,
        "Suspended {:?} after the bound the last sync sets",
        suspended_at - bound
    );
}

#[test]
fn an_answered_sync_proves_only_the_touches_answered_the_gap_before_it_was_sent() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    // Run healthy for a while, remembering what was sent when.
    let step = Duration::from_millis(100);
    let mut sends: Vec<Instant> = vec![handshake];
    let mut last_sync_sent = handshake;
    while h.now < handshake + T * 2 {
        h.advance(step);
        let sent = h.sent_requests();
        if !sent.is_empty() {
            sends.push(h.now);
        }
        if sync_count(&sent) > 0 {
            last_sync_sent = h.now;
        }
        for (xid, request) in sent {
            let body = match request {
                Request::Sync(p) => Response::Path(p),
                _ => Response::Empty,
            };
            h.reply(xid, 9, ErrorCode::Ok, body);
        }
    }
    assert!(h.events().is_empty());
    // Cut: from now on only pings are answered. The proof is the newest
    // send answered (in the step it went) at least the gap, 7T/24, before
    // the last answered sync was sent.
    let proven = sends
        .iter()
        .copied()
        .filter(|&t| t + T * 7 / 24 <= last_sync_sent)
        .max()
        .unwrap();
    let suspend_at = proven + T * 3 / 4;
    assert!(suspend_at > h.now, "healthy until the cut");
    while h.now + step < suspend_at {
        h.advance(step);
        answer_pings_only(&mut h);
        assert!(h.events().is_empty());
    }
    assert_eq!(h.s.poll_timeout(), Some(suspend_at));
    h.advance(suspend_at - h.now);
    assert_eq!(states(&h.events()), vec![SessionState::Suspended]);
    assert_eq!(h.s.poll_timeout(), Some(proven + T));
}

#[test]
fn a_successful_write_is_leader_proof_and_the_syncs_go_on_beside_writes() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    // A write every T/16, answered: the core's own syncs still go every
    // T/12, so that the proof's age does not depend on the writes.
    let mut writes = 0;
    let mut syncs = 0;
    while h.now < handshake + T * 3 {
        h.advance(T / 16);
        h.s.submit(h.now, Request::Sync("/w".into()), writes, None);
        writes += 1;
        let sent = h.sent_requests();
        syncs += sync_count(&sent) - 1;
        for (xid, request) in sent {
            let body = match request {
                Request::Sync(p) => Response::Path(p),
                _ => Response::Empty,
            };
            h.reply(xid, 9, ErrorCode::Ok, body);
        }
    }
    assert_eq!(states(&h.events()), vec![]);
    // One per T/12, sent at the first step after it is due (T/8 apart).
    assert_eq!(syncs, 24, "the core's own syncs");
    // A write a follower refuses alone (throttled) proves nothing.
    let last_ok = h.now;
    let mut proof_deadline = h.s.poll_timeout();
    h.advance(Duration::from_millis(1));
    h.s.submit(
        h.now,
        Request::Delete(jute::PathVersion {
            path: "/gone".into(),
            version: -1,
        }),
        99,
        None,
    );
    let sent = h.sent_requests();
    let (xid, _) = sent.last().cloned().unwrap();
    h.reply(xid, 9, ErrorCode::Throttled, Response::Empty);
    h.events();
    // Nothing leader-ordered answered from here: Suspended comes at 3T/4
    // after the newest touch proven by the last answered write or sync.
    let mut follower = CutFollower::default();
    while h.s.state() == SessionState::Connected {
        proof_deadline = h.s.poll_timeout();
        h.advance(Duration::from_millis(100));
        follower.answer(&mut h);
    }
    assert!(proof_deadline.unwrap() <= last_ok + T * 3 / 4);
    assert!(proof_deadline.unwrap() >= last_ok - T * 7 / 24 - T / 16 + T * 3 / 4);
}

#[test]
fn a_reconnect_is_leader_proof_and_resets_the_touches() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.advance(T / 2);
    answer_pings_only(&mut h);
    h.s.handle_disconnected(h.now);
    h.events();
    h.advance(Duration::from_millis(100));
    let resumed = h.now;
    h.connect(1, 9000);
    assert_eq!(states(&h.events()), vec![SessionState::Connected]);
    // The leader revalidated the session: the proof is the new handshake,
    // not the touches made on the old connection.
    let step = Duration::from_millis(10);
    let mut token = 0;
    while h.now + step < resumed + T * 3 / 4 {
        h.advance(step);
        h.s.submit(h.now, exists("/r", false), token, None);
        token += 1;
        answer_all_but_syncs(&mut h);
        assert!(states(&h.events()).is_empty());
    }
    assert_eq!(h.s.poll_timeout(), Some(resumed + T * 3 / 4));
    h.advance(resumed + T * 3 / 4 - h.now);
    assert_eq!(states(&h.events()), vec![SessionState::Suspended]);
}

#[test]
fn touches_are_kept_coarse_and_not_at_all_without_the_leader_check() {
    for check in [true, false] {
        let mut h = Harness::new();
        h.s.set_leader_check(check);
        h.connect(1, 9000);
        h.events();
        // A busy session: a request every millisecond for T/2.
        for i in 0..4500 {
            h.advance(Duration::from_millis(1));
            h.s.submit(h.now, exists("/busy", false), i, None);
        }
        let kept = h.s.touches.len();
        if check {
            // One per T/64, and the probes' own (six in T/2).
            assert!((32..=38).contains(&kept), "{kept} touches");
        } else {
            assert_eq!(kept, 0);
        }
    }
}

// ---- the follower/leader mechanism, modelled -----------------------------

/// Answers every request written so far: syncs with their path, the
/// rest (reads) with NoNode.
fn answer_all(h: &mut Harness) {
    for (xid, request) in h.sent_requests() {
        match request {
            Request::Sync(p) => h.reply(xid, 9, ErrorCode::Ok, Response::Path(p)),
            _ => h.reply(xid, 9, ErrorCode::NoNode, Response::Empty),
        }
    }
}

/// A probe sent within a touch's grain of another send is a touch of its
/// own: answered at once, the probe four periods later (the first sent the
/// gap, 3.5 periods, after its answer) proves exactly it, not the send
/// before.
#[test]
fn a_probe_right_after_another_send_is_proven_itself() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let due = h.s.probe_due().expect("a probe is due");
    let period = h.s.probe_period();
    // A read a millisecond before the probe: it touches the session.
    h.now = due - Duration::from_millis(1);
    h.s.submit(h.now, exists("/r", false), 0, None);
    answer_all(&mut h);
    for at in [
        due,
        due + period,
        due + 2 * period,
        due + 3 * period,
        due + 4 * period,
    ] {
        h.now = at;
        h.s.handle_timeout(at);
        answer_all(&mut h);
    }
    assert_eq!(h.s.leader_touch, Some(due));
    assert_eq!(states(&h.events()), vec![], "no alarm");
}

/// `valid_until` is the leader's proof plus a timeout while a session
/// lives, and nothing before one, once Lost was said, or once it ended.
///
/// Kills: `valid_until` → `None`; either `||` of `lost_deadline`'s guard
/// → `&&` (a deadline reported after Lost, or after the session ended).
#[test]
fn valid_until_is_the_proof_plus_a_timeout_only_while_the_session_may_live() {
    let mut h = Harness::new();
    assert_eq!(h.s.valid_until(), None, "before any session");
    let handshake = h.now;
    h.connect(1, 9000);
    h.events();
    assert_eq!(h.s.valid_until(), Some(handshake + T));
    // Nothing answered from here: Lost at the deadline, and no deadline after.
    h.advance(T);
    assert!(states(&h.events()).contains(&SessionState::Lost));
    assert_eq!(h.s.valid_until(), None, "after Lost");

    // A session the server says expired when it is resumed: ended, no deadline.
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.handle_disconnected(h.now);
    h.advance(Duration::from_millis(10));
    h.s.handle_connected(h.now);
    h.sent();
    h.s.handle_input(h.now, &handshake_answer(1, 0, vec![7; 16]));
    assert!(states(&h.events()).contains(&SessionState::Expired));
    assert_eq!(h.s.valid_until(), None, "after the session ended");
}
