//! What the raw floors share: a pipelining session of the codec alone over
//! the test kit's blocking `RawClient`, and the requests and replies of
//! Curator's lock protocol.

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use jute::{
    xid, CreateMode, CreateRequest, ErrorCode, OpCode, PathVersion, PathWatch, ReplyResult,
    Request, Response, ServerMessage,
};
use testkit::raw::RawClient;

use crate::BoxResult;

/// The session timeout every floor session asks for.
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// Longest wait for one frame; then the session pings the server.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Pings in a row without any other frame before a wait is given up (60 s).
const IDLE_LIMIT: u32 = 12;

/// Curator's node name prefix under `parent`, with a fixed UUID per session.
pub(super) fn node_prefix(parent: &str, session: usize) -> String {
    format!("{parent}/_c_{session:08x}-0000-4000-8000-000000000000-lock-")
}

/// An ephemeral sequential node named `<prefix><10 digits>`.
pub(super) fn create(prefix: &str) -> Request {
    Request::Create2(CreateRequest {
        path: prefix.to_owned(),
        data: Vec::new(),
        acl: jute::Acl::open_unsafe(),
        mode: CreateMode::EphemeralSequential,
    })
}

pub(super) fn delete(path: String) -> Request {
    Request::Delete(PathVersion { path, version: -1 })
}

/// The children of `parent`, no watch.
pub(super) fn list(parent: &str) -> Request {
    Request::GetChildren(PathWatch {
        path: parent.to_owned(),
        watch: false,
    })
}

/// getData with a watch: NoNode if `path` is gone (and then no watch is left).
pub(super) fn watch(path: String) -> Request {
    Request::GetData(PathWatch { path, watch: true })
}

/// The path a create2 made.
pub(super) fn created(r: Response) -> BoxResult<String> {
    match r {
        Response::Created { path, .. } => Ok(path),
        other => Err(format!("a create2 answered with {other:?}").into()),
    }
}

/// The lock nodes of a listing, by their sequence suffix, in queue order.
pub(super) fn queue_of(r: Response) -> BoxResult<Vec<(u64, String)>> {
    let Response::Children(names) = r else {
        return Err(format!("a getChildren answered with {r:?}").into());
    };
    let mut q: Vec<(u64, String)> = names
        .iter()
        .filter(|n| n.contains("-lock-"))
        .filter_map(|n| Some((seq(n)?, n.to_owned())))
        .collect();
    q.sort_unstable();
    Ok(q)
}

/// The 10-digit sequence suffix of a sequential node's name or path.
pub(super) fn seq(name: &str) -> Option<u64> {
    let digits = name.get(name.len().checked_sub(10)?..)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())?
}

/// One reply, or the path of a node whose watch fired.
pub(super) enum Msg {
    Reply(i32, ReplyResult),
    Event(String),
}

/// A raw session that pipelines: requests are queued into one buffer and
/// written together; replies come back in request order, watch events
/// anywhere between them. Every read is bounded (`READ_TIMEOUT`, then a
/// ping, at most `IDLE_LIMIT` times in a row).
pub(super) struct Session {
    raw: RawClient,
    xid: i32,
    out: BytesMut,
    /// The xid and op of every request queued or written and not answered.
    awaiting: VecDeque<(i32, OpCode)>,
    /// Nodes whose watches fired while replies were being read.
    pub(super) fired: Vec<String>,
}

impl Session {
    /// A session with the first server of `connect` (an ip:port).
    pub(super) fn connect(connect: &str) -> BoxResult<Session> {
        let first = connect.split(',').next().unwrap_or(connect);
        let addr: SocketAddr = first
            .parse()
            .map_err(|e| format!("the floor needs one ip:port, not {first:?}: {e}"))?;
        // RawClient panics when the server refuses; a test kit's manners.
        let mut raw = std::panic::catch_unwind(|| RawClient::connect(addr, SESSION_TIMEOUT_MS))
            .map_err(|_| format!("no session from {addr}"))?;
        raw.stream().set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(Session {
            raw,
            xid: 0,
            out: BytesMut::new(),
            awaiting: VecDeque::new(),
            fired: Vec::new(),
        })
    }

    /// Queues `request` for the next [`Session::flush`]; returns its xid.
    pub(super) fn queue(&mut self, request: &Request) -> i32 {
        self.xid += 1;
        jute::encode_request(&mut self.out, self.xid, request);
        self.awaiting.push_back((self.xid, request.op_code()));
        self.xid
    }

    /// Writes every queued request in one go.
    pub(super) fn flush(&mut self) -> BoxResult<()> {
        self.raw.stream().write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// The next reply or watch event.
    pub(super) fn next(&mut self) -> BoxResult<Msg> {
        let mut idle = 0;
        loop {
            let frame = match self.raw.read_frame() {
                Ok(f) => f,
                Err(e)
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                        && idle < IDLE_LIMIT =>
                {
                    idle += 1;
                    let mut ping = BytesMut::new();
                    jute::encode_request(&mut ping, xid::PING, &Request::Ping);
                    self.raw.stream().write_all(&ping)?;
                    continue;
                }
                Err(e) => return Err(format!("reading from the server: {e}").into()),
            };
            match jute::decode_server_message(&frame)? {
                ServerMessage::WatchEvent { event, .. } if event.path.is_empty() => {
                    return Err(format!("the session's state became {:?}", event.state).into());
                }
                ServerMessage::WatchEvent { event, .. } => return Ok(Msg::Event(event.path)),
                ServerMessage::Reply { header, .. } if header.xid == xid::PING => {}
                ServerMessage::Reply { header, body } => {
                    let Some((want, op)) = self.awaiting.pop_front() else {
                        return Err(format!("a reply to xid {} nobody sent", header.xid).into());
                    };
                    if header.xid != want {
                        let got = header.xid;
                        return Err(format!("a reply to xid {got} where {want} was due").into());
                    }
                    return Ok(Msg::Reply(want, jute::decode_reply(op, &header, body)?));
                }
            }
        }
    }

    /// Reads replies up to `xid`'s and returns its outcome. The replies
    /// before it must be successes; watch events on the way are kept for
    /// [`Session::events`].
    pub(super) fn until(&mut self, xid: i32) -> BoxResult<ReplyResult> {
        loop {
            match self.next()? {
                Msg::Event(path) => self.fired.push(path),
                Msg::Reply(x, r) if x == xid => return Ok(r),
                Msg::Reply(x, r) => {
                    r.map_err(|e| format!("the server answered xid {x} with {e:?}"))?;
                }
            }
        }
    }

    /// [`Session::until`], where `xid` too must succeed.
    pub(super) fn ok(&mut self, xid: i32) -> BoxResult<Response> {
        Ok(self
            .until(xid)?
            .map_err(|e| format!("the server answered xid {xid} with {e:?}"))?)
    }

    /// The nodes whose watches fired: those seen while reading replies, or
    /// else the next to come. Replies read meanwhile must be successes.
    pub(super) fn events(&mut self) -> BoxResult<Vec<String>> {
        while self.fired.is_empty() {
            match self.next()? {
                Msg::Event(path) => self.fired.push(path),
                Msg::Reply(x, r) => {
                    r.map_err(|e| format!("the server answered xid {x} with {e:?}"))?;
                }
            }
        }
        Ok(std::mem::take(&mut self.fired))
    }

    /// Waits for every reply still due.
    pub(super) fn drain(&mut self) -> BoxResult<()> {
        match self.awaiting.back() {
            Some(&(last, _)) => self.ok(last).map(drop),
            None => Ok(()),
        }
    }

    /// Ends the session (whatever ephemeral node is left goes with it).
    pub(super) fn close(mut self) -> BoxResult<()> {
        let x = self.queue(&Request::CloseSession);
        self.flush()?;
        self.ok(x).map(drop)
    }
}

/// Errors of a reply that the floors tell apart.
pub(super) fn is_no_node(r: &ReplyResult) -> bool {
    matches!(r, Err(ErrorCode::NoNode))
}
