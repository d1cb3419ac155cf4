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

mod connections;
mod counter_end;
mod lagging;
mod scripts;

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
use zklock_sim::zookeeper::{ConnId, SimZooKeeper};

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

/// Moves what the model wrote to connection `conns[i]` into `inbox[i]`,
/// and marks the connections it closed.
fn drain_model(
    zk: &mut SimZooKeeper,
    conns: &[ConnId],
    inbox: &mut [BytesMut],
    closed: &mut [bool],
) {
    while let Some((c, bytes)) = zk.poll_output() {
        if let Some(i) = conns.iter().position(|x| *x == c) {
            inbox[i].extend_from_slice(&bytes);
        }
    }
    while let Some(c) = zk.poll_closed() {
        if let Some(i) = conns.iter().position(|x| *x == c) {
            closed[i] = true;
        }
    }
}

impl Sim {
    fn drain(&mut self) {
        drain_model(&mut self.zk, &self.conns, &mut self.inbox, &mut self.closed);
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

/// Opens a fresh session asking a 4 s timeout on connections 0 and 1
/// (granted as asked: both servers allow it); their ids.
fn open_sessions(server: &mut dyn Server) -> Vec<i64> {
    (0..2)
        .map(|i| {
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
            resp.session_id
        })
        .collect()
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
