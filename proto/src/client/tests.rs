//! The protocol client's own tests: what comes back under the driver's
//! handles, the lock machine's traffic, and the states with their sessions.

use bytes::BytesMut;
use jute::{
    decode_request_header, encode_frame, split_frame, ConnectResponse, Encode, ErrorCode,
    KeeperState, PathWatch, ReplyHeader, Stat, WatcherEvent,
};

use super::*;
use crate::lock::{LockError, Rule};

fn connected() -> (Client<u32, u32>, Instant) {
    let now = Instant::now();
    let mut zk = Client::new(SessionConfig::default(), now);
    zk.handle_connected(now);
    let n = zk.output().len();
    zk.consume_output(n);
    let mut answer = BytesMut::new();
    encode_frame(&mut answer, |b| {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 10_000,
            session_id: 0x51,
            passwd: vec![7; 16],
            read_only: false,
        }
        .encode(b)
    });
    zk.handle_input(now, &answer);
    (zk, now)
}

fn events(zk: &mut Client<u32, u32>) -> Vec<Event<u32, u32>> {
    std::iter::from_fn(|| zk.poll_event()).collect()
}

/// The xids and op codes of the requests written, consumed.
fn sent(zk: &mut Client<u32, u32>) -> Vec<(i32, jute::OpCode)> {
    let mut buf = BytesMut::from(zk.output());
    zk.consume_output(buf.len());
    let mut out = Vec::new();
    while let Some(f) = split_frame(&mut buf, usize::MAX).unwrap() {
        let (h, _) = decode_request_header(&f).unwrap();
        out.push((h.xid, h.op));
    }
    out
}

/// The states with their sessions' ids: the old id with `Expired`, no
/// id with the new session's `Connecting`, its own with `Connected`.
#[test]
fn state_events_name_the_session_they_happened_to() {
    let (mut zk, now) = connected();
    zk.set_new_session_after_expiry(true);
    let change = |state, session_id| SessionChange { state, session_id };
    let states = |zk: &mut Client<u32, u32>| -> Vec<SessionChange> {
        events(zk)
            .into_iter()
            .filter_map(|e| match e {
                Event::State(c) => Some(c),
                _ => None,
            })
            .collect()
    };
    assert_eq!(states(&mut zk), [change(SessionState::Connected, 0x51)]);
    let answer = |session_id: i64, timeout_ms: i32| {
        let mut b = BytesMut::new();
        encode_frame(&mut b, |b| {
            ConnectResponse {
                protocol_version: 0,
                timeout_ms,
                session_id,
                passwd: vec![7; 16],
                read_only: false,
            }
            .encode(b)
        });
        b
    };
    zk.handle_disconnected(now);
    zk.handle_connected(now);
    let n = zk.output().len();
    zk.consume_output(n);
    // The server no longer has the session.
    zk.handle_input(now, &answer(0, 0));
    assert_eq!(
        states(&mut zk),
        [
            change(SessionState::Suspended, 0x51),
            change(SessionState::Expired, 0x51),
            change(SessionState::Connecting, 0),
        ]
    );
    assert!(zk.wants_connection());
    zk.handle_connected(now);
    let n = zk.output().len();
    zk.consume_output(n);
    zk.handle_input(now, &answer(0x52, 10_000));
    assert_eq!(states(&mut zk), [change(SessionState::Connected, 0x52)]);
}

#[test]
fn a_drivers_request_and_watch_come_back_under_its_handles() {
    let (mut zk, now) = connected();
    assert!(matches!(
        &events(&mut zk)[..],
        [Event::State(SessionChange {
            state: SessionState::Connected,
            ..
        })]
    ));
    let exists = Request::Exists(PathWatch {
        path: "/a".into(),
        watch: true,
    });
    zk.submit(now, exists, 7, Some(9));
    let [(xid, jute::OpCode::Exists)] = sent(&mut zk)[..] else {
        panic!("one exists request");
    };
    let mut reply = BytesMut::new();
    encode_frame(&mut reply, |b| {
        let err = ErrorCode::Ok;
        ReplyHeader { xid, zxid: 3, err }.encode(b);
        Response::Stat(Stat::default()).encode(b);
    });
    encode_frame(&mut reply, |b| {
        let (xid, zxid, err) = (-1, -1, ErrorCode::Ok);
        ReplyHeader { xid, zxid, err }.encode(b);
        let (kind, state) = (EventType::NodeDeleted, KeeperState::SyncConnected);
        WatcherEvent {
            kind,
            state,
            path: "/a".into(),
        }
        .encode(b);
    });
    zk.handle_input(now, &reply);
    let got = events(&mut zk);
    assert!(
        matches!(
            &got[..],
            [
                Event::Reply { to: 7, result: Ok(Response::Stat(_)) },
                Event::Watch { to: 9, event },
            ] if event.kind == EventType::NodeDeleted && event.path == "/a"
        ),
        "{got:?}"
    );
    assert_eq!(zk.watch_events(), 1);
    assert_eq!(zk.last_zxid(), 3);
}

#[test]
fn the_lock_machines_requests_go_out_and_its_events_come_back() {
    let (mut zk, now) = connected();
    events(&mut zk);
    let spec = Arc::new(LockSpec::new("/l", "-lock-", Rule::Predecessor));
    zk.acquire(now, 1, spec, "u".into(), None, false);
    assert!(
        !sent(&mut zk).is_empty(),
        "the acquisition's first requests"
    );
    assert_eq!(zk.lock_attempts(), 1);
    zk.cancel(now, 1);
    let got = events(&mut zk);
    assert!(
        matches!(
            &got[..],
            [Event::Lock(LockEvent::Failed {
                id: 1,
                error: LockError::Cancelled
            })]
        ),
        "{got:?}"
    );
}

#[test]
fn a_close_without_a_handle_answers_nobody() {
    let (mut zk, now) = connected();
    events(&mut zk);
    zk.close(now, None);
    let [(xid, jute::OpCode::CloseSession)] = sent(&mut zk)[..] else {
        panic!("one close request");
    };
    let mut reply = BytesMut::new();
    encode_frame(&mut reply, |b| {
        let err = ErrorCode::Ok;
        ReplyHeader { xid, zxid: 4, err }.encode(b);
    });
    zk.handle_input(now, &reply);
    let got = events(&mut zk);
    assert!(
        got.iter().all(|e| !matches!(e, Event::Reply { .. })),
        "{got:?}"
    );
    assert!(got
        .iter()
        .any(|e| matches!(e, Event::State(c) if c.state == SessionState::Closed)));
}
