//! Connection handling compared on raw connections, at the handshake
//! level: sessions opened, resumed and refused, bad frames.

use super::*;

/// What a raw connection observes next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Seen {
    Frame(Vec<u8>),
    Closed,
    Nothing,
}

/// Raw connections for the handshake-level comparison.
trait Net {
    fn open(&mut self) -> usize;
    fn send(&mut self, c: usize, bytes: &[u8]);
    fn next(&mut self, c: usize) -> Seen;
    fn sleep(&mut self, d: Duration);
}

struct RealNet {
    addr: std::net::SocketAddr,
    conns: RawConns,
}

/// What a model's connection shows next: a whole frame from its inbox,
/// else whether the model closed it.
pub(super) fn next_seen(inbox: &mut BytesMut, closed: bool) -> Seen {
    match split_frame(inbox, usize::MAX).unwrap() {
        Some(f) => Seen::Frame(f.to_vec()),
        None if closed => Seen::Closed,
        None => Seen::Nothing,
    }
}

/// Raw TCP connections to real servers, read frame by frame.
#[derive(Default)]
pub(super) struct RawConns {
    socks: Vec<TcpStream>,
    bufs: Vec<BytesMut>,
}

impl RawConns {
    /// A new connection to `addr`; its index.
    pub(super) fn open(&mut self, addr: std::net::SocketAddr) -> usize {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        s.set_nodelay(true).unwrap();
        self.socks.push(s);
        self.bufs.push(BytesMut::new());
        self.socks.len() - 1
    }

    pub(super) fn send(&mut self, c: usize, bytes: &[u8]) {
        // The server may have closed it already; that shows up in `next`.
        let _ = self.socks[c].write_all(bytes);
    }

    pub(super) fn next(&mut self, c: usize) -> Seen {
        loop {
            if let Some(f) = split_frame(&mut self.bufs[c], usize::MAX).unwrap() {
                return Seen::Frame(f.to_vec());
            }
            let mut chunk = [0u8; 4096];
            match self.socks[c].read(&mut chunk) {
                Ok(0) => return Seen::Closed,
                Ok(n) => self.bufs[c].extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Seen::Nothing
                }
                Err(_) => return Seen::Closed,
            }
        }
    }
}

impl Net for RealNet {
    fn open(&mut self) -> usize {
        self.conns.open(self.addr)
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        self.conns.send(c, bytes)
    }

    fn next(&mut self, c: usize) -> Seen {
        self.conns.next(c)
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

struct SimNet {
    zk: SimZooKeeper,
    now: Instant,
    conns: Vec<ConnId>,
    inbox: Vec<BytesMut>,
    closed: Vec<bool>,
}

impl SimNet {
    fn drain(&mut self) {
        drain_model(&mut self.zk, &self.conns, &mut self.inbox, &mut self.closed);
    }
}

impl Net for SimNet {
    fn open(&mut self) -> usize {
        self.conns.push(self.zk.connect(self.now));
        self.inbox.push(BytesMut::new());
        self.closed.push(false);
        self.drain();
        self.conns.len() - 1
    }

    fn send(&mut self, c: usize, bytes: &[u8]) {
        self.now += Duration::from_millis(1);
        self.zk.receive(self.now, self.conns[c], bytes);
        self.drain();
    }

    fn next(&mut self, c: usize) -> Seen {
        self.drain();
        next_seen(&mut self.inbox[c], self.closed[c])
    }

    fn sleep(&mut self, d: Duration) {
        self.now += d;
        self.zk.handle_timeout(self.now);
        self.drain();
    }
}

/// Observations of the handshake comparison, with session ids numbered.
#[derive(Default)]
struct Obs {
    ids: Vec<i64>,
    passwords: Vec<Vec<u8>>,
    out: Vec<String>,
}

impl Obs {
    fn see(&mut self, net: &mut dyn Net, c: usize, what: &str) {
        let line = match net.next(c) {
            Seen::Frame(f) => match ConnectResponse::decode_exact(&f) {
                Ok(r) => {
                    let sid = match self.ids.iter().position(|x| *x == r.session_id) {
                        Some(i) => format!("S{i}"),
                        None if r.session_id == 0 => "0".to_string(),
                        None => {
                            self.ids.push(r.session_id);
                            self.passwords.push(r.passwd.clone());
                            format!("S{} (new)", self.ids.len() - 1)
                        }
                    };
                    let pw = if r.passwd.iter().all(|b| *b == 0) {
                        "zeros"
                    } else {
                        "issued"
                    };
                    format!(
                        "connect response timeout={} session={sid} passwd={pw}",
                        r.timeout_ms
                    )
                }
                Err(_) => match decode_server_message(&f) {
                    Ok(ServerMessage::Reply { header, .. }) => {
                        format!(
                            "reply xid={} zxid={} err={:?}",
                            header.xid, header.zxid, header.err
                        )
                    }
                    other => format!("{other:?}"),
                },
            },
            other => format!("{other:?}"),
        };
        self.out.push(format!("{what}: {line}"));
    }
}

/// Handshakes and connection-level faults; one line per observation.
fn run_connections(net: &mut dyn Net) -> Vec<String> {
    let mut obs = Obs::default();
    let connect = |net: &mut dyn Net, c: usize, sid: i64, pw: Vec<u8>, zxid: i64, t: i32| {
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: zxid,
                timeout_ms: t,
                session_id: sid,
                passwd: pw,
                read_only: false,
            },
        );
        net.send(c, &buf);
    };
    // A new session; the timeout is clamped to 20 ticks.
    let c0 = net.open();
    connect(net, c0, 0, vec![0; 16], 0, 1_000_000);
    obs.see(net, c0, "c0 new session");
    let (s0, p0) = (obs.ids[0], obs.passwords[0].clone());
    // Resumed elsewhere: the old connection is closed.
    let c1 = net.open();
    connect(net, c1, s0, p0.clone(), 0, 4000);
    obs.see(net, c1, "c1 resume");
    obs.see(net, c0, "c0 after resume elsewhere");
    // Wrong password: expired-looking answer, closed; the live connection
    // of the session is closed too.
    let c2 = net.open();
    connect(net, c2, s0, vec![7; 16], 0, 4000);
    obs.see(net, c2, "c2 wrong password");
    obs.see(net, c2, "c2 then");
    obs.see(net, c1, "c1 after wrong password elsewhere");
    // The session itself survived.
    let c3 = net.open();
    connect(net, c3, s0, p0.clone(), 0, 4000);
    obs.see(net, c3, "c3 resume");
    // A client ahead of the server.
    let c4 = net.open();
    connect(net, c4, 0, vec![0; 16], 1 << 40, 4000);
    obs.see(net, c4, "c4 zxid ahead");
    // An unknown session.
    let c5 = net.open();
    connect(net, c5, s0 + 1000, p0.clone(), 0, 4000);
    obs.see(net, c5, "c5 unknown session");
    obs.see(net, c5, "c5 then");
    // The smallest timeout (2 ticks), then silence: expired, closed.
    let c6 = net.open();
    connect(net, c6, 0, vec![0; 16], 0, 1);
    obs.see(net, c6, "c6 short session");
    let (s6, p6) = (obs.ids[1], obs.passwords[1].clone());
    net.sleep(Duration::from_millis(3 * TICK_MS + 50));
    obs.see(net, c6, "c6 after silence");
    let c7 = net.open();
    connect(net, c7, s6, p6, 0, 4000);
    obs.see(net, c7, "c7 resume expired");
    // An op code nobody knows.
    let mut buf = BytesMut::new();
    jute::encode_frame(&mut buf, |b| {
        jute::Encode::encode(
            &jute::RequestHeader {
                xid: 1,
                op: OpCode::Unknown(4242),
            },
            b,
        )
    });
    net.send(c3, &buf);
    obs.see(net, c3, "c3 unknown op");
    obs.see(net, c3, "c3 then");
    // A negative frame length.
    let c8 = net.open();
    net.send(c8, &[0xff, 0xff, 0xff, 0xf0]);
    obs.see(net, c8, "c8 negative length");
    obs.out
}

#[test]
fn connection_handling_matches_real_zookeeper() {
    let real_server = testkit::zk::ZkServer::start_with(TICK_MS);
    let mut real = RealNet {
        addr: real_server.addr(),
        conns: RawConns::default(),
    };
    let real_lines = run_connections(&mut real);
    let now = Instant::now();
    let mut sim = SimNet {
        zk: SimZooKeeper::new(now, Duration::from_millis(TICK_MS)),
        now,
        conns: Vec::new(),
        inbox: Vec::new(),
        closed: Vec::new(),
    };
    let sim_lines = run_connections(&mut sim);
    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_lines.join("\n"));
    }
    assert_eq!(real_lines, sim_lines);
}
