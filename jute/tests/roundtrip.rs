//! encode → decode is the identity for every record, over generated values.

use bytes::BytesMut;
use zklock_jute::*;

/// A small deterministic generator so failures reproduce.
struct Gen(u64);

/// Where a run's seed comes from: `JUTE_SEED` if set, else the test's own
/// fixed seed (every plain run draws the same values).
const SEED_VAR: &str = "JUTE_SEED";

/// Prints, when the test fails, the command that draws the same values.
struct Replay {
    test: &'static str,
    seed: u64,
}

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "replay: {SEED_VAR}={} cargo test -p zklock-jute --test roundtrip {}",
                self.seed, self.test
            );
        }
    }
}

/// The generator for `test`, seeded from `JUTE_SEED` or `default`, and the
/// guard that prints the replay command if the test fails.
fn seeded(test: &'static str, default: u64) -> (Gen, Replay) {
    let seed = match std::env::var(SEED_VAR) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not a number")),
        Err(_) => default,
    };
    // xorshift stays at 0 from 0.
    let seed = seed.max(1);
    (Gen(seed), Replay { test, seed })
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn i32(&mut self) -> i32 {
        self.next() as i32
    }
    fn i64(&mut self) -> i64 {
        self.next() as i64
    }
    fn bool(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
    fn bytes(&mut self) -> Vec<u8> {
        (0..self.below(40)).map(|_| self.next() as u8).collect()
    }
    fn string(&mut self) -> String {
        let alphabet = ['a', 'z', '/', '-', '_', '0', '9', 'é', '锁', ' '];
        (0..self.below(30))
            .map(|_| alphabet[self.below(alphabet.len() as u64)])
            .collect()
    }
    fn strings(&mut self) -> Vec<String> {
        (0..self.below(6)).map(|_| self.string()).collect()
    }
    fn stat(&mut self) -> Stat {
        Stat {
            czxid: self.i64(),
            mzxid: self.i64(),
            ctime: self.i64(),
            mtime: self.i64(),
            version: self.i32(),
            cversion: self.i32(),
            aversion: self.i32(),
            ephemeral_owner: self.i64(),
            data_length: self.i32(),
            num_children: self.i32(),
            pzxid: self.i64(),
        }
    }
    fn acls(&mut self) -> Vec<Acl> {
        (0..self.below(4))
            .map(|_| Acl {
                perms: self.i32(),
                id: Id {
                    scheme: self.string(),
                    id: self.string(),
                },
            })
            .collect()
    }
    fn pick<T: Copy>(&mut self, all: &[T]) -> T {
        all[self.below(all.len() as u64)]
    }
    fn create(&mut self) -> CreateRequest {
        CreateRequest {
            path: self.string(),
            data: self.bytes(),
            acl: self.acls(),
            mode: self.pick(CreateMode::ALL),
        }
    }
    fn path_version(&mut self) -> PathVersion {
        PathVersion {
            path: self.string(),
            version: self.i32(),
        }
    }
    fn path_watch(&mut self) -> PathWatch {
        PathWatch {
            path: self.string(),
            watch: self.bool(),
        }
    }
    fn set_watches(&mut self, v2: bool) -> SetWatches {
        SetWatches {
            relative_zxid: self.i64(),
            data: self.strings(),
            exist: self.strings(),
            child: self.strings(),
            persistent: if v2 { self.strings() } else { vec![] },
            persistent_recursive: if v2 { self.strings() } else { vec![] },
        }
    }
    fn multi_op(&mut self) -> MultiOp {
        match self.below(5) {
            0 => MultiOp::Create(self.create()),
            1 => MultiOp::Create2(self.create()),
            2 => MultiOp::Delete(self.path_version()),
            3 => MultiOp::Check(self.path_version()),
            _ => MultiOp::SetData(SetDataRequest {
                path: self.string(),
                data: self.bytes(),
                version: self.i32(),
            }),
        }
    }
    fn multi_result(&mut self) -> MultiResult {
        match self.below(6) {
            0 => MultiResult::Create {
                path: self.string(),
            },
            1 => MultiResult::Create2 {
                path: self.string(),
                stat: self.stat(),
            },
            2 => MultiResult::Delete,
            3 => MultiResult::Check,
            4 => MultiResult::SetData { stat: self.stat() },
            _ => MultiResult::Error(self.pick(ErrorCode::ALL)),
        }
    }

    /// One request of every kind, chosen by `kind`.
    fn request(&mut self, kind: usize) -> Request {
        match kind {
            0 => Request::Create(self.create()),
            1 => Request::Create2(self.create()),
            2 => Request::CreateContainer(self.create()),
            3 => Request::CreateTtl(CreateTtlRequest {
                create: self.create(),
                ttl_ms: self.i64(),
            }),
            4 => Request::Delete(self.path_version()),
            5 => Request::Exists(self.path_watch()),
            6 => Request::GetData(self.path_watch()),
            7 => Request::SetData(SetDataRequest {
                path: self.string(),
                data: self.bytes(),
                version: self.i32(),
            }),
            8 => Request::GetAcl(self.string()),
            9 => Request::SetAcl(SetAclRequest {
                path: self.string(),
                acl: self.acls(),
                version: self.i32(),
            }),
            10 => Request::GetChildren(self.path_watch()),
            11 => Request::GetChildren2(self.path_watch()),
            12 => Request::Sync(self.string()),
            13 => Request::Check(self.path_version()),
            14 => Request::Multi((0..self.below(5)).map(|_| self.multi_op()).collect()),
            15 => Request::Auth(AuthPacket {
                kind: self.i32(),
                scheme: self.string(),
                auth: self.bytes(),
            }),
            16 => Request::SetWatches(self.set_watches(false)),
            17 => Request::SetWatches2(self.set_watches(true)),
            18 => Request::AddWatch(AddWatchRequest {
                path: self.string(),
                mode: self.pick(AddWatchMode::ALL),
            }),
            19 => Request::RemoveWatches(WatchesRequest {
                path: self.string(),
                kind: self.pick(WatcherType::ALL),
            }),
            20 => Request::CheckWatches(WatchesRequest {
                path: self.string(),
                kind: self.pick(WatcherType::ALL),
            }),
            21 => Request::GetEphemerals(self.string()),
            22 => Request::GetAllChildrenNumber(self.string()),
            23 => Request::WhoAmI,
            24 => Request::Ping,
            _ => Request::CloseSession,
        }
    }

    /// A response of every kind, paired with an op code that answers with it.
    fn response(&mut self, kind: usize) -> (OpCode, Response) {
        match kind {
            0 => (OpCode::Delete, Response::Empty),
            1 => (OpCode::Create, Response::Path(self.string())),
            2 => (
                OpCode::Create2,
                Response::Created {
                    path: self.string(),
                    stat: self.stat(),
                },
            ),
            3 => (OpCode::Exists, Response::Stat(self.stat())),
            4 => (
                OpCode::GetData,
                Response::Data {
                    data: self.bytes(),
                    stat: self.stat(),
                },
            ),
            5 => (
                OpCode::GetChildren,
                Response::Children(self.strings().into()),
            ),
            6 => (
                OpCode::GetChildren2,
                Response::Children2 {
                    children: self.strings().into(),
                    stat: self.stat(),
                },
            ),
            7 => (
                OpCode::GetAcl,
                Response::Acl {
                    acl: self.acls(),
                    stat: self.stat(),
                },
            ),
            8 => (
                OpCode::Multi,
                Response::Multi((0..self.below(5)).map(|_| self.multi_result()).collect()),
            ),
            9 => (OpCode::GetAllChildrenNumber, Response::Count(self.i32())),
            _ => (
                OpCode::AddWatch,
                Response::Status(self.pick(ErrorCode::ALL)),
            ),
        }
    }
}

const REQUEST_KINDS: usize = 26;
const RESPONSE_KINDS: usize = 11;

#[test]
fn every_request_round_trips() {
    let (mut g, _replay) = seeded("every_request_round_trips", 0x2545_f491_4f6c_dd1d);
    for round in 0..200 {
        for kind in 0..REQUEST_KINDS {
            let req = g.request(kind);
            let xid = g.i32();
            let mut buf = BytesMut::new();
            encode_request(&mut buf, xid, &req);
            let frame = split_frame(&mut buf, usize::MAX).unwrap().unwrap();
            assert!(buf.is_empty());
            let (header, body) = decode_request_header(&frame).unwrap();
            assert_eq!(
                header,
                RequestHeader {
                    xid,
                    op: req.op_code()
                }
            );
            assert_eq!(
                Request::decode_body(header.op, body),
                Ok(req),
                "round {round}"
            );
        }
    }
}

/// A SetWatches batch knows the size of its body, so that the session can
/// cut its batches under the server's frame limit: exactly setWatches2's
/// body, and no less than setWatches'. It needs setWatches2 exactly when
/// it carries persistent watches. Kills: `SetWatches::encoded_len`'s
/// sums altered, `needs_v2` made constant or its `||` or `!` altered.
#[test]
fn set_watches_knows_its_size_and_its_version() {
    let (mut g, _replay) = seeded("set_watches_knows_its_size_and_its_version", 0x5eed_05e7);
    let body_len = |req: &Request| {
        let mut buf = BytesMut::new();
        encode_request(&mut buf, 0, req)
    };
    // The request header: xid and op code.
    let header = 8;
    for _ in 0..200 {
        let persistent = g.bool();
        let batch = g.set_watches(persistent);
        let v2 = body_len(&Request::SetWatches2(batch.clone())) - header;
        let v1 = body_len(&Request::SetWatches(batch.clone())) - header;
        assert_eq!(batch.encoded_len(), v2, "{batch:?}");
        assert!(batch.encoded_len() >= v1, "{batch:?}");
    }
    for (persistent, recursive, needs) in [(0, 0, false), (1, 0, true), (0, 1, true), (2, 3, true)]
    {
        let batch = SetWatches {
            persistent: vec!["/p".into(); persistent],
            persistent_recursive: vec!["/r".into(); recursive],
            ..SetWatches::default()
        };
        assert_eq!(batch.needs_v2(), needs, "{batch:?}");
    }
}

#[test]
fn every_response_round_trips() {
    let (mut g, _replay) = seeded("every_response_round_trips", 0x9e37_79b9_7f4a_7c15);
    for _ in 0..200 {
        for kind in 0..RESPONSE_KINDS {
            let (op, resp) = g.response(kind);
            let header = ReplyHeader {
                xid: g.i32().max(1),
                zxid: g.i64(),
                err: ErrorCode::Ok,
            };
            let mut buf = BytesMut::new();
            encode_frame(&mut buf, |b| {
                header.encode(b);
                resp.encode(b);
            });
            let frame = split_frame(&mut buf, usize::MAX).unwrap().unwrap();
            let ServerMessage::Reply { header: h, body } = decode_server_message(&frame).unwrap()
            else {
                panic!("not a reply")
            };
            assert_eq!(h, header);
            assert_eq!(decode_reply(op, &h, body), Ok(Ok(resp)));
        }
    }
}

#[test]
fn handshake_and_events_round_trip() {
    let (mut g, _replay) = seeded("handshake_and_events_round_trip", 7);
    for _ in 0..500 {
        let req = ConnectRequest {
            protocol_version: g.i32(),
            last_zxid_seen: g.i64(),
            timeout_ms: g.i32(),
            session_id: g.i64(),
            passwd: g.bytes(),
            read_only: g.bool(),
        };
        let resp = ConnectResponse {
            protocol_version: g.i32(),
            timeout_ms: g.i32(),
            session_id: g.i64(),
            passwd: g.bytes(),
            read_only: g.bool(),
        };
        let event = WatcherEvent {
            kind: EventType::from(g.i32() % 10),
            state: KeeperState::from(g.i32() % 10),
            path: g.string(),
        };
        let stat = g.stat();
        let mut b = BytesMut::new();
        req.encode(&mut b);
        assert_eq!(ConnectRequest::decode_exact(&b), Ok(req));
        b.clear();
        resp.encode(&mut b);
        assert_eq!(ConnectResponse::decode_exact(&b), Ok(resp));
        b.clear();
        event.encode(&mut b);
        assert_eq!(WatcherEvent::decode_exact(&b), Ok(event));
        b.clear();
        stat.encode(&mut b);
        assert_eq!(b.len(), STAT_LEN);
        assert_eq!(Stat::decode_exact(&b), Ok(stat));
    }
}

#[test]
fn trailing_bytes_are_reported() {
    let mut b = BytesMut::new();
    Stat::default().encode(&mut b);
    b.extend_from_slice(&[0]);
    assert_eq!(Stat::decode_exact(&b), Err(DecodeError::TrailingBytes(1)));
    assert_eq!(
        Response::decode(OpCode::Exists, &b),
        Err(DecodeError::TrailingBytes(1))
    );
}

#[test]
fn unknown_op_codes_are_typed_errors() {
    assert_eq!(
        Response::decode(OpCode::Unknown(77), &[]),
        Err(DecodeError::UnknownOpCode(77))
    );
    assert_eq!(
        Request::decode_body(OpCode::from(77), &[]),
        Err(DecodeError::UnknownOpCode(77))
    );
}
