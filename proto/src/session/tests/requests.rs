//! Requests and their replies: xids, order, op codes, and what the session
//! refuses or drops the connection for.

use super::*;

#[test]
fn pipelined_replies_are_matched_in_order() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    for i in 0..3 {
        h.s.submit(h.now, exists(&format!("/n{i}"), false), 100 + i, None);
    }
    let sent = h.sent_requests();
    let xids: Vec<i32> = sent.iter().map(|(x, _)| *x).collect();
    assert_eq!(xids, vec![1, 2, 3]);
    h.reply(1, 10, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.reply(2, 11, ErrorCode::NoNode, Response::Empty);
    h.reply(3, 12, ErrorCode::Ok, Response::Stat(Stat::default()));
    let r = replies(&h.events());
    assert_eq!(r.len(), 3);
    assert_eq!(r[0], (100, Ok(Response::Stat(Stat::default()))));
    assert_eq!(r[1], (101, Err(RequestError::Server(ErrorCode::NoNode))));
    assert_eq!(r[2].0, 102);
    assert_eq!(h.s.last_zxid(), 12);
}

#[test]
fn out_of_order_xid_drops_the_connection_and_fails_in_flight_requests() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.submit(h.now, exists("/a", false), 7, None);
    h.sent();
    h.reply(99, 5, ErrorCode::Ok, Response::Stat(Stat::default()));
    let ev = h.events();
    assert_eq!(drops(&ev), 1);
    assert_eq!(replies(&ev), vec![(7, Err(RequestError::ConnectionLoss))]);
    assert_eq!(states(&ev), vec![SessionState::Suspended]);
    assert!(h.s.wants_connection());
}

#[test]
fn garbage_from_the_server_is_a_disconnect_not_a_panic() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    h.s.handle_input(h.now, &[0xff, 0xff, 0xff, 0x00, 1, 2, 3]);
    let ev = h.events();
    assert!(matches!(
        ev.first(),
        Some(SessionEvent::DropConnection(DropReason::Protocol(_)))
    ));
    assert_eq!(states(&ev), vec![SessionState::Suspended]);
}

#[test]
fn oversized_request_is_refused_without_sending() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.events();
    let big = Request::SetData(jute::SetDataRequest {
        path: "/big".into(),
        data: vec![0; 5000],
        version: -1,
    });
    h.s.submit(h.now, big.clone(), 1, None);
    assert!(h.s.output().is_empty());
    let r = replies(&h.events());
    assert!(matches!(r[0], (1, Err(RequestError::TooLarge { .. }))));
    // While disconnected too: refused at once, not queued for the next
    // connection (kills `>` → `==` in submit's queued branch).
    h.s.handle_disconnected(h.now);
    h.events();
    h.s.submit(h.now, big, 2, None);
    let r = replies(&h.events());
    assert!(
        matches!(r[..], [(2, Err(RequestError::TooLarge { .. }))]),
        "{r:?}"
    );
}

#[test]
fn op_codes_are_remembered_per_xid() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.events();
    h.s.submit(
        h.now,
        Request::GetData(PathWatch {
            path: "/g".into(),
            watch: false,
        }),
        1,
        None,
    );
    h.sent();
    h.reply(
        1,
        9,
        ErrorCode::Ok,
        Response::Data {
            data: b"v".to_vec(),
            stat: Stat::default(),
        },
    );
    let r = replies(&h.events());
    assert!(matches!(&r[0].1, Ok(Response::Data { data, .. }) if data == b"v"));
    let _ = OpCode::GetData;
}

/// Kills mutants of `handle_input` that the simulator (one frame per
/// read) cannot: the loop stopping after the first frame of a read, the
/// start of the next frame lost after a long reply, or the long reply
/// taken through the input buffer. TCP hands frames over in any pieces.
#[test]
fn frames_in_any_pieces_are_each_answered() {
    let mut h = Harness::with_max_frame(1 << 20);
    h.connect(5, 9000);
    h.events();
    for token in 1..=3 {
        let read = PathWatch {
            path: "/g".into(),
            watch: false,
        };
        h.s.submit(h.now, Request::GetData(read), token, None);
    }
    h.sent();
    // Three replies, the first longer than a long reply, in two reads:
    // the second frame whole, the third cut in two.
    let sizes = [100 * 1024, 10, 10];
    let mut wire = BytesMut::new();
    for (xid, size) in (1..).zip(sizes) {
        encode_frame(&mut wire, |b| {
            let (zxid, err) = (9, ErrorCode::Ok);
            ReplyHeader { xid, zxid, err }.encode(b);
            let data = vec![u8::try_from(xid).unwrap(); size];
            let stat = Stat::default();
            Response::Data { data, stat }.encode(b);
        });
    }
    let cut = wire.len() - 8;
    h.s.handle_input(h.now, &wire[..cut]);
    // The long reply went through its pieces, not the input buffer: a
    // waiter's session may hear nothing more for hours, and a buffer grown
    // to a listing's size would stay, for every such waiter.
    assert!(h.s.long_frame.is_none());
    assert!(
        h.s.input.capacity() <= 64 * 1024,
        "the input buffer grew to {} bytes",
        h.s.input.capacity()
    );
    h.s.handle_input(h.now, &wire[cut..]);
    let got: Vec<(u32, usize)> = replies(&h.events())
        .into_iter()
        .map(|(token, r)| match r {
            Ok(Response::Data { data, .. }) => (token, data.len()),
            other => panic!("token {token}: {other:?}"),
        })
        .collect();
    assert_eq!(got, vec![(1, sizes[0]), (2, 10), (3, 10)]);
}

/// A listing longer than a long reply is read in pieces, whatever the
/// reads' sizes, with a short reply after it in the same bytes: every name
/// arrives whole and in order, and nothing is left over.
#[test]
fn a_long_listing_in_any_reads_is_answered_whole() {
    let names: Vec<String> = (0..6000)
        .map(|i| format!("_c_{i:08}-lock-{i:010}"))
        .collect();
    for cut in [1000, 4096, 16 * 1024 + 3, usize::MAX] {
        let mut h = Harness::with_max_frame(1 << 20);
        h.connect(5, 9000);
        h.events();
        let list = PathWatch {
            path: "/q".into(),
            watch: false,
        };
        h.s.submit(h.now, Request::GetChildren2(list), 1, None);
        h.s.submit(h.now, exists("/q", false), 2, None);
        h.sent();
        let mut wire = BytesMut::new();
        encode_frame(&mut wire, |b| {
            let (xid, zxid, err) = (1, 9, ErrorCode::Ok);
            ReplyHeader { xid, zxid, err }.encode(b);
            let children: Names = names.iter().map(String::as_str).collect();
            let stat = Stat {
                num_children: 6000,
                ..Stat::default()
            };
            Response::Children2 { children, stat }.encode(b);
        });
        assert!(wire.len() > 5 * crate::session::connection::LONG_REPLY);
        encode_frame(&mut wire, |b| {
            let (xid, zxid, err) = (2, 9, ErrorCode::Ok);
            ReplyHeader { xid, zxid, err }.encode(b);
            Response::Stat(Stat::default()).encode(b);
        });
        for read in wire.chunks(cut.min(wire.len())) {
            h.s.handle_input(h.now, read);
            // The listing gathers in its pieces, not in the input buffer.
            assert!(h.s.input.capacity() <= 64 * 1024, "cut {cut}");
        }
        let got = replies(&h.events());
        assert_eq!(got.len(), 2, "cut {cut}");
        match &got[0] {
            (1, Ok(Response::Children2 { children, stat })) => {
                assert_eq!(stat.num_children, 6000);
                assert!(children.iter().eq(names.iter().map(String::as_str)));
            }
            other => panic!("cut {cut}: {other:?}"),
        }
        assert_eq!(got[1], (2, Ok(Response::Stat(Stat::default()))));
        assert!(h.s.long_frame.is_none() && h.s.input.is_empty());
    }
}

/// Every frame of one read is acted on in that call (a waiter's session
/// may hear nothing more for hours), and bytes after the frame that ended
/// the session, or while it is disconnected, are not read at all.
#[test]
fn every_frame_of_a_read_is_answered_and_nothing_after_the_end() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    for token in 1..=3 {
        h.s.submit(h.now, exists("/a", false), token, None);
    }
    h.sent();
    let mut wire = BytesMut::new();
    for xid in 1..=3 {
        encode_frame(&mut wire, |b| {
            let (zxid, err) = (5, ErrorCode::Ok);
            ReplyHeader { xid, zxid, err }.encode(b);
            Response::Stat(Stat::default()).encode(b);
        });
    }
    h.s.handle_input(h.now, &wire);
    let tokens: Vec<u32> = replies(&h.events()).iter().map(|(t, _)| *t).collect();
    assert_eq!(tokens, vec![1, 2, 3]);

    // The session expires in a frame followed by a reply nobody awaits:
    // the reply is not read (it would be a protocol error after the end).
    h.s.submit(h.now, exists("/a", false), 4, None);
    h.sent();
    let mut wire = watch_event_frame(EventType::None, KeeperState::Expired, "");
    encode_frame(&mut wire, |b| {
        let (xid, zxid, err) = (9, 6, ErrorCode::Ok);
        ReplyHeader { xid, zxid, err }.encode(b);
    });
    h.s.handle_input(h.now, &wire);
    let ev = h.events();
    assert_eq!(replies(&ev), vec![(4, Err(RequestError::SessionExpired))]);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::DropConnection(DropReason::Protocol(_)))),
        "{ev:?}"
    );
    // Disconnected, a session reads nothing.
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.s.handle_disconnected(h.now);
    h.events();
    h.s.handle_input(h.now, &[0xff, 0xff, 0xff, 0x00]);
    assert!(h.events().is_empty());
}

/// Only replies are read in pieces: a handshake answer longer than a long
/// reply (nothing a sane server sends, but nothing forbids it) is joined
/// and read as the handshake it is.
#[test]
fn a_long_handshake_answer_is_read_as_a_handshake() {
    let mut h = Harness::with_max_frame(1 << 20);
    h.s.handle_connected(h.now);
    h.sent();
    let wire = handshake_answer(5, 9000, vec![7; 40_000]);
    for read in wire.chunks(5000) {
        h.s.handle_input(h.now, read);
    }
    assert_eq!(states(&h.events()), vec![SessionState::Connected]);
    assert_eq!(h.s.session_id(), 5);
}
