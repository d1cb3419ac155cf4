//! The session core driven by bytes and virtual time: no sockets, no clock.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_request_header, encode_frame, split_frame, ConnectRequest, ConnectResponse, Decode,
    Encode, ErrorCode, EventType, KeeperState, Names, OpCode, PathWatch, ReplyHeader, Request,
    Response, Stat, WatcherEvent,
};

use super::*;

const T: Duration = Duration::from_millis(9000);

type TestSession = Session<u32, u32>;

/// Plays the server: reads what the session wrote, answers with frames.
struct Harness {
    s: TestSession,
    now: Instant,
}

impl Harness {
    fn new() -> Self {
        let now = Instant::now();
        let config = SessionConfig {
            session_timeout: T,
            connect_timeout: Duration::from_secs(3),
            max_frame: 4096,
        };
        Harness {
            s: Session::new(config, now),
            now,
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.s.handle_timeout(self.now);
    }

    /// Every whole frame the session has written, consumed.
    fn sent(&mut self) -> Vec<Vec<u8>> {
        let mut buf = BytesMut::from(self.s.output());
        let n = buf.len();
        self.s.consume_output(n);
        let mut frames = Vec::new();
        while let Some(f) = split_frame(&mut buf, usize::MAX).unwrap() {
            frames.push(f.to_vec());
        }
        frames
    }

    fn sent_requests(&mut self) -> Vec<(i32, Request)> {
        self.sent()
            .iter()
            .map(|f| {
                let (h, body) = decode_request_header(f).unwrap();
                (h.xid, Request::decode_body(h.op, body).unwrap())
            })
            .collect()
    }

    fn events(&mut self) -> Vec<SessionEvent<u32, u32>> {
        std::iter::from_fn(|| self.s.poll_event()).collect()
    }

    fn feed(&mut self, frame_body: impl FnOnce(&mut BytesMut)) {
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, frame_body);
        self.s.handle_input(self.now, &buf);
    }

    fn connect(&mut self, session_id: i64, timeout_ms: i32) -> ConnectRequest {
        self.s.handle_connected(self.now);
        let frames = self.sent();
        assert_eq!(frames.len(), 1);
        let req = ConnectRequest::decode_exact(&frames[0]).unwrap();
        self.feed(|b| {
            ConnectResponse {
                protocol_version: 0,
                timeout_ms,
                session_id,
                passwd: vec![7; 16],
                read_only: false,
            }
            .encode(b)
        });
        req
    }

    fn reply(&mut self, xid: i32, zxid: i64, err: ErrorCode, body: Response) {
        self.feed(|b| {
            ReplyHeader { xid, zxid, err }.encode(b);
            body.encode(b);
        });
    }

    fn watch_event(&mut self, kind: EventType, path: &str) {
        self.feed(|b| {
            ReplyHeader {
                xid: -1,
                zxid: -1,
                err: ErrorCode::Ok,
            }
            .encode(b);
            WatcherEvent {
                kind,
                state: KeeperState::SyncConnected,
                path: path.into(),
            }
            .encode(b);
        });
    }
}

fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(PathWatch {
        path: path.into(),
        watch,
    })
}

fn replies(events: &[SessionEvent<u32, u32>]) -> Vec<(u32, Result<Response, RequestError>)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Reply { handle, result } => Some((*handle, result.clone())),
            _ => None,
        })
        .collect()
}

fn states(events: &[SessionEvent<u32, u32>]) -> Vec<SessionState> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::State(s) => Some(*s),
            _ => None,
        })
        .collect()
}

fn drops(events: &[SessionEvent<u32, u32>]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, SessionEvent::DropConnection(_)))
        .count()
}

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
fn requests_submitted_while_connecting_wait_for_the_handshake() {
    let mut h = Harness::new();
    h.s.submit(h.now, exists("/early", false), 1, None);
    assert!(h.s.output().is_empty());
    h.connect(1, 9000);
    let sent = h.sent_requests();
    assert_eq!(sent, vec![(1, exists("/early", false))]);
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
fn reconnect_resumes_the_session_and_rearms_watches() {
    let mut h = Harness::new();
    h.connect(0x77, 9000);
    h.s.submit(h.now, exists("/w", true), 1, Some(501));
    h.s.submit(
        h.now,
        Request::GetChildren(PathWatch {
            path: "/c".into(),
            watch: true,
        }),
        2,
        Some(502),
    );
    h.sent();
    h.reply(1, 40, ErrorCode::NoNode, Response::Empty);
    h.reply(2, 41, ErrorCode::Ok, Response::Children(Names::new()));
    h.events();
    assert_eq!(h.s.watch_count(), 2);
    h.s.handle_disconnected(h.now);
    let req = h.connect(0x77, 9000);
    assert_eq!(req.session_id, 0x77);
    assert_eq!(req.passwd, vec![7; 16]);
    assert_eq!(req.last_zxid_seen, 41);
    let sent = h.sent_requests();
    let [(xid, Request::SetWatches(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches, got {sent:?}")
    };
    assert_eq!(*xid, -8);
    assert_eq!(sw.relative_zxid, 41);
    assert_eq!(sw.exist, vec!["/w".to_string()]);
    assert_eq!(sw.child, vec!["/c".to_string()]);
    assert_eq!(
        states(&h.events()),
        vec![SessionState::Suspended, SessionState::Connected]
    );
    // The server fires what changed while we were away: once each.
    h.reply(-8, 42, ErrorCode::Ok, Response::Empty);
    h.watch_event(EventType::NodeCreated, "/w");
    h.watch_event(EventType::NodeCreated, "/w");
    assert_eq!(
        fired(&h.events()),
        vec![(501, EventType::NodeCreated, "/w".to_string())]
    );
}

#[test]
fn node_deleted_fires_data_and_child_watches_once() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.s.submit(h.now, exists("/d", true), 1, Some(10));
    h.s.submit(
        h.now,
        Request::GetChildren2(PathWatch {
            path: "/d".into(),
            watch: true,
        }),
        2,
        Some(11),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Stat(Stat::default()));
    h.reply(
        2,
        2,
        ErrorCode::Ok,
        Response::Children2 {
            children: Names::new(),
            stat: Stat::default(),
        },
    );
    h.events();
    h.watch_event(EventType::NodeDeleted, "/d");
    let mut fired: Vec<u32> = fired(&h.events()).into_iter().map(|(w, _, _)| w).collect();
    fired.sort();
    assert_eq!(fired, vec![10, 11]);
    assert_eq!(h.s.watch_count(), 0);
}

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
fn oversized_request_is_refused_without_sending() {
    let mut h = Harness::new();
    h.connect(5, 9000);
    h.events();
    let big = Request::SetData(jute::SetDataRequest {
        path: "/big".into(),
        data: vec![0; 5000],
        version: -1,
    });
    h.s.submit(h.now, big, 1, None);
    assert!(h.s.output().is_empty());
    let r = replies(&h.events());
    assert!(matches!(r[0], (1, Err(RequestError::TooLarge { .. }))));
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

/// The fuzz driver on generated scripts, on stable: random bytes, and
/// scripts built from real handshakes and replies.
#[test]
fn fuzz_driver_on_generated_scripts() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // A valid handshake answer and a valid reply, to reach deeper states.
    let mut connect = BytesMut::new();
    encode_frame(&mut connect, |b| {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 6000,
            session_id: 9,
            passwd: vec![1; 16],
            read_only: false,
        }
        .encode(b)
    });
    let mut reply = BytesMut::new();
    encode_frame(&mut reply, |b| {
        ReplyHeader {
            xid: 1,
            zxid: 5,
            err: ErrorCode::Ok,
        }
        .encode(b);
        Response::Stat(Stat::default()).encode(b);
    });
    for _ in 0..3000 {
        let mut script = Vec::new();
        for _ in 0..(rand() % 24) {
            match rand() % 6 {
                0 => {
                    script.extend_from_slice(&[5, 0, connect.len() as u8]);
                    script.extend_from_slice(&connect);
                }
                1 => {
                    script.extend_from_slice(&[0, reply.len() as u8]);
                    script.extend_from_slice(&reply);
                }
                _ => script.extend((0..(rand() % 8)).map(|_| rand() as u8)),
            }
        }
        super::fuzz::run(&script);
    }
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

/// The committed seeds of the `session` fuzz target replay cleanly.
#[test]
fn fuzz_session_seeds_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/session");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/session exists") {
        let data = std::fs::read(entry.expect("seed entry").path()).expect("seed file");
        super::fuzz::run(&data);
        count += 1;
    }
    assert!(count > 0, "no session seeds in {}", dir.display());
}

#[test]
fn unwanted_watches_are_not_rearmed() {
    let mut h = Harness::new();
    h.connect(4, 9000);
    for (i, p) in ["/keep", "/drop"].iter().enumerate() {
        h.s.submit(h.now, exists(p, true), i as u32, Some(100 + i as u32));
        h.reply(i as i32 + 1, 2, ErrorCode::NoNode, Response::Empty);
    }
    h.events();
    assert_eq!(h.s.watch_count(), 2);
    h.s.handle_disconnected(h.now);
    h.s.retain_watches(|w| *w == 100);
    assert_eq!(h.s.watch_count(), 1);
    h.connect(4, 9000);
    let sent = h.sent_requests();
    let [(_, Request::SetWatches(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches, got {sent:?}")
    };
    assert_eq!(sw.exist, vec!["/keep".to_string()]);
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

fn add_watch(path: &str, mode: jute::AddWatchMode) -> Request {
    Request::AddWatch(jute::AddWatchRequest {
        path: path.into(),
        mode,
    })
}

fn fired(events: &[SessionEvent<u32, u32>]) -> Vec<(u32, EventType, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Watch { watcher, event } => {
                Some((*watcher, event.kind, event.path.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn persistent_watches_fire_repeatedly_and_recursive_ones_cover_descendants() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    h.s.submit(
        h.now,
        add_watch("/p", jute::AddWatchMode::Persistent),
        1,
        Some(10),
    );
    h.s.submit(
        h.now,
        add_watch("/r", jute::AddWatchMode::PersistentRecursive),
        2,
        Some(20),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.reply(2, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.events();
    h.watch_event(EventType::NodeDataChanged, "/p");
    h.watch_event(EventType::NodeChildrenChanged, "/p");
    h.watch_event(EventType::NodeCreated, "/r/a/b");
    h.watch_event(EventType::NodeChildrenChanged, "/r/a");
    h.watch_event(EventType::NodeDeleted, "/r");
    h.watch_event(EventType::NodeCreated, "/rx");
    let got = fired(&h.events());
    assert_eq!(
        got,
        vec![
            (10, EventType::NodeDataChanged, "/p".into()),
            (10, EventType::NodeChildrenChanged, "/p".into()),
            (20, EventType::NodeCreated, "/r/a/b".into()),
            (20, EventType::NodeDeleted, "/r".into()),
        ]
    );
    assert_eq!(h.s.watch_count(), 2, "persistent watches stay registered");
    // Re-armed with setWatches2 after a reconnect.
    h.s.handle_disconnected(h.now);
    h.connect(8, 9000);
    let sent = h.sent_requests();
    let [(_, Request::SetWatches2(sw))] = sent.as_slice() else {
        panic!("expected one SetWatches2, got {sent:?}")
    };
    assert_eq!(sw.persistent, vec!["/p".to_string()]);
    assert_eq!(sw.persistent_recursive, vec!["/r".to_string()]);
}

#[test]
fn releasing_a_persistent_watch_removes_it_from_the_server_when_the_last_goes() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    for (i, w) in [(1, 10), (2, 11)] {
        h.s.submit(
            h.now,
            add_watch("/p", jute::AddWatchMode::Persistent),
            i,
            Some(w),
        );
        h.reply(i as i32, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    }
    h.events();
    h.sent();
    // One of two watchers goes: nothing to tell the server.
    h.s.release_persistent(h.now, "/p", |w| *w != 10, 50);
    assert!(h.sent().is_empty());
    assert_eq!(replies(&h.events()), vec![(50, Ok(Response::Empty))]);
    // The last one goes: removeWatches(/p, Any), as 3.8 servers need.
    h.s.release_persistent(h.now, "/p", |_| false, 51);
    let sent = h.sent_requests();
    assert_eq!(
        sent,
        vec![(
            3,
            Request::RemoveWatches(jute::WatchesRequest {
                path: "/p".into(),
                kind: jute::WatcherType::Any
            })
        )]
    );
    assert_eq!(h.s.watch_count(), 0);
}

#[test]
fn expiry_abandons_persistent_watches() {
    let mut h = Harness::new();
    h.connect(8, 9000);
    h.s.submit(
        h.now,
        add_watch("/p", jute::AddWatchMode::Persistent),
        1,
        Some(10),
    );
    h.reply(1, 2, ErrorCode::Ok, Response::Status(ErrorCode::Ok));
    h.events();
    h.s.handle_disconnected(h.now);
    h.connect(0, 0);
    let ev = h.events();
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::WatchAbandoned {
            watcher: 10,
            reason: RequestError::SessionExpired
        }
    )));
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

// ---- liveness confirmed by the leader ----------------------------------

/// Answers everything written so far after `rtt`, as a healthy server: pings
/// and syncs alike. Returns how many syncs were answered.
fn answer_all(h: &mut Harness, rtt: Duration) -> usize {
    let sent = h.sent_requests();
    h.now += rtt;
    let mut syncs = 0;
    for (xid, request) in sent {
        let body = match request {
            Request::Sync(path) => {
                syncs += 1;
                Response::Path(path)
            }
            Request::Exists(_) => Response::Stat(Stat::default()),
            _ => Response::Empty,
        };
        h.reply(xid, 9, ErrorCode::Ok, body);
    }
    h.s.handle_timeout(h.now);
    syncs
}

/// Answers pings only, as a follower cut off from the leader does: a sync
/// stays forwarded to a leader that never sees it.
fn answer_pings_only(h: &mut Harness) {
    for (xid, request) in h.sent_requests() {
        if request == Request::Ping {
            h.reply(xid, 9, ErrorCode::Ok, Response::Empty);
        }
    }
}

fn sync_count(sent: &[(i32, Request)]) -> usize {
    sent.iter()
        .filter(|(_, r)| matches!(r, Request::Sync(_)))
        .count()
}

#[test]
fn a_healthy_session_syncs_once_per_probe_period_and_never_suspends() {
    // Round trips up to T/6 (1.5 s here) are healthy: the proof of a
    // session answered that slowly is at most T/3 + 2 × T/8 + T/6 = 3T/4
    // old when the next answer lands.
    for rtt_ms in [0u64, 20, 400, 1400] {
        let mut h = Harness::new();
        h.connect(1, 9000);
        h.events();
        let start = h.now;
        let mut syncs = 0;
        let step = Duration::from_millis(50);
        while h.now < start + T * 10 {
            h.advance(step);
            syncs += answer_all(&mut h, Duration::from_millis(rtt_ms));
        }
        let ev = h.events();
        // At most one touch per T/64 since the oldest still needed.
        assert!(h.s.touches.len() <= 64, "{} touches", h.s.touches.len());
        assert_eq!(states(&ev), vec![], "rtt {rtt_ms} ms");
        assert_eq!(drops(&ev), 0, "rtt {rtt_ms} ms");
        // One sync per T/8 at most (80 in 10 T); fewer when the round
        // trip delays the next one.
        assert!(syncs <= 80, "rtt {rtt_ms} ms: {syncs} syncs");
        assert!(
            syncs >= 10 * 8 * 9000 / (9000 + 8 * rtt_ms as usize + 400),
            "rtt {rtt_ms} ms: {syncs} syncs"
        );
    }
}

#[test]
fn pings_answered_without_the_leader_suspend_then_lose_the_session() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    // The follower answers pings, never the sync it forwarded.
    let step = Duration::from_millis(10);
    while h.now < handshake + T * 3 / 4 - step {
        h.advance(step);
        answer_pings_only(&mut h);
        assert!(h.events().is_empty(), "still within 3T/4 of the handshake");
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

#[test]
fn an_answered_sync_proves_only_the_touches_a_third_of_the_timeout_older() {
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
    // send at least T/3 older than the last answered sync.
    let proven = sends
        .iter()
        .copied()
        .filter(|&t| t + T / 3 <= last_sync_sent)
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
fn a_successful_write_is_leader_proof_and_puts_the_sync_off() {
    let mut h = Harness::new();
    h.connect(1, 9000);
    h.events();
    let handshake = h.now;
    // A write every T/16: the core never needs a sync of its own.
    let mut writes = 0;
    while h.now < handshake + T * 3 {
        h.advance(T / 16);
        h.s.submit(h.now, Request::Sync("/w".into()), writes, None);
        writes += 1;
        let sent = h.sent_requests();
        assert_eq!(sync_count(&sent), 1, "only the caller's own request");
        for (xid, request) in sent {
            let body = match request {
                Request::Sync(p) => Response::Path(p),
                _ => Response::Empty,
            };
            h.reply(xid, 9, ErrorCode::Ok, body);
        }
    }
    assert_eq!(states(&h.events()), vec![]);
    // A failed write proves nothing: the follower may have answered it.
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
    let (xid, _) = h.sent_requests()[0].clone();
    h.reply(xid, 9, ErrorCode::NoNode, Response::Empty);
    h.events();
    // Nothing answered from here: Suspended comes at 3T/4 after the newest
    // touch proven by the last successful write.
    while h.s.state() == SessionState::Connected {
        proof_deadline = h.s.poll_timeout();
        h.advance(Duration::from_millis(100));
        answer_pings_only(&mut h);
    }
    assert!(proof_deadline.unwrap() <= last_ok + T * 3 / 4);
    assert!(proof_deadline.unwrap() >= last_ok - T / 3 - T / 16 + T * 3 / 4);
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
    while h.now + step < resumed + T * 3 / 4 {
        h.advance(step);
        answer_pings_only(&mut h);
        assert!(h.events().is_empty());
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
            assert!((32..=34).contains(&kept), "{kept} touches");
        } else {
            assert_eq!(kept, 0);
        }
    }
}

// ---- the follower/leader mechanism, modelled -----------------------------

/// A small model of what ZooKeeper 3.8 does with a session on a follower
/// (see `Session::set_leader_check`): the follower notes every packet of
/// ours in its touch table and answers pings itself; the leader pings the
/// follower every tick/2, touches what the reply lists (expiry: arrival +
/// T, rounded up to a tick) and answers syncs. Links are FIFO with random
/// delays; at `cut` the follower-leader link goes silent. Returns (the
/// leader's expiry before its rounding up to a tick, which may add
/// nothing; when the core said Suspended; when it said Lost), in ms from
/// the start, and whether anything but Connected was said before the cut.
fn follower_model(
    seed: u64,
    cut_ms: u64,
    max_link_ms: u64,
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
    let mut queue: Vec<(u64, Msg)> = Vec::new();
    let mut last_arrival = [0u64; 4]; // c->f, f->c, l->f, f->l
    let mut send = |queue: &mut Vec<(u64, Msg)>, now: u64, way: usize, delay: u64, m: Msg| {
        let leader_link = way >= 2;
        let at = (now + delay).max(last_arrival[way]);
        last_arrival[way] = at;
        if leader_link && at >= cut_ms {
            return; // lost in the silent cut
        }
        queue.push((at, m));
    };
    let phase = rand(tick / 2);
    let mut next_leader_ping = phase;
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

#[test]
fn a_cut_off_follower_is_noticed_before_the_leader_expires_the_session() {
    let t_ms = T.as_millis() as u64;
    let mut least_margin = u64::MAX;
    for seed in 1..=60u64 {
        let seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        // Transit up to 150 ms each way on the leader link: within the
        // T/12 slack of the derivation at T = 2 × tick.
        let cut = 3 * t_ms + seed % t_ms;
        let (expiry, suspended, lost, early) = follower_model(seed, cut, 150);
        assert!(!early, "seed {seed}: not Connected before the cut");
        let suspended = suspended.unwrap_or_else(|| panic!("seed {seed}: never Suspended"));
        let lost = lost.unwrap_or_else(|| panic!("seed {seed}: never Lost"));
        assert!(
            suspended + t_ms / 4 <= expiry,
            "seed {seed}: Suspended at {suspended}, the leader expires at {expiry}"
        );
        assert!(
            lost <= expiry,
            "seed {seed}: Lost at {lost}, expiry {expiry}"
        );
        least_margin = least_margin.min(expiry - suspended);
    }
    eprintln!("least margin between Suspended and the leader's expiry: {least_margin} ms of T = {t_ms} ms");
}
