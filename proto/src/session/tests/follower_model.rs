//! The leader check against a model of ZooKeeper's follower/leader session
//! tracking: a follower cut off from its leader is noticed before the
//! leader expires the session.

use super::*;

/// A small model of what ZooKeeper 3.8 does with a session on a follower
/// (see `Session::set_leader_check`): the follower notes every packet of
/// ours in its touch table and answers pings itself; the leader pings the
/// follower every tick/2, touches what the reply lists (expiry: arrival +
/// T, rounded up to a tick) and answers syncs. Links are FIFO with random
/// delays; a `stall` (from, until) holds what crosses the client's link
/// both ways and delivers it all, in order, when it lifts; at `cut` (with
/// a stall: at the leader's first ping after it lifts, so that what it
/// delivered is never carried) the follower-leader link goes silent.
/// Returns (the
/// leader's expiry before its rounding up to a tick, which may add
/// nothing; when the core said Suspended; when it said Lost), in ms from
/// the start, and whether anything but Connected was said before the cut.
fn follower_model(
    seed: u64,
    cut_ms: u64,
    max_link_ms: u64,
    stall: Option<(u64, u64)>,
) -> (u64, Option<u64>, Option<u64>, bool) {
    let mut rng = seed;
    let mut rand = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    // The worst ratio the server allows: T = 2 × tick.
    let t_ms = T.as_millis() as u64;
    let tick = t_ms / 2;
    let round_up = |t: u64| (t / tick + 1) * tick;
    let mut h = Harness::new();
    let start = h.now;
    h.connect(1, t_ms as i32);
    h.events();
    let mut expiry = round_up(t_ms);
    // The expiry without the rounding up, which may add nothing.
    let mut floor = t_ms;
    let mut touched = false;
    // In-flight messages: (arrival ms, what). FIFO per direction.
    #[derive(Clone, Copy, PartialEq)]
    enum Msg {
        /// Client -> follower: a request with this xid (ping or sync).
        ToFollower(i32, bool),
        /// Follower -> client: the answer to this xid (sync or ping).
        ToClient(i32, bool),
        /// Leader -> follower: a quorum ping.
        Ping,
        /// Follower -> leader: ping reply carrying our touch, or not.
        PingReply(bool),
        /// Follower -> leader: our sync.
        Sync(i32),
        /// Leader -> follower: the sync's answer.
        SyncDone(i32),
    }
    let phase = rand(tick / 2);
    let mut next_leader_ping = phase;
    let cut_ms = match stall {
        Some((_, until)) => {
            let after = until + max_link_ms + 1;
            phase + (after.saturating_sub(phase) / (tick / 2) + 1) * (tick / 2)
        }
        None => cut_ms,
    };
    let mut queue: Vec<(u64, Msg)> = Vec::new();
    let mut last_arrival = [0u64; 4]; // c->f, f->c, l->f, f->l
    let mut send = |queue: &mut Vec<(u64, Msg)>, now: u64, way: usize, delay: u64, m: Msg| {
        let leader_link = way >= 2;
        let mut at = (now + delay).max(last_arrival[way]);
        if let Some((from, until)) = stall {
            if !leader_link && at >= from && at < until {
                at = until;
            }
        }
        last_arrival[way] = at;
        if leader_link && at >= cut_ms {
            return; // lost in the silent cut
        }
        queue.push((at, m));
    };
    let (mut suspended, mut lost, mut early) = (None, None, false);
    let end = cut_ms + 2 * t_ms;
    for now in 0..end {
        h.now = start + Duration::from_millis(now);
        // Deliver what arrives now, in order.
        let mut due: Vec<(u64, Msg)> = queue.iter().copied().filter(|(at, _)| *at <= now).collect();
        queue.retain(|(at, _)| *at > now);
        due.sort_by_key(|(at, _)| *at);
        for (_, m) in due {
            match m {
                Msg::ToFollower(xid, is_sync) => {
                    touched = true;
                    if is_sync {
                        let d = rand(max_link_ms + 1);
                        send(&mut queue, now, 3, d, Msg::Sync(xid));
                    } else {
                        send(&mut queue, now, 1, rand(3), Msg::ToClient(xid, false));
                    }
                }
                Msg::ToClient(xid, is_sync) => {
                    if h.s.phase == Phase::Connected {
                        let body = if is_sync {
                            Response::Path("/".into())
                        } else {
                            Response::Empty
                        };
                        h.reply(xid, 9, ErrorCode::Ok, body);
                    }
                }
                Msg::Ping => {
                    let carried = std::mem::take(&mut touched);
                    let d = rand(max_link_ms + 1);
                    send(&mut queue, now, 3, d, Msg::PingReply(carried));
                }
                Msg::PingReply(carried) => {
                    if carried && now < expiry {
                        expiry = round_up(now + t_ms);
                        floor = now + t_ms;
                    }
                }
                Msg::Sync(xid) => {
                    assert!(
                        now < expiry,
                        "seed {seed}: sync reached the leader after expiry"
                    );
                    let d = rand(max_link_ms + 1);
                    send(&mut queue, now, 2, d, Msg::SyncDone(xid));
                }
                Msg::SyncDone(xid) => {
                    send(&mut queue, now, 1, rand(3), Msg::ToClient(xid, true));
                }
            }
        }
        if now == next_leader_ping {
            let d = rand(max_link_ms + 1);
            send(&mut queue, now, 2, d, Msg::Ping);
            next_leader_ping += tick / 2;
        }
        if h.s.poll_timeout().is_some_and(|d| d <= h.now) {
            h.s.handle_timeout(h.now);
        }
        for (xid, request) in h.sent_requests() {
            let is_sync = matches!(request, Request::Sync(_));
            send(&mut queue, now, 0, rand(3), Msg::ToFollower(xid, is_sync));
        }
        let ev = h.events();
        for state in states(&ev) {
            if now < cut_ms {
                early = true;
            }
            match state {
                SessionState::Suspended => {
                    suspended.get_or_insert(now);
                }
                SessionState::Lost => {
                    lost.get_or_insert(now);
                }
                _ => {}
            }
        }
    }
    (floor, suspended, lost, early)
}

/// The promise both tests hold the model's run to: Suspended at least `T/4`
/// before the leader's expiry, and Lost no later than it. Returns when
/// Suspended came.
fn told_in_time(expiry: u64, suspended: Option<u64>, lost: Option<u64>, run: &str) -> u64 {
    let t_ms = T.as_millis() as u64;
    let suspended = suspended.unwrap_or_else(|| panic!("{run}: never Suspended"));
    let lost = lost.unwrap_or_else(|| panic!("{run}: never Lost"));
    assert!(
        suspended + t_ms / 4 <= expiry,
        "{run}: Suspended at {suspended}, the leader expires at {expiry}"
    );
    assert!(lost <= expiry, "{run}: Lost at {lost}, expiry {expiry}");
    suspended
}

#[test]
fn a_cut_off_follower_is_noticed_before_the_leader_expires_the_session() {
    let t_ms = T.as_millis() as u64;
    let mut least_margin = u64::MAX;
    for seed in 1..=60u64 {
        let seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        // Transit up to 150 ms each way on the leader link: within the
        // T/24 slack of the derivation at T = 2 × tick.
        let cut = 3 * t_ms + seed % t_ms;
        let (expiry, suspended, lost, early) = follower_model(seed, cut, 150, None);
        assert!(!early, "seed {seed}: not Connected before the cut");
        let suspended = told_in_time(expiry, suspended, lost, &format!("seed {seed}"));
        least_margin = least_margin.min(expiry - suspended);
    }
    eprintln!("least margin between Suspended and the leader's expiry: {least_margin} ms of T = {t_ms} ms");
}

/// A link that held our packets back and then delivered them all at once
/// puts touches sent far apart side by side at the follower: an answered
/// sync then proves only what had arrived long enough before it was sent,
/// as the answers bound it, not what was sent long enough before it. The
/// stall starts just after the handshake (so that the proof it leaves is
/// young and nothing is said during it) and holds several probes; the
/// follower is cut from its leader at the leader's first ping after it,
/// so the touches it delivered are never carried.
///
/// Kills: the proof counted from when a touch was sent (`arrived` marking
/// the send time): Lost after the leader's expiry.
#[test]
fn a_touch_held_back_by_a_stall_then_cut_off_is_not_taken_for_proven() {
    let t_ms = T.as_millis() as u64;
    for seed in 1..=60u64 {
        let seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        // From 0.4 T to 0.49 T: longer than the gap and a probe period,
        // shorter than what would leave the handshake's proof 3T/4 old.
        let from = 5;
        let until = from + t_ms * 2 / 5 + seed % (t_ms / 11);
        let (expiry, suspended, lost, _) = follower_model(seed, 0, 3, Some((from, until)));
        told_in_time(
            expiry,
            suspended,
            lost,
            &format!("seed {seed}, stall {from}..{until}"),
        );
    }
}
