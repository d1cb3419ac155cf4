//! The request scripts, fixed and random, run against both servers and
//! compared reply by reply.

use super::*;

/// The script: (client, request). Client 0 and 1 are separate sessions.
fn script() -> Vec<(usize, Request)> {
    use CreateMode::*;
    vec![
        (0, Request::GetData(pw("/", false))),
        (0, Request::Create2(node("/d", b"x", Persistent))),
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::Delete(pv("/d/s-0000000000", -1))),
        // Does a delete move the parent's cversion? (It does not in 3.8.)
        (0, Request::Create2(node("/d/s-", b"", EphemeralSequential))),
        (0, Request::GetChildren2(pw("/d", true))),
        (1, Request::Exists(pw("/nope", true))),
        (1, Request::GetData(pw("/nope2", true))),
        (1, Request::GetData(pw("/d", true))),
        (0, Request::Create(node("/nope", b"", Persistent))),
        (
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/d/m", b"", Persistent)),
                MultiOp::Check(pv("/missing", -1)),
                MultiOp::Delete(pv("/d", -1)),
            ]),
        ),
        (
            0,
            Request::Multi(vec![
                MultiOp::Create2(node("/d/q-", b"", PersistentSequential)),
                MultiOp::Create(node("/d/q-", b"", PersistentSequential)),
                MultiOp::Check(pv("/d", 0)),
                MultiOp::SetData(SetDataRequest {
                    path: "/d".into(),
                    data: b"y".to_vec(),
                    version: 0,
                }),
            ]),
        ),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/d".into(),
                data: b"z".to_vec(),
                version: 7,
            }),
        ),
        (0, Request::Delete(pv("/d", -1))),
        (0, Request::Delete(pv("/zookeeper", -1))),
        (0, Request::Delete(pv("/", -1))),
        (
            0,
            Request::Create(node("/d/s-0000000001/c", b"", Persistent)),
        ),
        (0, Request::Create(node("bad", b"", Persistent))),
        (0, Request::Create(node("/d/", b"", Persistent))),
        (0, Request::Create(node("/d/./x", b"", Persistent))),
        (0, Request::Create(node("/d/u-", b"", PersistentSequential))),
        (
            0,
            Request::Create(CreateRequest {
                path: "/d/e".into(),
                data: vec![],
                acl: vec![],
                mode: Persistent,
            }),
        ),
        (
            0,
            Request::Create(node("/nope/x", b"", CreateMode::Unknown(9))),
        ),
        (0, Request::Create(node("/ttl", b"", PersistentWithTtl))),
        (0, Request::CreateContainer(node("/ct", b"", Container))),
        (0, Request::Create2(node("/ct/a", b"", Persistent))),
        (0, Request::Exists(pw("/ct", false))),
        (0, Request::GetData(pw("/zookeeper", false))),
        (0, Request::GetData(pw("/zookeeper/config", false))),
        (0, Request::GetAcl("/d".into())),
        (0, Request::Sync("/d".into())),
        (0, Request::GetData(pw("/", false))),
        (0, Request::GetChildren(pw("/zookeeper", false))),
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/ct".into(),
                mode: AddWatchMode::PersistentRecursive,
            }),
        ),
        (0, Request::Create(node("/ct/a/b", b"", Persistent))),
        (0, Request::Delete(pv("/ct/a/b", -1))),
        (0, Request::GetEphemerals("/d".into())),
        (0, Request::GetAllChildrenNumber("/d".into())),
        (
            1,
            Request::SetWatches(SetWatches {
                relative_zxid: 1,
                data: vec!["/d".into(), "/gone".into()],
                exist: vec!["/nope".into(), "/never".into()],
                child: vec!["/d".into(), "/gone".into()],
                ..SetWatches::default()
            }),
        ),
        // One NodeDeleted per connection even with a data and a child watch.
        (1, Request::GetData(pw("/d/s-0000000001", true))),
        (1, Request::GetChildren(pw("/d/s-0000000001", true))),
        (1, Request::GetChildren(pw("/d", true))),
        (0, Request::Delete(pv("/d/s-0000000001", -1))),
        // Sequential under the root (a fresh root shows cversion -1).
        (0, Request::Create2(node("/r-", b"", PersistentSequential))),
        (0, Request::GetData(pw("/", false))),
        // A persistent and a one-shot watch on one path: one notification.
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/d".into(),
                mode: AddWatchMode::Persistent,
            }),
        ),
        (1, Request::GetData(pw("/d", true))),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/d".into(),
                data: b"w".to_vec(),
                version: -1,
            }),
        ),
        (0, Request::Create(node("/d/t", b"", Persistent))),
        (
            1,
            Request::SetWatches2(SetWatches {
                relative_zxid: 0,
                persistent: vec!["/p2".into()],
                persistent_recursive: vec!["/p3".into()],
                ..SetWatches::default()
            }),
        ),
        (0, Request::Create(node("/p2", b"", Persistent))),
        (0, Request::Create(node("/p3", b"", Persistent))),
        (0, Request::Create(node("/p3/x", b"", Persistent))),
        (
            1,
            Request::Auth(jute::AuthPacket {
                kind: 0,
                scheme: "digest".into(),
                auth: b"user:secret".to_vec(),
            }),
        ),
        (1, Request::Exists(pw("/d/s-0000000002", true))),
        // A one-shot watch replaces a persistent one on the same path.
        (0, Request::Create(node("/pc", b"", Persistent))),
        (
            1,
            Request::AddWatch(AddWatchRequest {
                path: "/pc".into(),
                mode: AddWatchMode::Persistent,
            }),
        ),
        (1, Request::GetChildren(pw("/pc", true))),
        (0, Request::Create(node("/pc/1", b"", Persistent))),
        (0, Request::Create(node("/pc/2", b"", Persistent))),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/pc".into(),
                data: b"1".to_vec(),
                version: -1,
            }),
        ),
        (
            0,
            Request::SetData(SetDataRequest {
                path: "/pc".into(),
                data: b"2".to_vec(),
                version: -1,
            }),
        ),
        (
            1,
            Request::CheckWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Children,
            }),
        ),
        (
            1,
            Request::RemoveWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Data,
            }),
        ),
        (
            1,
            Request::CheckWatches(jute::WatchesRequest {
                path: "/pc".into(),
                kind: jute::WatcherType::Any,
            }),
        ),
        (0, Request::Ping),
        (0, Request::CloseSession),
        (1, Request::GetChildren2(pw("/d", false))),
    ]
}

/// Runs the script on `server`; returns one normalized line per frame.
fn run(server: &mut dyn Server, steps: Vec<(usize, Request)>) -> Vec<String> {
    let sessions = open_sessions(server);
    let mut out = Vec::new();
    let mut base = None;
    let mut closed = [false; 2];
    for (step, (i, req)) in steps.into_iter().enumerate() {
        if closed[i] {
            out.push(format!("{step} c{i}: (closed)"));
            continue;
        }
        let op: OpCode = req.op_code();
        let xid = match op {
            OpCode::Ping => jute::xid::PING,
            OpCode::SetWatches | OpCode::SetWatches2 => jute::xid::SET_WATCHES,
            OpCode::Auth => jute::xid::AUTH,
            _ => step as i32 + 1,
        };
        let mut buf = BytesMut::new();
        encode_request(&mut buf, xid, &req);
        server.send(i, &buf);
        let (frames, was_closed) = server.until_reply(i, xid);
        // What the other connection got meanwhile: a ping flushes it.
        let other = 1 - i;
        let mut others = Vec::new();
        if !closed[other] {
            let mut ping = BytesMut::new();
            encode_request(&mut ping, jute::xid::PING, &Request::Ping);
            server.send(other, &ping);
            let (f, c) = server.until_reply(other, jute::xid::PING);
            others = f;
            closed[other] = c;
            others.pop();
        }
        for (conn, frames) in [(i, frames), (other, others)] {
            for f in frames {
                let line = match decode_server_message(&f).unwrap() {
                    ServerMessage::WatchEvent { zxid, event } => {
                        format!(
                            "event zxid={zxid} {:?} {:?} {}",
                            event.kind, event.state, event.path
                        )
                    }
                    ServerMessage::Reply { header, body } => {
                        let b = *base.get_or_insert(header.zxid);
                        let result = decode_reply(op, &header, body)
                            .unwrap()
                            .map(|r| norm(r, b, &sessions));
                        let zx = if header.xid == jute::xid::AUTH || header.zxid <= 0 {
                            header.zxid
                        } else {
                            z(header.zxid, b)
                        };
                        format!(
                            "reply xid={} zxid={zx} {:?}: {result:?}",
                            header.xid, header.err
                        )
                    }
                };
                out.push(format!("{step} c{conn}: {line}"));
            }
        }
        if was_closed {
            closed[i] = true;
            out.push(format!("{step} c{i}: closed by server"));
        }
    }
    out
}

/// Runs `steps` on a fresh real server and a fresh SimZooKeeper; returns
/// the differing transcript lines (empty when they agree).
fn compare(steps: Vec<(usize, Request)>) -> Vec<String> {
    compare_keeping_real(steps).0
}

/// As [`compare`], and the real server's transcript.
fn compare_keeping_real(steps: Vec<(usize, Request)>) -> (Vec<String>, Vec<String>) {
    let real_server = testkit::zk::ZkServer::start_with(TICK_MS);
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(real_server.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let mut real = Real {
        socks,
        bufs: vec![BytesMut::new(), BytesMut::new()],
    };
    let steps_copy = steps.clone();
    let real_lines = run(&mut real, steps.clone());

    let now = Instant::now();
    let mut zk = SimZooKeeper::new(now, Duration::from_millis(TICK_MS));
    let conns = vec![zk.connect(now), zk.connect(now)];
    let mut sim = Sim {
        zk,
        now,
        conns,
        inbox: vec![BytesMut::new(), BytesMut::new()],
        closed: vec![false, false],
    };
    let sim_lines = run(&mut sim, steps);

    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_lines.join("\n"));
    }
    if let Some(dir) = std::env::var_os("SIM_VS_REAL_DUMP") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::write(dir.join("real.txt"), real_lines.join("\n")).unwrap();
        std::fs::write(dir.join("sim.txt"), sim_lines.join("\n")).unwrap();
        let listing: Vec<String> = steps_copy
            .iter()
            .enumerate()
            .map(|(k, (c, r))| format!("{k} c{c}: {r:?}"))
            .collect();
        std::fs::write(dir.join("steps.txt"), listing.join("\n")).unwrap();
    }
    let mut diffs = Vec::new();
    for k in 0..real_lines.len().max(sim_lines.len()) {
        let r = real_lines.get(k).map(String::as_str).unwrap_or("<none>");
        let s = sim_lines.get(k).map(String::as_str).unwrap_or("<none>");
        if r != s {
            diffs.push(format!("line {k}\nreal: {r}\n sim: {s}"));
        }
    }
    (diffs, real_lines)
}

/// A write the server refuses is ordered like one it accepts: the leader's
/// PrepRequestProcessor.pRequest checks the session, and when the op then
/// fails it turns the txn into an error txn (OpCode.error, ErrorTxn) with
/// the zxid it already took, which is proposed and committed; the reply
/// comes once FinalRequestProcessor has applied it. Seen here as each
/// refusal's reply carrying a zxid one above the previous write's (no
/// read moves it), on the real server and in the model alike: what lets a
/// client take a refusal as the leader's word that its session lives.
#[test]
fn refused_writes_are_ordered_like_accepted_ones() {
    let data = |path: &str, version: i32| {
        Request::SetData(SetDataRequest {
            path: path.into(),
            data: b"v".to_vec(),
            version,
        })
    };
    let steps = vec![
        (
            0,
            Request::Create2(node("/rw", b"", CreateMode::Persistent)),
        ),
        // Refused: an existing node, a stale version, a missing node.
        (
            0,
            Request::Create2(node("/rw", b"", CreateMode::Persistent)),
        ),
        (0, data("/rw", 7)),
        (0, Request::Delete(pv("/rw/missing", -1))),
        (0, Request::GetData(pw("/rw", false))),
        // A multi whose check fails: nothing applied, one zxid taken.
        (
            0,
            Request::Multi(vec![
                MultiOp::Check(pv("/rw", 9)),
                MultiOp::Create(node("/rw/x", b"", CreateMode::Persistent)),
            ]),
        ),
        (1, data("/rw", 0)),
        (
            1,
            Request::Create2(node("/rw/y", b"", CreateMode::Persistent)),
        ),
    ];
    let writes = [0usize, 1, 2, 3, 5, 6, 7];
    let (diffs, real) = compare_keeping_real(steps);
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    let zxid_of = |step: usize| -> i64 {
        let prefix = format!("{step} c");
        let line = real
            .iter()
            .find(|l| l.starts_with(&prefix) && l.contains("reply xid"))
            .unwrap_or_else(|| panic!("no reply to step {step} in {real:#?}"));
        line.split("zxid=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|z| z.parse().ok())
            .unwrap_or_else(|| panic!("no zxid in {line}"))
    };
    for pair in writes.windows(2) {
        assert_eq!(
            zxid_of(pair[1]),
            zxid_of(pair[0]) + 1,
            "step {} (a write, refused or not) did not take the next zxid after step {}: {real:#?}",
            pair[1],
            pair[0]
        );
    }
    assert_eq!(zxid_of(4), zxid_of(3), "a read took a zxid: {real:#?}");
}

#[test]
fn sim_matches_real_zookeeper() {
    let diffs = compare(script());
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// A deterministic pseudo-random script over a handful of paths: creates
/// of every mode, deletes and setData at right and wrong versions, reads
/// with and without watches, multis, setWatches, addWatch. No
/// closeSession (the real server deletes a dying session's ephemerals in
/// HashSet order).
fn random_script(seed: u64, len: usize) -> Vec<(usize, Request)> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    const PATHS: [&str; 7] = ["/a", "/a/b", "/a/c", "/b", "/a/b/c", "/a/s-", "/c"];
    let mut steps = Vec::new();
    for _ in 0..len {
        let client = next(2) as usize;
        let path = PATHS[next(PATHS.len() as u64) as usize].to_string();
        let version = [-1, 0, 1, 2][next(4) as usize];
        let mode = [
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ][next(5) as usize];
        let watch = next(2) == 0;
        let data = vec![b'v'; next(3) as usize];
        let write = |next: &mut dyn FnMut(u64) -> u64| -> MultiOp {
            let p = PATHS[next(PATHS.len() as u64) as usize].to_string();
            match next(5) {
                0 => MultiOp::Create(node(&p, b"", CreateMode::Persistent)),
                1 => MultiOp::Create2(node(&p, b"m", CreateMode::PersistentSequential)),
                2 => MultiOp::Delete(pv(&p, -1)),
                3 => MultiOp::SetData(SetDataRequest {
                    path: p,
                    data: b"m".to_vec(),
                    version: -1,
                }),
                _ => MultiOp::Check(pv(&p, [-1, 0][next(2) as usize])),
            }
        };
        let req = match next(19) {
            14 => Request::SetAcl(jute::SetAclRequest {
                path,
                acl: Acl::open_unsafe(),
                version,
            }),
            15 => Request::GetAcl(path),
            16 => Request::GetEphemerals(path),
            17 => Request::GetAllChildrenNumber(path),
            18 => {
                let kind = [
                    jute::WatcherType::Children,
                    jute::WatcherType::Data,
                    jute::WatcherType::Any,
                ][next(3) as usize];
                let w = jute::WatchesRequest { path, kind };
                if watch {
                    Request::RemoveWatches(w)
                } else {
                    Request::CheckWatches(w)
                }
            }
            0 | 1 => Request::Create(node(&path, &data, mode)),
            2 => Request::Create2(node(&path, &data, mode)),
            3 => Request::CreateContainer(node(&path, &data, CreateMode::Container)),
            4 | 5 => Request::Delete(pv(&path, version)),
            6 => Request::SetData(SetDataRequest {
                path,
                data,
                version,
            }),
            7 => Request::Exists(pw(&path, watch)),
            8 => Request::GetData(pw(&path, watch)),
            9 => Request::GetChildren(pw(&path, watch)),
            10 => Request::GetChildren2(pw(&path, watch)),
            11 => {
                let n = 1 + next(3);
                Request::Multi((0..n).map(|_| write(&mut next)).collect())
            }
            12 => Request::SetWatches(SetWatches {
                relative_zxid: next(20) as i64,
                data: vec![path.clone()],
                exist: vec![PATHS[next(PATHS.len() as u64) as usize].to_string()],
                child: vec![path],
                ..SetWatches::default()
            }),
            _ => Request::AddWatch(AddWatchRequest {
                path,
                mode: if watch {
                    AddWatchMode::Persistent
                } else {
                    AddWatchMode::PersistentRecursive
                },
            }),
        };
        steps.push((client, req));
    }
    steps
}

/// Seeds 1-3 by default; `SIM_VS_REAL_SEEDS=FIRST..LAST` runs more.
#[test]
fn random_scripts_match_real_zookeeper() {
    let seeds: Vec<u64> = match std::env::var("SIM_VS_REAL_SEEDS") {
        Ok(range) => {
            let (a, b) = range.split_once("..").expect("FIRST..LAST");
            (a.parse().unwrap()..=b.parse().unwrap()).collect()
        }
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        let diffs = compare(random_script(seed, 400));
        assert!(
            diffs.is_empty(),
            "seed {seed}: {} differences, first ones:\n{}\nreplay: SIM_VS_REAL_SEEDS={seed}..{seed} cargo test --test zookeeper random_scripts -- --nocapture",
            diffs.len(),
            diffs[..diffs.len().min(6)].join("\n")
        );
    }
}
