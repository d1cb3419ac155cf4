//! A follower that has not applied what the leader committed, compared
//! with the model's lagging follower (`sim/src/zookeeper/lagging.rs`).
//!
//! The real side is a 3-member ensemble whose member links go through
//! fault proxies: the link between the leader and one follower F is
//! stalled (bytes held, connections open) for a moment shorter than the
//! sync limit, so F stays a follower and simply falls behind; the model's
//! follower is held the same way (`SimZooKeeper::hold_follower`). Meanwhile
//! a client of the leader writes, and the script looks at what F's clients
//! see: older reads, a handshake refused to a client that has seen newer
//! zxids, a sync and a read queued behind it, a watch that fires only once
//! F applies.

use super::connections::{next_seen, RawConns, Seen};
use super::*;

const TICK: u64 = 1000;
const SESSION_MS: i32 = 20_000;

/// Raw connections to the leader or to the lagging follower.
trait Members {
    fn open(&mut self, on_follower: bool) -> usize;
    fn send(&mut self, c: usize, bytes: &[u8]);
    fn next(&mut self, c: usize) -> Seen;
    /// The follower stops applying (`true`) or catches up (`false`).
    fn hold(&mut self, held: bool);
}

struct RealMembers {
    ensemble: testkit::zk::ZkEnsemble,
    leader: usize,
    follower: usize,
    conns: RawConns,
}

impl Members for RealMembers {
    fn open(&mut self, on_follower: bool) -> usize {
        let member = if on_follower {
            self.follower
        } else {
            self.leader
        };
        self.conns.open(self.ensemble.member_addr(member))
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        self.conns.send(c, bytes)
    }

    fn next(&mut self, c: usize) -> Seen {
        self.conns.next(c)
    }

    fn hold(&mut self, held: bool) {
        if held {
            self.ensemble.stall_link(self.leader, self.follower);
        } else {
            self.ensemble.heal_link(self.leader, self.follower);
        }
    }
}

struct SimMembers {
    zk: SimZooKeeper,
    now: Instant,
    conns: Vec<ConnId>,
    inbox: Vec<BytesMut>,
    closed: Vec<bool>,
}

impl SimMembers {
    fn drain(&mut self) {
        self.zk.handle_timeout(self.now);
        drain_model(&mut self.zk, &self.conns, &mut self.inbox, &mut self.closed);
    }
}

impl Members for SimMembers {
    fn open(&mut self, on_follower: bool) -> usize {
        let conn = if on_follower {
            self.zk.connect_lagging(self.now)
        } else {
            self.zk.connect(self.now)
        };
        self.conns.push(conn);
        self.inbox.push(BytesMut::new());
        self.closed.push(false);
        self.conns.len() - 1
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        self.now += Duration::from_millis(1);
        self.zk.receive(self.now, self.conns[c], bytes);
        self.drain();
    }

    fn next(&mut self, c: usize) -> Seen {
        self.now += Duration::from_millis(1);
        self.drain();
        next_seen(&mut self.inbox[c], self.closed[c])
    }

    fn hold(&mut self, held: bool) {
        self.now += Duration::from_millis(1);
        self.zk.handle_timeout(self.now);
        self.zk.hold_follower(held);
        self.drain();
    }
}

/// The script's observations, one line each; zxids are told only as
/// "behind" or "current" against the newest the leader's client saw.
struct Script<'a> {
    m: &'a mut dyn Members,
    lines: Vec<String>,
    xid: i32,
    newest: i64,
}

impl Script<'_> {
    fn handshake(&mut self, c: usize, session: i64, passwd: Vec<u8>, last_zxid: i64) {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: last_zxid,
                timeout_ms: SESSION_MS,
                session_id: session,
                passwd,
                read_only: false,
            },
        );
        self.m.send(c, &buf);
    }

    /// The ConnectResponse on `c` (its session and password), logged.
    fn session(&mut self, c: usize, what: &str) -> Option<(i64, Vec<u8>)> {
        let seen = self.m.next(c);
        let got = match &seen {
            Seen::Frame(f) => ConnectResponse::decode_exact(f)
                .ok()
                .map(|r| (r.session_id, r.passwd)),
            _ => None,
        };
        let line = match (&seen, &got) {
            (_, Some((sid, _))) if *sid != 0 => "session up".to_owned(),
            (Seen::Frame(_), _) => "a frame that is no session".to_owned(),
            (other, _) => format!("{other:?}"),
        };
        self.lines.push(format!("{what}: {line}"));
        got
    }

    fn request(&mut self, c: usize, request: &Request) -> i32 {
        self.xid += 1;
        let mut buf = BytesMut::new();
        encode_request(&mut buf, self.xid, request);
        self.m.send(c, &buf);
        self.xid
    }

    /// The next thing `c` receives, logged; a reply's zxid is returned.
    fn see(&mut self, c: usize, what: &str) -> Option<i64> {
        let (line, zxid) = match self.m.next(c) {
            Seen::Frame(f) => match decode_server_message(&f) {
                Ok(ServerMessage::Reply { header, .. }) => {
                    let when = if header.zxid >= self.newest {
                        "current"
                    } else {
                        "behind"
                    };
                    (
                        format!("reply xid={} {:?} zxid {when}", header.xid, header.err),
                        Some(header.zxid),
                    )
                }
                Ok(ServerMessage::WatchEvent { event, .. }) => {
                    (format!("event {:?} {}", event.kind, event.path), None)
                }
                Err(e) => (format!("undecodable: {e:?}"), None),
            },
            other => (format!("{other:?}"), None),
        };
        self.lines.push(format!("{what}: {line}"));
        zxid
    }
}

fn run_lagging(m: &mut dyn Members) -> Vec<String> {
    let mut s = Script {
        m,
        lines: Vec::new(),
        xid: 0,
        newest: i64::MAX,
    };
    let persistent = |p: &str| Request::Create(node(p, b"x", CreateMode::Persistent));
    let a = s.m.open(false);
    s.handshake(a, 0, vec![0; 16], 0);
    let (sid_a, pw_a) = s.session(a, "a on the leader").expect("a's session");
    let b = s.m.open(true);
    s.handshake(b, 0, vec![0; 16], 0);
    s.session(b, "b on the follower");
    s.request(b, &Request::Exists(pw("/lag2", true)));
    s.see(b, "b exists /lag2 with a watch");
    s.m.hold(true);
    s.request(a, &persistent("/lag"));
    s.request(a, &persistent("/lag2"));
    s.see(a, "a creates /lag");
    s.newest = s.see(a, "a creates /lag2").expect("a reply");
    s.lines.push("a's writes are committed".into());
    // The follower's clients read its older state.
    s.request(b, &Request::GetData(pw("/lag", false)));
    s.see(b, "b reads /lag");
    // A client that saw the leader's newest zxid is refused by the follower.
    let c = s.m.open(true);
    s.handshake(c, sid_a, pw_a.clone(), s.newest);
    s.session(c, "a's session moves to the follower");
    // A sync, and a read behind it, wait for the follower.
    s.request(b, &Request::Sync("/lag".into()));
    s.request(b, &Request::GetData(pw("/lag", false)));
    s.see(b, "b syncs and reads /lag");
    s.m.hold(false);
    s.see(b, "then b");
    s.see(b, "then b");
    s.see(b, "then b");
    // Caught up: the moved session is taken now.
    let d = s.m.open(true);
    s.handshake(d, sid_a, pw_a, s.newest);
    s.session(d, "a's session moves to the follower again");
    s.request(d, &Request::GetData(pw("/lag2", false)));
    s.see(d, "a reads /lag2 there");
    s.lines
}

#[test]
fn a_lagging_follower_matches_a_real_follower_behind_its_leader() {
    let options = testkit::zk::ZkOptions::default().tick_ms(TICK);
    // The sync limit (20 ticks) outlasts the stall: the follower stays one.
    let ensemble = testkit::zk::ZkEnsemble::start_with_links(3, &options, 20);
    let leader = ensemble.leader().expect("a leader");
    let follower = *ensemble.followers().first().expect("a follower");
    let mut real = RealMembers {
        ensemble,
        leader,
        follower,
        conns: RawConns::default(),
    };
    let real_lines = run_lagging(&mut real);
    let now = Instant::now();
    let mut sim = SimMembers {
        zk: SimZooKeeper::new(now, Duration::from_millis(TICK))
            .with_lagging_follower(Duration::ZERO, 1),
        now,
        conns: Vec::new(),
        inbox: Vec::new(),
        closed: Vec::new(),
    };
    let sim_lines = run_lagging(&mut sim);
    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_lines.join("\n"));
    }
    assert_eq!(real_lines, sim_lines);
}
