//! The floor under every lock+unlock: a client of the codec alone, one
//! blocking socket, no threads, no recipe. Each cycle writes the previous
//! node's delete, the next create2 and the getChildren in one go and waits
//! for the listing: the least one uncontended cycle can cost on this server.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::BytesMut;
use jute::{
    CreateMode, CreateRequest, ErrorCode, PathVersion, PathWatch, Request, Response, ServerMessage,
};
use testkit::raw::RawClient;

use crate::json::ObjWriter;
use crate::worker::{stage, BoxResult, Params};

/// `worker floor <connect> <lock path> cycles=N`: the latency of each cycle.
pub fn uncontended(connect: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let cycles = p.usize("cycles", 1000)?;
    let warm = p.usize("warm", cycles / 2)?;
    let first = connect.split(',').next().unwrap_or(connect);
    let addr: SocketAddr = first
        .parse()
        .map_err(|e| format!("the floor needs one ip:port, not {first:?}: {e}"))?;
    let mut floor = Floor {
        raw: RawClient::connect(addr, 30_000),
        prefix: format!("{path}/_c_00000000-0000-4000-8000-000000000000-lock-"),
        parent: path.to_owned(),
        xid: 0,
        held: None,
    };
    floor.cycle()?;
    stage("rest")?;
    for _ in 0..warm {
        floor.cycle()?;
    }
    stage("ready")?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        floor.cycle()?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stage("done")?;
    out.nums("latencies_ns", &lat);
    Ok(())
}

struct Floor {
    raw: RawClient,
    prefix: String,
    parent: String,
    xid: i32,
    /// The node of the last cycle, deleted at the front of the next.
    held: Option<String>,
}

impl Floor {
    fn next_xid(&mut self) -> i32 {
        self.xid += 1;
        self.xid
    }

    fn cycle(&mut self) -> BoxResult<()> {
        let mut buf = BytesMut::new();
        if let Some(node) = self.held.take() {
            let xid = self.next_xid();
            let delete = Request::Delete(PathVersion {
                path: node,
                version: -1,
            });
            jute::encode_request(&mut buf, xid, &delete);
        }
        let create_xid = self.next_xid();
        let create = Request::Create2(CreateRequest {
            path: self.prefix.clone(),
            data: Vec::new(),
            acl: jute::Acl::open_unsafe(),
            mode: CreateMode::EphemeralSequential,
        });
        jute::encode_request(&mut buf, create_xid, &create);
        let list_xid = self.next_xid();
        let list = Request::GetChildren(PathWatch {
            path: self.parent.clone(),
            watch: false,
        });
        jute::encode_request(&mut buf, list_xid, &list);
        self.raw.stream().write_all(&buf)?;
        loop {
            let frame = self.raw.read_frame()?;
            let ServerMessage::Reply { header, body } = jute::decode_server_message(&frame)? else {
                continue;
            };
            if header.err != ErrorCode::Ok {
                let err = header.err;
                return Err(format!("the server answered xid {} with {err:?}", header.xid).into());
            }
            if header.xid == create_xid {
                if let Ok(Ok(Response::Created { path, .. })) =
                    jute::decode_reply(create.op_code(), &header, body)
                {
                    self.held = Some(path);
                }
            }
            if header.xid == list_xid {
                return Ok(());
            }
        }
    }
}
