//! The server the `core` fuzz target plays: one ZooKeeper, its tree, its
//! sessions and one connection, each request answered as
//! `FinalRequestProcessor` would once the script says so. It only decides
//! what a real server could decide (when to answer, whether a write
//! reached it before the connection died, when a silent session expires);
//! everything else follows the server's rules, so that what the client is
//! told is always true of this tree.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_request_header, encode_frame, split_frame, ConnectRequest, ConnectResponse, CreateMode,
    CreateRequest, Decode, Encode, ErrorCode, EventType, KeeperState, MultiOp, MultiResult,
    ReplyHeader, Request, Response, SetWatches, Stat, WatcherEvent, WatcherType,
};

/// The session every foreign node belongs to: contenders of other
/// processes, alive throughout.
pub(super) const FOREIGN: i64 = 0x0f00_0000_0000_0001;

/// Our sessions' ids start here (the server numbers them in order).
const FIRST_SESSION: i64 = 0x0100_0000_0000_0001;

#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) owner: i64,
    data: Vec<u8>,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    version: i32,
    /// Children created and deleted so far: the next sequence suffix.
    cversion: i32,
    pub(super) children: BTreeSet<String>,
}

impl Node {
    fn new(owner: i64, data: Vec<u8>, zxid: i64) -> Node {
        Node {
            owner,
            data,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            version: 0,
            cversion: 0,
            children: BTreeSet::new(),
        }
    }

    fn stat(&self) -> Stat {
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: 0,
            mtime: 0,
            version: self.version,
            cversion: self.cversion,
            aversion: 0,
            ephemeral_owner: self.owner,
            data_length: i32::try_from(self.data.len()).unwrap_or(i32::MAX),
            num_children: i32::try_from(self.children.len()).unwrap_or(i32::MAX),
            pzxid: self.pzxid,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct SessionRecord {
    pub(super) timeout: Duration,
    /// When the server last heard anything on this session.
    pub(super) last_heard: Instant,
}

/// What the connection has asked and not yet been answered, in order.
#[derive(Debug)]
enum Asked {
    Handshake(ConnectRequest),
    Request { xid: i32, request: Request },
}

#[derive(Debug, Default)]
struct Connection {
    /// The session this connection serves, once its handshake is answered.
    session: Option<i64>,
    input: BytesMut,
    asked: VecDeque<Asked>,
    /// One-shot watches: data (exists and getData) and child.
    data_watches: BTreeSet<String>,
    child_watches: BTreeSet<String>,
}

/// How the script answers the oldest request.
#[derive(Debug, Clone, Copy)]
pub(super) enum Answer {
    /// As the server would.
    Serve,
    /// Refused before it ran, with this code (never for a write that
    /// releases: see `refusable`).
    Refuse(ErrorCode),
}

/// Codes a server may answer a request with before running it (busy,
/// throttled, not allowed): the request did nothing.
pub(super) const REFUSALS: [ErrorCode; 4] = [
    ErrorCode::SystemError,
    ErrorCode::OperationTimeout,
    ErrorCode::Throttled,
    ErrorCode::NoAuth,
];

pub(super) struct Server {
    pub(super) tree: BTreeMap<String, Node>,
    pub(super) sessions: BTreeMap<i64, SessionRecord>,
    conn: Option<Connection>,
    /// Bytes for the client, in order.
    pub(super) out: BytesMut,
    /// The server closed the connection (the driver tells the core).
    pub(super) closed: bool,
    zxid: i64,
    next_session: i64,
    /// The timeouts the server grants: [min, max].
    min_timeout: Duration,
    max_timeout: Duration,
}

impl Server {
    pub(super) fn new(tick: Duration) -> Server {
        let mut tree = BTreeMap::new();
        tree.insert("/".to_owned(), Node::new(0, Vec::new(), 0));
        Server {
            tree,
            sessions: BTreeMap::new(),
            conn: None,
            out: BytesMut::new(),
            closed: false,
            zxid: 1,
            next_session: FIRST_SESSION,
            min_timeout: tick * 2,
            max_timeout: tick * 20,
        }
    }

    /// What the connection asked and awaits, for traces.
    pub(super) fn asked(&self) -> String {
        format!("{:?}", self.conn.as_ref().map(|c| (c.session, &c.asked)))
    }

    pub(super) fn has_asked(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| !c.asked.is_empty())
    }

    /// Whether `session` is ours and alive.
    pub(super) fn session_alive(&self, session: i64) -> bool {
        self.sessions.contains_key(&session)
    }

    pub(super) fn connect(&mut self) {
        self.conn = Some(Connection::default());
        self.out.clear();
        self.closed = false;
    }

    /// The connection is gone. With `writes_landed`, the writes it had
    /// sent and not yet been answered took effect first (the server had
    /// them; the answers are lost).
    pub(super) fn disconnect(&mut self, writes_landed: bool) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if writes_landed {
            if let Some(session) = conn.session {
                while let Some(asked) = conn.asked.pop_front() {
                    if let Asked::Request { request, .. } = asked {
                        if is_write(&request) && self.sessions.contains_key(&session) {
                            let _ = self.write(session, request, None);
                        }
                    }
                }
            }
        }
        self.out.clear();
    }

    /// Bytes from the client, heard at `now`.
    pub(super) fn receive(&mut self, now: Instant, bytes: &[u8]) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        conn.input.extend_from_slice(bytes);
        if let Some(record) = conn.session.and_then(|s| self.sessions.get_mut(&s)) {
            record.last_heard = now;
        }
        let handshaken = conn.session.is_some() || !conn.asked.is_empty();
        let mut first = !handshaken;
        loop {
            let frame = match split_frame(&mut conn.input, jute::DEFAULT_MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(_) => return self.close(),
            };
            let asked = if first {
                first = false;
                match ConnectRequest::decode_exact(&frame) {
                    Ok(req) => Asked::Handshake(req),
                    Err(_) => return self.close(),
                }
            } else {
                let Ok((header, body)) = decode_request_header(&frame) else {
                    return self.close();
                };
                match Request::decode_body(header.op, body) {
                    Ok(request) => Asked::Request {
                        xid: header.xid,
                        request,
                    },
                    Err(_) => return self.close(),
                }
            };
            conn.asked.push_back(asked);
        }
    }

    /// The server closes the connection (the client hears it as a
    /// disconnection).
    fn close(&mut self) {
        self.disconnect(false);
        self.closed = true;
    }

    /// Answers the oldest request, if any. Only what the server hears
    /// renews a session (`receive`), not its answers; `now` is when a
    /// handshake creates or renews one.
    pub(super) fn answer(&mut self, now: Instant, how: Answer) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let Some(asked) = conn.asked.pop_front() else {
            return;
        };
        let (xid, request) = match asked {
            Asked::Handshake(req) => return self.handshake(now, req),
            Asked::Request { xid, request } => (xid, request),
        };
        let Some(session) = conn.session.filter(|s| self.sessions.contains_key(s)) else {
            // The session ended under the connection: ZooKeeper closes it.
            return self.close();
        };
        match (how, refusable(&request)) {
            (Answer::Refuse(code), true) => {
                let zxid = self.zxid;
                return self.reply(xid, zxid, Err(code));
            }
            (Answer::Refuse(_) | Answer::Serve, _) => {}
        }
        match request {
            Request::Ping => self.reply(xid, self.zxid, Ok(Response::Empty)),
            Request::CloseSession => {
                self.end_session(session);
                self.reply(xid, self.zxid, Ok(Response::Empty));
                let out = std::mem::take(&mut self.out);
                self.close();
                self.out = out;
            }
            Request::SetWatches(sw) | Request::SetWatches2(sw) => {
                self.set_watches(&sw);
                self.reply(xid, self.zxid, Ok(Response::Empty));
            }
            Request::Sync(path) => self.reply(xid, self.zxid, Ok(Response::Path(path))),
            request if is_write(&request) => {
                let mut events = Vec::new();
                let result = self.write(session, request, Some(&mut events));
                let zxid = self.zxid;
                // Notifications go out before the reply (FinalRequestProcessor
                // triggers watches as the txn applies).
                for (kind, path) in events {
                    self.notify(kind, &path);
                }
                self.reply(xid, zxid, result);
            }
            request => {
                let result = self.read(request);
                self.reply(xid, self.zxid, result);
            }
        }
    }

    fn handshake(&mut self, now: Instant, req: ConnectRequest) {
        let asked = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
        let timeout = asked.clamp(self.min_timeout, self.max_timeout);
        let session = if req.session_id == 0 {
            let id = self.next_session;
            self.next_session += 1;
            Some(id)
        } else if req.last_zxid_seen > self.zxid {
            // The client has seen more than this server: it refuses
            // (ZooKeeperServer.processConnectRequest) and closes.
            return self.close();
        } else {
            self.sessions
                .contains_key(&req.session_id)
                .then_some(req.session_id)
        };
        let Some(session) = session else {
            // Expired: a timeout of 0, then the server closes.
            self.send(|b| {
                ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: 0,
                    session_id: 0,
                    passwd: vec![0; 16],
                    read_only: false,
                }
                .encode(b);
            });
            let out = std::mem::take(&mut self.out);
            self.close();
            self.out = out;
            return;
        };
        self.sessions.insert(
            session,
            SessionRecord {
                timeout,
                last_heard: now,
            },
        );
        if let Some(conn) = self.conn.as_mut() {
            conn.session = Some(session);
        }
        self.send(|b| {
            ConnectResponse {
                protocol_version: 0,
                timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
                session_id: session,
                passwd: session.to_be_bytes().repeat(2),
                read_only: false,
            }
            .encode(b);
        });
    }

    /// Expires `session` if it has been silent a whole timeout: the only
    /// way ZooKeeper ends a live session on its own.
    pub(super) fn expire_if_silent(&mut self, now: Instant, session: i64) -> bool {
        let Some(record) = self.sessions.get(&session) else {
            return false;
        };
        let served_live = self
            .conn
            .as_ref()
            .is_some_and(|c| c.session == Some(session));
        if now <= record.last_heard + record.timeout {
            return false;
        }
        self.end_session(session);
        if served_live {
            self.close();
        }
        true
    }

    /// The session ends: its ephemeral nodes go, their watches fire.
    fn end_session(&mut self, session: i64) {
        self.sessions.remove(&session);
        let doomed: Vec<String> = self
            .tree
            .iter()
            .filter(|(_, n)| n.owner == session)
            .map(|(p, _)| p.clone())
            .collect();
        for path in doomed {
            self.zxid += 1;
            let mut events = Vec::new();
            self.remove(&path, &mut events);
            for (kind, path) in events {
                self.notify(kind, &path);
            }
        }
    }

    /// A third party's write (another process, an operator): applied now,
    /// watches fire.
    pub(super) fn admin_create(&mut self, owner: i64, path: &str, sequential: bool) {
        let mode = match (owner == 0, sequential) {
            (true, true) => CreateMode::PersistentSequential,
            (true, false) => CreateMode::Persistent,
            (false, true) => CreateMode::EphemeralSequential,
            (false, false) => CreateMode::Ephemeral,
        };
        let create = CreateRequest {
            path: path.to_owned(),
            data: b"other".to_vec(),
            acl: Vec::new(),
            mode,
        };
        self.zxid += 1;
        let mut events = Vec::new();
        let _ = self.create(owner, &create, &mut events);
        for (kind, path) in events {
            self.notify(kind, &path);
        }
    }

    /// Deletes `path`; `true` if that told our connection (a watch on the
    /// node itself fired).
    pub(super) fn admin_delete(&mut self, path: &str) -> bool {
        let mut told = false;
        if self.tree.get(path).is_some_and(|n| n.children.is_empty()) {
            self.zxid += 1;
            let mut events = Vec::new();
            self.remove(path, &mut events);
            for (kind, at) in events {
                told |= self.notify(kind, &at) && at == path;
            }
        }
        told
    }

    // ---- requests -----------------------------------------------------

    /// Applies a write as `session`; `events` collects the watches it
    /// fires (`None`: a write whose connection is gone fires them anyway,
    /// at nobody here).
    fn write(
        &mut self,
        session: i64,
        request: Request,
        events: Option<&mut Vec<(EventType, String)>>,
    ) -> Result<Response, ErrorCode> {
        let mut scratch = Vec::new();
        let events = events.unwrap_or(&mut scratch);
        self.zxid += 1;
        match request {
            Request::Create(c) => self.create(session, &c, events).map(Response::Path),
            Request::Create2(c) | Request::CreateContainer(c) => {
                let path = self.create(session, &c, events)?;
                let stat = self.tree.get(&path).map(Node::stat).unwrap_or_default();
                Ok(Response::Created { path, stat })
            }
            Request::Delete(p) => {
                self.check(&p.path, p.version)?;
                if self
                    .tree
                    .get(&p.path)
                    .is_some_and(|n| !n.children.is_empty())
                {
                    return Err(ErrorCode::NotEmpty);
                }
                self.remove(&p.path, events);
                Ok(Response::Empty)
            }
            Request::SetData(s) => {
                self.check(&s.path, s.version)?;
                let zxid = self.zxid;
                let node = self.tree.get_mut(&s.path).ok_or(ErrorCode::NoNode)?;
                node.data = s.data;
                node.version += 1;
                node.mzxid = zxid;
                let stat = node.stat();
                events.push((EventType::NodeDataChanged, s.path));
                Ok(Response::Stat(stat))
            }
            Request::Multi(ops) => Ok(Response::Multi(self.multi(session, ops, events))),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// All or nothing; a failure puts the tree back and fires nothing.
    fn multi(
        &mut self,
        session: i64,
        ops: Vec<MultiOp>,
        events: &mut Vec<(EventType, String)>,
    ) -> Vec<MultiResult> {
        let before = self.tree.clone();
        let count = ops.len();
        let mut results = Vec::with_capacity(count);
        let mut fired = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let result = match op {
                // 3.8 answers a create2 inside a multi like a create.
                MultiOp::Create(c) | MultiOp::Create2(c) => self
                    .create(session, &c, &mut fired)
                    .map(|path| MultiResult::Create { path }),
                MultiOp::Delete(p) => self.check(&p.path, p.version).and_then(|()| {
                    if self
                        .tree
                        .get(&p.path)
                        .is_some_and(|n| !n.children.is_empty())
                    {
                        return Err(ErrorCode::NotEmpty);
                    }
                    self.remove(&p.path, &mut fired);
                    Ok(MultiResult::Delete)
                }),
                MultiOp::SetData(s) => self.check(&s.path, s.version).map(|()| {
                    let zxid = self.zxid;
                    let node = self.tree.get_mut(&s.path).expect("checked");
                    node.data = s.data;
                    node.version += 1;
                    node.mzxid = zxid;
                    fired.push((EventType::NodeDataChanged, s.path));
                    MultiResult::SetData { stat: node.stat() }
                }),
                MultiOp::Check(p) => self.check(&p.path, p.version).map(|()| MultiResult::Check),
            };
            match result {
                Ok(r) => results.push(r),
                Err(code) => {
                    self.tree = before;
                    return (0..count)
                        .map(|j| {
                            MultiResult::Error(match j.cmp(&i) {
                                std::cmp::Ordering::Less => ErrorCode::Ok,
                                std::cmp::Ordering::Equal => code,
                                std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                            })
                        })
                        .collect();
                }
            }
        }
        events.extend(fired);
        results
    }

    fn check(&self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let node = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != node.version {
            return Err(ErrorCode::BadVersion);
        }
        Ok(())
    }

    fn create(
        &mut self,
        session: i64,
        c: &CreateRequest,
        events: &mut Vec<(EventType, String)>,
    ) -> Result<String, ErrorCode> {
        if c.mode.is_ttl() {
            return Err(ErrorCode::Unimplemented);
        }
        let (parent, _) = c.path.rsplit_once('/').ok_or(ErrorCode::BadArguments)?;
        let parent = if parent.is_empty() { "/" } else { parent };
        let zxid = self.zxid;
        let p = self.tree.get_mut(parent).ok_or(ErrorCode::NoNode)?;
        if p.owner != 0 {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let path = if c.mode.is_sequential() {
            format!("{}{:010}", c.path, p.cversion)
        } else {
            c.path.clone()
        };
        if self.tree.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        let p = self.tree.get_mut(parent).ok_or(ErrorCode::NoNode)?;
        p.cversion += 1;
        p.pzxid = zxid;
        let name = path[parent.len()..].trim_start_matches('/').to_owned();
        p.children.insert(name);
        let owner = if c.mode.is_ephemeral() { session } else { 0 };
        self.tree
            .insert(path.clone(), Node::new(owner, c.data.clone(), zxid));
        events.push((EventType::NodeCreated, path.clone()));
        events.push((EventType::NodeChildrenChanged, parent.to_owned()));
        Ok(path)
    }

    fn remove(&mut self, path: &str, events: &mut Vec<(EventType, String)>) {
        if self.tree.remove(path).is_none() {
            return;
        }
        let (parent, name) = path.rsplit_once('/').unwrap_or(("/", path));
        let parent = if parent.is_empty() { "/" } else { parent };
        let zxid = self.zxid;
        if let Some(p) = self.tree.get_mut(parent) {
            p.children.remove(name);
            p.cversion += 1;
            p.pzxid = zxid;
        }
        events.push((EventType::NodeDeleted, path.to_owned()));
        events.push((EventType::NodeChildrenChanged, parent.to_owned()));
    }

    fn read(&mut self, request: Request) -> Result<Response, ErrorCode> {
        let two = matches!(request, Request::GetChildren2(_));
        let conn = self.conn.as_mut().ok_or(ErrorCode::ConnectionLoss)?;
        match request {
            Request::Exists(p) => {
                if p.watch {
                    conn.data_watches.insert(p.path.clone());
                }
                self.tree
                    .get(&p.path)
                    .map(|n| Response::Stat(n.stat()))
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(p) => {
                let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
                if p.watch {
                    conn.data_watches.insert(p.path.clone());
                }
                Ok(Response::Data {
                    data: node.data.clone(),
                    stat: node.stat(),
                })
            }
            Request::GetChildren(p) | Request::GetChildren2(p) => {
                let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
                if p.watch {
                    conn.child_watches.insert(p.path.clone());
                }
                let children = node.children.iter().map(String::as_str).collect();
                Ok(if two {
                    Response::Children2 {
                        children,
                        stat: node.stat(),
                    }
                } else {
                    Response::Children(children)
                })
            }
            Request::RemoveWatches(w) | Request::CheckWatches(w) => {
                let data = matches!(w.kind, WatcherType::Data | WatcherType::Any)
                    && conn.data_watches.contains(&w.path);
                let child = matches!(w.kind, WatcherType::Children | WatcherType::Any)
                    && conn.child_watches.contains(&w.path);
                if !data && !child {
                    return Err(ErrorCode::NoWatcher);
                }
                Ok(Response::Empty)
            }
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// Re-arms watches after a reconnect: what changed since the client's
    /// zxid fires at once (DataTree.setWatches).
    fn set_watches(&mut self, sw: &SetWatches) {
        let mut fire = Vec::new();
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        for path in &sw.data {
            match self.tree.get(path) {
                None => fire.push((EventType::NodeDeleted, path.clone())),
                Some(n) if n.mzxid > sw.relative_zxid => {
                    fire.push((EventType::NodeDataChanged, path.clone()))
                }
                Some(_) => {
                    conn.data_watches.insert(path.clone());
                }
            }
        }
        for path in &sw.exist {
            if self.tree.contains_key(path) {
                fire.push((EventType::NodeCreated, path.clone()));
            } else {
                conn.data_watches.insert(path.clone());
            }
        }
        for path in &sw.child {
            match self.tree.get(path) {
                None => fire.push((EventType::NodeDeleted, path.clone())),
                Some(n) if n.pzxid > sw.relative_zxid => {
                    fire.push((EventType::NodeChildrenChanged, path.clone()))
                }
                Some(_) => {
                    conn.child_watches.insert(path.clone());
                }
            }
        }
        for (kind, path) in fire {
            self.event(kind, &path);
        }
    }

    /// Fires the watches a change to `path` triggers on our connection;
    /// `true` if one did.
    fn notify(&mut self, kind: EventType, path: &str) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let hit = match kind {
            EventType::NodeCreated | EventType::NodeDataChanged => conn.data_watches.remove(path),
            EventType::NodeChildrenChanged => conn.child_watches.remove(path),
            EventType::NodeDeleted => {
                let data = conn.data_watches.remove(path);
                conn.child_watches.remove(path) || data
            }
            _ => false,
        };
        let told = hit && conn.session.is_some();
        if told {
            self.event(kind, path);
        }
        told
    }

    fn event(&mut self, kind: EventType, path: &str) {
        let zxid = self.zxid;
        self.send(|b| {
            ReplyHeader {
                xid: -1,
                zxid,
                err: ErrorCode::Ok,
            }
            .encode(b);
            WatcherEvent {
                kind,
                state: KeeperState::SyncConnected,
                path: path.to_owned(),
            }
            .encode(b);
        });
    }

    fn reply(&mut self, xid: i32, zxid: i64, result: Result<Response, ErrorCode>) {
        self.send(|b| match result {
            Ok(resp) => {
                ReplyHeader {
                    xid,
                    zxid,
                    err: ErrorCode::Ok,
                }
                .encode(b);
                resp.encode(b);
            }
            Err(err) => ReplyHeader { xid, zxid, err }.encode(b),
        });
    }

    fn send(&mut self, write: impl FnOnce(&mut BytesMut)) {
        if self.conn.is_some() {
            encode_frame(&mut self.out, write);
        }
    }
}

fn is_write(request: &Request) -> bool {
    matches!(
        request,
        Request::Create(_)
            | Request::Create2(_)
            | Request::CreateContainer(_)
            | Request::CreateTtl(_)
            | Request::Delete(_)
            | Request::SetData(_)
            | Request::Multi(_)
    )
}

/// Whether the script may have the server refuse `request` before it
/// runs. Never a delete or a multi: a refused release leaves the node by
/// design ([`LockError::ReleaseRefused`](crate::recipes::LockError)), and
/// the leak check could not tell that from a lost one. Never the
/// session's own housekeeping either.
fn refusable(request: &Request) -> bool {
    !matches!(
        request,
        Request::Delete(_)
            | Request::Multi(_)
            | Request::Ping
            | Request::CloseSession
            | Request::SetWatches(_)
            | Request::SetWatches2(_)
            | Request::Auth(_)
    )
}
