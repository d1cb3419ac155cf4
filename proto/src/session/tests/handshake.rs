//! The handshake: the negotiated timeout, requests held until it is done,
//! and its timeouts.

use super::*;

#[test]
fn handshake_negotiates_timeout_and_connects() {
    let mut h = Harness::new();
    assert!(h.s.wants_connection());
    let req = h.connect(0x55, 6000);
    assert_eq!(
        (req.session_id, req.timeout_ms, req.last_zxid_seen),
        (0, 9000, 0)
    );
    assert_eq!(states(&h.events()), vec![SessionState::Connected]);
    assert_eq!(h.s.negotiated_timeout(), Some(Duration::from_millis(6000)));
    assert_eq!(h.s.session_id(), 0x55);
    assert!(!h.s.wants_connection());
}

/// A peer that is not ZooKeeper (an HTTP server's `HTTP/1.1 400`) is named
/// as such, not as a frame of 1213486160 bytes; after the handshake an
/// oversized frame is a bad frame.
#[test]
fn a_peer_that_does_not_speak_zookeeper_is_named_so() {
    let dropped_because = |h: &mut Harness| match h.events().first() {
        Some(SessionEvent::DropConnection(DropReason::Protocol(what))) => what.clone(),
        other => panic!("no protocol drop: {other:?}"),
    };
    let mut h = Harness::new();
    h.s.handle_connected(h.now);
    h.sent();
    h.s.handle_input(h.now, b"HTTP/1.1 400 Bad Request\r\n\r\n");
    assert_eq!(
        dropped_because(&mut h),
        r#"the server does not speak ZooKeeper (its first bytes were "HTTP")"#
    );
    let mut h = Harness::new();
    h.s.handle_connected(h.now);
    h.sent();
    h.s.handle_input(h.now, &[0x16, 0x03, 0x03, 0x00, 0x02]);
    let what = dropped_because(&mut h);
    assert!(
        what.starts_with(
            "the server does not speak ZooKeeper (its answer to the handshake: frame of"
        ),
        "{what}"
    );
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.handle_input(h.now, b"HTTP");
    let what = dropped_because(&mut h);
    assert!(
        what.starts_with("bad frame: frame of 1213486160 bytes"),
        "{what}"
    );
}

#[test]
fn requests_submitted_while_connecting_wait_for_the_handshake() {
    let mut h = Harness::new();
    h.s.submit(h.now, exists("/early", false), 1, None);
    assert!(h.s.output().is_empty());
    h.connect(1, 9000);
    let sent = h.sent_requests();
    assert_eq!(sent, vec![(1, exists("/early", false))]);
}

#[test]
fn handshake_timeout_drops_and_retries() {
    let mut h = Harness::new();
    h.s.handle_connected(h.now);
    h.sent();
    h.advance(Duration::from_secs(3));
    let ev = h.events();
    assert!(matches!(
        ev.as_slice(),
        [SessionEvent::DropConnection(DropReason::HandshakeTimeout)]
    ));
    assert!(h.s.wants_connection());
}

/// The driver sleeps until `poll_timeout`: while the handshake is out, that
/// is the handshake's deadline, or a server that never answers would keep
/// the client waiting.
#[test]
fn the_handshake_deadline_is_when_the_driver_wakes() {
    let mut h = Harness::new();
    h.s.handle_connected(h.now);
    h.sent();
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(3)));
}

#[test]
fn resuming_handshake_gets_a_third_of_the_session_timeout() {
    let mut h = Harness::new();
    h.connect(3, 6000);
    h.s.handle_disconnected(h.now);
    h.events();
    h.s.handle_connected(h.now);
    h.sent();
    // Connect timeout is 3 s, but a third of the 6 s session is 2 s.
    h.advance(Duration::from_millis(1999));
    assert_eq!(drops(&h.events()), 0);
    h.advance(Duration::from_millis(1));
    let ev = h.events();
    assert!(matches!(
        ev.as_slice(),
        [SessionEvent::DropConnection(DropReason::HandshakeTimeout)]
    ));
}
