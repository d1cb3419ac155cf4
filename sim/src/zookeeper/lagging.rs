//! A follower whose applied state trails the leader's commits by a
//! bounded, varying delay, for every client connected to it.
//!
//! What ZooKeeper 3.8 does, and what the model keeps of it:
//! - A follower applies the leader's commits in zxid order, each when its
//!   COMMIT has come and been processed (Learner.syncWithLeader, then
//!   FollowerZooKeeperServer.commit → CommitProcessor → FinalRequestProcessor
//!   → ZKDatabase). Here each txn is applied on the follower at its commit
//!   time plus a lag drawn per txn in `[0, max_lag]`, never before the txn
//!   ahead of it. Until then, reads (getData, exists, getChildren,
//!   getEphemerals, setWatches' comparisons) are answered from the
//!   follower's older tree, and the watches of its connections fire when it
//!   applies the txn, not when the leader commits it.
//! - A write sent to the follower goes to the leader at once
//!   (FollowerRequestProcessor → Learner.request), which decides it (the
//!   model applies it to the leader's tree then); the follower answers it
//!   only once it has applied that txn itself (FinalRequestProcessor runs
//!   on the committed request).
//! - A client's requests are answered in order: CommitProcessor keeps a
//!   queue per session (`pendingRequests`); a request of a session with a
//!   write (or a sync: `needCommit` is true for sync on a learner,
//!   `matchSyncs`) still waiting for its commit waits behind it, a read or a
//!   ping included. So a client always reads its own writes, and a read
//!   issued after a write is answered from a state that includes it.
//! - `sync` is answered once the follower has applied everything the
//!   leader had committed when it received the sync (the leader's SYNC
//!   comes after those COMMITs on the same link, Leader.processSync).
//! - Every reply's zxid is the follower's last applied one
//!   (FinalRequestProcessor reads ZKDatabase.getDataTreeLastProcessedZxid),
//!   and so is the zxid a handshake is held to: a client that has seen a
//!   later zxid is refused, the connection closed with no answer
//!   (ZooKeeperServer.processConnectRequest: "Refusing session request for
//!   client ... as it has seen zxid ... our last zxid is ... client must try
//!   another server"). A new session is answered once the follower has
//!   applied its createSession txn (FinalRequestProcessor finishes the
//!   session's init); a resumed one at once (Learner.validateSession asks
//!   the leader, no txn).
//!
//! Simplified: the session's end (closeSession, expiry) closes its
//! connection at once, as on the leader; auth is answered at once, as
//! ZooKeeperServer.processPacket does before the pipeline; a restart brings
//! the follower up to date (it loads what the leader committed).

use super::*;

/// A txn as the follower will apply it.
#[derive(Debug)]
pub(super) struct Txn {
    zxid: i64,
    /// When the follower applies it.
    due: Instant,
    /// Every node the txn touched, as it was after the txn (`None`: gone).
    images: Vec<(String, Option<Node>)>,
    /// The changes whose watches fire on the follower's connections.
    changes: Vec<Change>,
}

/// What waits in a connection's queue on the follower.
#[derive(Debug)]
enum Work {
    /// Bytes ready to go (a new session's ConnectResponse).
    Frame(Vec<u8>),
    /// A write's or sync's reply, decided already.
    Reply {
        xid: i32,
        result: Result<Response, ErrorCode>,
    },
    /// A read, setWatches or ping, answered from the follower's tree when
    /// it reaches the head of the queue.
    Read { xid: i32, request: Request },
}

#[derive(Debug)]
struct Queued {
    /// The zxid the follower must have applied first (0: none).
    point: i64,
    work: Work,
}

/// The lagging follower.
#[derive(Debug)]
pub(super) struct Follower {
    tree: BTreeMap<String, Node>,
    applied: i64,
    max_lag: Duration,
    seed: u64,
    txns: VecDeque<Txn>,
    queues: BTreeMap<ConnId, VecDeque<Queued>>,
    /// Applies nothing (its link from the leader stalled).
    held: bool,
    /// Reads (pings and setWatches too) answered from a state behind the
    /// leader's, and handshakes refused to clients ahead of it.
    stale_reads: u64,
    refused: u64,
}

impl Follower {
    pub(super) fn new(
        tree: &BTreeMap<String, Node>,
        zxid: i64,
        max_lag: Duration,
        seed: u64,
    ) -> Self {
        Follower {
            tree: tree.clone(),
            applied: zxid,
            max_lag,
            seed,
            txns: VecDeque::new(),
            queues: BTreeMap::new(),
            held: false,
            stale_reads: 0,
            refused: 0,
        }
    }
}

impl SimZooKeeper {
    /// The ensemble gets a follower that applies each txn up to `max_lag`
    /// after the leader commits it (a different delay per txn, from
    /// `seed`); [`SimZooKeeper::connect_lagging`] connects to it. See
    /// `lagging.rs`.
    pub fn with_lagging_follower(mut self, max_lag: Duration, seed: u64) -> Self {
        self.add_lagging_follower(max_lag, seed);
        self
    }

    /// [`SimZooKeeper::with_lagging_follower`] on a server in use: the
    /// follower starts up to date.
    pub fn add_lagging_follower(&mut self, max_lag: Duration, seed: u64) {
        self.follower = Some(Follower::new(&self.tree, self.zxid, max_lag, seed));
    }

    /// A new TCP connection to the lagging follower (as
    /// [`SimZooKeeper::connect`] without one).
    pub fn connect_lagging(&mut self, now: Instant) -> ConnId {
        let conn = self.connect(now);
        if self.follower.is_some() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.lagging = true;
            }
        }
        conn
    }

    /// Whether `conn` is served by the lagging follower.
    pub fn is_lagging(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.lagging)
    }

    /// Connections whose data watch on `path` a deletion committed now
    /// fires: the leader's as they stand; the lagging follower's only if no
    /// change it has still to apply fires their one-shot watch first.
    pub fn deletion_watchers(&self, path: &str) -> Vec<ConnId> {
        let consumed = self.follower.as_ref().is_some_and(|f| {
            f.txns.iter().flat_map(|t| &t.changes).any(|c| match c {
                Change::Created(p) | Change::Deleted(p) | Change::DataChanged(p) => p == path,
            })
        });
        self.data_watches
            .get(path)
            .map(|m| {
                m.iter()
                    .filter(|(conn, mode)| {
                        !(consumed && **mode == Mode::Standard && self.is_lagging(**conn))
                    })
                    .map(|(conn, _)| *conn)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The last zxid the lagging follower applied (the leader's without one).
    pub fn follower_zxid(&self) -> i64 {
        self.follower.as_ref().map_or(self.zxid, |f| f.applied)
    }

    /// How many reads (pings and setWatches too) the lagging follower
    /// answered from a state behind the leader's, and how many handshakes
    /// it refused to clients ahead of it.
    pub fn follower_counts(&self) -> (u64, u64) {
        self.follower
            .as_ref()
            .map_or((0, 0), |f| (f.stale_reads, f.refused))
    }

    /// A handshake on `conn` was refused for being ahead of its server.
    pub(super) fn count_refusal(&mut self, conn: ConnId) {
        if self.is_lagging(conn) {
            if let Some(f) = self.follower.as_mut() {
                f.refused += 1;
            }
        }
    }

    /// Whether the lagging follower still has txns to apply or answers to
    /// give.
    pub fn follower_behind(&self) -> bool {
        self.follower
            .as_ref()
            .is_some_and(|f| !f.txns.is_empty() || f.queues.values().any(|q| !q.is_empty()))
    }

    /// The zxid the server of `conn` has applied: what its handshake is
    /// held to and what its replies carry.
    pub(super) fn applied_for(&self, conn: ConnId) -> i64 {
        if self.is_lagging(conn) {
            self.follower_zxid()
        } else {
            self.zxid
        }
    }

    /// A zxid was taken: the follower will apply that txn (empty until
    /// [`SimZooKeeper::record_txn`] fills it).
    pub(super) fn follower_txn(&mut self, zxid: i64) {
        let now = self.clock;
        let Some(f) = self.follower.as_mut() else {
            return;
        };
        let lag_ms = f.max_lag.as_millis() as u64;
        let lag = Duration::from_millis(splitmix(f.seed ^ zxid as u64) % (lag_ms + 1));
        let after = f.txns.back().map_or(now, |t| t.due);
        f.txns.push_back(Txn {
            zxid,
            due: (now + lag).max(after),
            images: Vec::new(),
            changes: Vec::new(),
        });
    }

    /// The txn just applied on the leader: what it left of each node it
    /// touched, and its changes, for the follower.
    pub(super) fn record_txn(&mut self) {
        let touched = std::mem::take(&mut self.touched);
        let Some(f) = self.follower.as_mut() else {
            return;
        };
        let Some(txn) = f.txns.back_mut().filter(|t| t.zxid == self.zxid) else {
            return;
        };
        for path in touched {
            let image = self.tree.get(&path).cloned();
            match txn.images.iter_mut().find(|(p, _)| *p == path) {
                Some(entry) => entry.1 = image,
                None => txn.images.push((path, image)),
            }
        }
        txn.changes.extend(self.changes.iter().cloned());
    }

    /// When the follower applies its next txn.
    pub(super) fn follower_timeout(&self) -> Option<Instant> {
        let f = self.follower.as_ref().filter(|f| !f.held)?;
        f.txns.front().map(|t| t.due)
    }

    /// `true`: the follower applies nothing more until `false`, as when
    /// its link from the leader stalls (the differential test's lever);
    /// then it applies what has come due.
    pub fn hold_follower(&mut self, held: bool) {
        if let Some(f) = self.follower.as_mut() {
            f.held = held;
        }
        if !held {
            self.apply_due_txns(self.clock);
        }
    }

    /// The follower applies every txn due by `now`, one at a time: the tree,
    /// then its connections' watches, then the answers that waited for it.
    pub(super) fn apply_due_txns(&mut self, now: Instant) {
        loop {
            let Some(f) = self.follower.as_mut() else {
                return;
            };
            if f.held || f.txns.front().is_none_or(|t| t.due > now) {
                return;
            }
            let txn = f.txns.pop_front().expect("present");
            for (path, image) in txn.images {
                match image {
                    Some(node) => f.tree.insert(path, node),
                    None => f.tree.remove(&path),
                };
            }
            f.applied = txn.zxid;
            let zxid = txn.zxid;
            self.log(|| format!("follower applies {zxid:#x}"));
            self.fire(true, txn.changes);
            self.drain_follower(now);
        }
    }

    /// The follower catches up at once (a restart: it loads what was
    /// committed), its connections' queues gone with them.
    pub(super) fn follower_catch_up(&mut self) {
        let zxid = self.zxid;
        if let Some(f) = self.follower.as_mut() {
            f.tree = self.tree.clone();
            f.applied = zxid;
            f.txns.clear();
            f.queues.clear();
        }
    }

    /// A request on a connection to the lagging follower (see the module
    /// docs).
    pub(super) fn on_request_lagging(
        &mut self,
        now: Instant,
        conn: ConnId,
        session: i64,
        frame: &[u8],
    ) {
        self.touch(now, session);
        let Ok((header, body)) = decode_request_header(frame) else {
            return self.close_conn(conn);
        };
        let xid = header.xid;
        let request = match Request::decode_body(header.op, body) {
            Ok(r) => r,
            Err(DecodeError::UnknownOpCode(_)) => return self.unimplemented(conn, xid),
            Err(_) => {
                return self.reply(
                    conn,
                    xid,
                    self.follower_zxid(),
                    Err(ErrorCode::MarshallingError),
                )
            }
        };
        if self.trace.is_some() {
            let summary = format!("{request:?}");
            self.log(|| {
                format!("conn {conn} {session:#x} xid={xid} (lagging follower): {summary}")
            });
        }
        let authed = self.conns.get(&conn).is_some_and(|c| c.authed);
        let caller = Caller { session, authed };
        let queued = match request {
            Request::Auth(_) | Request::CloseSession | Request::WhoAmI | Request::Check(_) => {
                return self.dispatch(now, conn, caller, xid, request);
            }
            Request::Sync(path) => {
                self.land_late_writes(now, session);
                Queued {
                    point: self.zxid,
                    work: Work::Reply {
                        xid,
                        result: Ok(Response::Path(path)),
                    },
                }
            }
            req if Self::is_write(&req) => {
                let zxid = self.next_zxid();
                let result = self.write(now, caller, req, zxid);
                self.commit();
                Queued {
                    point: zxid,
                    work: Work::Reply { xid, result },
                }
            }
            request => Queued {
                point: 0,
                work: Work::Read { xid, request },
            },
        };
        if let Some(f) = self.follower.as_mut() {
            f.queues.entry(conn).or_default().push_back(queued);
        }
        self.drain_follower(now);
        self.land_late_writes(now, session);
    }

    /// A new session's ConnectResponse on the follower: sent once it has
    /// applied the createSession txn `zxid`.
    pub(super) fn queue_handshake(&mut self, conn: ConnId, zxid: i64, bytes: Vec<u8>) {
        if let Some(f) = self.follower.as_mut() {
            f.queues.entry(conn).or_default().push_back(Queued {
                point: zxid,
                work: Work::Frame(bytes),
            });
        }
        self.drain_follower(self.clock);
    }

    /// Answers, on every follower connection, what heads its queue and may
    /// go now.
    fn drain_follower(&mut self, now: Instant) {
        let conns: Vec<ConnId> = match &self.follower {
            Some(f) => f.queues.keys().copied().collect(),
            None => return,
        };
        for conn in conns {
            loop {
                let Some(f) = self.follower.as_mut() else {
                    return;
                };
                let applied = f.applied;
                let Some(queue) = f.queues.get_mut(&conn) else {
                    break;
                };
                if queue.front().is_none_or(|q| q.point > applied) {
                    if queue.is_empty() {
                        f.queues.remove(&conn);
                    }
                    break;
                }
                let work = queue.pop_front().expect("present").work;
                if !self.conns.contains_key(&conn) {
                    continue;
                }
                match work {
                    Work::Frame(bytes) => self.out.push_back((conn, bytes, applied)),
                    Work::Reply { xid, result } => self.reply(conn, xid, applied, result),
                    Work::Read { xid, request } => self.read_on_follower(now, conn, xid, request),
                }
            }
        }
    }

    /// A read, setWatches or ping, answered from the follower's tree.
    fn read_on_follower(&mut self, now: Instant, conn: ConnId, xid: i32, request: Request) {
        let Some(session) = self.conns.get(&conn).and_then(|c| c.session) else {
            return;
        };
        let applied = self.follower_zxid();
        let behind = applied < self.zxid;
        if let Some(f) = self.follower.as_mut() {
            f.stale_reads += u64::from(behind);
        }
        let path = match &request {
            Request::Exists(p) | Request::GetData(p) => Some(p.path.clone()),
            Request::GetChildren(p) | Request::GetChildren2(p) => Some(p.path.clone()),
            _ => None,
        };
        // The request is served by the leader's code on the follower's
        // tree: the two trees trade places for it.
        self.swap_follower_tree();
        let result = match request {
            Request::Ping => Ok(Response::Empty),
            Request::SetWatches(sw) | Request::SetWatches2(sw) => {
                self.set_watches(conn, &sw);
                Ok(Response::Empty)
            }
            request => self.read(conn, session, request),
        };
        self.swap_follower_tree();
        if let (Some(path), true) = (path, result.is_ok()) {
            self.last_reads.insert((session, path), now);
        }
        self.reply(conn, xid, applied, result);
    }

    fn swap_follower_tree(&mut self) {
        if let Some(f) = self.follower.as_mut() {
            std::mem::swap(&mut self.tree, &mut f.tree);
        }
    }

    /// A connection is gone: what waited in its queue goes with it.
    pub(super) fn forget_follower_conn(&mut self, conn: ConnId) {
        if let Some(f) = self.follower.as_mut() {
            f.queues.remove(&conn);
        }
    }

    /// The admin's in-place edit reaches the follower too (it is no txn).
    pub(super) fn follower_set_counter(&mut self, path: &str, value: i32) {
        if let Some(n) = self.follower.as_mut().and_then(|f| f.tree.get_mut(path)) {
            n.stat.cversion = value;
        }
    }
}
