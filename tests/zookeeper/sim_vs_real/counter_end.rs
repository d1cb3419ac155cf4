//! The sequence counter's end, compared against ZooKeeper's own server
//! with a stored cversion near i32::MAX.

use super::*;

// ---- the sequence counter's end -------------------------------------------
//
// The real side is `testkit::zk::ZkHarness`: ZooKeeper's own standalone
// server embedded in a JVM that can set a node's stored cversion, so a
// parent reaches i32::MAX in a few creates.

/// One step of an end-of-counter script.
#[derive(Clone)]
enum End {
    /// One request on client `.0`; its reply awaited before the next step.
    One(usize, Request),
    /// Requests written in one go on client `.0`, replies awaited after:
    /// the later ones are prepped while the earlier ones are in flight.
    Burst(usize, Vec<Request>),
    /// Sets the node's stored cversion (the sequence counter).
    Counter(&'static str, i32),
    /// Reads the node's stored cversion.
    Stored(&'static str),
}

/// The sides of the comparison can also set and read a stored cversion.
trait EndServer: Server {
    fn set_counter(&mut self, path: &str, value: i32);
    fn counter(&mut self, path: &str) -> i32;
}

struct RealEnd<'a> {
    real: Real,
    harness: &'a testkit::zk::ZkHarness,
}

impl Server for RealEnd<'_> {
    fn send(&mut self, i: usize, bytes: &[u8]) {
        self.real.send(i, bytes)
    }
    fn until_reply(&mut self, i: usize, xid: i32) -> (Vec<Vec<u8>>, bool) {
        self.real.until_reply(i, xid)
    }
    fn first_frame(&mut self, i: usize) -> Vec<u8> {
        self.real.first_frame(i)
    }
}

impl EndServer for RealEnd<'_> {
    fn set_counter(&mut self, path: &str, value: i32) {
        self.harness.set_sequence_counter(path, value);
    }
    fn counter(&mut self, path: &str) -> i32 {
        self.harness.stored(path).cversion
    }
}

impl EndServer for Sim {
    fn set_counter(&mut self, path: &str, value: i32) {
        assert!(self.zk.set_sequence_counter(path, value), "sim: no {path}");
    }
    fn counter(&mut self, path: &str) -> i32 {
        self.zk.sequence_counter(path).expect("sim: no such node")
    }
}

/// What a script run shows: transcript lines (names created in bursts
/// replaced by `<seq>`), and per burst the sequence numbers it was given.
struct EndRun {
    lines: Vec<String>,
    bursts: Vec<Vec<i32>>,
}

/// The number ZooKeeper appended to `prefix` (`%010d`: eleven characters
/// when negative, so it cannot be read from the end of a name alone).
fn seq_of(path: &str, prefix: &str) -> i32 {
    path.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no sequence number after {prefix}"))
}

/// The path a create asks for (the prefix of a sequential name).
fn asked_path(r: &Request) -> String {
    match r {
        Request::Create(c) | Request::Create2(c) => c.path.clone(),
        _ => String::new(),
    }
}

fn run_end(server: &mut dyn EndServer, steps: &[End]) -> EndRun {
    let sessions = open_sessions(server);
    let mut run = EndRun {
        lines: Vec::new(),
        bursts: Vec::new(),
    };
    let mut base = None;
    let mut xid = 0;
    for (step, s) in steps.iter().enumerate() {
        let (i, reqs, burst) = match s {
            End::Counter(path, v) => {
                server.set_counter(path, *v);
                continue;
            }
            End::Stored(path) => {
                let cv = server.counter(path);
                run.lines
                    .push(format!("{step}: stored {path} cversion={cv}"));
                continue;
            }
            End::One(i, r) => (*i, vec![r.clone()], false),
            End::Burst(i, rs) => (*i, rs.clone(), true),
        };
        let mut buf = BytesMut::new();
        let mut ops = Vec::new();
        for r in &reqs {
            xid += 1;
            encode_request(&mut buf, xid, r);
            ops.push((xid, r.op_code(), asked_path(r)));
        }
        server.send(i, &buf);
        let (frames, closed) = server.until_reply(i, xid);
        assert!(!closed, "step {step}: connection closed");
        let mut names = Vec::new();
        for f in frames {
            let line = match decode_server_message(&f).unwrap() {
                ServerMessage::WatchEvent { event, .. } => {
                    format!("event {:?} {}", event.kind, event.path)
                }
                ServerMessage::Reply { header, body } => {
                    let (op, asked) = ops
                        .iter()
                        .find(|(x, _, _)| *x == header.xid)
                        .map(|(_, op, asked)| (*op, asked.as_str()))
                        .expect("a reply to a request we sent");
                    let b = *base.get_or_insert(header.zxid);
                    let mut result = decode_reply(op, &header, body)
                        .unwrap()
                        .map(|r| norm(r, b, &sessions));
                    if burst {
                        if let Ok(Response::Created { path, .. } | Response::Path(path)) =
                            &mut result
                        {
                            names.push(seq_of(path, asked));
                            *path = "<seq>".into();
                        }
                    }
                    format!(
                        "reply xid={} zxid={} {:?}: {result:?}",
                        header.xid,
                        z(header.zxid, b),
                        header.err
                    )
                }
            };
            run.lines.push(format!("{step} c{i}: {line}"));
        }
        if burst {
            run.bursts.push(names);
        }
    }
    run
}

/// Whether `names` (the sequence numbers one burst's creates got, in order,
/// all on one parent whose stored cversion was `stored` before) can come
/// from ZooKeeper 3.8's pipeline: the first is named from the DataTree; each
/// later one either from the previous one's outstanding record (previous + 1
/// in Java ints) or, once every earlier create was applied and its record
/// dropped, from the DataTree again, which holds the greatest cversion ever
/// stored.
fn burst_admissible(stored: i32, names: &[i32]) -> bool {
    let mut tree = stored;
    for (k, n) in names.iter().enumerate() {
        let ok = if k == 0 {
            *n == tree
        } else {
            *n == names[k - 1].wrapping_add(1) || *n == tree
        };
        if !ok {
            return false;
        }
        // DataTree.createNode: stored only if greater.
        tree = tree.max(n.wrapping_add(1));
    }
    true
}

fn compare_end(steps: &[End]) -> (EndRun, EndRun) {
    let harness = testkit::zk::ZkHarness::start(Duration::from_millis(TICK_MS));
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(harness.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let mut real = RealEnd {
        real: Real {
            socks,
            bufs: vec![BytesMut::new(), BytesMut::new()],
        },
        harness: &harness,
    };
    let real_run = run_end(&mut real, steps);
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
    let sim_run = run_end(&mut sim, steps);
    if std::env::var_os("SIM_VS_REAL_PRINT").is_some() {
        println!("{}", real_run.lines.join("\n"));
        println!("real bursts: {:?}", real_run.bursts);
    }
    (real_run, sim_run)
}

fn assert_same_lines(real: &EndRun, sim: &EndRun) {
    let mut diffs = Vec::new();
    for k in 0..real.lines.len().max(sim.lines.len()) {
        let r = real.lines.get(k).map(String::as_str).unwrap_or("<none>");
        let s = sim.lines.get(k).map(String::as_str).unwrap_or("<none>");
        if r != s {
            diffs.push(format!("line {k}\nreal: {r}\n sim: {s}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

fn seq(path: &str, mode: CreateMode) -> Request {
    Request::Create2(node(path, b"", mode))
}

/// Creates one at a time across the end of `/e`'s counter (plain and
/// protected names, deletes in between, a multi, a child watch), `stat`
/// of the parent after each stage, and its stored cversion: the model and
/// the real server agree field by field.
#[test]
fn counter_end_one_at_a_time_matches_real_zookeeper() {
    use CreateMode::*;
    let max = i32::MAX;
    let steps = vec![
        End::One(0, Request::Create(node("/e", b"", Persistent))),
        End::Counter("/e", max - 2),
        End::Stored("/e"),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Exists(pw("/e", false))),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::Stored("/e"),
        // Stuck: a plain name is taken, a protected one reuses the suffix.
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, seq("/e/n-", PersistentSequential)),
        End::One(1, Request::GetChildren(pw("/e", true))),
        End::One(0, seq("/e/_c_aaaa-lock-", EphemeralSequential)),
        End::One(1, seq("/e/_c_bbbb-lock-", EphemeralSequential)),
        End::One(0, seq("/e/_c_cccc-lock-", PersistentSequential)),
        End::Stored("/e"),
        End::One(1, Request::GetChildren2(pw("/e", false))),
        // A delete moves pzxid, not the counter; the plain name is free again.
        End::One(0, Request::Delete(pv("/e/n-2147483647", -1))),
        End::Stored("/e"),
        End::One(0, Request::Exists(pw("/e", false))),
        End::One(1, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Delete(pv("/e/n-2147483645", -1))),
        End::One(0, seq("/e/n-", EphemeralSequential)),
        End::One(0, Request::Exists(pw("/e", false))),
        // Two sequential creates in one multi: the second is prepped from
        // the first's record.
        End::One(
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/e/_c_dddd-lock-", b"", EphemeralSequential)),
                MultiOp::Create(node("/e/_c_eeee-lock-", b"", EphemeralSequential)),
            ]),
        ),
        End::Stored("/e"),
        End::One(0, Request::GetChildren2(pw("/e", false))),
        // A failed multi leaves the counter alone.
        End::One(
            0,
            Request::Multi(vec![
                MultiOp::Create(node("/e/_c_ffff-lock-", b"", EphemeralSequential)),
                MultiOp::Check(pv("/missing", -1)),
            ]),
        ),
        End::One(0, seq("/e/_c_gggg-lock-", EphemeralSequential)),
        End::Stored("/e"),
        End::One(1, Request::Exists(pw("/e", false))),
    ];
    let (real, sim) = compare_end(&steps);
    assert_same_lines(&real, &sim);
    // What the names and stat say, on the real server, spelled out.
    let text = real.lines.join("\n");
    assert!(text.contains("/e/n-2147483647"), "{text}");
    assert!(text.contains("NodeExists"), "{text}");
    assert!(text.contains("/e/_c_bbbb-lock-2147483647"), "{text}");
    assert!(text.contains("/e/_c_eeee-lock--2147483648"), "{text}");
    assert!(
        real.lines
            .iter()
            .filter(|l| l.contains("stored /e"))
            .skip(1)
            .all(|l| l.ends_with(&format!("cversion={max}"))),
        "{text}"
    );
}

/// Creates written without waiting, at and just before the end: the model
/// prepares the whole burst while it is in flight (2147483647, -2147483648,
/// …); the real server's names depend on how far its pipeline drained, and
/// must be a sequence its source allows. Everything else (errors, stats,
/// the stored counter after) must be equal.
#[test]
fn counter_end_bursts_match_real_zookeeper() {
    use CreateMode::*;
    let max = i32::MAX;
    let protected = |p: &str, k: usize| seq(&format!("{p}/_c_{k:04}-lock-"), EphemeralSequential);
    let mut steps = vec![
        End::One(0, Request::Create(node("/b1", b"", Persistent))),
        End::One(0, Request::Create(node("/b2", b"", Persistent))),
        End::One(0, Request::Create(node("/b3", b"", Persistent))),
        End::One(0, Request::Create(node("/b4", b"", Persistent))),
        End::Counter("/b1", max),
        End::Counter("/b2", max - 1),
        End::Counter("/b3", max),
        End::Counter("/b4", max),
    ];
    // Expected stored counters before each burst, in burst order.
    let mut stored_before = Vec::new();
    // /b1: protected names from the end, twice (-2147483648 can be issued
    // by both bursts).
    for round in 0..2 {
        stored_before.push(max);
        steps.push(End::Burst(
            0,
            (0..6).map(|k| protected("/b1", round * 10 + k)).collect(),
        ));
        steps.push(End::Stored("/b1"));
        steps.push(End::One(1, Request::Exists(pw("/b1", false))));
    }
    // /b2: crossing the end inside the burst.
    stored_before.push(max - 1);
    steps.push(End::Burst(0, (0..5).map(|k| protected("/b2", k)).collect()));
    steps.push(End::Stored("/b2"));
    steps.push(End::One(1, Request::Exists(pw("/b2", false))));
    // /b3: plain names while `n-2147483647` exists: every one fails.
    steps.push(End::One(0, seq("/b3/n-", EphemeralSequential)));
    steps.push(End::Burst(
        0,
        (0..4).map(|_| seq("/b3/n-", EphemeralSequential)).collect(),
    ));
    steps.push(End::Stored("/b3"));
    // /b4: a delete between two creates of one burst.
    steps.push(End::One(0, seq("/b4/_c_x-lock-", PersistentSequential)));
    stored_before.push(max);
    steps.push(End::Burst(
        0,
        vec![
            protected("/b4", 1),
            Request::Delete(pv("/b4/_c_x-lock-2147483647", -1)),
            protected("/b4", 2),
            protected("/b4", 3),
        ],
    ));
    steps.push(End::Stored("/b4"));
    steps.push(End::One(1, Request::Exists(pw("/b4", false))));
    let (real, sim) = compare_end(&steps);
    assert_same_lines(&real, &sim);
    // The /b3 burst created nothing on either side: no names recorded.
    let bursts_with_names: Vec<&Vec<i32>> = real.bursts.iter().filter(|b| !b.is_empty()).collect();
    let sim_with_names: Vec<&Vec<i32>> = sim.bursts.iter().filter(|b| !b.is_empty()).collect();
    assert_eq!(bursts_with_names.len(), stored_before.len());
    for ((r, s), stored) in bursts_with_names
        .iter()
        .zip(&sim_with_names)
        .zip(&stored_before)
    {
        assert!(
            burst_admissible(*stored, r),
            "real names {r:?} (stored {stored}) are not what ZooKeeper's pipeline can issue"
        );
        assert!(burst_admissible(*stored, s), "model names {s:?}");
        // The model keeps the whole burst in flight.
        let all_in_flight: Vec<i32> = (0..s.len() as i32)
            .map(|k| stored.wrapping_add(k))
            .collect();
        assert_eq!(**s, all_in_flight);
    }
    eprintln!("real burst names: {:?}", real.bursts);
}

#[test]
fn burst_admissibility_rule() {
    let max = i32::MAX;
    let min = i32::MIN;
    assert!(burst_admissible(max, &[max, min, min + 1]));
    assert!(burst_admissible(max, &[max, max, min, max, min]));
    assert!(burst_admissible(max - 1, &[max - 1, max, min, max]));
    assert!(!burst_admissible(max, &[min]));
    assert!(!burst_admissible(max, &[max, min + 1]));
    assert!(!burst_admissible(max - 1, &[max - 1, max - 1]));
    assert!(!burst_admissible(5, &[5, 6, 5]));
}
