//! Credentials: a failed auth ends the session; the accepted ones are
//! resent after a reconnect.

use super::*;

#[test]
fn auth_failure_is_terminal() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.events();
    h.s.submit(
        h.now,
        Request::Auth(jute::AuthPacket {
            kind: 0,
            scheme: "digest".into(),
            auth: b"u:p".to_vec(),
        }),
        4,
        None,
    );
    let sent = h.sent_requests();
    assert_eq!(sent[0].0, -4);
    h.reply(-4, 0, ErrorCode::AuthFailed, Response::Empty);
    let ev = h.events();
    assert_eq!(replies(&ev), vec![(4, Err(RequestError::AuthFailed))]);
    assert_eq!(states(&ev), vec![SessionState::AuthFailed]);
    // What is asked afterwards is refused with the same reason (kills the
    // AuthFailed arm of end_reason deleted: it said Closed).
    h.s.submit(h.now, exists("/a", false), 5, None);
    assert_eq!(
        replies(&h.events()),
        vec![(5, Err(RequestError::AuthFailed))]
    );
}

#[test]
fn credentials_are_resent_once_each_after_a_reconnect() {
    let mut h = Harness::new();
    h.connect(6, 9000);
    let auth = jute::AuthPacket {
        kind: 0,
        scheme: "digest".into(),
        auth: b"u:p".to_vec(),
    };
    for handle in 0..3 {
        h.s.submit(h.now, Request::Auth(auth.clone()), handle, None);
        h.reply(-4, 0, ErrorCode::Ok, Response::Empty);
    }
    assert_eq!(replies(&h.events()).len(), 3);
    h.s.handle_disconnected(h.now);
    h.connect(6, 9000);
    let sent = h.sent_requests();
    assert_eq!(sent, vec![(-4, Request::Auth(auth))]);
}
