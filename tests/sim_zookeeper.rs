//! SimZooKeeper driven by the real session core (`zklock::session::Session`)
//! on virtual time: bytes move between `Session::output` and
//! `SimZooKeeper::receive`, and between `SimZooKeeper::poll_output` and
//! `Session::handle_input`. Every loop is bounded.

mod sim;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_server_message, encode_connect, encode_request, split_frame, Acl, ConnectRequest,
    ConnectResponse, CreateMode, CreateRequest, Decode, ErrorCode, EventType, MultiOp, MultiResult,
    PathVersion, PathWatch, Request, Response, ServerMessage, SetDataRequest,
};
use sim::zookeeper::{session_password, ConnId, SimZooKeeper, SESSION_ID_BASE};
use zklock::session::{RequestError, Session, SessionConfig, SessionEvent, SessionState};

const TICK: Duration = Duration::from_millis(200);
const TIMEOUT: Duration = Duration::from_millis(3000);

type Reply = Result<Response, RequestError>;

struct Client {
    s: Session<u64, u64>,
    conn: Option<ConnId>,
    /// Cut off from the server: nothing it writes arrives, no reconnect.
    partitioned: bool,
    /// At most one connection attempt per virtual instant (a refused
    /// client would otherwise retry forever without time passing).
    last_attempt: Option<Instant>,
    replies: Vec<(u64, Reply)>,
    fired: Vec<(u64, EventType, String)>,
    abandoned: Vec<u64>,
    states: Vec<SessionState>,
    next_handle: u64,
}

struct World {
    zk: SimZooKeeper,
    now: Instant,
    clients: Vec<Client>,
}

impl World {
    fn new() -> Self {
        Self::with(|zk| zk)
    }

    fn with(build: impl FnOnce(SimZooKeeper) -> SimZooKeeper) -> Self {
        let now = Instant::now();
        World {
            zk: build(SimZooKeeper::new(now, TICK)),
            now,
            clients: Vec::new(),
        }
    }

    /// A client that connects and waits until its session is up.
    fn client(&mut self) -> usize {
        let config = SessionConfig {
            session_timeout: TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            max_frame: jute::DEFAULT_MAX_FRAME,
        };
        self.clients.push(Client {
            s: Session::new(config, self.now),
            conn: None,
            partitioned: false,
            last_attempt: None,
            replies: Vec::new(),
            fired: Vec::new(),
            abandoned: Vec::new(),
            states: Vec::new(),
            next_handle: 1,
        });
        let i = self.clients.len() - 1;
        self.pump();
        assert_eq!(self.clients[i].s.state(), SessionState::Connected);
        i
    }

    fn session_id(&self, i: usize) -> i64 {
        self.clients[i].s.session_id()
    }

    /// Moves bytes and events until nothing moves.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            let mut progress = false;
            for c in &mut self.clients {
                if c.s.wants_connection()
                    && c.conn.is_none()
                    && !c.partitioned
                    && c.last_attempt != Some(self.now)
                {
                    c.last_attempt = Some(self.now);
                    c.conn = Some(self.zk.connect(self.now));
                    c.s.handle_connected(self.now);
                    progress = true;
                }
                let out = c.s.output().to_vec();
                if !out.is_empty() {
                    c.s.consume_output(out.len());
                    if let (Some(conn), false) = (c.conn, c.partitioned) {
                        self.zk.receive(self.now, conn, &out);
                    }
                    progress = true;
                }
                while let Some(ev) = c.s.poll_event() {
                    progress = true;
                    match ev {
                        SessionEvent::Reply { handle, result } => c.replies.push((handle, result)),
                        SessionEvent::Watch { watcher, event } => {
                            c.fired.push((watcher, event.kind, event.path))
                        }
                        SessionEvent::WatchAbandoned { watcher, .. } => c.abandoned.push(watcher),
                        SessionEvent::State(s) => c.states.push(s),
                        SessionEvent::DropConnection(_) => {
                            if let Some(conn) = c.conn.take() {
                                self.zk.disconnect(self.now, conn);
                            }
                        }
                    }
                }
            }
            while let Some((conn, bytes)) = self.zk.poll_output() {
                progress = true;
                if let Some(c) = self
                    .clients
                    .iter_mut()
                    .find(|c| c.conn == Some(conn) && !c.partitioned)
                {
                    c.s.handle_input(self.now, &bytes);
                }
            }
            while let Some(conn) = self.zk.poll_closed() {
                progress = true;
                if let Some(c) = self.clients.iter_mut().find(|c| c.conn == Some(conn)) {
                    c.conn = None;
                    if !c.partitioned {
                        c.s.handle_disconnected(self.now);
                    }
                }
            }
            if let Err(e) = self.zk.check_invariants() {
                panic!("server invariant broken: {e}");
            }
            if !progress {
                return;
            }
        }
        panic!("pump did not settle");
    }

    /// Advances virtual time to `now + d`, stopping at every deadline.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..100_000 {
            let next = self
                .clients
                .iter()
                .filter_map(|c| c.s.poll_timeout())
                .chain(self.zk.poll_timeout())
                .filter(|t| *t > self.now)
                .min()
                .unwrap_or(end)
                .min(end);
            self.now = next;
            self.zk.handle_timeout(self.now);
            for c in &mut self.clients {
                c.s.handle_timeout(self.now);
            }
            self.pump();
            if self.now >= end {
                return;
            }
        }
        panic!("advance did not reach its end");
    }

    fn submit(&mut self, i: usize, req: Request, watch: bool) -> u64 {
        let c = &mut self.clients[i];
        let h = c.next_handle;
        c.next_handle += 1;
        c.s.submit(self.now, req, h, watch.then_some(h));
        h
    }

    fn call_w(&mut self, i: usize, req: Request, watch: bool) -> (u64, Reply) {
        let h = self.submit(i, req, watch);
        self.pump();
        let c = &mut self.clients[i];
        let pos = c
            .replies
            .iter()
            .position(|(rh, _)| *rh == h)
            .expect("no reply");
        (h, c.replies.remove(pos).1)
    }

    fn call(&mut self, i: usize, req: Request) -> Reply {
        self.call_w(i, req, false).1
    }

    fn fired(&mut self, i: usize) -> Vec<(u64, EventType, String)> {
        std::mem::take(&mut self.clients[i].fired)
    }

    /// Drops client `i`'s connection from the network side: both ends see it.
    fn cut(&mut self, i: usize) {
        if let Some(conn) = self.clients[i].conn.take() {
            self.zk.disconnect(self.now, conn);
            self.clients[i].s.handle_disconnected(self.now);
        }
        self.advance(Duration::from_millis(1));
    }
}

fn create(path: &str, data: &[u8], mode: CreateMode) -> CreateRequest {
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

fn created_path(r: Reply) -> String {
    match r {
        Ok(Response::Path(p)) | Ok(Response::Created { path: p, .. }) => p,
        other => panic!("not a create reply: {other:?}"),
    }
}

#[test]
fn create_get_set_delete() {
    let mut w = World::new();
    let a = w.client();
    let z0 = w.zk.last_zxid();
    let r = w.call(
        a,
        Request::Create2(create("/a", b"hello", CreateMode::Persistent)),
    );
    let Ok(Response::Created { path, stat }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(path, "/a");
    assert_eq!(stat.czxid, z0 + 1);
    assert_eq!((stat.mzxid, stat.pzxid), (z0 + 1, z0 + 1));
    assert_eq!(
        (stat.version, stat.data_length, stat.ephemeral_owner),
        (0, 5, 0)
    );
    assert_eq!(w.zk.last_zxid(), z0 + 1);

    match w.call(a, Request::GetData(pw("/a", false))) {
        Ok(Response::Data { data, stat }) => {
            assert_eq!(data, b"hello");
            assert_eq!(stat.czxid, z0 + 1);
        }
        other => panic!("{other:?}"),
    }
    // Reads do not move the zxid.
    assert_eq!(w.zk.last_zxid(), z0 + 1);
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/a", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NodeExists))
    );
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/x/y", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    assert_eq!(
        w.call(
            a,
            Request::Create(create("bad", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::BadArguments))
    );
    match w.call(
        a,
        Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: b"bye".to_vec(),
            version: 0,
        }),
    ) {
        Ok(Response::Stat(stat)) => assert_eq!((stat.version, stat.data_length), (1, 3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/a/c", b"", CreateMode::Persistent))
        )
        .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/a".into(),
                version: 1
            })
        ),
        Err(RequestError::Server(ErrorCode::NotEmpty))
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/a/c".into(),
                version: 3
            })
        ),
        Err(RequestError::Server(ErrorCode::BadVersion))
    );
    let before = w.zk.exists("/a").unwrap();
    let counter = w.zk.sequence_counter("/a").unwrap();
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/a/c".into(),
            version: 0,
        }),
    )
    .unwrap();
    let after = w.zk.exists("/a").unwrap();
    // Delete moves the parent's pzxid and the cversion clients see, not
    // the sequence counter (ZooKeeper 3.8 stores creates only and reports
    // creates × 2 − children).
    assert_eq!(w.zk.sequence_counter("/a"), Some(counter));
    assert_eq!(after.cversion, before.cversion + 1);
    assert!(after.pzxid > before.pzxid);
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/a".into(),
            version: 1,
        }),
    )
    .unwrap();
    assert!(w.zk.exists("/a").is_none());
    assert_eq!(
        w.call(a, Request::Exists(pw("/a", false))),
        Err(RequestError::Server(ErrorCode::NoNode))
    );
    assert_eq!(
        w.call(
            a,
            Request::Delete(PathVersion {
                path: "/zookeeper".into(),
                version: -1
            })
        ),
        Err(RequestError::Server(ErrorCode::BadArguments))
    );
    match w.call(a, Request::GetChildren(pw("/", false))) {
        Ok(Response::Children(c)) => assert_eq!(c.to_vec(), vec!["zookeeper".to_string()]),
        other => panic!("{other:?}"),
    }
}

/// Protected-style names with a unique prefix per create, as Curator and
/// zklock name lock nodes.
fn unique(k: usize) -> Request {
    Request::Create2(create(
        &format!("/lock/_c_{k:04}-lock-"),
        b"",
        CreateMode::EphemeralSequential,
    ))
}

/// The number after `-lock-` (`%010d`: eleven characters when negative).
fn suffix(path: &str) -> i32 {
    let (_, n) = path
        .rsplit_once("-lock-")
        .unwrap_or(("", &path[path.len() - 10..]));
    n.parse().unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// DataTree.createNode stores a parent's cversion only if greater: one
/// create at a time, the counter stops at i32::MAX; plain names then fail
/// NodeExists, unique prefixes reuse the suffix; deletes move neither the
/// counter nor cversion's end, only pzxid.
#[test]
fn sequential_names_stop_at_the_counter_end() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX - 1));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let mk = |w: &mut World| {
        w.call(
            a,
            Request::Create(create("/lock/n-", b"", CreateMode::EphemeralSequential)),
        )
    };
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483646");
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483647");
    let pzxid = w.zk.exists("/lock").unwrap().pzxid;
    assert_eq!(mk(&mut w), Err(RequestError::Server(ErrorCode::NodeExists)));
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    let names: Vec<String> = (0..3).map(|k| created_path(w.call(a, unique(k)))).collect();
    assert!(names.iter().all(|n| suffix(n) == i32::MAX), "{names:?}");
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    // Creates at the end leave pzxid where it was.
    assert_eq!(w.zk.exists("/lock").unwrap().pzxid, pzxid);
    // DataNode.copyStat: 2 × stored − numChildren, in Java ints.
    assert_eq!(
        w.zk.exists("/lock").unwrap().cversion,
        i32::MAX.wrapping_mul(2).wrapping_sub(5)
    );
    assert!(w.zk.delete_as_admin(w.now, "/lock/n-2147483647"));
    assert!(w.zk.exists("/lock").unwrap().pzxid > pzxid);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    assert_eq!(created_path(mk(&mut w)), "/lock/n-2147483647");
    // Small numbers are zero-padded to ten digits, negative ones too.
    let mut w = World::with(|zk| zk.with_sequence_start(-1));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/q", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let first = created_path(w.call(
        a,
        Request::Create(create("/q/x", b"", CreateMode::PersistentSequential)),
    ));
    let second = created_path(w.call(
        a,
        Request::Create(create("/q/x", b"", CreateMode::PersistentSequential)),
    ));
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("/q/x-000000001", "/q/x0000000000")
    );
}

/// Sends `reqs` without pumping in between: they reach the server in one
/// `receive`, one burst in flight. Returns the replies in order.
fn burst(w: &mut World, i: usize, reqs: Vec<Request>) -> Vec<Reply> {
    let handles: Vec<u64> = reqs.into_iter().map(|r| w.submit(i, r, false)).collect();
    w.pump();
    handles
        .iter()
        .map(|h| {
            let c = &mut w.clients[i];
            let pos = c.replies.iter().position(|(rh, _)| rh == h).expect("reply");
            c.replies.remove(pos).1
        })
        .collect()
}

/// PrepRequestProcessor names a create from the outstanding parent record
/// (cversion + 1 in Java ints) while an earlier create is in flight: at the
/// end a burst comes out 2147483647, -2147483648, -2147483647, …; the
/// stored counter stays at i32::MAX, so the next burst issues -2147483648
/// again.
#[test]
fn creates_in_flight_at_the_end_come_out_negative() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX));
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let names =
        |rs: Vec<Reply>| -> Vec<i32> { rs.into_iter().map(|r| suffix(&created_path(r))).collect() };
    let first = names(burst(&mut w, a, (0..4).map(unique).collect()));
    assert_eq!(first, [i32::MAX, i32::MIN, i32::MIN + 1, i32::MIN + 2]);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
    let second = names(burst(&mut w, a, (4..6).map(unique).collect()));
    assert_eq!(second, [i32::MAX, i32::MIN]);
    // A delete in flight carries the prepped cversion on (its parent record
    // is a duplicate of the outstanding one).
    let third = burst(
        &mut w,
        a,
        vec![
            unique(6),
            Request::Delete(PathVersion {
                path: "/lock/_c_0000-lock-2147483647".into(),
                version: -1,
            }),
            unique(7),
        ],
    );
    assert_eq!(suffix(&created_path(third[0].clone())), i32::MAX);
    assert!(third[1].is_ok(), "{:?}", third[1]);
    assert_eq!(suffix(&created_path(third[2].clone())), i32::MIN);
}

/// Two sequential creates in one multi at the end: the second is prepped
/// against the first's record. A failed multi puts the outstanding records
/// back (PrepRequestProcessor.rollbackPendingChanges).
#[test]
fn multi_at_the_counter_end_and_its_rollback() {
    let mut w = World::with(|zk| zk.with_sequence_start(i32::MAX));
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/lock", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let seq = |k: usize| {
        MultiOp::Create(create(
            &format!("/lock/_c_{k:04}-lock-"),
            b"",
            CreateMode::PersistentSequential,
        ))
    };
    match w.call(a, Request::Multi(vec![seq(0), seq(1)])) {
        Ok(Response::Multi(rs)) => assert_eq!(
            rs,
            vec![
                MultiResult::Create {
                    path: "/lock/_c_0000-lock-2147483647".into()
                },
                MultiResult::Create {
                    path: "/lock/_c_0001-lock--2147483648".into()
                },
            ]
        ),
        other => panic!("{other:?}"),
    }
    // One window of requests in flight across two connections.
    w.zk.hold_in_flight(true);
    assert_eq!(suffix(&created_path(w.call(a, unique(2)))), i32::MAX);
    let failing = Request::Multi(vec![
        seq(3),
        MultiOp::Check(PathVersion {
            path: "/missing".into(),
            version: -1,
        }),
    ]);
    assert!(matches!(w.call(b, failing), Ok(Response::Multi(_))));
    assert_eq!(suffix(&created_path(w.call(b, unique(4)))), i32::MIN);
    w.zk.hold_in_flight(false);
    assert_eq!(suffix(&created_path(w.call(b, unique(5)))), i32::MAX);
    assert_eq!(w.zk.sequence_counter("/lock"), Some(i32::MAX));
}

#[test]
fn ephemerals_vanish_on_close() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let sid = w.session_id(a);
    let p = created_path(w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral))));
    assert_eq!(w.zk.exists(&p).unwrap().ephemeral_owner, sid);
    assert_eq!(
        w.call(
            a,
            Request::Create(create("/e/child", b"", CreateMode::Persistent))
        ),
        Err(RequestError::Server(ErrorCode::NoChildrenForEphemerals))
    );
    // b watches it; the close fires NodeDeleted at b.
    let (h, r) = w.call_w(b, Request::Exists(pw("/e", true)), true);
    r.unwrap();
    w.clients[a].s.close(w.now, 999);
    w.pump();
    assert_eq!(w.clients[a].s.state(), SessionState::Closed);
    assert!(w.clients[a]
        .replies
        .iter()
        .any(|(h, r)| *h == 999 && r.is_ok()));
    assert!(w.zk.exists("/e").is_none());
    assert!(!w.zk.session_alive(sid));
    assert!(w.zk.connection_of(sid).is_none());
    assert_eq!(
        w.fired(b),
        vec![(h, EventType::NodeDeleted, "/e".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn ephemerals_vanish_when_the_session_expires() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let sid = w.session_id(a);
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    assert_eq!(w.zk.session_timeout(sid), Some(TIMEOUT));
    w.clients[a].partitioned = true;
    let silent_since = w.now;
    // Still there just before T: only silence longer than T expires it.
    w.advance(TIMEOUT - Duration::from_millis(1));
    assert!(w.zk.session_alive(sid));
    assert!(w.zk.exists("/e").is_some());
    w.advance(TICK + Duration::from_millis(1));
    assert!(!w.zk.session_alive(sid));
    assert!(w.zk.exists("/e").is_none());
    assert!(w.now - silent_since <= TIMEOUT + TICK);
    // b keeps pinging, so it lives on.
    w.advance(TIMEOUT * 3);
    assert!(w.zk.session_alive(w.session_id(b)));
    // a comes back: the server says expired.
    w.clients[a].partitioned = false;
    w.advance(Duration::from_secs(2));
    assert_eq!(w.clients[a].s.state(), SessionState::Expired);
}

#[test]
fn expiry_happens_on_a_tick_boundary_between_t_and_t_plus_tick() {
    let now = Instant::now();
    let tick = Duration::from_millis(500);
    let mut zk = SimZooKeeper::new(now, tick);
    let conn = zk.connect(now);
    let t0 = now + Duration::from_millis(1234);
    let mut buf = BytesMut::new();
    encode_connect(
        &mut buf,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 100_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
        },
    );
    zk.receive(t0, conn, &buf);
    let (_, frame) = zk.poll_output().unwrap();
    let resp = ConnectResponse::decode_exact(&frame[4..]).unwrap();
    // Clamped to 20 ticks.
    assert_eq!(resp.timeout_ms, 10_000);
    assert_eq!(resp.session_id, SESSION_ID_BASE + 1);
    assert_eq!(resp.passwd, session_password(resp.session_id));
    // 1234 + 10000 = 11234 → next multiple of 500 above it: 11500.
    let deadline = now + Duration::from_millis(11_500);
    assert_eq!(zk.poll_timeout(), Some(deadline));
    zk.handle_timeout(deadline - Duration::from_millis(1));
    assert!(zk.session_alive(resp.session_id));
    zk.handle_timeout(deadline);
    assert!(!zk.session_alive(resp.session_id));
    assert_eq!(zk.poll_closed(), Some(conn));
    assert_eq!(zk.poll_timeout(), None);
}

#[test]
fn exists_watch_on_missing_node_fires_node_created() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    let (h, r) = w.call_w(a, Request::Exists(pw("/later", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 1);
    assert_eq!(w.zk.watches_of(w.session_id(a)), 1);
    w.call(
        b,
        Request::Create(create("/later", b"", CreateMode::Persistent)),
    )
    .unwrap();
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeCreated, "/later".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn get_data_on_missing_node_leaves_no_watch() {
    let mut w = World::new();
    let a = w.client();
    let (_, r) = w.call_w(a, Request::GetData(pw("/nothing", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 0);
    let (_, r) = w.call_w(a, Request::GetChildren(pw("/nothing", true)), true);
    assert_eq!(r, Err(RequestError::Server(ErrorCode::NoNode)));
    assert_eq!(w.zk.watch_count(), 0);
    assert_eq!(w.clients[a].abandoned.len(), 2);
}

#[test]
fn child_watch_fires_on_create_then_is_gone() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/p", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h, r) = w.call_w(a, Request::GetChildren2(pw("/p", true)), true);
    match r {
        Ok(Response::Children2 { children, stat }) => {
            assert!(children.is_empty());
            assert_eq!(stat.num_children, 0);
        }
        other => panic!("{other:?}"),
    }
    w.call(
        b,
        Request::Create(create("/p/c1", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/p/c2", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // One-shot: only the first create is reported.
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeChildrenChanged, "/p".to_string())]
    );
    assert_eq!(w.zk.watch_count(), 0);
    // Data watch + child watch on a node that is deleted: one NodeDeleted
    // per connection on the wire, both client watchers told.
    let (h1, _) = w.call_w(a, Request::GetData(pw("/p/c1", true)), true);
    let (h2, _) = w.call_w(a, Request::GetChildren(pw("/p/c1", true)), true);
    assert_eq!(w.zk.watch_count(), 2);
    assert!(w.zk.delete_as_admin(w.now, "/p/c1"));
    w.pump();
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, p)| (*h, p.clone()));
    assert_eq!(
        fired,
        vec![
            (h1, EventType::NodeDeleted, "/p/c1".to_string()),
            (h2, EventType::NodeDeleted, "/p/c1".to_string()),
        ]
    );
    assert_eq!(w.zk.watch_count(), 0);
}

#[test]
fn failed_multi_applies_nothing_and_reports_per_op_errors() {
    let mut w = World::new();
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/m", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h, _) = w.call_w(a, Request::GetChildren(pw("/m", true)), true);
    let cversion = w.zk.exists("/m").unwrap().cversion;
    let z0 = w.zk.last_zxid();
    let r = w.call(
        a,
        Request::Multi(vec![
            MultiOp::Create(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Check(PathVersion {
                path: "/missing".into(),
                version: -1,
            }),
            MultiOp::Delete(PathVersion {
                path: "/m".into(),
                version: -1,
            }),
        ]),
    );
    assert_eq!(
        r,
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ]))
    );
    assert!(w.zk.children("/m").is_empty());
    assert_eq!(w.zk.exists("/m").unwrap().cversion, cversion);
    // A failed multi is still a txn.
    assert_eq!(w.zk.last_zxid(), z0 + 1);
    assert!(w.fired(a).is_empty());
    // A good one applies every op, later ops seeing earlier ones.
    let r = w.call(
        a,
        Request::Multi(vec![
            MultiOp::Create2(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Create(create("/m/x", b"", CreateMode::PersistentSequential)),
            MultiOp::Check(PathVersion {
                path: "/m/x0000000000".into(),
                version: 0,
            }),
            MultiOp::SetData(SetDataRequest {
                path: "/m/x0000000001".into(),
                data: b"d".to_vec(),
                version: 0,
            }),
        ]),
    );
    let Ok(Response::Multi(results)) = r else {
        panic!("{r:?}")
    };
    // 3.8 answers a create2 inside a multi with the path only.
    assert_eq!(
        results[0],
        MultiResult::Create {
            path: "/m/x0000000000".into()
        }
    );
    assert_eq!(w.zk.exists("/m/x0000000000").unwrap().czxid, z0 + 2);
    assert_eq!(
        results[1],
        MultiResult::Create {
            path: "/m/x0000000001".into()
        }
    );
    assert_eq!(results[2], MultiResult::Check);
    assert!(matches!(&results[3], MultiResult::SetData { stat } if stat.version == 1));
    assert_eq!(w.zk.last_zxid(), z0 + 2);
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeChildrenChanged, "/m".to_string())]
    );
}

#[test]
fn set_watches_after_reconnect_fires_what_changed_while_away() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    for p in ["/w", "/d", "/c", "/k"] {
        w.call(a, Request::Create(create(p, b"", CreateMode::Persistent)))
            .unwrap();
    }
    let (h_data, _) = w.call_w(a, Request::GetData(pw("/w", true)), true);
    let (h_del, _) = w.call_w(a, Request::Exists(pw("/d", true)), true);
    let (h_exist, _) = w.call_w(a, Request::Exists(pw("/new", true)), true);
    let (h_child, _) = w.call_w(a, Request::GetChildren(pw("/c", true)), true);
    let (h_keep, _) = w.call_w(a, Request::GetData(pw("/k", true)), true);
    assert_eq!(w.zk.watches_of(w.session_id(a)), 5);
    let sid = w.session_id(a);
    // a drops off; its watches are gone from the server.
    w.clients[a].partitioned = true;
    w.cut(a);
    assert_eq!(w.zk.watch_count(), 0);
    w.call(
        b,
        Request::SetData(SetDataRequest {
            path: "/w".into(),
            data: b"x".to_vec(),
            version: -1,
        }),
    )
    .unwrap();
    w.call(
        b,
        Request::Delete(PathVersion {
            path: "/d".into(),
            version: -1,
        }),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/new", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/c/x", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // a comes back on a new connection with the same session.
    w.clients[a].partitioned = false;
    w.advance(Duration::from_millis(1));
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, p)| (*h, p.clone()));
    let mut want = vec![
        (h_data, EventType::NodeDataChanged, "/w".to_string()),
        (h_del, EventType::NodeDeleted, "/d".to_string()),
        (h_exist, EventType::NodeCreated, "/new".to_string()),
        (h_child, EventType::NodeChildrenChanged, "/c".to_string()),
    ];
    want.sort_by_key(|(h, _, p)| (*h, p.clone()));
    assert_eq!(fired, want);
    // The unchanged one is re-armed and still works.
    assert_eq!(w.zk.watches_of(sid), 1);
    w.call(
        b,
        Request::SetData(SetDataRequest {
            path: "/k".into(),
            data: b"y".to_vec(),
            version: -1,
        }),
    )
    .unwrap();
    assert_eq!(
        w.fired(a),
        vec![(h_keep, EventType::NodeDataChanged, "/k".to_string())]
    );
}

#[test]
fn a_session_resumes_on_a_new_connection_and_keeps_its_ephemerals() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    let old = w.clients[a].conn.unwrap();
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    w.cut(a);
    let new = w.clients[a].conn.unwrap();
    assert_ne!(old, new);
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    assert_eq!(w.zk.connection_of(sid), Some(new));
    assert_eq!(w.zk.exists("/e").unwrap().ephemeral_owner, sid);
    assert_eq!(w.zk.ephemerals_of(sid), vec!["/e".to_string()]);
    // A reconnect while the old connection is still open closes the old one.
    let mut raw = Raw::connect(&mut w.zk, w.now);
    let zxid = w.zk.last_zxid();
    let resp = raw.handshake(&mut w.zk, w.now, zxid, sid, session_password(sid));
    assert_eq!(resp.map(|r| r.session_id), Some(sid));
    let mut closed = Vec::new();
    while let Some(c) = w.zk.poll_closed() {
        closed.push(c);
    }
    assert_eq!(closed, vec![new]);
    assert_eq!(w.zk.connection_of(sid), Some(raw.conn));
    assert!(w.zk.exists("/e").is_some());
}

#[test]
fn a_client_ahead_of_the_server_is_refused_without_an_answer() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
    let ahead = zk.last_zxid() + 5;
    assert!(raw.handshake(&mut zk, now, ahead, 0, vec![0; 16]).is_none());
    assert_eq!(zk.poll_output(), None);
    assert_eq!(zk.poll_closed(), Some(raw.conn));
    assert!(zk.sessions().is_empty());
    // Same through the session core: a server restored from an older
    // snapshot (a fresh one here) refuses a client that saw more.
    let mut w = World::new();
    let a = w.client();
    for i in 0..3 {
        w.call(
            a,
            Request::Create(create(&format!("/n{i}"), b"", CreateMode::Persistent)),
        )
        .unwrap();
    }
    assert!(w.clients[a].s.last_zxid() >= 4);
    w.zk = SimZooKeeper::new(w.now, TICK);
    w.clients[a].conn = None;
    w.clients[a].s.handle_disconnected(w.now);
    w.pump();
    assert_ne!(w.clients[a].s.state(), SessionState::Connected);
    assert!(w.zk.sessions().is_empty());
}

#[test]
fn unknown_session_or_wrong_password_reads_as_expired() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
    let resp = raw.handshake(&mut zk, now, 0, SESSION_ID_BASE + 77, vec![0; 16]);
    let resp = resp.unwrap();
    assert!(resp.is_expired());
    assert_eq!((resp.session_id, resp.passwd), (0, vec![0; 16]));
    assert_eq!(zk.poll_closed(), Some(raw.conn));

    let mut good = Raw::connect(&mut zk, now);
    let sid = good
        .handshake(&mut zk, now, 0, 0, vec![0; 16])
        .unwrap()
        .session_id;
    let mut bad = Raw::connect(&mut zk, now);
    let resp = bad.handshake(&mut zk, now, 0, sid, vec![1; 16]).unwrap();
    assert!(resp.is_expired());
    // The wrong password still closed the session's old connection (as
    // ZooKeeper does), but the session itself lives.
    let mut closed = Vec::new();
    while let Some(c) = zk.poll_closed() {
        closed.push(c);
    }
    assert_eq!(closed, vec![good.conn, bad.conn]);
    assert!(zk.session_alive(sid));
}

#[test]
fn restart_keeps_tree_and_sessions() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    let (h, _) = w.call_w(a, Request::GetData(pw("/e", true)), true);
    let zxid = w.zk.last_zxid();
    w.zk.stop(w.now);
    w.pump();
    assert!(w.zk.connections().is_empty());
    assert_eq!(w.zk.watch_count(), 0);
    // Down for longer than the session timeout: nothing expires meanwhile.
    w.advance(TIMEOUT * 2);
    assert!(w.zk.session_alive(sid));
    w.zk.start(w.now);
    w.advance(Duration::from_secs(2));
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(w.session_id(a), sid);
    assert!(w.zk.exists("/e").is_some());
    assert_eq!(w.zk.last_zxid(), zxid);
    // The watch was re-armed by setWatches.
    w.zk.set_data_as_admin(w.now, "/e", b"v").unwrap();
    w.pump();
    assert_eq!(
        w.fired(a),
        vec![(h, EventType::NodeDataChanged, "/e".to_string())]
    );
}

#[test]
fn forced_expiry_and_third_party_delete_fire_watches() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(a, Request::Create(create("/e", b"", CreateMode::Ephemeral)))
        .unwrap();
    w.call(
        a,
        Request::Create(create("/p", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (h1, _) = w.call_w(b, Request::GetData(pw("/e", true)), true);
    let (h2, _) = w.call_w(b, Request::GetData(pw("/p", true)), true);
    let (h3, _) = w.call_w(b, Request::GetChildren(pw("/", true)), true);
    assert!(w.zk.delete_as_admin(w.now, "/p"));
    assert!(!w.zk.delete_as_admin(w.now, "/p"));
    w.pump();
    assert_eq!(
        w.fired(b),
        vec![
            (h2, EventType::NodeDeleted, "/p".to_string()),
            (h3, EventType::NodeChildrenChanged, "/".to_string()),
        ]
    );
    let sid = w.session_id(a);
    w.zk.expire_session(w.now, sid);
    w.advance(Duration::from_millis(1));
    assert_eq!(
        w.fired(b),
        vec![(h1, EventType::NodeDeleted, "/e".to_string())]
    );
    assert!(!w.zk.session_alive(sid));
    assert_eq!(w.clients[a].s.state(), SessionState::Expired);
}

#[test]
fn containers_are_collected_once_emptied() {
    let mut w = World::new();
    let a = w.client();
    let r = w.call(
        a,
        Request::CreateContainer(create("/ct", b"", CreateMode::Container)),
    );
    let Ok(Response::Created { stat, .. }) = r else {
        panic!("{r:?}")
    };
    // Stored as a container owner, shown to clients as 0.
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!(w.zk.collect_containers(w.now), 0);
    w.call(
        a,
        Request::Create(create("/ct/x", b"", CreateMode::Ephemeral)),
    )
    .unwrap();
    assert_eq!(w.zk.collect_containers(w.now), 0);
    w.call(
        a,
        Request::Delete(PathVersion {
            path: "/ct/x".into(),
            version: -1,
        }),
    )
    .unwrap();
    assert_eq!(w.zk.collect_containers(w.now), 1);
    assert!(w.zk.exists("/ct").is_none());
}

#[test]
fn ping_auth_sync_and_partial_frames() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    let mut raw = Raw::connect(&mut zk, now);
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
    encode_request(&mut buf, jute::xid::PING, &Request::Ping);
    encode_request(
        &mut buf,
        jute::xid::AUTH,
        &Request::Auth(jute::AuthPacket {
            kind: 0,
            scheme: "digest".into(),
            auth: b"u:p".to_vec(),
        }),
    );
    encode_request(&mut buf, 1, &Request::Sync("/".into()));
    // One byte at a time.
    for b in buf.iter() {
        zk.receive(now, raw.conn, &[*b]);
    }
    let frames = raw.frames(&mut zk);
    assert_eq!(frames.len(), 4);
    let ConnectResponse { timeout_ms, .. } = ConnectResponse::decode_exact(&frames[0]).unwrap();
    assert_eq!(timeout_ms, 4000);
    let headers: Vec<_> = frames[1..]
        .iter()
        .map(|f| match decode_server_message(f).unwrap() {
            ServerMessage::Reply { header, .. } => (header.xid, header.zxid, header.err),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        headers,
        vec![
            (-2, 1, ErrorCode::Ok),
            (-4, 0, ErrorCode::Ok),
            (1, 1, ErrorCode::Ok)
        ]
    );
    // An unknown op: Unimplemented, then the close.
    let mut buf = BytesMut::new();
    jute::encode_frame(&mut buf, |b| {
        jute::Encode::encode(
            &jute::RequestHeader {
                xid: 2,
                op: jute::OpCode::Unknown(4242),
            },
            b,
        )
    });
    zk.receive(now, raw.conn, &buf);
    let frames = raw.frames(&mut zk);
    assert!(matches!(
        decode_server_message(&frames[0]).unwrap(),
        ServerMessage::Reply { header, .. } if header.err == ErrorCode::Unimplemented
    ));
    assert_eq!(zk.poll_closed(), Some(raw.conn));
}

#[test]
fn garbage_never_panics_and_closes_the_connection() {
    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, TICK);
    // A negative frame length.
    let c = zk.connect(now);
    zk.receive(now, c, &[0xff, 0xff, 0xff, 0xfe, 1, 2]);
    assert_eq!(zk.poll_closed(), Some(c));
    // Too large.
    let c = zk.connect(now);
    zk.receive(now, c, &[0x7f, 0, 0, 0]);
    assert_eq!(zk.poll_closed(), Some(c));
    // A frame that is no ConnectRequest.
    let c = zk.connect(now);
    zk.receive(now, c, &[0, 0, 0, 3, 1, 2, 3]);
    assert_eq!(zk.poll_closed(), Some(c));
    // Pseudo-random bytes after a good handshake, many seeds: never a panic.
    let mut x: u64 = 0x1234_5678;
    for round in 0..300 {
        let mut raw = Raw::connect(&mut zk, now);
        if round % 3 != 0 {
            raw.handshake(&mut zk, now, 0, 0, vec![0; 16]).unwrap();
        }
        let mut bytes = Vec::new();
        let len = 12 + round % 60;
        for _ in 0..len {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            bytes.push((x >> 56) as u8);
        }
        // A plausible frame header so the body reaches the decoders.
        let body_len = (bytes.len() - 4) as u32;
        bytes[..4].copy_from_slice(&body_len.to_be_bytes());
        if round % 2 == 0 {
            // A known op code with a garbage body.
            bytes[8..12].copy_from_slice(&[0, 0, 0, (round % 16) as u8]);
        }
        zk.receive(now, raw.conn, &bytes);
        while zk.poll_output().is_some() {}
        while zk.poll_closed().is_some() {}
    }
}

/// A hand-driven connection for wire-level checks.
struct Raw {
    conn: ConnId,
    input: BytesMut,
}

impl Raw {
    fn connect(zk: &mut SimZooKeeper, now: Instant) -> Raw {
        Raw {
            conn: zk.connect(now),
            input: BytesMut::new(),
        }
    }

    /// Frames delivered to this connection so far (others are dropped).
    fn frames(&mut self, zk: &mut SimZooKeeper) -> Vec<Vec<u8>> {
        let mut other = Vec::new();
        while let Some((c, bytes)) = zk.poll_output() {
            if c == self.conn {
                self.input.extend_from_slice(&bytes);
            } else {
                other.push((c, bytes));
            }
        }
        let mut frames = Vec::new();
        while let Some(f) = split_frame(&mut self.input, usize::MAX).unwrap() {
            frames.push(f.to_vec());
        }
        frames
    }

    fn handshake(
        &mut self,
        zk: &mut SimZooKeeper,
        now: Instant,
        last_zxid_seen: i64,
        session_id: i64,
        passwd: Vec<u8>,
    ) -> Option<ConnectResponse> {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen,
                timeout_ms: 4000,
                session_id,
                passwd,
                read_only: false,
            },
        );
        zk.receive(now, self.conn, &buf);
        self.frames(zk)
            .first()
            .map(|f| ConnectResponse::decode_exact(f).unwrap())
    }
}

fn add_watch(path: &str, recursive: bool) -> Request {
    Request::AddWatch(jute::AddWatchRequest {
        path: path.into(),
        mode: if recursive {
            jute::AddWatchMode::PersistentRecursive
        } else {
            jute::AddWatchMode::Persistent
        },
    })
}

#[test]
fn persistent_watches_stay_until_removed() {
    let mut w = World::new();
    let a = w.client();
    let r = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (hp, res) = w.call_w(a, add_watch("/r", false), true);
    res.unwrap();
    let (hr, res) = w.call_w(r, add_watch("/r", true), true);
    res.unwrap();
    // One entry per table each.
    assert_eq!(w.zk.persistent_watch_count(), 4);
    assert_eq!(w.zk.watch_count(), 0);
    w.call(
        b,
        Request::Create(create("/r/x", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call(
        b,
        Request::Create(create("/r/x/y", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.zk.set_data_as_admin(w.now, "/r", b"1").unwrap();
    w.pump();
    // Plain on /r: its child list and its data, every time.
    assert_eq!(
        w.fired(a),
        vec![
            (hp, EventType::NodeChildrenChanged, "/r".to_string()),
            (hp, EventType::NodeDataChanged, "/r".to_string()),
        ]
    );
    // Recursive: creates below and the data change, never
    // NodeChildrenChanged.
    assert_eq!(
        w.fired(r),
        vec![
            (hr, EventType::NodeCreated, "/r/x".to_string()),
            (hr, EventType::NodeCreated, "/r/x/y".to_string()),
            (hr, EventType::NodeDataChanged, "/r".to_string()),
        ]
    );
    assert_eq!(w.zk.persistent_watch_count(), 4);
    // They survive a reconnect (setWatches2 re-arms them).
    w.cut(a);
    assert_eq!(w.zk.persistent_watch_count(), 4);
    let res = w.call(
        a,
        Request::RemoveWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    assert_eq!(res, Ok(Response::Empty));
    assert_eq!(w.zk.persistent_watch_count(), 2);
    let res = w.call(
        a,
        Request::CheckWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    // 3.8's checkWatches answers Ok while *any* connection (here r's)
    // watches the path; removeWatches only touches the caller's own.
    assert_eq!(res, Ok(Response::Empty));
    let res = w.call(
        a,
        Request::RemoveWatches(jute::WatchesRequest {
            path: "/r".into(),
            kind: jute::WatcherType::Any,
        }),
    );
    assert_eq!(res, Err(RequestError::Server(ErrorCode::NoWatcher)));
    assert_eq!(w.zk.persistent_watch_count(), 2);
}

#[test]
fn one_mode_per_path_and_connection_as_in_3_8() {
    let mut w = World::new();
    let a = w.client();
    let b = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    // A one-shot child watch on a path with a persistent watch replaces the
    // persistent mode in the child table (ZooKeeper 3.8, fixed in 3.9 by
    // ZOOKEEPER-4466): after it fires, child changes are no longer seen.
    let (hp, _) = w.call_w(a, add_watch("/r", false), true);
    let (hc, _) = w.call_w(a, Request::GetChildren(pw("/r", true)), true);
    for name in ["/r/1", "/r/2"] {
        w.call(
            b,
            Request::Create(create(name, b"", CreateMode::Persistent)),
        )
        .unwrap();
    }
    let fired = w.fired(a);
    // The client core hands the one notification to both its watchers.
    assert_eq!(
        fired,
        vec![
            (hc, EventType::NodeChildrenChanged, "/r".to_string()),
            (hp, EventType::NodeChildrenChanged, "/r".to_string()),
        ]
    );
    // The data half is still persistent.
    w.zk.set_data_as_admin(w.now, "/r", b"1").unwrap();
    w.zk.set_data_as_admin(w.now, "/r", b"2").unwrap();
    w.pump();
    assert_eq!(w.fired(a).len(), 2);
}

#[test]
fn child_order_seed_permutes_listing_deterministically() {
    let names = |seed: u64| {
        let mut w = World::with(|zk| zk.with_child_order_seed(seed));
        let a = w.client();
        w.call(
            a,
            Request::Create(create("/p", b"", CreateMode::Persistent)),
        )
        .unwrap();
        for i in 0..8 {
            w.call(
                a,
                Request::Create(create(&format!("/p/c{i}"), b"", CreateMode::Persistent)),
            )
            .unwrap();
        }
        match w.call(a, Request::GetChildren(pw("/p", false))) {
            Ok(Response::Children(c)) => c.to_vec(),
            other => panic!("{other:?}"),
        }
    };
    let sorted: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    assert_eq!(names(0), sorted);
    let a = names(7);
    assert_eq!(a, names(7));
    assert_ne!(a, sorted);
    let mut again = a.clone();
    again.sort();
    assert_eq!(again, sorted);
}

#[test]
fn a_lost_reply_leaves_the_write_applied() {
    let mut w = World::new();
    let a = w.client();
    let sid = w.session_id(a);
    let h = w.submit(
        a,
        Request::Create2(create("/lock-", b"", CreateMode::EphemeralSequential)),
        false,
    );
    // The request reaches the server; the connection dies before the reply.
    let out = w.clients[a].s.output().to_vec();
    w.clients[a].s.consume_output(out.len());
    let conn = w.clients[a].conn.unwrap();
    w.zk.receive(w.now, conn, &out);
    w.clients[a].conn = None;
    w.zk.disconnect(w.now, conn);
    w.clients[a].s.handle_disconnected(w.now);
    w.advance(Duration::from_millis(1));
    let pos = w.clients[a]
        .replies
        .iter()
        .position(|(rh, _)| *rh == h)
        .unwrap();
    assert_eq!(
        w.clients[a].replies[pos].1,
        Err(RequestError::ConnectionLoss)
    );
    assert_eq!(w.clients[a].s.state(), SessionState::Connected);
    assert_eq!(
        w.zk.ephemerals_of(sid),
        vec!["/lock-0000000000".to_string()]
    );
}

#[test]
fn same_inputs_same_bytes() {
    let run = || {
        let mut w = World::with(|zk| zk.with_trace());
        let a = w.client();
        let b = w.client();
        w.call(
            a,
            Request::Create(create("/l", b"", CreateMode::Persistent)),
        )
        .unwrap();
        for i in 0..4 {
            let c = if i % 2 == 0 { a } else { b };
            w.call(
                c,
                Request::Create(create("/l/n-", b"", CreateMode::EphemeralSequential)),
            )
            .unwrap();
            w.call_w(c, Request::GetChildren(pw("/l", true)), true)
                .1
                .unwrap();
        }
        w.cut(a);
        w.advance(TIMEOUT);
        let sid = w.session_id(b);
        w.zk.expire_session(w.now, sid);
        w.advance(TIMEOUT);
        w.zk.take_trace()
    };
    let first = run();
    assert!(first.len() > 30);
    assert!(first.iter().any(|l| l.contains("expired")));
    assert_eq!(first, run());
}

#[test]
#[ignore = "prints a sample trace"]
fn print_trace() {
    let mut w = World::with(|zk| zk.with_trace());
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/l", b"", CreateMode::Persistent)),
    )
    .unwrap();
    w.call_w(a, Request::GetChildren(pw("/l", true)), true)
        .1
        .unwrap();
    w.call(
        a,
        Request::Create(create("/l/n-", b"", CreateMode::EphemeralSequential)),
    )
    .unwrap();
    w.cut(a);
    w.advance(TIMEOUT);
    for line in w.zk.take_trace() {
        println!("{line}");
    }
}

#[test]
fn one_notification_per_connection_when_watches_overlap() {
    let mut w = World::with(|zk| zk.with_trace());
    let a = w.client();
    w.call(
        a,
        Request::Create(create("/r", b"", CreateMode::Persistent)),
    )
    .unwrap();
    let (hr, _) = w.call_w(
        a,
        Request::AddWatch(jute::AddWatchRequest {
            path: "/r".into(),
            mode: jute::AddWatchMode::PersistentRecursive,
        }),
        true,
    );
    let (he, _) = w.call_w(a, Request::Exists(pw("/r/z", true)), true);
    w.zk.take_trace();
    w.zk.create_as_admin(w.now, "/r/z", b"", CreateMode::Persistent)
        .unwrap();
    w.pump();
    let events: Vec<String> =
        w.zk.take_trace()
            .into_iter()
            .filter(|l| l.contains("event"))
            .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let mut fired = w.fired(a);
    fired.sort_by_key(|(h, _, _)| *h);
    let mut want = vec![
        (hr, EventType::NodeCreated, "/r/z".to_string()),
        (he, EventType::NodeCreated, "/r/z".to_string()),
    ];
    want.sort_by_key(|(h, _, _)| *h);
    assert_eq!(fired, want);
}
