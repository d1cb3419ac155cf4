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
    handshake(&mut zk, now);
    (zk, now)
}

/// A connection made and its handshake answered: session 0x51, 10 s.
fn handshake(zk: &mut Client<u32, u32>, now: Instant) {
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

/// Each call of the client reaches the part it names, and what it knows
/// comes from there: the granted timeout, the machine's attempts, the
/// persistent watch's release, a requeue, the SASL login.
/// Kills: `release_persistent` and `requeue` emptied; `negotiated_timeout`,
/// `lock_attempts` and `watch_events` answering a fixed value.
#[test]
fn every_call_reaches_its_part() {
    let now = Instant::now();
    let fresh: Client<u32, u32> = Client::new(SessionConfig::default(), now);
    assert_eq!(fresh.negotiated_timeout(), None, "nothing granted yet");
    let (mut zk, now) = connected();
    events(&mut zk);
    assert_eq!(zk.negotiated_timeout(), Some(Duration::from_secs(10)));
    assert_eq!(zk.watch_events(), 0, "no watch has fired");

    // A persistent watch whose last watcher goes: the server is asked to
    // drop it.
    let add = Request::AddWatch(jute::AddWatchRequest {
        path: "/w".into(),
        mode: jute::AddWatchMode::Persistent,
    });
    zk.submit(now, add, 1, Some(5));
    let [(xid, jute::OpCode::AddWatch)] = sent(&mut zk)[..] else {
        panic!("one addWatch");
    };
    let mut ok = BytesMut::new();
    encode_frame(&mut ok, |b| {
        let err = ErrorCode::Ok;
        ReplyHeader { xid, zxid: 2, err }.encode(b);
        // addWatch answers with an error code of its own (ErrorResponse).
        b.extend_from_slice(&0i32.to_be_bytes());
    });
    zk.handle_input(now, &ok);
    events(&mut zk);
    zk.release_persistent(now, "/w", |_| false, 2);
    assert_eq!(
        sent(&mut zk).iter().map(|(_, op)| *op).collect::<Vec<_>>(),
        [jute::OpCode::RemoveWatches]
    );

    // Attempts counted as the machine has them; a requeue of a holder it
    // does not have queues the new attempt anew.
    assert_eq!(zk.lock_attempts(), 0);
    let spec = Arc::new(LockSpec::new("/l", "-lock-", Rule::Predecessor));
    zk.acquire(now, 1, spec.clone(), "u1".into(), None, false);
    sent(&mut zk);
    zk.requeue(now, 7, 2, spec, "u2".into(), None);
    assert!(!sent(&mut zk).is_empty(), "the requeued attempt's requests");
    assert_eq!(zk.lock_attempts(), 2);
}

/// With SASL set, the first frame after the handshake is the login.
/// Kills: `set_sasl` emptied.
#[cfg(feature = "sasl")]
#[test]
fn a_sasl_login_goes_first_once_set() {
    let now = Instant::now();
    let mut zk: Client<u32, u32> = Client::new(SessionConfig::default(), now);
    zk.set_sasl(Some(crate::session::SaslConfig::digest_md5("alice", "pw")));
    handshake(&mut zk, now);
    assert_eq!(
        sent(&mut zk).iter().map(|(_, op)| *op).collect::<Vec<_>>(),
        [jute::OpCode::Sasl]
    );
}
