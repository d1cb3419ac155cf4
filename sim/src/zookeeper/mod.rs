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
//! checked against the real 3.8.0 server by `tests/zookeeper/sim_vs_real/`: a fixed
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
//!   phase differs, the rule does not. Every connection's server is a
//!   follower: a packet's touch reaches the leader with the follower's
//!   answer to the leader's next ping, each half tick (Learner.ping,
//!   Leader.lead), and the deadline counts from that ping; a follower cut
//!   from the leader before it never carries the touch (sessions.rs; not
//!   held against a real server: the difference lies inside half a tick).
//!   Creating a session, attaching it (Learner.validateSession) and a
//!   restart touch it at the leader at once. Expiry (and
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
//! One up-to-date server, and optionally one lagging follower
//! ([`SimZooKeeper::with_lagging_follower`], `lagging.rs`; no quorum, no
//! session moved, no read-only mode); no ACL
//! enforcement; no quotas; children are listed in name order unless
//! [`SimZooKeeper::with_child_order_seed`] asks for a seeded permutation
//! (ZooKeeper lists them in HashSet order); the zxid epoch never changes
//! (a restart keeps counting); ephemerals of a dying session are deleted in
//! path order (ZooKeeper: HashSet order); the admin helpers act as session
//! 0, so an ephemeral mode there makes a node no session owns; while the
//! server is stopped the admin helpers still edit the tree (the disk).
//!
//! # Layout
//! `tree.rs`: the nodes, the writes and sequential naming; `multi.rs`: all
//! or nothing; `sessions.rs`: the handshake, expiry and a session's end;
//! `watches.rs`: the watch tables, their triggers and setWatches;
//! `requests.rs`: one request from its header to its reply;
//! `connection.rs`: frames in and out, and closes; `follower.rs`: a
//! follower cut from the leader; `lagging.rs`: a follower whose applied
//! state trails the leader's; `faults.rs`: what a test does to the
//! server; `inspection.rs`: what a test reads of it, and the invariants.
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

mod connection;
mod faults;
mod follower;
mod inspection;
mod lagging;
mod late;
mod multi;
mod requests;
mod sessions;
mod tree;
mod watches;

use connection::Conn;
use requests::{Caller, ADMIN};
use sessions::SessionEntry;
use tree::{is_under, name_of, parent_of, Node, SYSTEM_NODES};
use watches::{count_modes, Change, Mode, Table, Watches};

// Not every test crate that includes the simulator uses each of these.
#[allow(unused_imports)]
pub use sessions::{session_password, SESSION_ID_BASE};
#[allow(unused_imports)]
pub use tree::{valid_path, CONTAINER_OWNER};

/// A TCP connection to the simulated server.
pub type ConnId = u64;

/// ctime/mtime of a node created at the base instant, in ms since the epoch.
pub const EPOCH_MS: i64 = 1_600_000_000_000;

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
    /// Frames to deliver, each with the zxid its server had applied when
    /// it wrote it.
    out: VecDeque<(ConnId, Vec<u8>, i64)>,
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
    /// Per session: writes committed but not yet visible where it reads.
    late: BTreeMap<i64, late::LateWrites>,
    /// A follower whose applied state trails the leader's (lagging.rs).
    follower: Option<lagging::Follower>,
    /// Nodes the txn under way touched, for the follower.
    touched: Vec<String>,
    /// The session whose request is being applied (0: the admin).
    acting: i64,
    /// Per deleted path, the session whose request deleted it last (its
    /// owner for an expiry or close, 0 for the admin).
    deleted_by: BTreeMap<String, i64>,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
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
            late: BTreeMap::new(),
            follower: None,
            touched: Vec::new(),
            acting: 0,
            deleted_by: BTreeMap::new(),
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

    fn millis(&self, now: Instant) -> i64 {
        EPOCH_MS + now.saturating_duration_since(self.base).as_millis() as i64
    }

    fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.follower_txn(self.zxid);
        self.zxid
    }
}
