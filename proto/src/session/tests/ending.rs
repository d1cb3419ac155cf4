//! How the session ends: closing, and expiry abandoning everything.

use super::*;

#[test]
fn expiry_is_terminal_and_abandons_everything() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.s.submit(h.now, exists("/x", true), 1, Some(9));
    h.reply(1, 2, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.s.handle_disconnected(h.now);
    h.s.submit(h.now, exists("/y", false), 2, None);
    h.events();
    // The server no longer knows the session: timeout 0.
    h.connect(0, 0);
    let ev = h.events();
    assert_eq!(states(&ev), vec![SessionState::Expired]);
    assert_eq!(replies(&ev), vec![(2, Err(RequestError::SessionExpired))]);
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::WatchAbandoned {
            watcher: 9,
            reason: RequestError::SessionExpired
        }
    )));
    assert!(!h.s.wants_connection());
    h.s.submit(h.now, exists("/z", false), 3, None);
    assert_eq!(
        replies(&h.events()),
        vec![(3, Err(RequestError::SessionExpired))]
    );
}

#[test]
fn close_sends_close_session_and_ends() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.events();
    h.s.close(h.now, 77);
    let sent = h.sent_requests();
    assert_eq!(sent, vec![(1, Request::CloseSession)]);
    h.reply(1, 3, ErrorCode::Ok, Response::Empty);
    let ev = h.events();
    assert_eq!(states(&ev), vec![SessionState::Closed]);
    assert_eq!(replies(&ev), vec![(77, Ok(Response::Empty))]);
    assert!(h.s.is_finished());
}

#[test]
fn close_is_answered_after_the_closed_state_is_announced() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.close(h.now, 9);
    let xid = h.sent_requests()[0].0;
    h.reply(xid, 6, ErrorCode::Ok, Response::Empty);
    let ev = h.events();
    let state_at = ev
        .iter()
        .position(|e| matches!(e, SessionEvent::State(SessionState::Closed)))
        .expect("closed announced");
    let reply_at = ev
        .iter()
        .position(|e| matches!(e, SessionEvent::Reply { handle: 9, .. }))
        .expect("close answered");
    assert!(state_at < reply_at);
}

#[test]
fn closing_says_closed_at_once() {
    // Found by simulation seed 7: the server may drop the session (and its
    // nodes) before the close is answered; holders must not wait for that.
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.close(h.now, 9);
    assert_eq!(states(&h.events()), vec![SessionState::Closed]);
    assert_eq!(h.s.state(), SessionState::Closed);
    // The close itself is still on its way and answered later.
    assert!(matches!(
        h.sent_requests()[..],
        [(_, Request::CloseSession)]
    ));
}

/// Kills: the Closing deadline never reached (connection.rs, the match
/// guard → false): a close the server never answers held the connection,
/// and the I/O thread with it, for good.
#[test]
fn a_close_never_answered_ends_at_the_read_timeout() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.close(h.now, 9);
    h.sent_requests();
    h.events();
    let read_timeout = T * 2 / 3;
    // The driver wakes for it.
    assert!(
        h.s.poll_timeout()
            .is_some_and(|t| t <= h.now + read_timeout),
        "{:?}",
        h.s.poll_timeout()
    );
    h.advance(read_timeout - Duration::from_millis(1));
    assert!(!h.s.is_finished(), "the close may still be answered");
    h.advance(Duration::from_millis(1));
    let ev = h.events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::DropConnection(DropReason::SessionEnded))),
        "{ev:?}"
    );
    assert!(h.s.is_finished());
    assert!(
        replies(&ev).iter().any(|(handle, _)| *handle == 9),
        "{ev:?}"
    );
}

/// Kills: the Closing arm of `close` deleted (a second close took over the
/// first one's answer: the first caller was never answered).
#[test]
fn two_closes_are_each_answered_once() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.close(h.now, 1);
    h.s.close(h.now, 2);
    let xid = h.sent_requests()[0].0;
    h.reply(xid, 6, ErrorCode::Ok, Response::Empty);
    let mut answered: Vec<u32> = replies(&h.events()).into_iter().map(|(k, _)| k).collect();
    answered.sort_unstable();
    assert_eq!(answered, vec![1, 2]);
}

/// The session that follows an expired one starts afresh (no id, a zeroed
/// password) but keeps what the user gave and what was seen: the
/// credentials, sent again once it opens, and the newest zxid, so that no
/// server behind it is accepted.
#[test]
fn a_successor_asks_for_a_new_session_with_the_same_credentials() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    let auth = jute::AuthPacket {
        kind: 0,
        scheme: "digest".into(),
        auth: b"u:p".to_vec(),
    };
    h.s.submit(h.now, Request::Auth(auth.clone()), 1, None);
    h.s.submit(h.now, exists("/x", false), 2, None);
    let xid = h.sent_requests().last().expect("the exists").0;
    h.reply(xid, 41, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.s.handle_disconnected(h.now);
    h.events();
    h.connect(0, 0);
    assert_eq!(h.s.state(), SessionState::Expired);
    h.s = h.s.successor(h.now);
    assert_eq!(h.s.state(), SessionState::Connecting);
    assert!(h.s.wants_connection());
    let req = h.connect(6, 9000);
    assert_eq!(req.session_id, 0, "a new session, not the old one resumed");
    assert_eq!(req.passwd, vec![0; 16]);
    assert_eq!(req.last_zxid_seen, 41);
    assert_eq!(h.s.session_id(), 6);
    let sent = h.sent_requests();
    assert!(
        sent.iter().any(|(_, r)| *r == Request::Auth(auth.clone())),
        "{sent:?}"
    );
}
