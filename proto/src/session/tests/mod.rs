//! The session core driven by bytes and virtual time: no sockets, no clock.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_request_header, encode_frame, split_frame, ConnectRequest, ConnectResponse, Decode,
    Encode, ErrorCode, EventType, KeeperState, Names, OpCode, PathWatch, ReplyHeader, Request,
    Response, Stat, WatcherEvent,
};

use super::*;

mod auth;
mod ending;
mod follower_model;
mod fuzzing;
mod handshake;
mod leader_check;
mod liveness;
mod refused_writes;
mod requests;
mod watches;

const T: Duration = Duration::from_millis(9000);

type TestSession = Session<u32, u32>;

/// Plays the server: reads what the session wrote, answers with frames.
struct Harness {
    s: TestSession,
    now: Instant,
}

impl Harness {
    fn new() -> Self {
        Harness::with_max_frame(4096)
    }

    /// A session that takes frames up to `max_frame` bytes long.
    fn with_max_frame(max_frame: usize) -> Self {
        let now = Instant::now();
        let config = SessionConfig {
            session_timeout: T,
            connect_timeout: Duration::from_secs(3),
            max_frame,
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
        let answer = handshake_answer(session_id, timeout_ms, vec![7; 16]);
        self.s.handle_input(self.now, &answer);
        req
    }

    fn reply(&mut self, xid: i32, zxid: i64, err: ErrorCode, body: Response) {
        self.feed(|b| {
            ReplyHeader { xid, zxid, err }.encode(b);
            body.encode(b);
        });
    }

    fn watch_event(&mut self, kind: EventType, path: &str) {
        let wire = watch_event_frame(kind, KeeperState::SyncConnected, path);
        self.s.handle_input(self.now, &wire);
    }
}

/// A watch notification, framed.
fn watch_event_frame(kind: EventType, state: KeeperState, path: &str) -> BytesMut {
    let mut wire = BytesMut::new();
    encode_frame(&mut wire, |b| {
        let (xid, zxid, err) = (-1, -1, ErrorCode::Ok);
        ReplyHeader { xid, zxid, err }.encode(b);
        let path = path.into();
        WatcherEvent { kind, state, path }.encode(b);
    });
    wire
}

/// The server's answer to a handshake, framed.
fn handshake_answer(session_id: i64, timeout_ms: i32, passwd: Vec<u8>) -> BytesMut {
    let mut wire = BytesMut::new();
    encode_frame(&mut wire, |b| {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            passwd,
            read_only: false,
        }
        .encode(b)
    });
    wire
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
