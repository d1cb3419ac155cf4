//! SimZooKeeper driven by the real session core (`zklock_proto::session::Session`)
//! on virtual time: bytes move between `Session::output` and
//! `SimZooKeeper::receive`, and between `SimZooKeeper::poll_output` and
//! `Session::handle_input`. Every loop is bounded.

mod lagging;
mod nodes;
mod sequence_end;
mod sessions;
mod watches;
mod wire;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use jute::{
    decode_server_message, encode_connect, encode_request, split_frame, Acl, ConnectRequest,
    ConnectResponse, CreateMode, CreateRequest, Decode, ErrorCode, EventType, MultiOp, MultiResult,
    PathVersion, PathWatch, Request, Response, ServerMessage, SetDataRequest,
};
use zklock_proto::session::{RequestError, Session, SessionConfig, SessionEvent, SessionState};
use zklock_sim::zookeeper::{session_password, ConnId, SimZooKeeper, SESSION_ID_BASE};

const TICK: Duration = Duration::from_millis(200);
const TIMEOUT: Duration = Duration::from_millis(3000);

type Reply = Result<Response, RequestError>;

struct Client {
    s: Session<u64, u64>,
    conn: Option<ConnId>,
    /// Cut off from the server: nothing it writes arrives, no reconnect.
    partitioned: bool,
    /// Connects to the lagging follower (`SimZooKeeper::connect_lagging`).
    lagging: bool,
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
        self.client_on(false)
    }

    /// A client of the lagging follower (`lagging`) or of the leader, once
    /// its session is up (on the follower: once it applied the
    /// createSession txn).
    fn client_on(&mut self, lagging: bool) -> usize {
        let config = SessionConfig {
            session_timeout: TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            max_frame: jute::DEFAULT_MAX_FRAME,
        };
        self.clients.push(Client {
            s: Session::new(config, self.now),
            conn: None,
            partitioned: false,
            lagging,
            last_attempt: None,
            replies: Vec::new(),
            fired: Vec::new(),
            abandoned: Vec::new(),
            states: Vec::new(),
            next_handle: 1,
        });
        let i = self.clients.len() - 1;
        self.pump();
        for _ in 0..1000 {
            if self.clients[i].s.state() == SessionState::Connected {
                break;
            }
            self.advance(Duration::from_millis(10));
        }
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
                    c.conn = Some(if c.lagging {
                        self.zk.connect_lagging(self.now)
                    } else {
                        self.zk.connect(self.now)
                    });
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
