//! Pings, the read timeout, and when the session is Suspended, then Lost.

use super::*;

#[test]
fn idle_session_pings_then_times_out_without_replies() {
    let mut h = Harness::new();
    // Pings and the read timeout alone; the leader check has tests below.
    h.s.set_leader_check(false);
    h.connect(1, 9000);
    h.events();
    h.advance(T / 3);
    let sent = h.sent_requests();
    assert_eq!(sent, vec![(-2, Request::Ping)]);
    h.reply(-2, 3, ErrorCode::Ok, Response::Empty);
    // Nothing heard for 2T/3 after that reply: the connection is dead.
    h.advance(T / 3);
    assert_eq!(h.sent_requests(), vec![(-2, Request::Ping)]);
    assert!(h.events().is_empty());
    h.advance(T / 3);
    let ev = h.events();
    assert_eq!(drops(&ev), 1);
    assert_eq!(states(&ev), vec![SessionState::Suspended]);
}

#[test]
fn no_contact_for_the_session_timeout_reports_lost() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.handle_disconnected(h.now);
    assert_eq!(states(&h.events()), vec![SessionState::Suspended]);
    let deadline = h.s.poll_timeout().expect("a lost deadline");
    assert_eq!(deadline, h.now + T);
    h.advance(T - Duration::from_millis(1));
    assert!(h.events().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(states(&h.events()), vec![SessionState::Lost]);
}

#[test]
fn lost_is_counted_from_the_send_time_of_the_last_answered_request() {
    let mut h = Harness::new();
    // Without the leader check every answer counts (see the leader tests).
    h.s.set_leader_check(false);
    h.connect(1, 9000);
    h.events();
    // A request sent now but answered 4 s later: the server heard us at
    // some point after the send, so only the send time is certain.
    h.advance(Duration::from_secs(1));
    let sent_at = h.now;
    h.s.submit(h.now, exists("/a", false), 1, None);
    let xid = h.sent_requests()[0].0;
    h.now += Duration::from_secs(2);
    h.reply(xid, 5, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.events();
    // Heard much later than sent; then the connection drops.
    h.now += Duration::from_secs(2);
    h.watch_event(EventType::NodeDataChanged, "/a");
    h.s.handle_disconnected(h.now);
    assert_eq!(states(&h.events()), vec![SessionState::Suspended]);
    assert_eq!(h.s.poll_timeout(), Some(sent_at + T));
    h.advance(sent_at + T - h.now - Duration::from_millis(1));
    assert!(h.events().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(states(&h.events()), vec![SessionState::Lost]);
}

#[test]
fn a_connection_that_answers_nothing_for_a_session_timeout_is_dropped_as_lost() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let start = h.now;
    // Pings go out but no reply comes; watch events still trickle in, so
    // the read timeout alone would never fire.
    for _ in 0..30 {
        h.advance(Duration::from_millis(500));
        h.watch_event(EventType::NodeDataChanged, "/x");
        if h.now >= start + T {
            break;
        }
    }
    let ev = h.events();
    assert!(drops(&ev) >= 1, "the dead connection is dropped");
    assert_eq!(
        states(&ev),
        vec![SessionState::Suspended, SessionState::Lost]
    );
}
