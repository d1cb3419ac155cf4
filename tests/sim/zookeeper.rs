//! `SimZooKeeper`: a deterministic, in-memory, single-server ZooKeeper 3.8
//! that speaks the real wire format, for simulation tests.
//!
//! No sockets, threads, clock or randomness: the caller hands it bytes,
//! connection events and `now`, and drains the bytes it wants delivered
//! ([`SimZooKeeper::poll_output`]), the connections it closed
//! ([`SimZooKeeper::poll_closed`]) and its next deadline
//! ([`SimZooKeeper::poll_timeout`]). Every map is a `BTreeMap`, so the same
//! inputs always give the same bytes.
//!
//! # Driving it
//! ```text
//! let mut zk = SimZooKeeper::new(base, Duration::from_millis(500));
//! let conn = zk.connect(now);                 // TCP up
//! zk.receive(now, conn, &client_bytes);       // any split of the stream
//! while let Some((conn, bytes)) = zk.poll_output() { /* deliver */ }
//! while let Some(conn) = zk.poll_closed() { /* the client sees EOF */ }
//! if let Some(t) = zk.poll_timeout() { /* at t: */ zk.handle_timeout(t) }
//! ```
//! Delivery order: every byte a connection will ever receive is queued in
//! `poll_output` before that connection shows up in `poll_closed` (a
//! closeSession reply, then the close). Drain `poll_output` first.
//!
//! Every method taking `now` first expires the sessions due at `now` (as if
//! the server's expiry thread had run), then does its work. `now` must not go
//! backwards.
//!
//! # Semantics (read from ZooKeeper 3.8.0's PrepRequestProcessor,
//! FinalRequestProcessor, DataTree, DataNode, WatchManager, ExpiryQueue, and
//! checked against the real 3.8.0 server by `tests/sim_vs_real.rs`: a fixed
//! script, the handshake and connection faults, and seeded random scripts
//! of 400 ops over two sessions, all compared reply by reply and
//! notification by notification after normalizing zxids, times and
//! session ids)
//! - Handshake: the first frame of a connection is a ConnectRequest. A
//!   `last_zxid_seen` above the server's last zxid closes the connection with
//!   no answer. The timeout is clamped to `[2, 20] × tick`. Session id 0
//!   creates a session (a txn: the zxid moves); ids are
//!   `SESSION_ID_BASE + n` (n = 1, 2, …) and the 16-byte password is a fixed
//!   function of the id. A known id: the session's old connection is closed
//!   first (as ZooKeeper's CLIENT_RECONNECT does, before the password check),
//!   then a right password resumes it; a wrong password or an unknown or
//!   expired id gets a ConnectResponse with timeout 0, session 0 and a zeroed
//!   password, then the close.
//! - Frames: 4-byte big-endian length. A negative length, one above
//!   `jute::DEFAULT_MAX_FRAME`, an unreadable ConnectRequest or request header
//!   closes the connection. Never panics on any input.
//! - Replies in request order: `ReplyHeader{xid, zxid = last zxid, err}`,
//!   then the body only when err is Ok. A multi always has err 0 in the header
//!   and one result per op: ops before the failing one `Error(Ok)`, the
//!   failing op its code, ops after it `Error(RuntimeInconsistency)`; a
//!   create2 inside a multi is answered like a create (path, no Stat), as
//!   3.8 does. Notifications: `{-1, -1, 0}` + `WatcherEvent{type,
//!   SyncConnected, path}`, sent *before* the reply of the request that
//!   caused them: FinalRequestProcessor.processRequest applies the txn
//!   (ZooKeeperServer.processTxn → DataTree, whose WatchManager.triggerWatch
//!   queues each notification on the watcher's connection) and only then
//!   queues the reply.
//! - zxid: every write request takes one, even when it fails (ZooKeeper logs
//!   an error txn): create, create2, createContainer, createTTL, delete,
//!   setData, setACL, multi (one for the whole multi), closeSession,
//!   session creation, expiry, and admin writes. Reads, sync, ping, auth and
//!   setWatches do not. A check sent on its own (not in a multi) takes a
//!   zxid and is never answered: 3.8.0 fails to serialize its null response
//!   and the connection just hangs (seen on the real server).
//! - Sequential nodes: `path + format!("{:010}", counter)` (Java's `%010d`:
//!   `-000000001`, `-2147483648`), where `counter` is the parent's *stored*
//!   cversion, which counts child creates only and goes up by one on each
//!   (deletes do not touch it). Clients never see it directly: every Stat
//!   reports `cversion = stored × 2 − numChildren` (DataNode.copyStat, Java
//!   int arithmetic), i.e. creates plus deletes; a fresh root shows -1.
//!   [`SimZooKeeper::sequence_counter`] reads the stored one. New nodes
//!   start with stored cversion `with_sequence_start` (0 by default; system
//!   nodes always 0; [`SimZooKeeper::set_sequence_counter`] sets it).
//! - The counter's end (PrepRequestProcessor.pRequest2TxnCreate and
//!   DataTree.createNode; there is no wrapping mode, because no ZooKeeper
//!   wraps): the prep stage names the child with the parent's cversion taken
//!   from the latest *outstanding change record* if a create on that parent
//!   is still in flight, else from the DataTree, and writes `cversion + 1` in
//!   Java int arithmetic into the txn and into a new parent record; the
//!   DataTree stores the txn's cversion (and the parent's pzxid) only if it
//!   is greater than the stored one. So at `i32::MAX` the stored counter
//!   stays: one create at a time, every name ends `2147483647` (plain names
//!   then fail NodeExists, unique prefixes succeed with the same suffix),
//!   the parent's pzxid stops moving on creates (deletes still move it:
//!   DataTree.deleteNode). Creates prepped while an earlier one on the same
//!   parent is in flight are named `-2147483648`, `-2147483647`, … and
//!   once the pipeline drains (FinalRequestProcessor drops the applied
//!   records) the next create reads `2147483647` again, so a later burst
//!   issues `-2147483648` a second time. In flight here means: the frames
//!   of one [`SimZooKeeper::receive`] call, the ops of one multi, or
//!   everything received while [`SimZooKeeper::hold_in_flight`] is on; a
//!   failed multi puts the earlier records back
//!   (PrepRequestProcessor.rollbackPendingChanges).
//! - Create errors in ZooKeeper's order: unknown mode BadArguments, TTL modes
//!   Unimplemented (extended types are off by default), no '/' or a NUL
//!   BadArguments, empty ACL InvalidAcl (and an `auth`-scheme ACL from a
//!   connection with no auth), missing parent NoNode, invalid final path
//!   BadArguments, NodeExists, ephemeral parent NoChildrenForEphemerals.
//! - Delete: `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config`
//!   BadArguments, NoNode, BadVersion, then NotEmpty.
//! - Stat: czxid, mzxid, pzxid (= czxid at create), ctime/mtime in ms =
//!   `EPOCH_MS` + virtual time since `new`, version, cversion, aversion,
//!   ephemeralOwner (the session id; 0 for persistent nodes and for
//!   containers, which are stored with `CONTAINER_OWNER` but shown as 0),
//!   dataLength, numChildren.
//! - Containers (createContainer, or create with mode Container): never
//!   deleted on their own; [`SimZooKeeper::collect_containers`] plays
//!   ZooKeeper's ContainerManager pass and deletes every container that has
//!   had a child and has none now (a txn each, watches fire). Call it when
//!   the simulation wants the background cleanup to happen.
//! - Watches belong to the connection, as in ZooKeeper 3.8's WatchManager:
//!   two tables (data, child), each holding one *mode* per (path,
//!   connection): standard (one-shot), persistent or recursive. A later add
//!   replaces the mode, so a getData/getChildren watch on a path where the
//!   same connection has a persistent watch turns that table's entry into a
//!   one-shot, and a plain and a recursive addWatch on one path collapse
//!   into the last (fixed only in 3.9, ZOOKEEPER-4466; seen on the real
//!   server). exists leaves a data watch even on a missing node (fires
//!   NodeCreated); getData and getChildren leave one only on an existing
//!   node (NoNode, no watch). Create fires the node's data table
//!   (NodeCreated) then the parent's child table (NodeChildrenChanged);
//!   setData fires NodeDataChanged; delete fires the node's data table, then
//!   its child table (NodeDeleted, skipping connections already told), then
//!   the parent's child table. On the path itself every mode matches
//!   (standard ones are removed, recursive ones skip NodeChildrenChanged);
//!   on ancestors only recursive ones match, never for NodeChildrenChanged.
//!   Each table trigger notifies a connection once. addWatch (106) sets the
//!   mode in both tables. When a connection closes its watches are gone;
//!   the client re-arms them with setWatches (101) or setWatches2 (105),
//!   which fires at once what changed after `relativeZxid` (data:
//!   NodeDeleted if gone, NodeDataChanged if mzxid > rel; exist: NodeCreated
//!   if present; child: NodeDeleted if gone, NodeChildrenChanged if pzxid >
//!   rel), re-arms the rest, and re-adds persistent ones silently.
//! - Sessions expire when nothing was received from them for their timeout,
//!   at ZooKeeper's tick granularity: the deadline after a packet at
//!   elapsed time `t` (ms since `new`) is `((t + timeout) / tick + 1) × tick`,
//!   i.e. between T and T + tick after the last packet (SessionTrackerImpl
//!   keeps sessions in an ExpiryQueue whose interval is the tick: update()
//!   files a touched session under roundToNextInterval(now + timeout), and
//!   poll() expires a whole bucket once its time has come). The real grid
//!   is aligned to the JVM's elapsed-time origin, this one to `new`: the
//!   phase differs, the rule does not. Expiry (and
//!   closeSession, and [`SimZooKeeper::expire_session`]) is one txn: the
//!   session's ephemerals are deleted in path order, watches fire (the
//!   dying session's own connection included), then its connection is closed
//!   (closeSession: after the reply).
//! - Auth (xid -4): schemes "digest" and "ip" are accepted (reply zxid 0,
//!   err 0), as ZooKeeper's default providers accept any credentials; any
//!   other scheme gets AuthFailed (zxid 0) and the connection is closed.
//! - Other ops: sync (path echoed), getACL/setACL (ACLs are stored and
//!   versioned but never enforced), getEphemerals,
//!   getAllChildrenNumber, removeWatches (Children, Data or Any table, any
//!   mode; NoWatcher when the connection has none there), checkWatches (as
//!   3.8 does: Ok when *any* connection has a watch in that table on the
//!   exact path), 3.9's watcher types 4 and 5 BadArguments (unverified),
//!   ping (xid -2).
//!   An op code the server does not know gets Unimplemented (zxid -1) and the
//!   connection is closed, as ZooKeeper's UnimplementedRequestProcessor
//!   does; whoAmI, reconfig, multiRead and SASL are answered that way too.
//!   A known op whose body does not decode gets MarshallingError; the
//!   connection stays.
//!
//! # Simplifications
//! One server (no quorum, no session moved, no read-only mode); no ACL
//! enforcement; no quotas; children are listed in name order unless
//! [`SimZooKeeper::with_child_order_seed`] asks for a seeded permutation
//! (ZooKeeper lists them in HashSet order); the zxid epoch never changes
//! (a restart keeps counting); ephemerals of a dying session are deleted in
//! path order (ZooKeeper: HashSet order); the admin helpers act as session
//! 0, so an ephemeral mode there makes a node no session owns; while the
//! server is stopped the admin helpers still edit the tree (the disk).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_request_header, encode_frame, split_frame, xid, Acl, AddWatchMode, ConnectRequest,
    ConnectResponse, CreateMode, CreateRequest, Decode, DecodeError, Encode, ErrorCode, EventType,
    KeeperState, MultiOp, MultiResult, OpCode, ReplyHeader, Request, Response, SetWatches, Stat,
    WatcherEvent, WatcherType,
};

/// A TCP connection to the simulated server.
pub type ConnId = u64;

/// Session ids are this plus a counter from 1 (server id 1 in the top byte,
/// as ZooKeeper lays them out).
pub const SESSION_ID_BASE: i64 = 0x0100_0000_0000_0000;

/// The ephemeralOwner ZooKeeper shows for container nodes.
pub const CONTAINER_OWNER: i64 = i64::MIN;

/// ctime/mtime of a node created at the base instant, in ms since the epoch.
pub const EPOCH_MS: i64 = 1_600_000_000_000;

/// Nodes every server has and no client may delete.
const SYSTEM_NODES: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// Mixed into the password derivation; any constant does.
const PASSWORD_SECRET: u64 = 0x5a6b_6c6f_636b_2173;

#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    acl: Vec<Acl>,
    /// numChildren and dataLength are filled in by `stat_of`.
    stat: Stat,
    children: BTreeSet<String>,
    /// Has ever had a child (a container is collected only then).
    had_child: bool,
}

#[derive(Debug)]
struct SessionEntry {
    timeout_ms: i32,
    expire_at: Instant,
    conn: Option<ConnId>,
}

#[derive(Debug, Default)]
struct Conn {
    input: BytesMut,
    /// Set once the handshake succeeded.
    session: Option<i64>,
    /// Added a digest identity (needed for `auth`-scheme ACLs).
    authed: bool,
    /// The highest zxid this connection has been shown: the client's own
    /// at the handshake, then every reply's.
    shown_zxid: i64,
}

/// A change to the tree whose watches fire once the txn commits.
#[derive(Debug)]
enum Change {
    Created(String),
    Deleted(String),
    DataChanged(String),
}

/// Who issues a write: a client connection, or the test itself.
#[derive(Debug, Clone, Copy)]
struct Caller {
    session: i64,
    authed: bool,
}

const ADMIN: Caller = Caller {
    session: 0,
    authed: true,
};

/// The simulated server. See the module docs.
#[derive(Debug)]
pub struct SimZooKeeper {
    base: Instant,
    tick_ms: u64,
    sequence_start: i32,
    child_order_seed: u64,
    running: bool,
    /// The latest `now` seen, for trace lines.
    clock: Instant,
    trace: Option<Vec<String>>,
    /// When each session last read a path (getData or exists that found
    /// it, or a listing of it): the simulator's proof that a holder
    /// re-read its node before saying Held again.
    last_reads: BTreeMap<(i64, String), Instant>,
    /// Connections served by a follower that is silently cut from the
    /// leader (see [`SimZooKeeper::cut_from_leader`]), and the last zxid
    /// that follower applied: its view stops there.
    behind_cut: BTreeMap<ConnId, i64>,
    tree: BTreeMap<String, Node>,
    zxid: i64,
    session_counter: i64,
    sessions: BTreeMap<i64, SessionEntry>,
    next_conn: ConnId,
    conns: BTreeMap<ConnId, Conn>,
    /// WatchManager's two tables: path → connection → mode. One mode per
    /// (table, path, connection): a later add replaces it (3.8 behaviour).
    data_watches: Watches,
    child_watches: Watches,
    out: VecDeque<(ConnId, Vec<u8>)>,
    closed: VecDeque<ConnId>,
    /// Inside a multi: the first before-image of every node touched.
    undo: Option<BTreeMap<String, Option<Node>>>,
    /// The prep stage's view of each parent's cversion while creates on it
    /// are in flight (PrepRequestProcessor.getRecordForPath reads
    /// ZooKeeperServer.outstandingChangesForPath before the DataTree): lives
    /// for one `receive` call, one multi, or a window opened with
    /// [`SimZooKeeper::hold_in_flight`].
    in_flight: BTreeMap<String, i32>,
    /// [`SimZooKeeper::hold_in_flight`] is on.
    holding: bool,
    changes: Vec<Change>,
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn name_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// ZooKeeper's PathUtils.validatePath.
pub fn valid_path(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    for seg in path[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return false;
        }
    }
    !path.chars().any(|c| {
        c == '\0'
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
            // Java sees these as surrogate pairs (U+D800..U+DFFF): invalid.
            || c > '\u{ffff}'
    })
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The password of a session: a fixed function of its id.
pub fn session_password(session_id: i64) -> Vec<u8> {
    let a = splitmix(session_id as u64 ^ PASSWORD_SECRET);
    let b = splitmix(a);
    let mut p = a.to_be_bytes().to_vec();
    p.extend_from_slice(&b.to_be_bytes());
    p
}

fn is_under(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl SimZooKeeper {
    /// A fresh server at `now` with ZooKeeper's tickTime `tick` (at least
    /// 1 ms): `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config`,
    /// last zxid 0.
    pub fn new(now: Instant, tick: Duration) -> Self {
        let mut zk = SimZooKeeper {
            base: now,
            tick_ms: (tick.as_millis() as u64).max(1),
            sequence_start: 0,
            child_order_seed: 0,
            running: true,
            clock: now,
            trace: None,
            tree: BTreeMap::new(),
            last_reads: BTreeMap::new(),
            behind_cut: BTreeMap::new(),
            zxid: 0,
            session_counter: 0,
            sessions: BTreeMap::new(),
            next_conn: 1,
            conns: BTreeMap::new(),
            data_watches: BTreeMap::new(),
            child_watches: BTreeMap::new(),
            out: VecDeque::new(),
            closed: VecDeque::new(),
            undo: None,
            in_flight: BTreeMap::new(),
            holding: false,
            changes: Vec::new(),
        };
        for path in SYSTEM_NODES {
            zk.tree.insert(
                path.to_owned(),
                Node {
                    data: Vec::new(),
                    acl: Acl::open_unsafe(),
                    stat: Stat::default(),
                    children: BTreeSet::new(),
                    had_child: false,
                },
            );
        }
        // As a fresh 3.8 server shows it.
        if let Some(config) = zk.tree.get_mut("/zookeeper/config") {
            config.stat.aversion = -1;
        }
        for path in &SYSTEM_NODES[1..] {
            if let Some(parent) = zk.tree.get_mut(parent_of(path)) {
                parent.children.insert(name_of(path).to_owned());
            }
        }
        zk
    }

    /// Nodes created from now on start with this cversion, so a test reaches
    /// the end of the sequence counter (`i32::MAX`) in a few creates.
    pub fn with_sequence_start(mut self, parent_cversion_start: i32) -> Self {
        self.sequence_start = parent_cversion_start;
        self
    }

    /// Sets `path`'s stored cversion (its sequence counter) in place, no txn,
    /// as `testkit::zk::ZkHarness::set_sequence_counter` does on the real
    /// server. False if the node does not exist.
    pub fn set_sequence_counter(&mut self, path: &str, value: i32) -> bool {
        match self.tree.get_mut(path) {
            Some(n) => {
                n.stat.cversion = value;
                true
            }
            None => false,
        }
    }

    /// `true`: requests received from now on are prepped while the earlier
    /// ones are still in flight, across `receive` calls and connections, as
    /// when ZooKeeper's PrepRequestProcessor runs ahead of the
    /// SyncRequestProcessor's fsync. `false`: the pipeline drains
    /// (FinalRequestProcessor.processRequest drops the applied change
    /// records) and the next create reads the stored counter again. Without
    /// it, one `receive` call is one burst.
    pub fn hold_in_flight(&mut self, hold: bool) {
        self.holding = hold;
        if !hold {
            self.in_flight.clear();
        }
    }

    /// 0 (default): getChildren lists names in sorted order. Otherwise a
    /// permutation fixed by the seed and the names, standing in for
    /// ZooKeeper's HashSet order, so callers that assume sorted lists fail.
    pub fn with_child_order_seed(mut self, seed: u64) -> Self {
        self.child_order_seed = seed;
        self
    }

    /// Records one line per handshake, request (with its outcome),
    /// notification, close and expiry; read them with
    /// [`SimZooKeeper::take_trace`] to explain a failing seed.
    pub fn with_trace(mut self) -> Self {
        self.trace = Some(Vec::new());
        self
    }

    /// The trace lines recorded since the last call (empty without
    /// [`SimZooKeeper::with_trace`]).
    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        let ms = self.clock.saturating_duration_since(self.base).as_millis();
        if let Some(trace) = &mut self.trace {
            let mut line = line();
            if line.len() > 300 {
                let mut cut = 300;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                line.truncate(cut);
                line.push('…');
            }
            trace.push(format!("{ms:>8}ms {line}"));
        }
    }

    // ---- connections ----------------------------------------------------

    /// A new TCP connection. While the server is stopped the connection is
    /// refused: it appears at once in `poll_closed`.
    pub fn connect(&mut self, now: Instant) -> ConnId {
        self.handle_timeout(now);
        let id = self.next_conn;
        self.next_conn += 1;
        if self.running {
            self.conns.insert(id, Conn::default());
        } else {
            self.closed.push_back(id);
        }
        id
    }

    /// Bytes from the client on `conn`, split anywhere. Ignored once the
    /// connection is closed.
    pub fn receive(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.receive_frames(now, conn, bytes);
        if !self.holding {
            self.in_flight.clear();
        }
    }

    fn receive_frames(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.handle_timeout(now);
        match self.conns.get_mut(&conn) {
            Some(c) => c.input.extend_from_slice(bytes),
            None => return,
        }
        // Each round consumes one whole frame; the bound is only a guard.
        for _ in 0..=bytes.len() {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let frame = match split_frame(&mut c.input, jute::DEFAULT_MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(_) => return self.close_conn(conn),
            };
            match c.session {
                None => self.on_connect(now, conn, &frame),
                Some(session) => self.on_request(now, conn, session, &frame),
            }
        }
    }

    /// The next bytes to deliver: one frame, to one connection, in order.
    pub fn poll_output(&mut self) -> Option<(ConnId, Vec<u8>)> {
        self.out.pop_front()
    }

    /// The next connection the server closed (or refused).
    pub fn poll_closed(&mut self) -> Option<ConnId> {
        self.closed.pop_front()
    }

    /// The client side (or the network) dropped `conn`. Output not yet
    /// delivered to it is discarded; its watches are gone; its session
    /// lives on until it expires or resumes elsewhere.
    pub fn disconnect(&mut self, now: Instant, conn: ConnId) {
        self.handle_timeout(now);
        if self.drop_conn(conn) {
            self.log(|| format!("conn {conn}: dropped by the client or the network"));
            self.out.retain(|(c, _)| *c != conn);
        }
    }

    // ---- time -----------------------------------------------------------

    /// Expires every session whose deadline is `<= now`, earliest first.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        if !self.running {
            return;
        }
        let mut due: Vec<(Instant, i64)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.expire_at <= now)
            .map(|(id, s)| (s.expire_at, *id))
            .collect();
        due.sort();
        for (_, id) in due {
            self.expire(now, id);
        }
    }

    /// The next session expiry, if any session lives (None while stopped).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.running {
            return None;
        }
        self.sessions.values().map(|s| s.expire_at).min()
    }

    /// The session deadline after a packet at `now`, on a tick boundary.
    fn deadline(&self, now: Instant, timeout_ms: i32) -> Instant {
        let elapsed = now.saturating_duration_since(self.base).as_millis() as u64;
        let t = elapsed + timeout_ms.max(0) as u64;
        let at = (t / self.tick_ms + 1) * self.tick_ms;
        self.base + Duration::from_millis(at)
    }

    fn millis(&self, now: Instant) -> i64 {
        EPOCH_MS + now.saturating_duration_since(self.base).as_millis() as i64
    }

    // ---- faults -----------------------------------------------------------

    /// The server process dies: every connection is closed (undelivered
    /// output is lost), every watch is gone; the tree, the sessions and the
    /// zxid survive (they are on disk). Until [`SimZooKeeper::start`], new
    /// connections are refused and no session expires.
    pub fn stop(&mut self, now: Instant) {
        self.handle_timeout(now);
        self.running = false;
        self.in_flight.clear();
        self.out.clear();
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.close_conn(c);
        }
    }

    /// The server is back: every session's expiry clock restarts at `now`.
    pub fn start(&mut self, now: Instant) {
        if self.running {
            return;
        }
        self.running = true;
        let ids: Vec<i64> = self.sessions.keys().copied().collect();
        for id in ids {
            self.touch(now, id);
        }
    }

    /// `stop` then `start` at the same instant.
    pub fn restart(&mut self, now: Instant) {
        self.stop(now);
        self.start(now);
    }

    /// Whether the server is up.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// A third party deletes `path` (any version). False if it does not
    /// exist, has children or is a system node. Watches fire.
    pub fn delete_as_admin(&mut self, now: Instant, path: &str) -> bool {
        self.handle_timeout(now);
        let ok = self
            .tree
            .get(path)
            .is_some_and(|n| n.children.is_empty() && !SYSTEM_NODES.contains(&path));
        if !ok {
            return false;
        }
        let zxid = self.next_zxid();
        let res = self.delete(path, -1, zxid);
        self.commit();
        res.is_ok()
    }

    /// A third party creates a persistent node (open ACL). Returns the
    /// created path (with the suffix for a sequential mode). Watches fire.
    pub fn create_as_admin(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ErrorCode> {
        self.handle_timeout(now);
        let zxid = self.next_zxid();
        let req = CreateRequest {
            path: path.to_owned(),
            data: data.to_vec(),
            acl: Acl::open_unsafe(),
            mode,
        };
        let res = self.create(now, ADMIN, &req, false, zxid);
        self.commit();
        res.map(|(p, _)| p)
    }

    /// A third party replaces `path`'s data (any version). Watches fire.
    pub fn set_data_as_admin(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
    ) -> Result<Stat, ErrorCode> {
        self.handle_timeout(now);
        let zxid = self.next_zxid();
        let res = self.set_data(now, path, data, -1, zxid);
        self.commit();
        res
    }

    /// Expires `session_id` now, whatever its deadline: ephemerals deleted,
    /// watches fired, its connection closed. No-op for an unknown session.
    pub fn expire_session(&mut self, now: Instant, session_id: i64) {
        self.handle_timeout(now);
        if self.running && self.sessions.contains_key(&session_id) {
            self.expire(now, session_id);
        }
    }

    /// ZooKeeper's ContainerManager pass: deletes every container node that
    /// has had a child and has none now, in path order (one txn each;
    /// watches fire). Returns how many were deleted.
    pub fn collect_containers(&mut self, now: Instant) -> usize {
        self.handle_timeout(now);
        let empty: Vec<String> = self
            .tree
            .iter()
            .filter(|(_, n)| {
                n.stat.ephemeral_owner == CONTAINER_OWNER && n.had_child && n.children.is_empty()
            })
            .map(|(p, _)| p.clone())
            .collect();
        for path in &empty {
            let zxid = self.next_zxid();
            self.remove_node(path, zxid);
            self.commit();
        }
        empty.len()
    }

    // ---- inspection -------------------------------------------------------

    /// The node's Stat, if it exists.
    pub fn exists(&self, path: &str) -> Option<Stat> {
        self.tree.get(path).map(Self::stat_of)
    }

    /// The parent's stored sequence counter: the number the next sequential
    /// child gets when no create on it is in flight (not the cversion
    /// clients see, which also counts deletes).
    pub fn sequence_counter(&self, path: &str) -> Option<i32> {
        self.tree.get(path).map(|n| n.stat.cversion)
    }

    /// The node's data, if it exists.
    pub fn data(&self, path: &str) -> Option<Vec<u8>> {
        self.tree.get(path).map(|n| n.data.clone())
    }

    /// Child names, sorted (empty if the node does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.tree
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every node path, sorted (system nodes included).
    pub fn paths(&self) -> Vec<String> {
        self.tree.keys().cloned().collect()
    }

    /// The session is known and not expired or closed.
    pub fn session_alive(&self, session_id: i64) -> bool {
        self.sessions.contains_key(&session_id)
    }

    /// Live session ids, sorted.
    pub fn sessions(&self) -> Vec<i64> {
        self.sessions.keys().copied().collect()
    }

    /// The connection a session is attached to, if any.
    pub fn connection_of(&self, session_id: i64) -> Option<ConnId> {
        self.sessions.get(&session_id).and_then(|s| s.conn)
    }

    /// The negotiated timeout of a live session.
    pub fn session_timeout(&self, session_id: i64) -> Option<Duration> {
        self.sessions
            .get(&session_id)
            .map(|s| Duration::from_millis(s.timeout_ms.max(0) as u64))
    }

    /// When a live session will expire if nothing more is heard from it.
    pub fn session_deadline(&self, session_id: i64) -> Option<Instant> {
        self.sessions.get(&session_id).map(|s| s.expire_at)
    }

    /// Paths of the ephemerals `session_id` owns, sorted.
    pub fn ephemerals_of(&self, session_id: i64) -> Vec<String> {
        self.tree
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == session_id && session_id != 0)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Total one-shot watches registered (data and exist watches share
    /// ZooKeeper's data table; plus child watches), like `wchc` totals
    /// without the persistent ones.
    pub fn watch_count(&self) -> usize {
        count_modes(&self.data_watches, |m| m == Mode::Standard)
            + count_modes(&self.child_watches, |m| m == Mode::Standard)
    }

    /// Persistent and recursive watch entries: an addWatch makes one in
    /// each table, so it counts 2 (until a later add on the same path by
    /// the same connection replaces a mode).
    pub fn persistent_watch_count(&self) -> usize {
        count_modes(&self.data_watches, |m| m != Mode::Standard)
            + count_modes(&self.child_watches, |m| m != Mode::Standard)
    }

    /// One-shot watches held by `session_id`'s current connection (0 if it
    /// has none).
    pub fn watches_of(&self, session_id: i64) -> usize {
        let Some(conn) = self.connection_of(session_id) else {
            return 0;
        };
        let count = |w: &Watches| {
            w.values()
                .filter(|m| m.get(&conn) == Some(&Mode::Standard))
                .count()
        };
        count(&self.data_watches) + count(&self.child_watches)
    }

    /// When `session` last read `path` successfully (see `last_reads`).
    pub fn last_read(&self, session: i64, path: &str) -> Option<Instant> {
        self.last_reads.get(&(session, path.to_owned())).copied()
    }

    /// Connections with a data watch (any mode) on `path`.
    pub fn data_watchers(&self, path: &str) -> Vec<ConnId> {
        self.data_watches
            .get(path)
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Paths with a watch of any mode in either table, sorted, no
    /// duplicates.
    pub fn watched_paths(&self) -> Vec<String> {
        let set: BTreeSet<String> = self
            .data_watches
            .keys()
            .chain(self.child_watches.keys())
            .cloned()
            .collect();
        set.into_iter().collect()
    }

    /// The zxid of the last txn.
    pub fn last_zxid(&self) -> i64 {
        self.zxid
    }

    /// Open connections, sorted.
    pub fn connections(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// The server's own bookkeeping agrees with itself: parents and children
    /// lists match, every ephemeral's owner lives and has no children,
    /// zxids are not from the future, every watch belongs to an open
    /// connection, and sessions and connections point at each other.
    /// Cheap enough to call after every simulation step.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (path, node) in &self.tree {
            if path != "/" {
                let parent = parent_of(path);
                let listed = self
                    .tree
                    .get(parent)
                    .is_some_and(|p| p.children.contains(name_of(path)));
                if !listed {
                    return Err(format!("{path} is not listed by its parent {parent}"));
                }
            }
            for child in &node.children {
                let full = if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                };
                if !self.tree.contains_key(&full) {
                    return Err(format!("{path} lists a missing child {child}"));
                }
            }
            let owner = node.stat.ephemeral_owner;
            if owner != 0 && owner != CONTAINER_OWNER {
                if !self.sessions.contains_key(&owner) {
                    return Err(format!("{path} is owned by dead session {owner:#x}"));
                }
                if !node.children.is_empty() {
                    return Err(format!("ephemeral {path} has children"));
                }
            }
            let st = &node.stat;
            if st.czxid > self.zxid || st.mzxid > self.zxid || st.pzxid > self.zxid {
                return Err(format!("{path} has a zxid above {:#x}", self.zxid));
            }
            if st.mzxid < st.czxid || st.pzxid < st.czxid {
                return Err(format!("{path}: mzxid or pzxid below czxid"));
            }
        }
        for table in [&self.data_watches, &self.child_watches] {
            for (path, conns) in table {
                if conns.is_empty() {
                    return Err(format!("empty watch set left on {path}"));
                }
                if let Some(c) = conns.keys().find(|c| !self.conns.contains_key(c)) {
                    return Err(format!("watch on {path} for closed conn {c}"));
                }
            }
        }
        for (id, s) in &self.sessions {
            if let Some(c) = s.conn {
                if self.conns.get(&c).and_then(|c| c.session) != Some(*id) {
                    return Err(format!("session {id:#x} points at conn {c}, not back"));
                }
            }
        }
        for (c, conn) in &self.conns {
            if let Some(id) = conn.session {
                if self.sessions.get(&id).and_then(|s| s.conn) != Some(*c) {
                    return Err(format!("conn {c} serves {id:#x}, which is elsewhere"));
                }
            }
        }
        if !self.running && !self.conns.is_empty() {
            return Err("connections open on a stopped server".into());
        }
        Ok(())
    }

    // ---- connection plumbing ---------------------------------------------

    fn send(&mut self, conn: ConnId, write: impl FnOnce(&mut BytesMut)) {
        if !self.conns.contains_key(&conn) {
            return;
        }
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, write);
        self.out.push_back((conn, buf.to_vec()));
    }

    fn reply(&mut self, conn: ConnId, xid: i32, zxid: i64, result: Result<Response, ErrorCode>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.shown_zxid = c.shown_zxid.max(zxid);
        }
        self.send(conn, |b| match result {
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

    /// A follower cut from the leader answers its clients' pings itself
    /// (Learner's connections stay up, FollowerZooKeeperServer handles
    /// pings locally) but reaches the leader with nothing: the session's
    /// touches stay in its LearnerSessionTracker (the leader never renews
    /// the session), and a write or a sync waits for a leader that does
    /// not answer. Reads would be served from a view that no longer moves;
    /// the model holds them too (a client that learns nothing new is the
    /// case that matters), and so it holds notifications.
    fn on_request_behind_cut(&mut self, conn: ConnId, frame: &[u8]) {
        let Ok((header, _)) = decode_request_header(frame) else {
            return self.close_conn(conn);
        };
        if header.op == OpCode::Ping {
            // The follower stamps replies with its own last applied zxid
            // (FinalRequestProcessor, ZKDatabase.getDataTreeLastProcessedZxid),
            // which stops at the cut, and it would have served this
            // connection's reads and SetWatches from that view first. The
            // model holds those, so a ping reveals no more than the
            // connection has been shown: a client must never learn of a
            // zxid whose changes it could not have seen.
            let frozen = self.behind_cut.get(&conn).copied().unwrap_or(self.zxid);
            let shown = self.conns.get(&conn).map_or(frozen, |c| c.shown_zxid);
            let zxid = frozen.min(shown);
            self.reply(conn, header.xid, zxid, Ok(Response::Empty));
        }
    }

    /// The server of connection `conn` is a follower that the leader no
    /// longer hears (a silent cut between the two): pings are answered,
    /// nothing else, and the session is not renewed, so the leader expires
    /// it after its timeout. End it with [`SimZooKeeper::close_connection`]
    /// (the follower gives up on the leader and drops its clients).
    pub fn cut_from_leader(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.behind_cut.insert(conn, self.zxid);
        }
    }

    /// Standard child watches on `path`, one per connection.
    pub fn child_watch_count(&self, path: &str) -> usize {
        self.child_watches.get(path).map_or(0, |m| {
            m.values().filter(|mode| **mode == Mode::Standard).count()
        })
    }

    /// Whether `conn`'s server is cut from the leader (it hears nothing).
    pub fn is_behind_cut(&self, conn: ConnId) -> bool {
        self.behind_cut.contains_key(&conn)
    }

    /// The server closes connection `conn` (its session lives on).
    pub fn close_connection(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.close_conn(conn);
        }
    }

    fn notify(&mut self, conn: ConnId, kind: EventType, path: &str) {
        if self.behind_cut.contains_key(&conn) {
            return;
        }
        self.log(|| format!("conn {conn}: event {kind:?} {path}"));
        self.send(conn, |b| {
            ReplyHeader {
                xid: xid::WATCH_EVENT,
                zxid: -1,
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

    /// Forgets `conn` and its watches; false if it was not open.
    fn drop_conn(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.conns.remove(&conn) else {
            return false;
        };
        if let Some(id) = c.session {
            if let Some(s) = self.sessions.get_mut(&id) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
        for table in [&mut self.data_watches, &mut self.child_watches] {
            table.retain(|_, set| {
                set.remove(&conn);
                !set.is_empty()
            });
        }
        true
    }

    /// The server closes `conn`: queued output stays deliverable.
    fn close_conn(&mut self, conn: ConnId) {
        if self.drop_conn(conn) {
            self.log(|| format!("conn {conn}: closed by the server"));
            self.closed.push_back(conn);
        }
    }

    fn touch(&mut self, now: Instant, session: i64) {
        let Some(timeout) = self.sessions.get(&session).map(|s| s.timeout_ms) else {
            return;
        };
        let at = self.deadline(now, timeout);
        if let Some(s) = self.sessions.get_mut(&session) {
            s.expire_at = at;
        }
    }

    fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.zxid
    }

    fn on_connect(&mut self, now: Instant, conn: ConnId, frame: &[u8]) {
        if self.behind_cut.contains_key(&conn) {
            // Attaching a session on a follower asks the leader
            // (Learner.validateSession; a new session is a leader-ordered
            // createSession): cut off from it, the handshake goes
            // unanswered until the follower drops its clients.
            return;
        }
        let Ok(req) = ConnectRequest::decode_exact(frame) else {
            self.log(|| format!("conn {conn}: unreadable ConnectRequest"));
            return self.close_conn(conn);
        };
        self.log(|| {
            format!(
                "conn {conn}: connect session={:#x} last_zxid={:#x} timeout={}",
                req.session_id, req.last_zxid_seen, req.timeout_ms
            )
        });
        if req.last_zxid_seen > self.zxid {
            // "Refusing session request for client as it has seen zxid …"
            let zxid = self.zxid;
            self.log(|| format!("conn {conn}: refused, client is ahead of {zxid:#x}"));
            return self.close_conn(conn);
        }
        let tick = i32::try_from(self.tick_ms).unwrap_or(i32::MAX);
        let timeout = req
            .timeout_ms
            .clamp(tick.saturating_mul(2), tick.saturating_mul(20));
        let session_id = if req.session_id == 0 {
            self.next_zxid();
            self.session_counter += 1;
            let id = SESSION_ID_BASE + self.session_counter;
            self.sessions.insert(
                id,
                SessionEntry {
                    timeout_ms: timeout,
                    expire_at: now,
                    conn: None,
                },
            );
            id
        } else {
            let id = req.session_id;
            if let Some(old) = self.connection_of(id) {
                if old != conn {
                    self.close_conn(old);
                }
            }
            if !self.sessions.contains_key(&id) || req.passwd != session_password(id) {
                self.log(|| format!("conn {conn}: session {id:#x} unknown or bad password"));
                self.send(conn, |b| {
                    ConnectResponse {
                        protocol_version: jute::PROTOCOL_VERSION,
                        timeout_ms: 0,
                        session_id: 0,
                        passwd: vec![0; 16],
                        read_only: false,
                    }
                    .encode(b)
                });
                return self.close_conn(conn);
            }
            id
        };
        if let Some(s) = self.sessions.get_mut(&session_id) {
            s.timeout_ms = timeout;
            s.conn = Some(conn);
        }
        self.touch(now, session_id);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(session_id);
            c.shown_zxid = req.last_zxid_seen;
        }
        self.log(|| format!("conn {conn}: session {session_id:#x} up, timeout {timeout}ms"));
        self.send(conn, |b| {
            ConnectResponse {
                protocol_version: jute::PROTOCOL_VERSION,
                timeout_ms: timeout,
                session_id,
                passwd: session_password(session_id),
                read_only: false,
            }
            .encode(b)
        });
    }

    fn on_request(&mut self, now: Instant, conn: ConnId, session: i64, frame: &[u8]) {
        if self.behind_cut.contains_key(&conn) {
            return self.on_request_behind_cut(conn, frame);
        }
        self.touch(now, session);
        let Ok((header, body)) = decode_request_header(frame) else {
            return self.close_conn(conn);
        };
        let xid = header.xid;
        let request = match Request::decode_body(header.op, body) {
            Ok(r) => r,
            Err(DecodeError::UnknownOpCode(_)) => return self.unimplemented(conn, xid),
            Err(_) => return self.reply(conn, xid, self.zxid, Err(ErrorCode::MarshallingError)),
        };
        let authed = self.conns.get(&conn).is_some_and(|c| c.authed);
        let caller = Caller { session, authed };
        let out_before = self.out.len();
        if self.trace.is_some() {
            let summary = format!("{request:?}");
            self.log(|| format!("conn {conn} {session:#x} xid={xid}: {summary}"));
        }
        self.dispatch(now, conn, caller, xid, request);
        if self.trace.is_some() {
            let last = self
                .out
                .iter()
                .skip(out_before)
                .rev()
                .find(|(c, _)| *c == conn);
            let outcome = last.and_then(|(_, b)| {
                jute::decode_server_message(b.get(4..)?)
                    .ok()
                    .map(|m| match m {
                        jute::ServerMessage::Reply { header, .. } => {
                            format!(
                                "→ xid={} zxid={:#x} {:?}",
                                header.xid, header.zxid, header.err
                            )
                        }
                        jute::ServerMessage::WatchEvent { .. } => "→ (event)".to_string(),
                    })
            });
            let outcome = outcome.unwrap_or_else(|| "→ (no reply)".to_string());
            self.log(|| format!("conn {conn} xid={xid} {outcome}"));
        }
    }

    fn dispatch(&mut self, now: Instant, conn: ConnId, caller: Caller, xid: i32, request: Request) {
        let session = caller.session;
        match request {
            Request::Ping => self.reply(conn, xid, self.zxid, Ok(Response::Empty)),
            Request::CloseSession => {
                let zxid = self.kill_session(session);
                self.reply(conn, xid, zxid, Ok(Response::Empty));
                self.close_conn(conn);
            }
            Request::Auth(auth) => {
                if auth.scheme == "digest" || auth.scheme == "ip" {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.authed = true;
                    }
                    self.reply(conn, xid, 0, Ok(Response::Empty));
                } else {
                    self.reply(conn, xid, 0, Err(ErrorCode::AuthFailed));
                    self.close_conn(conn);
                }
            }
            Request::SetWatches(sw) | Request::SetWatches2(sw) => {
                self.set_watches(conn, &sw);
                self.reply(conn, xid, self.zxid, Ok(Response::Empty));
            }
            Request::WhoAmI => self.unimplemented(conn, xid),
            Request::Check(p) => {
                // 3.8.0 takes a txn for a check sent on its own, then fails
                // to serialize the (null) response: no reply ever comes
                // and the connection stays open.
                self.next_zxid();
                self.log(|| format!("conn {conn}: standalone check {} gets no reply", p.path));
            }
            req if Self::is_write(&req) => {
                let zxid = self.next_zxid();
                let result = self.write(now, caller, req, zxid);
                self.commit();
                self.reply(conn, xid, zxid, result);
            }
            req => {
                let path = match &req {
                    Request::Exists(p) | Request::GetData(p) => Some(p.path.clone()),
                    Request::GetChildren(p) | Request::GetChildren2(p) => Some(p.path.clone()),
                    _ => None,
                };
                let result = self.read(conn, session, req);
                if let (Some(path), true) = (path, result.is_ok()) {
                    self.last_reads.insert((session, path), now);
                }
                self.reply(conn, xid, self.zxid, result);
            }
        }
    }

    fn unimplemented(&mut self, conn: ConnId, xid: i32) {
        self.reply(conn, xid, -1, Err(ErrorCode::Unimplemented));
        self.close_conn(conn);
    }

    fn is_write(req: &Request) -> bool {
        matches!(
            req,
            Request::Create(_)
                | Request::Create2(_)
                | Request::CreateContainer(_)
                | Request::CreateTtl(_)
                | Request::Delete(_)
                | Request::SetData(_)
                | Request::SetAcl(_)
                | Request::Check(_)
                | Request::Multi(_)
        )
    }

    // ---- writes -----------------------------------------------------------

    fn write(
        &mut self,
        now: Instant,
        caller: Caller,
        req: Request,
        zxid: i64,
    ) -> Result<Response, ErrorCode> {
        match req {
            Request::Create(c) => self
                .create(now, caller, &c, false, zxid)
                .map(|(path, _)| Response::Path(path)),
            Request::Create2(c) => self
                .create(now, caller, &c, false, zxid)
                .map(|(path, stat)| Response::Created { path, stat }),
            Request::CreateContainer(c) => self
                .create(now, caller, &c, true, zxid)
                .map(|(path, stat)| Response::Created { path, stat }),
            Request::CreateTtl(_) => Err(ErrorCode::Unimplemented),
            Request::Delete(p) => self
                .delete(&p.path, p.version, zxid)
                .map(|_| Response::Empty),
            Request::SetData(s) => self
                .set_data(now, &s.path, &s.data, s.version, zxid)
                .map(Response::Stat),
            Request::SetAcl(s) => self.set_acl(&s.path, &s.acl, s.version),
            Request::Multi(ops) => Ok(Response::Multi(self.multi(now, caller, &ops, zxid))),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// Records `path`'s before-image while a multi is open.
    fn save(&mut self, path: &str) {
        if let Some(undo) = &mut self.undo {
            if !undo.contains_key(path) {
                undo.insert(path.to_owned(), self.tree.get(path).cloned());
            }
        }
    }

    /// The Stat a client sees (DataNode.copyStat): the stored cversion
    /// counts child creates only; clients see `creates × 2 − children`
    /// (creates plus deletes), wrapping like Java ints; containers show
    /// ephemeralOwner 0.
    fn stat_of(n: &Node) -> Stat {
        let children = i32::try_from(n.children.len()).unwrap_or(i32::MAX);
        let owner = n.stat.ephemeral_owner;
        Stat {
            data_length: i32::try_from(n.data.len()).unwrap_or(i32::MAX),
            num_children: children,
            cversion: n.stat.cversion.wrapping_mul(2).wrapping_sub(children),
            ephemeral_owner: if owner == CONTAINER_OWNER { 0 } else { owner },
            ..n.stat
        }
    }

    fn create(
        &mut self,
        now: Instant,
        caller: Caller,
        req: &CreateRequest,
        container_op: bool,
        zxid: i64,
    ) -> Result<(String, Stat), ErrorCode> {
        let mode = req.mode;
        if matches!(mode, CreateMode::Unknown(_)) {
            return Err(ErrorCode::BadArguments);
        }
        if mode.is_ttl() {
            return Err(ErrorCode::Unimplemented);
        }
        let container = container_op || mode == CreateMode::Container;
        let path = req.path.as_str();
        if !path.contains('/') || path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        if req.acl.is_empty() || (!caller.authed && req.acl.iter().any(|a| a.id.scheme == "auth")) {
            return Err(ErrorCode::InvalidAcl);
        }
        let parent_path = parent_of(path).to_owned();
        let Some(parent) = self.tree.get(&parent_path) else {
            return Err(ErrorCode::NoNode);
        };
        // PrepRequestProcessor.pRequest2TxnCreate: the parent's record is
        // the latest outstanding change if a create on it is in flight, else
        // the DataTree's node.
        let parent_cversion = *self
            .in_flight
            .get(&parent_path)
            .unwrap_or(&parent.stat.cversion);
        let parent_owner = parent.stat.ephemeral_owner;
        let full = if mode.is_sequential() {
            format!("{path}{parent_cversion:010}")
        } else {
            path.to_owned()
        };
        if !valid_path(&full) {
            return Err(ErrorCode::BadArguments);
        }
        if self.tree.contains_key(&full) {
            return Err(ErrorCode::NodeExists);
        }
        if parent_owner != 0 && parent_owner != CONTAINER_OWNER {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let owner = if container {
            CONTAINER_OWNER
        } else if mode.is_ephemeral() {
            caller.session
        } else {
            0
        };
        self.save(&parent_path);
        self.save(&full);
        // Java int arithmetic: 2147483647 + 1 is -2147483648 in the txn.
        let new_cversion = parent_cversion.wrapping_add(1);
        if let Some(parent) = self.tree.get_mut(&parent_path) {
            parent.children.insert(name_of(&full).to_owned());
            parent.had_child = true;
            // DataTree.createNode stores the txn's cversion (and pzxid) only
            // if greater, so past the end the stored counter stays at
            // i32::MAX and the parent's pzxid does not move either.
            if new_cversion > parent.stat.cversion {
                parent.stat.cversion = new_cversion;
                parent.stat.pzxid = zxid;
            }
        }
        // The prep stage's duplicate parent record carries the txn's value.
        self.in_flight.insert(parent_path, new_cversion);
        // A node created anew has a fresh record (a delete in flight left none).
        self.in_flight.remove(&full);
        let time = self.millis(now);
        let node = Node {
            data: req.data.clone(),
            acl: req.acl.clone(),
            stat: Stat {
                czxid: zxid,
                mzxid: zxid,
                ctime: time,
                mtime: time,
                version: 0,
                cversion: self.sequence_start,
                aversion: 0,
                ephemeral_owner: owner,
                data_length: 0,
                num_children: 0,
                pzxid: zxid,
            },
            children: BTreeSet::new(),
            had_child: false,
        };
        let stat = Self::stat_of(&node);
        self.tree.insert(full.clone(), node);
        self.changes.push(Change::Created(full.clone()));
        Ok((full, stat))
    }

    fn delete(&mut self, path: &str, version: i32, zxid: i64) -> Result<(), ErrorCode> {
        if !path.contains('/') || path.contains('\0') || SYSTEM_NODES.contains(&path) {
            return Err(ErrorCode::BadArguments);
        }
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove_node(path, zxid);
        Ok(())
    }

    /// Removes a childless node: the parent's pzxid moves if the txn's zxid
    /// is greater, its cversion does not (DataTree.deleteNode; the prep
    /// stage's parent record keeps the cversion it had, so in-flight names
    /// go on from it).
    fn remove_node(&mut self, path: &str, zxid: i64) {
        let parent_path = parent_of(path).to_owned();
        self.save(&parent_path);
        self.save(path);
        if let Some(parent) = self.tree.get_mut(&parent_path) {
            parent.children.remove(name_of(path));
            if zxid > parent.stat.pzxid {
                parent.stat.pzxid = zxid;
            }
        }
        self.tree.remove(path);
        self.in_flight.remove(path);
        self.changes.push(Change::Deleted(path.to_owned()));
    }

    fn set_data(
        &mut self,
        now: Instant,
        path: &str,
        data: &[u8],
        version: i32,
        zxid: i64,
    ) -> Result<Stat, ErrorCode> {
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        self.save(path);
        let time = self.millis(now);
        let Some(node) = self.tree.get_mut(path) else {
            return Err(ErrorCode::NoNode);
        };
        node.data = data.to_vec();
        node.stat.mzxid = zxid;
        node.stat.mtime = time;
        node.stat.version = node.stat.version.wrapping_add(1);
        let stat = Self::stat_of(node);
        self.changes.push(Change::DataChanged(path.to_owned()));
        Ok(stat)
    }

    fn set_acl(&mut self, path: &str, acl: &[Acl], version: i32) -> Result<Response, ErrorCode> {
        if acl.is_empty() {
            return Err(ErrorCode::InvalidAcl);
        }
        let Some(node) = self.tree.get_mut(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.aversion {
            return Err(ErrorCode::BadVersion);
        }
        node.acl = acl.to_vec();
        node.stat.aversion = node.stat.aversion.wrapping_add(1);
        Ok(Response::Stat(Self::stat_of(node)))
    }

    fn check(&self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let Some(node) = self.tree.get(path) else {
            return Err(ErrorCode::NoNode);
        };
        if version != -1 && version != node.stat.version {
            return Err(ErrorCode::BadVersion);
        }
        Ok(())
    }

    /// All or nothing: ops apply in order, each seeing the ones before; the
    /// first failure rolls everything back and no watch fires.
    fn multi(
        &mut self,
        now: Instant,
        caller: Caller,
        ops: &[MultiOp],
        zxid: i64,
    ) -> Vec<MultiResult> {
        self.undo = Some(BTreeMap::new());
        // PrepRequestProcessor.getPendingChanges / rollbackPendingChanges: a
        // failed multi puts back the change records that were outstanding.
        let in_flight_before = self.in_flight.clone();
        let mut results = Vec::with_capacity(ops.len());
        let mut failure = None;
        for (i, op) in ops.iter().enumerate() {
            let res = match op {
                MultiOp::Create(c) => self
                    .create(now, caller, c, false, zxid)
                    .map(|(path, _)| MultiResult::Create { path }),
                // ZooKeeper 3.8 answers a create2 inside a multi like a
                // create: the path, no Stat.
                MultiOp::Create2(c) => self
                    .create(now, caller, c, false, zxid)
                    .map(|(path, _)| MultiResult::Create { path }),
                MultiOp::Delete(p) => self
                    .delete(&p.path, p.version, zxid)
                    .map(|_| MultiResult::Delete),
                MultiOp::SetData(s) => self
                    .set_data(now, &s.path, &s.data, s.version, zxid)
                    .map(|stat| MultiResult::SetData { stat }),
                MultiOp::Check(p) => self.check(&p.path, p.version).map(|_| MultiResult::Check),
            };
            match res {
                Ok(r) => results.push(r),
                Err(e) => {
                    failure = Some((i, e));
                    break;
                }
            }
        }
        let undo = self.undo.take().unwrap_or_default();
        let Some((failed, code)) = failure else {
            return results;
        };
        self.in_flight = in_flight_before;
        for (path, before) in undo {
            match before {
                Some(node) => {
                    self.tree.insert(path, node);
                }
                None => {
                    self.tree.remove(&path);
                }
            }
        }
        self.changes.clear();
        (0..ops.len())
            .map(|i| {
                MultiResult::Error(match i.cmp(&failed) {
                    std::cmp::Ordering::Less => ErrorCode::Ok,
                    std::cmp::Ordering::Equal => code,
                    std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                })
            })
            .collect()
    }

    /// closeSession / expiry: one txn deleting every ephemeral of the
    /// session; watches fire; the session is gone. Returns the txn's zxid.
    fn kill_session(&mut self, session: i64) -> i64 {
        let zxid = self.next_zxid();
        for path in self.ephemerals_of(session) {
            self.remove_node(&path, zxid);
        }
        self.commit();
        self.sessions.remove(&session);
        zxid
    }

    fn expire(&mut self, _now: Instant, session: i64) {
        self.log(|| format!("session {session:#x}: expired"));
        let conn = self.connection_of(session);
        self.kill_session(session);
        if let Some(conn) = conn {
            self.close_conn(conn);
        }
    }

    // ---- watches ----------------------------------------------------------

    /// Fires the watches of every change made by the txn just applied, as
    /// DataTree does: the data table for the node, then (delete) the child
    /// table for the node, then the child table for the parent.
    fn commit(&mut self) {
        let none = BTreeSet::new();
        for change in std::mem::take(&mut self.changes) {
            match change {
                Change::Created(path) => {
                    self.trigger(Table::Data, &path, EventType::NodeCreated, &none);
                    let parent = parent_of(&path).to_owned();
                    self.trigger(Table::Child, &parent, EventType::NodeChildrenChanged, &none);
                }
                Change::Deleted(path) => {
                    let done = self.trigger(Table::Data, &path, EventType::NodeDeleted, &none);
                    self.trigger(Table::Child, &path, EventType::NodeDeleted, &done);
                    let parent = parent_of(&path).to_owned();
                    self.trigger(Table::Child, &parent, EventType::NodeChildrenChanged, &none);
                }
                Change::DataChanged(path) => {
                    self.trigger(Table::Data, &path, EventType::NodeDataChanged, &none);
                }
            }
        }
    }

    /// One table's trigger (ZooKeeper 3.8's WatchManager.triggerWatch):
    /// on `path` itself every watch matches (a standard one is removed, a
    /// persistent one stays, a recursive one stays and is skipped for
    /// NodeChildrenChanged); on its ancestors only recursive watches match,
    /// never for NodeChildrenChanged. Each matching connection is notified
    /// once, except those in `suppress`. Returns every connection that
    /// matched.
    fn trigger(
        &mut self,
        table: Table,
        path: &str,
        kind: EventType,
        suppress: &BTreeSet<ConnId>,
    ) -> BTreeSet<ConnId> {
        let map = match table {
            Table::Data => &mut self.data_watches,
            Table::Child => &mut self.child_watches,
        };
        let children_changed = kind == EventType::NodeChildrenChanged;
        let mut hit = BTreeSet::new();
        if let Some(conns) = map.get_mut(path) {
            conns.retain(|c, mode| match mode {
                Mode::Recursive => {
                    if !children_changed {
                        hit.insert(*c);
                    }
                    true
                }
                Mode::Persistent => {
                    hit.insert(*c);
                    true
                }
                Mode::Standard => {
                    hit.insert(*c);
                    false
                }
            });
            if conns.is_empty() {
                map.remove(path);
            }
        }
        if !children_changed && path != "/" {
            let mut up = parent_of(path);
            loop {
                if let Some(conns) = map.get(up) {
                    hit.extend(
                        conns
                            .iter()
                            .filter(|(_, m)| **m == Mode::Recursive)
                            .map(|(c, _)| *c),
                    );
                }
                if up == "/" {
                    break;
                }
                up = parent_of(up);
            }
        }
        for &c in &hit {
            if !suppress.contains(&c) {
                self.notify(c, kind, path);
            }
        }
        hit
    }

    /// Sets (or replaces) `conn`'s watch mode on `path` in one table.
    fn add_watch(&mut self, table: Table, path: &str, conn: ConnId, mode: Mode) {
        let map = match table {
            Table::Data => &mut self.data_watches,
            Table::Child => &mut self.child_watches,
        };
        map.entry(path.to_owned()).or_default().insert(conn, mode);
    }

    fn set_watches(&mut self, conn: ConnId, sw: &SetWatches) {
        let rel = sw.relative_zxid;
        for path in &sw.data {
            match self.tree.get(path).map(|n| n.stat.mzxid) {
                None => self.notify(conn, EventType::NodeDeleted, path),
                Some(m) if m > rel => self.notify(conn, EventType::NodeDataChanged, path),
                Some(_) => self.add_watch(Table::Data, path, conn, Mode::Standard),
            }
        }
        for path in &sw.exist {
            if self.tree.contains_key(path) {
                self.notify(conn, EventType::NodeCreated, path);
            } else {
                self.add_watch(Table::Data, path, conn, Mode::Standard);
            }
        }
        for path in &sw.child {
            match self.tree.get(path).map(|n| n.stat.pzxid) {
                None => self.notify(conn, EventType::NodeDeleted, path),
                Some(p) if p > rel => self.notify(conn, EventType::NodeChildrenChanged, path),
                Some(_) => self.add_watch(Table::Child, path, conn, Mode::Standard),
            }
        }
        for (paths, mode) in [
            (&sw.persistent, Mode::Persistent),
            (&sw.persistent_recursive, Mode::Recursive),
        ] {
            for path in paths {
                self.add_watch(Table::Child, path, conn, mode);
                self.add_watch(Table::Data, path, conn, mode);
            }
        }
    }

    // ---- reads --------------------------------------------------------------

    fn ordered_children(&self, node: &Node) -> Vec<String> {
        let mut names: Vec<String> = node.children.iter().cloned().collect();
        if self.child_order_seed != 0 {
            let key = |name: &String| {
                let mut h = self.child_order_seed;
                for b in name.bytes() {
                    h = splitmix(h ^ u64::from(b));
                }
                h
            };
            names.sort_by_cached_key(key);
        }
        names
    }

    fn read(&mut self, conn: ConnId, session: i64, req: Request) -> Result<Response, ErrorCode> {
        match req {
            Request::Exists(p) => {
                if p.watch {
                    self.add_watch(Table::Data, &p.path, conn, Mode::Standard);
                }
                self.exists(&p.path)
                    .map(Response::Stat)
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(p) => {
                let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
                let resp = Response::Data {
                    data: node.data.clone(),
                    stat: Self::stat_of(node),
                };
                if p.watch {
                    self.add_watch(Table::Data, &p.path, conn, Mode::Standard);
                }
                Ok(resp)
            }
            Request::GetChildren(p) => self.get_children(conn, p, false),
            Request::GetChildren2(p) => self.get_children(conn, p, true),
            Request::GetAcl(path) => {
                let node = self.tree.get(&path).ok_or(ErrorCode::NoNode)?;
                Ok(Response::Acl {
                    acl: node.acl.clone(),
                    stat: Self::stat_of(node),
                })
            }
            Request::Sync(path) => Ok(Response::Path(path)),
            Request::GetEphemerals(prefix) => Ok(Response::Children(
                self.ephemerals_of(session)
                    .into_iter()
                    .filter(|p| p.starts_with(&prefix))
                    .collect(),
            )),
            Request::GetAllChildrenNumber(path) => {
                if !self.tree.contains_key(&path) {
                    return Err(ErrorCode::NoNode);
                }
                let n = self
                    .tree
                    .keys()
                    .filter(|k| k.as_str() != path && is_under(k, &path))
                    .count();
                Ok(Response::Count(i32::try_from(n).unwrap_or(i32::MAX)))
            }
            Request::AddWatch(a) => {
                let mode = match a.mode {
                    AddWatchMode::Persistent => Mode::Persistent,
                    AddWatchMode::PersistentRecursive => Mode::Recursive,
                    AddWatchMode::Unknown(_) => return Err(ErrorCode::BadArguments),
                };
                self.add_watch(Table::Data, &a.path, conn, mode);
                self.add_watch(Table::Child, &a.path, conn, mode);
                Ok(Response::Status(ErrorCode::Ok))
            }
            Request::RemoveWatches(w) => self
                .remove_watches(conn, &w.path, w.kind, true)
                .map(|_| Response::Empty),
            Request::CheckWatches(w) => self
                .remove_watches(conn, &w.path, w.kind, false)
                .map(|_| Response::Empty),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn get_children(
        &mut self,
        conn: ConnId,
        p: jute::PathWatch,
        two: bool,
    ) -> Result<Response, ErrorCode> {
        let node = self.tree.get(&p.path).ok_or(ErrorCode::NoNode)?;
        let children = self.ordered_children(node);
        let stat = Self::stat_of(node);
        if p.watch {
            self.add_watch(Table::Child, &p.path, conn, Mode::Standard);
        }
        let children = children.into();
        Ok(if two {
            Response::Children2 { children, stat }
        } else {
            Response::Children(children)
        })
    }

    /// removeWatches / checkWatches: NoWatcher if the connection has no
    /// watch of that type on the path; else Ok, removing them if asked.
    fn remove_watches(
        &mut self,
        conn: ConnId,
        path: &str,
        kind: WatcherType,
        remove: bool,
    ) -> Result<(), ErrorCode> {
        let tables: Vec<&mut Watches> = match kind {
            WatcherType::Children => vec![&mut self.child_watches],
            WatcherType::Data => vec![&mut self.data_watches],
            WatcherType::Any => vec![&mut self.data_watches, &mut self.child_watches],
            // 3.9's persistent types: 3.8 knows only 1-3.
            _ => return Err(ErrorCode::BadArguments),
        };
        let mut found = false;
        for table in tables {
            if let Some(set) = table.get_mut(path) {
                // 3.8's WatchManager.containsWatcher answers true when *any*
                // connection watches the exact path (seen on the real
                // server); removal only removes this connection's watch.
                if !remove && !set.is_empty() {
                    found = true;
                }
                if remove && set.contains_key(&conn) {
                    found = true;
                    set.remove(&conn);
                    if set.is_empty() {
                        table.remove(path);
                    }
                }
            }
        }
        if found {
            Ok(())
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Table {
    Data,
    Child,
}

/// A watch's mode in one table (ZooKeeper's WatcherMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One-shot: removed when it fires.
    Standard,
    /// addWatch PERSISTENT: stays; fires for the path itself.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: stays; fires for the path and
    /// everything below it, except NodeChildrenChanged.
    Recursive,
}

type Watches = BTreeMap<String, BTreeMap<ConnId, Mode>>;

fn count_modes(w: &Watches, want: impl Fn(Mode) -> bool) -> usize {
    w.values()
        .map(|m| m.values().filter(|mode| want(**mode)).count())
        .sum()
}
