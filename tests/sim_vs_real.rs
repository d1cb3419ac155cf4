//! Differential check: the same request script, byte for byte, against the
//! real ZooKeeper 3.8 (a fresh standalone JVM from testkit) and
//! against `SimZooKeeper`. Replies and notifications are decoded and
//! normalized (zxids relative to the script's first one, times zeroed,
//! session ids replaced by the client's index, child lists sorted), then
//! must be equal.
//!
//! The sequence counter's end needs a server whose lock parent is near
//! 2^31 - 1: those scripts run against `testkit::zk::ZkHarness`, ZooKeeper's
//! own standalone server embedded in a JVM that can set a stored cversion.
//! Creates sent together race the server's pipeline, so their names are
//! held to what its source allows rather than compared one by one.

mod sim;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_reply, decode_server_message, encode_connect, encode_request, split_frame, Acl,
    AddWatchMode, AddWatchRequest, ConnectRequest, ConnectResponse, CreateMode, CreateRequest,
    Decode, MultiOp, MultiResult, OpCode, PathVersion, PathWatch, Request, Response, ServerMessage,
    SetDataRequest, SetWatches, Stat,
};
use sim::zookeeper::{ConnId, SimZooKeeper};

const TICK_MS: u64 = 200;

/// One side of the comparison: two client connections.
trait Server {
    /// Sends `bytes` on connection `i`.
    fn send(&mut self, i: usize, bytes: &[u8]);
    /// Whole frames received on connection `i` up to and including the reply
    /// with `xid` (None: the connection closed first).
    fn until_reply(&mut self, i: usize, xid: i32) -> (Vec<Vec<u8>>, bool);
    /// The first frame on connection `i` (the ConnectResponse).
    fn first_frame(&mut self, i: usize) -> Vec<u8>;
}

struct Real {
    socks: Vec<TcpStream>,
    bufs: Vec<BytesMut>,
}

impl Real {
    fn read_frame(&mut self, i: usize) -> Option<Vec<u8>> {
        loop {
            if let Some(f) = split_frame(&mut self.bufs[i], usize::MAX).unwrap() {
                return Some(f.to_vec());
            }
            let mut chunk = [0u8; 4096];
            match self.socks[i].read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.bufs[i].extend_from_slice(&chunk[..n]),
            }
        }
    }
}

impl Server for Real {
    fn send(&mut self, i: usize, bytes: &[u8]) {
        self.socks[i].write_all(bytes).unwrap();
    }

    fn until_reply(&mut self, i: usize, xid: i32) -> (Vec<Vec<u8>>, bool) {
        let mut frames = Vec::new();
        for _ in 0..1000 {
            let Some(f) = self.read_frame(i) else {
                return (frames, true);
            };
            let done = matches!(decode_server_message(&f), Ok(ServerMessage::Reply { header, .. }) if header.xid == xid);
            frames.push(f);
            if done {
                return (frames, false);
            }
        }
        panic!("no reply for xid {xid}");
    }

    fn first_frame(&mut self, i: usize) -> Vec<u8> {
        self.read_frame(i).unwrap()
    }
}

struct Sim {
    zk: SimZooKeeper,
    now: Instant,
    conns: Vec<ConnId>,
    inbox: Vec<BytesMut>,
    closed: Vec<bool>,
}

impl Sim {
    fn drain(&mut self) {
        while let Some((c, bytes)) = self.zk.poll_output() {
            if let Some(i) = self.conns.iter().position(|x| *x == c) {
                self.inbox[i].extend_from_slice(&bytes);
            }
        }
        while let Some(c) = self.zk.poll_closed() {
            if let Some(i) = self.conns.iter().position(|x| *x == c) {
                self.closed[i] = true;
            }
        }
    }
}

impl Server for Sim {
    fn send(&mut self, i: usize, bytes: &[u8]) {
        self.now += Duration::from_millis(1);
        self.zk.receive(self.now, self.conns[i], bytes);
        self.drain();
    }

    fn until_reply(&mut self, i: usize, xid: i32) -> (Vec<Vec<u8>>, bool) {
        let mut frames = Vec::new();
        while let Some(f) = split_frame(&mut self.inbox[i], usize::MAX).unwrap() {
            let f = f.to_vec();
            let done = matches!(decode_server_message(&f), Ok(ServerMessage::Reply { header, .. }) if header.xid == xid);
            frames.push(f);
            if done {
                return (frames, false);
            }
        }
        assert!(self.closed[i], "sim: no reply for xid {xid}");
        (frames, true)
    }

    fn first_frame(&mut self, i: usize) -> Vec<u8> {
        split_frame(&mut self.inbox[i], usize::MAX)
            .unwrap()
            .unwrap()
            .to_vec()
    }
}

fn node(path: &str, data: &[u8], mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: data.to_vec(),
        acl: Acl::open_unsafe(),
        mode,
    }
}

fn pw(path: &str, watch: bool) -> PathWatch {
    PathWatch {
        path: path.into(),
        watch,
    }
}

fn pv(path: &str, version: i32) -> PathVersion {
    PathVersion {
        path: path.into(),
        version,
    }
}

/// The script: (client, request). Client 0 and 1 are separate sessions.
fn script() -> Vec<(usize, Request)> {
    use CreateMode::*;
    vec![
        (0, Request::GetData(pw("/", false))),
        (0, Request::Create2(node("/d", b"x", Persistent))),
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::Delete(pv("/d/s-0000000000", -1))),
        // Does a delete move the parent's cversion? (It does not in 3.8.)
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::GetChildren2(pw("/d", true))),
        (1, Request::Exists(pw("/nope", true))),
        (1, Request::GetData(pw("/nope2", true))),
        (1, Request::GetData(pw("/d", true))),
        (0, Request::Create(node("/nope", b"", Persistent))),
        (
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/d/m", b"", Persistent)),
                MultiOp::Check(pv("/missing", -1)),
                MultiOp::Delete(pv("/d", -1)),
            ]),
        ),
        (
            0,
            Request::Multi(vec![
                MultiOp::Create2(node("/d/q-", b"", PersistentSequential)),
                MultiOp::Create(node("/d/q-", b"", PersistentSequential)),
                MultiOp::Check(pv("/d", 0)),
                MultiOp::SetData(SetDataRequest {
                    path: "/d".into(),
                    data: b"y".to_vec(),
                    version: 0,
                }),
            ]),
        ),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/d".into(),
                data: b"z".to_vec(),
                version: 7,
            }),
        ),
        (0, Request::Delete(pv("/d", -1))),
        (0, Request::Delete(pv("/zookeeper", -1))),
        (0, Request::Delete(pv("/", -1))),
        (
            0,
            Request::Create(node("/d/s-0000000001/c", b"", Persistent)),
        ),
        (0, Request::Create(node("bad", b"", Persistent))),
        (0, Request::Create(node("/d/", b"", Persistent))),
        (0, Request::Create(node("/d/./x", b"", Persistent))),
        (0, Request::Create(node("/d/u-", b"", PersistentSequential))),
        (
            0,
            Request::Create(CreateRequest {
                path: "/d/e".into(),
                data: vec![],
                acl: vec![],
                mode: Persistent,
            }),
        ),
        (
            0,
            Request::Create(node("/nope/x", b"", CreateMode::Unknown(9))),
        ),
        (0, Request::Create(node("/ttl", b"", PersistentWithTtl))),
        (0, Request::CreateContainer(node("/ct", b"", Container))),
        (0, Request::Create2(node("/ct/a", b"", Persistent))),
        (0, Request::Exists(pw("/ct", false))),
        (0, Request::GetData(pw("/zookeeper", false))),
        (0, Request::GetData(pw("/zookeeper/config", false))),
        (0, Request::GetAcl("/d".into())),
        (0, Request::Sync("/d".into())),
        (0, Request::GetData(pw("/", false))),
        (0, Request::GetChildren(pw("/zookeeper", false))),
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/ct".into(),
                mode: AddWatchMode::PersistentRecursive,
            }),
        ),
        (0, Request::Create(node("/ct/a/b", b"", Persistent))),
        (0, Request::Delete(pv("/ct/a/b", -1))),
        (0, Request::GetEphemerals("/d".into())),
        (0, Request::GetAllChildrenNumber("/d".into())),
        (
            1,
            Request::SetWatches(SetWatches {
                relative_zxid: 1,
                data: vec!["/d".into(), "/gone".into()],
                exist: vec!["/nope".into(), "/never".into()],
                child: vec!["/d".into(), "/gone".into()],
                ..SetWatches::default()
            }),
        ),
        // One NodeDeleted per connection even with a data and a child watch.
        (1, Request::GetData(pw("/d/s-0000000001", true))),
        (1, Request::GetChildren(pw("/d/s-0000000001", true))),
        (1, Request::GetChildren(pw("/d", true))),
        (0, Request::Delete(pv("/d/s-0000000001", -1))),
        // Sequential under the root (a fresh root shows cversion -1).
        (0, Request::Create2(node("/r-", b"", PersistentSequential))),
        (0, Request::GetData(pw("/", false))),
        // A persistent and a one-shot watch on one path: one notification.
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/d".into(),
                mode: AddWatchMode::Persistent,
            }),
        ),
        (1, Request::GetData(pw("/d", true))),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/d".into(),
                data: b"w".to_vec(),
                version: -1,
            }),
        ),
        (0, Request::Create(node("/d/t", b"", Persistent))),
        (
            1,
            Request::SetWatches2(SetWatches {
                relative_zxid: 0,
                persistent: vec!["/p2".into()],
                persistent_recursive: vec!["/p3".into()],
                ..SetWatches::default()
            }),
        ),
        (0, Request::Create(node("/p2", b"", Persistent))),
        (0, Request::Create(node("/p3", b"", Persistent))),
        (0, Request::Create(node("/p3/x", b"", Persistent))),
        (
            1,
            Request::Auth(jute::AuthPacket {
                kind: 0,
                scheme: "digest".into(),
                auth: b"user:secret".to_vec(),
            }),
        ),
        (1, Request::Exists(pw("/d/s-0000000002", true))),
        // A one-shot watch replaces a persistent one on the same path.
        (0, Request::Create(node("/pc", b"", Persistent))),
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/pc".into(),
                mode: AddWatchMode::Persistent,
            }),
        ),
        (1, Request::GetChildren(pw("/pc", true))),
        (0, Request::Create(node("/pc/1", b"", Persistent))),
        (0, Request::Create(node("/pc/2", b"", Persistent))),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/pc".into(),
                data: b"1".to_vec(),
                version: -1,
            }),
        ),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/pc".into(),
                data: b"2".to_vec(),
                version: -1,
            }),
        ),
        (
            1,
            Request::CheckWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Children,
            }),
        ),
        (
            1,
            Request::RemoveWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Data,
            }),
        ),
        (
            1,
            Request::CheckWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Any,
            }),
        ),
        (0, Request::Ping),
        (0, Request::CloseSession),
        (1, Request::GetChildren2(pw("/d", false))),
    ]
}

/// Normalizes zxids (relative to `base`; older ones become -1).
fn z(v: i64, base: i64) -> i64 {
    if v < base {
        -1
    } else {
        v - base
    }
}

fn norm_stat(s: Stat, base: i64, sessions: &[i64]) -> Stat {
    Stat {
        czxid: z(s.czxid, base),
        mzxid: z(s.mzxid, base),
        pzxid: z(s.pzxid, base),
        ctime: 0,
        mtime: 0,
        ephemeral_owner: sessions
            .iter()
            .position(|x| *x == s.ephemeral_owner)
            .map(|i| 1000 + i as i64)
            .unwrap_or(s.ephemeral_owner),
        ..s
    }
}

fn norm(resp: Response, base: i64, sessions: &[i64]) -> Response {
    let st = |s| norm_stat(s, base, sessions);
    match resp {
        Response::Created { path, stat } => Response::Created {
            path,
            stat: st(stat),
        },
        Response::Stat(s) => Response::Stat(st(s)),
        Response::Acl { acl, stat } => Response::Acl {
            acl,
            stat: st(stat),
        },
        Response::Data { data, stat } => Response::Data {
            data,
            stat: st(stat),
        },
        Response::Children(c) => {
            let mut c = c.to_vec();
            c.sort();
            Response::Children(c.into())
        }
        Response::Children2 { children, stat } => {
            let mut children = children.to_vec();
            children.sort();
            Response::Children2 {
                children: children.into(),
                stat: st(stat),
            }
        }
        Response::Multi(rs) => Response::Multi(
            rs.into_iter()
                .map(|r| match r {
                    MultiResult::Create2 { path, stat } => MultiResult::Create2 {
                        path,
                        stat: st(stat),
                    },
                    MultiResult::SetData { stat } => MultiResult::SetData { stat: st(stat) },
                    other => other,
                })
                .collect(),
        ),
        other => other,
    }
}

/// Runs the script on `server`; returns one normalized line per frame.
fn run(server: &mut dyn Server, steps: Vec<(usize, Request)>) -> Vec<String> {
    let mut sessions = Vec::new();
    for i in 0..2 {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: 4000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
            },
        );
        server.send(i, &buf);
        let resp = ConnectResponse::decode_exact(&server.first_frame(i)).unwrap();
        assert_eq!(resp.timeout_ms, 4000);
        sessions.push(resp.session_id);
    }
    let mut out = Vec::new();
    let mut base = None;
    let mut closed = [false; 2];
    for (step, (i, req)) in steps.into_iter().enumerate() {
        if closed[i] {
            out.push(format!("{step} c{i}: (closed)"));
            continue;
        }
        let op: OpCode = req.op_code();
        let xid = match op {
            OpCode::Ping => jute::xid::PING,
            OpCode::SetWatches | OpCode::SetWatches2 => jute::xid::SET_WATCHES,
            OpCode::Auth => jute::xid::AUTH,
            _ => step as i32 + 1,
        };
        let mut buf = BytesMut::new();
        encode_request(&mut buf, xid, &req);
        server.send(i, &buf);
        let (frames, was_closed) = server.until_reply(i, xid);
        // What the other connection got meanwhile: a ping flushes it.
        let other = 1 - i;
        let mut others = Vec::new();
        if !closed[other] {
            let mut ping = BytesMut::new();
            encode_request(&mut ping, jute::xid::PING, &Request::Ping);
            server.send(other, &ping);
            let (f, c) = server.until_reply(other, jute::xid::PING);
            others = f;
            closed[other] = c;
            others.pop();
        }
        for (conn, frames) in [(i, frames), (other, others)] {
            for f in frames {
                let line = match decode_server_message(&f).unwrap() {
                    ServerMessage::WatchEvent { zxid, event } => {
                        format!(
                            "event zxid={zxid} {:?} {:?} {}",
                            event.kind, event.state, event.path
                        )
                    }
                    ServerMessage::Reply { header, body } => {
                        let b = *base.get_or_insert(header.zxid);
                        let result = decode_reply(op, &header, body)
                            .unwrap()
                            .map(|r| norm(r, b, &sessions));
                        let zx = if header.xid == jute::xid::AUTH || header.zxid <= 0 {
                            header.zxid
                        } else {
                            z(header.zxid, b)
                        };
                        format!(
                            "reply xid={} zxid={zx} {:?}: {result:?}",
                            header.xid, header.err
                        )
                    }
                };
                out.push(format!("{step} c{conn}: {line}"));
            }
        }
        if was_closed {
            closed[i] = true;
            out.push(format!("{step} c{i}: closed by server"));
        }
    }
    out
}

/// Runs `steps` on a fresh real server and a fresh SimZooKeeper; returns
/// the differing transcript lines (empty when they agree).
fn compare(steps: Vec<(usize, Request)>) -> Vec<String> {
    let real_server = testkit::zk::ZkServer::start_with(TICK_MS);
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(real_server.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let mut real = Real {
        socks,
        bufs: vec![BytesMut::new(), BytesMut::new()],
    };
    let steps_copy = steps.clone();
    let real_lines = run(&mut real, steps.clone());

    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, Duration::from_millis(TICK_MS));
    let conns = vec![zk.connect(now), zk.connect(now)];
    let mut sim = Sim {
        zk,
        now,
        conns,
        inbox: vec![BytesMut::new(), BytesMut::new()],
        closed: vec![false, false],
    };
    let sim_lines = run(&mut sim, steps);

    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_lines.join("\n"));
    }
    if let Some(dir) = std::env::var_os("SIM_VS_REAL_DUMP") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::write(dir.join("real.txt"), real_lines.join("\n")).unwrap();
        std::fs::write(dir.join("sim.txt"), sim_lines.join("\n")).unwrap();
        let listing: Vec<String> = steps_copy
            .iter()
            .enumerate()
            .map(|(k, (c, r))| format!("{k} c{c}: {r:?}"))
            .collect();
        std::fs::write(dir.join("steps.txt"), listing.join("\n")).unwrap();
    }
    let mut diffs = Vec::new();
    for k in 0..real_lines.len().max(sim_lines.len()) {
        let r = real_lines.get(k).map(String::as_str).unwrap_or("<none>");
        let s = sim_lines.get(k).map(String::as_str).unwrap_or("<none>");
        if r != s {
            diffs.push(format!("line {k}\nreal: {r}\n sim: {s}"));
        }
    }
    diffs
}

#[test]
fn sim_matches_real_zookeeper() {
    let diffs = compare(script());
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// A deterministic pseudo-random script over a handful of paths: creates
/// of every mode, deletes and setData at right and wrong versions, reads
/// with and without watches, multis, setWatches, addWatch. No
/// closeSession (the real server deletes a dying session's ephemerals in
/// HashSet order).
fn random_script(seed: u64, len: usize) -> Vec<(usize, Request)> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    const PATHS: [&str; 7] = ["/a", "/a/b", "/a/c", "/b", "/a/b/c", "/a/s-", "/c"];
    let mut steps = Vec::new();
    for _ in 0..len {
        let client = next(2) as usize;
        let path = PATHS[next(PATHS.len() as u64) as usize].to_string();
        let version = [-1, 0, 1, 2][next(4) as usize];
        let mode = [
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ][next(5) as usize];
        let watch = next(2) == 0;
        let data = vec![b'v'; next(3) as usize];
        let write = |next: &mut dyn FnMut(u64) -> u64| -> MultiOp {
            let p = PATHS[next(PATHS.len() as u64) as usize].to_string();
            match next(5) {
                0 => MultiOp::Create(node(&p, b"", CreateMode::Persistent)),
                1 => MultiOp::Create2(node(&p, b"m", CreateMode::PersistentSequential)),
                2 => MultiOp::Delete(pv(&p, -1)),
                3 => MultiOp::SetData(SetDataRequest {
                    path: p,
                    data: b"m".to_vec(),
                    version: -1,
                }),
                _ => MultiOp::Check(pv(&p, [-1, 0][next(2) as usize])),
            }
        };
        let req = match next(19) {
            14 => Request::SetAcl(jute::SetAclRequest {
                path,
                acl: Acl::open_unsafe(),
                version,
            }),
            15 => Request::GetAcl(path),
            16 => Request::GetEphemerals(path),
            17 => Request::GetAllChildrenNumber(path),
            18 => {
                let kind = [
                    jute::WatcherType::Children,
                    jute::WatcherType::Data,
                    jute::WatcherType::Any,
                ][next(3) as usize];
                let w = jute::WatchesRequest { path, kind };
                if watch {
                    Request::RemoveWatches(w)
                } else {
                    Request::CheckWatches(w)
                }
            }
            0 | 1 => Request::Create(node(&path, &data, mode)),
            2 => Request::Create2(node(&path, &data, mode)),
            3 => Request::CreateContainer(node(&path, &data, CreateMode::Container)),
            4 | 5 => Request::Delete(pv(&path, version)),
            6 => Request::SetData(SetDataRequest {
                path,
                data,
                version,
            }),
            7 => Request::Exists(pw(&path, watch)),
            8 => Request::GetData(pw(&path, watch)),
            9 => Request::GetChildren(pw(&path, watch)),
            10 => Request::GetChildren2(pw(&path, watch)),
            11 => {
                let n = 1 + next(3);
                Request::Multi((0..n).map(|_| write(&mut next)).collect())
            }
            12 => Request::SetWatches(SetWatches {
                relative_zxid: next(20) as i64,
                data: vec![path.clone()],
                exist: vec![PATHS[next(PATHS.len() as u64) as usize].to_string()],
                child: vec![path],
                ..SetWatches::default()
            }),
            _ => Request::AddWatch(AddWatchRequest {
                path,
                mode: if watch {
                    AddWatchMode::Persistent
                } else {
                    AddWatchMode::PersistentRecursive
                },
            }),
        };
        steps.push((client, req));
    }
    steps
}

/// Seeds 1-3 by default; `SIM_VS_REAL_SEEDS=FIRST..LAST` runs more.
#[test]
fn random_scripts_match_real_zookeeper() {
    let seeds: Vec<u64> = match std::env::var("SIM_VS_REAL_SEEDS") {
        Ok(range) => {
            let (a, b) = range.split_once("..").expect("FIRST..LAST");
            (a.parse().unwrap()..=b.parse().unwrap()).collect()
        }
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        let diffs = compare(random_script(seed, 400));
        assert!(
            diffs.is_empty(),
            "seed {seed}: {} differences, first ones:\n{}",
            diffs.len(),
            diffs[..diffs.len().min(6)].join("\n")
        );
    }
}

/// What a raw connection observes next.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Frame(Vec<u8>),
    Closed,
    Nothing,
}

/// Raw connections for the handshake-level comparison.
trait Net {
    fn open(&mut self) -> usize;
    fn send(&mut self, c: usize, bytes: &[u8]);
    fn next(&mut self, c: usize) -> Seen;
    fn sleep(&mut self, d: Duration);
}

struct RealNet {
    addr: std::net::SocketAddr,
    socks: Vec<TcpStream>,
    bufs: Vec<BytesMut>,
}

impl Net for RealNet {
    fn open(&mut self) -> usize {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        s.set_nodelay(true).unwrap();
        self.socks.push(s);
        self.bufs.push(BytesMut::new());
        self.socks.len() - 1
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        // The server may have closed it already; that shows up in `next`.
        let _ = self.socks[c].write_all(bytes);
    }

    fn next(&mut self, c: usize) -> Seen {
        loop {
            if let Some(f) = split_frame(&mut self.bufs[c], usize::MAX).unwrap() {
                return Seen::Frame(f.to_vec());
            }
            let mut chunk = [0u8; 4096];
            match self.socks[c].read(&mut chunk) {
                Ok(0) => return Seen::Closed,
                Ok(n) => self.bufs[c].extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Seen::Nothing
                }
                Err(_) => return Seen::Closed,
            }
        }
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

struct SimNet {
    zk: SimZooKeeper,
    now: Instant,
    conns: Vec<ConnId>,
    inbox: Vec<BytesMut>,
    closed: Vec<bool>,
}

impl SimNet {
    fn drain(&mut self) {
        while let Some((c, bytes)) = self.zk.poll_output() {
            if let Some(i) = self.conns.iter().position(|x| *x == c) {
                self.inbox[i].extend_from_slice(&bytes);
            }
        }
        while let Some(c) = self.zk.poll_closed() {
            if let Some(i) = self.conns.iter().position(|x| *x == c) {
                self.closed[i] = true;
            }
        }
    }
}

impl Net for SimNet {
    fn open(&mut self) -> usize {
        self.conns.push(self.zk.connect(self.now));
        self.inbox.push(BytesMut::new());
        self.closed.push(false);
        self.drain();
        self.conns.len() - 1
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        self.now += Duration::from_millis(1);
        self.zk.receive(self.now, self.conns[c], bytes);
        self.drain();
    }

    fn next(&mut self, c: usize) -> Seen {
        self.drain();
        if let Some(f) = split_frame(&mut self.inbox[c], usize::MAX).unwrap() {
            return Seen::Frame(f.to_vec());
        }
        if self.closed[c] {
            Seen::Closed
        } else {
            Seen::Nothing
        }
    }

    fn sleep(&mut self, d: Duration) {
        self.now += d;
        self.zk.handle_timeout(self.now);
        self.drain();
    }
}

/// Observations of the handshake comparison, with session ids numbered.
#[derive(Default)]
struct Obs {
    ids: Vec<i64>,
    passwords: Vec<Vec<u8>>,
    out: Vec<String>,
}

impl Obs {
    fn see(&mut self, net: &mut dyn Net, c: usize, what: &str) {
        let line = match net.next(c) {
            Seen::Frame(f) => match ConnectResponse::decode_exact(&f) {
                Ok(r) => {
                    let sid = match self.ids.iter().position(|x| *x == r.session_id) {
                        Some(i) => format!("S{i}"),
                        None if r.session_id == 0 => "0".to_string(),
                        None => {
                            self.ids.push(r.session_id);
                            self.passwords.push(r.passwd.clone());
                            format!("S{} (new)", self.ids.len() - 1)
                        }
                    };
                    let pw = if r.passwd.iter().all(|b| *b == 0) {
                        "zeros"
                    } else {
                        "issued"
                    };
                    format!(
                        "connect response timeout={} session={sid} passwd={pw}",
                        r.timeout_ms
                    )
                }
                Err(_) => match decode_server_message(&f) {
                    Ok(ServerMessage::Reply { header, .. }) => {
                        format!(
                            "reply xid={} zxid={} err={:?}",
                            header.xid, header.zxid, header.err
                        )
                    }
                    other => format!("{other:?}"),
                },
            },
            other => format!("{other:?}"),
        };
        self.out.push(format!("{what}: {line}"));
    }
}

/// Handshakes and connection-level faults; one line per observation.
fn run_connections(net: &mut dyn Net) -> Vec<String> {
    let mut obs = Obs::default();
    let connect = |net: &mut dyn Net, c: usize, sid: i64, pw: Vec<u8>, zxid: i64, t: i32| {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: zxid,
                timeout_ms: t,
                session_id: sid,
                passwd: pw,
                read_only: false,
            },
        );
        net.send(c, &buf);
    };
    // A new session; the timeout is clamped to 20 ticks.
    let c0 = net.open();
    connect(net, c0, 0, vec![0; 16], 0, 1_000_000);
    obs.see(net, c0, "c0 new session");
    let (s0, p0) = (obs.ids[0], obs.passwords[0].clone());
    // Resumed elsewhere: the old connection is closed.
    let c1 = net.open();
    connect(net, c1, s0, p0.clone(), 0, 4000);
    obs.see(net, c1, "c1 resume");
    obs.see(net, c0, "c0 after resume elsewhere");
    // Wrong password: expired-looking answer, closed; the live connection
    // of the session is closed too.
    let c2 = net.open();
    connect(net, c2, s0, vec![7; 16], 0, 4000);
    obs.see(net, c2, "c2 wrong password");
    obs.see(net, c2, "c2 then");
    obs.see(net, c1, "c1 after wrong password elsewhere");
    // The session itself survived.
    let c3 = net.open();
    connect(net, c3, s0, p0.clone(), 0, 4000);
    obs.see(net, c3, "c3 resume");
    // A client ahead of the server.
    let c4 = net.open();
    connect(net, c4, 0, vec![0; 16], 1 << 40, 4000);
    obs.see(net, c4, "c4 zxid ahead");
    // An unknown session.
    let c5 = net.open();
    connect(net, c5, s0 + 1000, p0.clone(), 0, 4000);
    obs.see(net, c5, "c5 unknown session");
    obs.see(net, c5, "c5 then");
    // The smallest timeout (2 ticks), then silence: expired, closed.
    let c6 = net.open();
    connect(net, c6, 0, vec![0; 16], 0, 1);
    obs.see(net, c6, "c6 short session");
    let (s6, p6) = (obs.ids[1], obs.passwords[1].clone());
    net.sleep(Duration::from_millis(3 * TICK_MS + 50));
    obs.see(net, c6, "c6 after silence");
    let c7 = net.open();
    connect(net, c7, s6, p6, 0, 4000);
    obs.see(net, c7, "c7 resume expired");
    // An op code nobody knows.
    let mut buf = BytesMut::new();
    jute::encode_frame(&mut buf, |b| {
        jute::Encode::encode(
            &jute::RequestHeader {
                xid: 1,
                op: OpCode::Unknown(4242),
            },
            b,
        )
    });
    net.send(c3, &buf);
    obs.see(net, c3, "c3 unknown op");
    obs.see(net, c3, "c3 then");
    // A negative frame length.
    let c8 = net.open();
    net.send(c8, &[0xff, 0xff, 0xff, 0xf0]);
    obs.see(net, c8, "c8 negative length");
    obs.out
}

#[test]
fn connection_handling_matches_real_zookeeper() {
    let real_server = testkit::zk::ZkServer::start_with(TICK_MS);
    let mut real = RealNet {
        addr: real_server.addr(),
        socks: Vec::new(),
        bufs: Vec::new(),
    };
    let real_lines = run_connections(&mut real);
    let now = Instant::now();
    let mut sim = SimNet {
        zk: SimZooKeeper::new(now, Duration::from_millis(TICK_MS)),
        now,
        conns: Vec::new(),
        inbox: Vec::new(),
        closed: Vec::new(),
    };
    let sim_lines = run_connections(&mut sim);
    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_lines.join("\n"));
    }
    assert_eq!(real_lines, sim_lines);
}

// ---- the sequence counter's end -------------------------------------------
//
// The real side is `testkit::zk::ZkHarness`: ZooKeeper's own standalone
// server embedded in a JVM that can set a node's stored cversion, so a
// parent reaches i32::MAX in a few creates.

/// One step of an end-of-counter script.
#[derive(Clone)]
enum End {
    /// One request on client `.0`; its reply awaited before the next step.
    One(usize, Request),
    /// Requests written in one go on client `.0`, replies awaited after:
    /// the later ones are prepped while the earlier ones are in flight.
    Burst(usize, Vec<Request>),
    /// Sets the node's stored cversion (the sequence counter).
    Counter(&'static str, i32),
    /// Reads the node's stored cversion.
    Stored(&'static str),
}

/// The sides of the comparison can also set and read a stored cversion.
trait EndServer: Server {
    fn set_counter(&mut self, path: &str, value: i32);
    fn counter(&mut self, path: &str) -> i32;
}

struct RealEnd<'a> {
    real: Real,
    harness: &'a testkit::zk::ZkHarness,
}

impl Server for RealEnd<'_> {
    fn send(&mut self, i: usize, bytes: &[u8]) {
        self.real.send(i, bytes)
    }
    fn until_reply(&mut self, i: usize, xid: i32) -> (Vec<Vec<u8>>, bool) {
        self.real.until_reply(i, xid)
    }
    fn first_frame(&mut self, i: usize) -> Vec<u8> {
        self.real.first_frame(i)
    }
}

impl EndServer for RealEnd<'_> {
    fn set_counter(&mut self, path: &str, value: i32) {
        self.harness.set_sequence_counter(path, value);
    }
    fn counter(&mut self, path: &str) -> i32 {
        self.harness.stored(path).cversion
    }
}

impl EndServer for Sim {
    fn set_counter(&mut self, path: &str, value: i32) {
        assert!(self.zk.set_sequence_counter(path, value), "sim: no {path}");
    }
    fn counter(&mut self, path: &str) -> i32 {
        self.zk.sequence_counter(path).expect("sim: no such node")
    }
}

/// What a script run shows: transcript lines (names created in bursts
/// replaced by `<seq>`), and per burst the sequence numbers it was given.
struct EndRun {
    lines: Vec<String>,
    bursts: Vec<Vec<i32>>,
}

/// The number ZooKeeper appended to `prefix` (`%010d`: eleven characters
/// when negative, so it cannot be read from the end of a name alone).
fn seq_of(path: &str, prefix: &str) -> i32 {
    path.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no sequence number after {prefix}"))
}

/// The path a create asks for (the prefix of a sequential name).
fn asked_path(r: &Request) -> String {
    match r {
        Request::Create(c) | Request::Create2(c) => c.path.clone(),
        _ => String::new(),
    }
}

fn run_end(server: &mut dyn EndServer, steps: &[End]) -> EndRun {
    let mut sessions = Vec::new();
    for i in 0..2 {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: 4000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
            },
        );
        server.send(i, &buf);
        let resp = ConnectResponse::decode_exact(&server.first_frame(i)).unwrap();
        sessions.push(resp.session_id);
    }
    let mut run = EndRun {
        lines: Vec::new(),
        bursts: Vec::new(),
    };
    let mut base = None;
    let mut xid = 0;
    for (step, s) in steps.iter().enumerate() {
        let (i, reqs, burst) = match s {
            End::Counter(path, v) => {
                server.set_counter(path, *v);
                continue;
            }
            End::Stored(path) => {
                let cv = server.counter(path);
                run.lines
                    .push(format!("{step}: stored {path} cversion={cv}"));
                continue;
            }
            End::One(i, r) => (*i, vec![r.clone()], false),
            End::Burst(i, rs) => (*i, rs.clone(), true),
        };
        let mut buf = BytesMut::new();
        let mut ops = Vec::new();
        for r in &reqs {
            xid += 1;
            encode_request(&mut buf, xid, r);
            ops.push((xid, r.op_code(), asked_path(r)));
        }
        server.send(i, &buf);
        let (frames, closed) = server.until_reply(i, xid);
        assert!(!closed, "step {step}: connection closed");
        let mut names = Vec::new();
        for f in frames {
            let line = match decode_server_message(&f).unwrap() {
                ServerMessage::WatchEvent { event, .. } => {
                    format!("event {:?} {}", event.kind, event.path)
                }
                ServerMessage::Reply { header, body } => {
                    let (op, asked) = ops
                        .iter()
                        .find(|(x, _, _)| *x == header.xid)
                        .map(|(_, op, asked)| (*op, asked.as_str()))
                        .expect("a reply to a request we sent");
                    let b = *base.get_or_insert(header.zxid);
                    let mut result = decode_reply(op, &header, body)
                        .unwrap()
                        .map(|r| norm(r, b, &sessions));
                    if burst {
                        if let Ok(Response::Created { path, .. } | Response::Path(path)) =
                            &mut result
                        {
                            names.push(seq_of(path, asked));
                            *path = "<seq>".into();
                        }
                    }
                    format!(
                        "reply xid={} zxid={} {:?}: {result:?}",
                        header.xid,
                        z(header.zxid, b),
                        header.err
                    )
                }
            };
            run.lines.push(format!("{step} c{i}: {line}"));
        }
        if burst {
            run.bursts.push(names);
        }
    }
    run
}

/// Whether `names` (the sequence numbers one burst's creates got, in order,
/// all on one parent whose stored cversion was `stored` before) can come
/// from ZooKeeper 3.8's pipeline: the first is named from the DataTree; each
/// later one either from the previous one's outstanding record (previous + 1
/// in Java ints) or, once every earlier create was applied and its record
/// dropped, from the DataTree again, which holds the greatest cversion ever
/// stored.
fn burst_admissible(stored: i32, names: &[i32]) -> bool {
    let mut tree = stored;
    for (k, n) in names.iter().enumerate() {
        let ok = if k == 0 {
            *n == tree
        } else {
            *n == names[k - 1].wrapping_add(1) || *n == tree
        };
        if !ok {
            return false;
        }
        // DataTree.createNode: stored only if greater.
        tree = tree.max(n.wrapping_add(1));
    }
    true
}

fn compare_end(steps: &[End]) -> (EndRun, EndRun) {
    let harness = testkit::zk::ZkHarness::start(Duration::from_millis(TICK_MS));
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(harness.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let mut real = RealEnd {
        real: Real {
            socks,
            bufs: vec![BytesMut::new(), BytesMut::new()],
        },
        harness: &harness,
    };
    let real_run = run_end(&mut real, steps);
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, Duration::from_millis(TICK_MS));
    let conns = vec![zk.connect(now), zk.connect(now)];
    let mut sim = Sim {
        zk,
        now,
        conns,
        inbox: vec![BytesMut::new(), BytesMut::new()],
        closed: vec![false, false],
    };
    let sim_run = run_end(&mut sim, steps);
    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_run.lines.join("\n"));
        println!("real bursts: {:?}", real_run.bursts);
    }
    (real_run, sim_run)
}

fn assert_same_lines(real: &EndRun, sim: &EndRun) {
    let mut diffs = Vec::new();
    for k in 0..real.lines.len().max(sim.lines.len()) {
        let r = real.lines.get(k).map(String::as_str).unwrap_or("<none>");
        let s = sim.lines.get(k).map(String::as_str).unwrap_or("<none>");
        if r != s {
            diffs.push(format!("line {k}\nreal: {r}\n sim: {s}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

fn seq(path: &str, mode: CreateMode) -> Request {
    Request::Create2(node(path, b"", mode))
}

/// Creates one at a time across the end of `/e`'s counter (plain and
/// protected names, deletes in between, a multi, a child watch), `stat`
/// of the parent after each stage, and its stored cversion: the model and
/// the real server agree field by field.
#[test]
fn counter_end_one_at_a_time_matches_real_zookeeper() {
    use CreateMode::*;
    let max = i32::MAX;
    let steps = vec![
        End::One(0, Request::Create(node("/e", b"", Persistent))),
        End::Counter("/e", max - 2),
        End::Stored("/e"),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Exists(pw("/e", false))),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::Stored("/e"),
        // Stuck: a plain name is taken, a protected one reuses the suffix.
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, seq("/e/n-", PersistentSequential)),
        End::One(1, Request::GetChildren(pw("/e", true))),
        End::One(0, seq("/e/_c_aaaa-lock-", EphemeralSequential)),
        End::One(1, seq("/e/_c_bbbb-lock-", EphemeralSequential)),
        End::One(0, seq("/e/_c_cccc-lock-", PersistentSequential)),
        End::Stored("/e"),
        End::One(1, Request::GetChildren2(pw("/e", false))),
        // A delete moves pzxid, not the counter; the plain name is free again.
        End::One(0, Request::Delete(pv("/e/n-2147483647", -1))),
        End::Stored("/e"),
        End::One(0, Request::Exists(pw("/e", false))),
        End::One(1, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Delete(pv("/e/n-2147483645", -1))),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Exists(pw("/e", false))),
        // Two sequential creates in one multi: the second is prepped from
        // the first's record.
        End::One(
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/e/_c_dddd-lock-", b"", EphemeralSequential)),
                MultiOp::Create(node("/e/_c_eeee-lock-", b"", EphemeralSequential)),
            ]),
        ),
        End::Stored("/e"),
        End::One(0, Request::GetChildren2(pw("/e", false))),
        // A failed multi leaves the counter alone.
        End::One(
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/e/_c_ffff-lock-", b"", EphemeralSequential)),
                MultiOp::Check(pv("/missing", -1)),
            ]),
        ),
        End::One(0, seq("/e/_c_gggg-lock-", EphemeralSequential)),
        End::Stored("/e"),
        End::One(1, Request::Exists(pw("/e", false))),
    ];
    let (real, sim) = compare_end(&steps);
    assert_same_lines(&real, &sim);
    // What the names and stat say, on the real server, spelled out.
    let text = real.lines.join("\n");
    assert!(text.contains("/e/n-2147483647"), "{text}");
    assert!(text.contains("NodeExists"), "{text}");
    assert!(text.contains("/e/_c_bbbb-lock-2147483647"), "{text}");
    assert!(text.contains("/e/_c_eeee-lock--2147483648"), "{text}");
    assert!(
        real.lines
            .iter()
            .filter(|l| l.contains("stored /e"))
            .skip(1)
            .all(|l| l.ends_with(&format!("cversion={max}"))),
        "{text}"
    );
}

/// Creates written without waiting, at and just before the end: the model
/// prepares the whole burst while it is in flight (2147483647, -2147483648,
/// …); the real server's names depend on how far its pipeline drained, and
/// must be a sequence its source allows. Everything else (errors, stats,
/// the stored counter after) must be equal.
#[test]
fn counter_end_bursts_match_real_zookeeper() {
    use CreateMode::*;
    let max = i32::MAX;
    let protected = |p: &str, k: usize| seq(&format!("{p}/_c_{k:04}-lock-"), EphemeralSequential);
    let mut steps = vec![
        End::One(0, Request::Create(node("/b1", b"", Persistent))),
        End::One(0, Request::Create(node("/b2", b"", Persistent))),
        End::One(0, Request::Create(node("/b3", b"", Persistent))),
        End::One(0, Request::Create(node("/b4", b"", Persistent))),
        End::Counter("/b1", max),
        End::Counter("/b2", max - 1),
        End::Counter("/b3", max),
        End::Counter("/b4", max),
    ];
    // Expected stored counters before each burst, in burst order.
    let mut stored_before = Vec::new();
    // /b1: protected names from the end, twice (-2147483648 can be issued
    // by both bursts).
    for round in 0..2 {
        stored_before.push(max);
        steps.push(End::Burst(
            0,
            (0..6).map(|k| protected("/b1", round * 10 + k)).collect(),
        ));
        steps.push(End::Stored("/b1"));
        steps.push(End::One(1, Request::Exists(pw("/b1", false))));
    }
    // /b2: crossing the end inside the burst.
    stored_before.push(max - 1);
    steps.push(End::Burst(0, (0..5).map(|k| protected("/b2", k)).collect()));
    steps.push(End::Stored("/b2"));
    steps.push(End::One(1, Request::Exists(pw("/b2", false))));
    // /b3: plain names while `n-2147483647` exists: every one fails.
    steps.push(End::One(0, seq("/b3/n-", EphemeralSequential)));
    steps.push(End::Burst(
        0,
        (0..4).map(|_| seq("/b3/n-", EphemeralSequential)).collect(),
    ));
    steps.push(End::Stored("/b3"));
    // /b4: a delete between two creates of one burst.
    steps.push(End::One(0, seq("/b4/_c_x-lock-", PersistentSequential)));
    stored_before.push(max);
    steps.push(End::Burst(
        0,
        vec![
            protected("/b4", 1),
            Request::Delete(pv("/b4/_c_x-lock-2147483647", -1)),
            protected("/b4", 2),
            protected("/b4", 3),
        ],
    ));
    steps.push(End::Stored("/b4"));
    steps.push(End::One(1, Request::Exists(pw("/b4", false))));
    let (real, sim) = compare_end(&steps);
    assert_same_lines(&real, &sim);
    // The /b3 burst created nothing on either side: no names recorded.
    let bursts_with_names: Vec<&Vec<i32>> = real.bursts.iter().filter(|b| !b.is_empty()).collect();
    let sim_with_names: Vec<&Vec<i32>> = sim.bursts.iter().filter(|b| !b.is_empty()).collect();
    assert_eq!(bursts_with_names.len(), stored_before.len());
    for ((r, s), stored) in bursts_with_names
        .iter()
        .zip(&sim_with_names)
        .zip(&stored_before)
    {
        assert!(
            burst_admissible(*stored, r),
            "real names {r:?} (stored {stored}) are not what ZooKeeper's pipeline can issue"
        );
        assert!(burst_admissible(*stored, s), "model names {s:?}");
        // The model keeps the whole burst in flight.
        let all_in_flight: Vec<i32> = (0..s.len() as i32)
            .map(|k| stored.wrapping_add(k))
            .collect();
        assert_eq!(**s, all_in_flight);
    }
    eprintln!("real burst names: {:?}", real.bursts);
}

#[test]
fn burst_admissibility_rule() {
    let max = i32::MAX;
    let min = i32::MIN;
    assert!(burst_admissible(max, &[max, min, min + 1]));
    assert!(burst_admissible(max, &[max, max, min, max, min]));
    assert!(burst_admissible(max - 1, &[max - 1, max, min, max]));
    assert!(!burst_admissible(max, &[min]));
    assert!(!burst_admissible(max, &[max, min + 1]));
    assert!(!burst_admissible(max - 1, &[max - 1, max - 1]));
    assert!(!burst_admissible(5, &[5, 6, 5]));
}
