//! Benchmark: zklock against Apache Curator (Java) and kazoo (Python), in one
//! run, against one ZooKeeper server, with ratio columns.
//!
//! `cargo run --release --example bench` (or `scripts/bench.sh`). Starts a
//! standalone server on loopback unless `ZKLOCK_CONNECT` names one, runs one
//! worker process per implementation (this binary, `bench/CuratorBench.java`,
//! `bench/kazoo_bench.py`) and then two processes of each implementation
//! contending for one lock. Prints a table and writes it to
//! `target/bench/results.md`. See `bench/README.md` for what each figure means.
//!
//! Sizes (environment): `BENCH_N` create+delete pairs (2000), `BENCH_M`
//! pipelined reads (20000), `BENCH_K` lock+unlock cycles (1000),
//! `BENCH_THREADS` zklock reader threads (32), `BENCH_H` lock acquisitions
//! per process in the handoff test (300), `BENCH_HOLD_MS` hold time in the
//! handoff test (2), `BENCH_HANDOFF_WARM` warm-up cycles of a handoff process
//! (300), `BENCH_ROUNDS` rounds whose medians are reported (3).
//! `BENCH_JVM_OPTS` adds JVM flags for Curator; `PYTHON` picks the
//! interpreter for kazoo.
//!
//! This is a measurement, not a test: nothing here asserts on timings.

#[path = "../tests/support/peers.rs"]
mod peers;
#[path = "../tests/support/zk.rs"]
#[allow(dead_code)]
mod zk;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zklock::recipes::{Mutex, MutexOptions};
use zklock::{Client, CreateMode, Error};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a measured loop before reading the server's counters, so that
/// requests still in flight (zklock's holder monitor, Curator's background
/// work) are counted in the phase that caused them.
const SETTLE: Duration = Duration::from_millis(200);
/// Longest a worker process may run before the orchestrator gives up on it.
const WORKER_DEADLINE: Duration = Duration::from_secs(180);

fn main() -> BoxResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("worker") => worker(&args[1..]),
        Some("handoff") => handoff_worker(&args[1..]),
        _ => orchestrate(),
    }
}

// ---------------------------------------------------------------------------
// Measuring helpers (shared by both modes)
// ---------------------------------------------------------------------------

/// CPU time of the whole process (every thread, including exited ones), ns,
/// from `/proc/self/stat` (clock ticks of 10 ms, USER_HZ = 100 on Linux):
/// coarse, but the measured loops run for a second or more, and it needs
/// no unsafe code.
fn process_cpu_ns() -> u64 {
    proc_stat_ticks() * 10_000_000
}

/// utime + stime of the process from `/proc/self/stat`, in clock ticks
/// (the basis of `process_cpu_ns`).
fn proc_stat_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12)
}

/// A `kB` line of `/proc/self/status` (VmHWM, VmRSS).
fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| {
            v.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The server's `mntr` counters (numeric ones only).
fn mntr(addr: SocketAddr) -> BTreeMap<String, f64> {
    let answer = zk::try_four_letter(addr, "mntr").unwrap_or_default();
    answer
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse::<f64>().ok()?;
            Some((k.to_owned(), v))
        })
        .collect()
}

/// Process-side readings at the start and end of a phase.
struct Snap {
    wall: Instant,
    cpu_ns: u64,
    ticks: u64,
    packets: f64,
    watches: f64,
    rss_kb: u64,
}

fn snap_server(addr: SocketAddr) -> (f64, f64) {
    let m = mntr(addr);
    (
        m.get("zk_packets_received").copied().unwrap_or(f64::NAN),
        m.get("zk_watch_count").copied().unwrap_or(f64::NAN),
    )
}

fn begin(addr: SocketAddr) -> Snap {
    let (packets, watches) = snap_server(addr);
    Snap {
        rss_kb: status_kb("VmRSS"),
        ticks: proc_stat_ticks(),
        cpu_ns: process_cpu_ns(),
        wall: Instant::now(),
        packets,
        watches,
    }
}

/// Ends a phase of `ops` operations and prints its `R <phase>.<key> <value>` lines.
fn end(phase: &str, addr: SocketAddr, ops: usize, before: Snap, latencies_ns: Option<Vec<u64>>) {
    let wall = before.wall.elapsed();
    let cpu_ns = process_cpu_ns() - before.cpu_ns;
    let ticks = proc_stat_ticks() - before.ticks;
    let rss_kb = status_kb("VmRSS");
    std::thread::sleep(SETTLE);
    let (packets, watches) = snap_server(addr);
    let ops_f = ops as f64;
    let clk_tck = 100.0; // getconf CLK_TCK on Linux x86_64
    let mut out = vec![
        ("ops", ops_f),
        ("wall_s", wall.as_secs_f64()),
        ("ops_per_s", ops_f / wall.as_secs_f64()),
        ("cpu_us_per_op", cpu_ns as f64 / 1e3 / ops_f),
        ("cpu_ticks_us_per_op", ticks as f64 * 1e6 / clk_tck / ops_f),
        // The `mntr` that reads the counter is itself one received packet.
        ("packets_per_op", (packets - before.packets - 1.0) / ops_f),
        ("watches_left", watches - before.watches),
        ("rss_growth_kb", rss_kb as f64 - before.rss_kb as f64),
    ];
    if let Some(lat) = latencies_ns {
        let s = Stats::of(lat);
        out.extend([
            ("mean_us", s.mean_us),
            ("p50_us", s.p50_us),
            ("p99_us", s.p99_us),
        ]);
    }
    for (k, v) in out {
        println!("R {phase}.{k} {v}");
    }
}

struct Stats {
    mean_us: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Stats {
    fn of(mut ns: Vec<u64>) -> Stats {
        if ns.is_empty() {
            return Stats {
                mean_us: f64::NAN,
                p50_us: f64::NAN,
                p99_us: f64::NAN,
            };
        }
        ns.sort_unstable();
        let n = ns.len();
        let pct = |p: usize| ns[(n * p / 100).min(n - 1)] as f64 / 1e3;
        Stats {
            mean_us: ns.iter().sum::<u64>() as f64 / n as f64 / 1e3,
            p50_us: pct(50),
            p99_us: pct(99),
        }
    }
}

// ---------------------------------------------------------------------------
// zklock worker: `bench worker <connect> <mntr host:port> <N> <M> <K> <threads>`
// ---------------------------------------------------------------------------

fn ensure(client: &Client, path: &str, data: &[u8]) -> BoxResult<()> {
    match client.create(path, data, CreateMode::Persistent) {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn rt_loop(client: &Client, path: &str, n: usize) -> BoxResult<Vec<u64>> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.create(path, b"", CreateMode::Persistent)?;
        client.delete(path, None)?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    Ok(lat)
}

/// `m` reads of one node by `threads` threads sharing `client`.
fn pipe_loop(client: &Client, path: &str, m: usize, threads: usize) -> BoxResult<()> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let client = client.clone();
            let path = path.to_owned();
            let barrier = barrier.clone();
            let count = m / threads + usize::from(i < m % threads);
            std::thread::spawn(move || -> Result<(), Error> {
                barrier.wait();
                for _ in 0..count {
                    client.get_data(&path)?;
                }
                Ok(())
            })
        })
        .collect();
    barrier.wait();
    for h in handles {
        h.join().map_err(|_| "reader thread panicked")??;
    }
    Ok(())
}

fn lock_loop(mutex: &Mutex, k: usize) -> BoxResult<Vec<u64>> {
    let mut lat = Vec::with_capacity(k);
    for _ in 0..k {
        let t = Instant::now();
        let guard = mutex.lock()?;
        guard.unlock()?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    Ok(lat)
}

fn worker(args: &[String]) -> BoxResult<()> {
    let [connect, mntr_addr, n, m, k, threads] = args else {
        return Err("usage: bench worker <connect> <mntr host:port> <N> <M> <K> <threads>".into());
    };
    let addr: SocketAddr = mntr_addr.parse()?;
    let (n, m, k, threads): (usize, usize, usize, usize) =
        (n.parse()?, m.parse()?, k.parse()?, threads.parse()?);

    let client = Client::connect(connect, SESSION_TIMEOUT)?;
    let base = "/bench/zklock";
    ensure(&client, "/bench", b"")?;
    ensure(&client, base, b"")?;
    let data_path = format!("{base}/data");
    ensure(&client, &data_path, &[7u8; 32])?;
    let rt_path = format!("{base}/rt");
    let _ = client.delete(&rt_path, None);
    // Lock parents made persistent up front, as for Curator and kazoo, so
    // the server's container reaper cannot remove one mid-loop.
    let lock_path = format!("{base}/lock");
    let lock_nw_path = format!("{base}/lock-nw");
    ensure(&client, &lock_path, b"")?;
    ensure(&client, &lock_nw_path, b"")?;
    let mutex = Mutex::new(&client, &lock_path)?;
    let mutex_nw = Mutex::with_options(
        &client,
        &lock_nw_path,
        MutexOptions::default().watch_node(false),
    )?;

    // Warm-up pass: half of every measured loop, not measured.
    rt_loop(&client, &rt_path, n / 2)?;
    pipe_loop(&client, &data_path, m / 2, threads)?;
    lock_loop(&mutex, k / 2)?;
    lock_loop(&mutex_nw, k / 2)?;

    let s = begin(addr);
    let lat = rt_loop(&client, &rt_path, n)?;
    end("rt", addr, n, s, Some(lat));

    let s = begin(addr);
    pipe_loop(&client, &data_path, m, threads)?;
    end("pipe", addr, m, s, None);

    let s = begin(addr);
    let lat = lock_loop(&mutex, k)?;
    end("lock", addr, k, s, Some(lat));

    let s = begin(addr);
    let lat = lock_loop(&mutex_nw, k)?;
    end("lock_nw", addr, k, s, Some(lat));

    // What one OS thread costs here: zklock spawns one per acquisition (the
    // holder's monitor, src/recipes/held.rs). Spawn + join of a thread that
    // waits on a channel, like the monitor does.
    let spawns = 1000;
    let s = begin(addr);
    for _ in 0..spawns {
        // std's mpsc stands in for crossbeam, which the example cannot name.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name("bench-spawn".into())
            .spawn(move || {
                let _ = rx.recv();
            })?;
        drop(tx);
        h.join().map_err(|_| "spawn probe panicked")?;
    }
    let wall = s.wall.elapsed();
    let cpu = process_cpu_ns() - s.cpu_ns;
    println!(
        "R spawn.wall_us_per_op {}",
        wall.as_secs_f64() * 1e6 / spawns as f64
    );
    println!("R spawn.cpu_us_per_op {}", cpu as f64 / 1e3 / spawns as f64);
    println!("R watch_events_received {}", client.watch_events_received());

    client.close()?;
    println!("R rss_hwm_kb {}", status_kb("VmHWM"));
    println!("R rss_end_kb {}", status_kb("VmRSS"));
    Ok(())
}

// ---------------------------------------------------------------------------
// Handoff worker: `bench handoff <connect> <lock path> <H> <warm-up> <hold ms> <id>`
// ---------------------------------------------------------------------------

fn handoff_worker(args: &[String]) -> BoxResult<()> {
    let [connect, path, h, warm, hold_ms, id] = args else {
        return Err(
            "usage: bench handoff <connect> <lock path> <H> <warm-up> <hold ms> <id>".into(),
        );
    };
    let (h, warm): (usize, usize) = (h.parse()?, warm.parse()?);
    let hold = Duration::from_millis(hold_ms.parse()?);
    let client = Client::connect(connect, SESSION_TIMEOUT)?;
    ensure(&client, "/bench", b"")?;
    ensure(&client, path, b"")?;
    let warm_path = format!("{path}-warm-{id}");
    ensure(&client, &warm_path, b"")?;
    lock_loop(&Mutex::new(&client, &warm_path)?, warm)?;
    let mutex = Mutex::new(&client, path)?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let mut acquired = Vec::with_capacity(h);
    let mut released = Vec::with_capacity(h);
    for _ in 0..h {
        let guard = mutex.lock()?;
        acquired.push(unix_ns());
        // Hold long enough for the other process to queue behind us.
        std::thread::sleep(hold);
        released.push(unix_ns());
        guard.unlock()?;
    }
    let mut out = String::new();
    for (a, r) in acquired.iter().zip(&released) {
        out.push_str(&format!("H {a} {r}\n"));
    }
    print!("{out}");
    client.close()?;
    println!("done");
    Ok(())
}

// ---------------------------------------------------------------------------
// Orchestrator
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Impl {
    Zklock,
    Curator,
    Kazoo,
}

impl Impl {
    const ALL: [Impl; 3] = [Impl::Zklock, Impl::Curator, Impl::Kazoo];

    fn name(self) -> &'static str {
        match self {
            Impl::Zklock => "zklock",
            Impl::Curator => "Curator",
            Impl::Kazoo => "kazoo",
        }
    }
}

struct Setup {
    root: PathBuf,
    out_dir: PathBuf,
    connect: String,
    mntr_addr: SocketAddr,
    curator_cp: String,
    python: String,
    jvm_opts: Vec<String>,
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// Compiles `bench/CuratorBench.java` into `target/bench/classes` when the
/// class file is missing or older than the source.
fn compile_curator(root: &Path, out_dir: &Path, cp: &str) -> BoxResult<PathBuf> {
    let source = root.join("bench/CuratorBench.java");
    let classes = out_dir.join("classes");
    let class = classes.join("CuratorBench.class");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(src), Some(cls)) = (modified(&source), modified(&class)) {
        if cls >= src {
            return Ok(classes);
        }
    }
    std::fs::create_dir_all(&classes)?;
    let out = Command::new("javac")
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&classes)
        .arg("-cp")
        .arg(cp)
        .arg(&source)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "javac failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(classes)
}

fn command_for(setup: &Setup, imp: Impl, args: &[String]) -> Command {
    match imp {
        Impl::Zklock => {
            let mut c = Command::new(std::env::current_exe().expect("current_exe"));
            c.args(args);
            c
        }
        Impl::Curator => {
            let mut c = Command::new("java");
            c.args(&setup.jvm_opts)
                .arg("-cp")
                .arg(&setup.curator_cp)
                .arg("CuratorBench")
                .args(args);
            c
        }
        Impl::Kazoo => {
            let mut c = Command::new(&setup.python);
            c.arg("-u")
                .arg(setup.root.join("bench/kazoo_bench.py"))
                .args(args);
            c
        }
    }
}

/// A worker process whose stdout lines arrive on a channel and whose stderr
/// is kept for error messages.
struct Running {
    label: String,
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Arc<std::sync::Mutex<String>>,
    deadline: Instant,
}

impl Running {
    fn start(label: String, mut cmd: Command) -> BoxResult<Running> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{label}: cannot start: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stderr_pipe = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = keep.lock().unwrap_or_else(|p| p.into_inner());
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 16_384 {
                    let cut = s.len() - 8_192;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        });
        Ok(Running {
            label,
            child,
            lines: rx,
            stderr,
            deadline: Instant::now() + WORKER_DEADLINE,
        })
    }

    fn failure(&mut self, what: &str) -> Box<dyn std::error::Error> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let err = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        format!("{}: {what}\n--- stderr ---\n{err}", self.label).into()
    }

    /// The next stdout line, or `None` at EOF.
    fn next_line(&mut self) -> BoxResult<Option<String>> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(l) => Ok(Some(l)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Ok(None),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err(self.failure(&format!("no answer within {WORKER_DEADLINE:?}")))
            }
        }
    }

    fn wait_for(&mut self, word: &str) -> BoxResult<()> {
        loop {
            match self.next_line()? {
                Some(l) if l.trim() == word => return Ok(()),
                Some(l) if l.starts_with("error") => return Err(self.failure(&l)),
                Some(_) => {}
                None => return Err(self.failure(&format!("exited before saying {word:?}"))),
            }
        }
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Reads stdout to EOF and waits for a clean exit.
    fn finish(mut self) -> BoxResult<Vec<String>> {
        drop(self.child.stdin.take());
        let mut all = Vec::new();
        while let Some(l) = self.next_line()? {
            all.push(l);
        }
        let status = self.child.wait()?;
        if !status.success() {
            return Err(self.failure(&format!("exited with {status}")));
        }
        Ok(all)
    }
}

type Results = BTreeMap<String, f64>;

fn run_worker(setup: &Setup, imp: Impl, sizes: &Sizes) -> BoxResult<Results> {
    let args: Vec<String> = vec![
        "worker".into(),
        setup.connect.clone(),
        setup.mntr_addr.to_string(),
        sizes.n.to_string(),
        sizes.m.to_string(),
        sizes.k.to_string(),
        sizes.threads.to_string(),
    ];
    let started = Instant::now();
    let running = Running::start(imp.name().to_owned(), command_for(setup, imp, &args))?;
    let lines = running.finish()?;
    let mut r = Results::new();
    for l in lines {
        let mut it = l.split_whitespace();
        if it.next() != Some("R") {
            continue;
        }
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            if let Ok(v) = v.parse::<f64>() {
                r.insert(k.to_owned(), v);
            }
        }
    }
    r.insert("process_wall_s".into(), started.elapsed().as_secs_f64());
    eprintln!(
        "bench: {} worker done in {:.1} s",
        imp.name(),
        started.elapsed().as_secs_f64()
    );
    Ok(r)
}

/// Two processes of one implementation take turns on one lock, each holding
/// it for `hold_ms` so that the other is queued when it is released. Adds
/// `handoff.*` entries to `r`.
fn run_handoff(
    setup: &Setup,
    imp: Impl,
    sizes: &Sizes,
    round: usize,
    r: &mut Results,
) -> BoxResult<()> {
    let path = format!("/bench/handoff-{}", imp.name().to_lowercase());
    let mut procs = Vec::new();
    for id in 0..2 {
        let args: Vec<String> = vec![
            "handoff".into(),
            setup.connect.clone(),
            path.clone(),
            sizes.h.to_string(),
            sizes.handoff_warm.to_string(),
            sizes.hold_ms.to_string(),
            id.to_string(),
        ];
        let label = format!("{} handoff #{id}", imp.name());
        procs.push(Running::start(label, command_for(setup, imp, &args))?);
    }
    for p in &mut procs {
        p.wait_for("ready")?;
    }
    for p in &mut procs {
        p.send("go");
    }
    // (time, process, is_acquire)
    let mut events: Vec<(u64, usize, bool)> = Vec::new();
    for (id, p) in procs.into_iter().enumerate() {
        for l in p.finish()? {
            let mut it = l.split_whitespace();
            if it.next() != Some("H") {
                continue;
            }
            let a: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            let r: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            events.push((a, id, true));
            events.push((r, id, false));
        }
    }
    events.sort_unstable();
    // The merged timeline, for a look at who held when.
    let timeline: String = events
        .iter()
        .map(|(t, p, acq)| format!("{t} {p} {}\n", if *acq { "acquired" } else { "releasing" }))
        .collect();
    let file = setup.out_dir.join(format!(
        "handoff-{}-round{}.txt",
        imp.name().to_lowercase(),
        round + 1
    ));
    std::fs::write(file, timeline)?;
    // A handoff: one process releases and the other is the next to acquire.
    let mut lat = Vec::new();
    let mut again = 0;
    let mut overlaps = 0;
    for w in events.windows(2) {
        let ((t0, p0, acq0), (t1, p1, acq1)) = (w[0], w[1]);
        match (acq0, acq1) {
            (false, true) if p0 != p1 => lat.push(t1.saturating_sub(t0)),
            (false, true) => again += 1,
            (true, true) => overlaps += 1,
            _ => {}
        }
    }
    let s = Stats::of(lat.clone());
    r.insert("handoff.count".into(), lat.len() as f64);
    r.insert("handoff.same_process_again".into(), again as f64);
    r.insert("handoff.overlaps".into(), overlaps as f64);
    r.insert("handoff.mean_us".into(), s.mean_us);
    r.insert("handoff.p50_us".into(), s.p50_us);
    r.insert("handoff.p99_us".into(), s.p99_us);
    eprintln!(
        "bench: {} handoff done: {} handoffs, mean {:.0} µs",
        imp.name(),
        lat.len(),
        s.mean_us
    );
    Ok(())
}

struct Sizes {
    n: usize,
    m: usize,
    k: usize,
    threads: usize,
    h: usize,
    handoff_warm: usize,
    hold_ms: u64,
    rounds: usize,
}

/// Warms the server's JIT and caches with the same kinds of request every
/// implementation sends, so the first implementation measured does not pay
/// for a cold server.
fn warm_server(connect: &str, sizes: &Sizes) -> BoxResult<()> {
    let client = Client::connect(connect, SESSION_TIMEOUT)?;
    ensure(&client, "/bench", b"")?;
    ensure(&client, "/bench/server-warm", &[1u8; 32])?;
    let _ = client.delete("/bench/server-warm/rt", None);
    rt_loop(&client, "/bench/server-warm/rt", sizes.n)?;
    pipe_loop(&client, "/bench/server-warm", sizes.m, sizes.threads)?;
    ensure(&client, "/bench/server-warm/lock", b"")?;
    lock_loop(&Mutex::new(&client, "/bench/server-warm/lock")?, sizes.k)?;
    client.close()?;
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn first_line(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

fn orchestrate() -> BoxResult<()> {
    let total = Instant::now();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = target_dir(&root).join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let sizes = Sizes {
        n: env_usize("BENCH_N", 2000).max(1),
        m: env_usize("BENCH_M", 20000).max(1),
        k: env_usize("BENCH_K", 1000).max(1),
        threads: env_usize("BENCH_THREADS", 32).max(1),
        h: env_usize("BENCH_H", 300).max(1),
        handoff_warm: env_usize("BENCH_HANDOFF_WARM", 300),
        hold_ms: env_usize("BENCH_HOLD_MS", 2) as u64,
        rounds: env_usize("BENCH_ROUNDS", 3).max(1),
    };

    // The server: ZKLOCK_CONNECT, or a fresh standalone one on loopback.
    let (server, connect) = match std::env::var("ZKLOCK_CONNECT") {
        Ok(c) if !c.is_empty() => (None, c),
        _ => {
            eprintln!("bench: starting a standalone ZooKeeper on 127.0.0.1");
            let s = zk::ZkServer::start();
            let c = s.connect_string();
            (Some(s), c)
        }
    };
    // Counters are read from the first server of the connect string.
    let first_host = connect
        .split('/')
        .next()
        .unwrap_or("")
        .split(',')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    let first_host = if first_host.rsplit_once(':').is_some() {
        first_host
    } else {
        format!("{first_host}:2181")
    };
    let mntr_addr = first_host
        .to_socket_addrs()?
        .next()
        .ok_or("cannot resolve the first server")?;
    let server_version = zk::try_four_letter(mntr_addr, "srvr")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("Zookeeper version:")
        .trim()
        .split(['-', ','])
        .next()
        .unwrap_or("")
        .to_owned();

    let jars = peers::curator_classpath().to_string_lossy().into_owned();
    let classes = compile_curator(&root, &out_dir, &jars)?;
    let kazoo_version = peers::ensure_kazoo().to_owned();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let jvm_opts: Vec<String> = std::env::var("BENCH_JVM_OPTS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let setup = Setup {
        root: root.clone(),
        out_dir: out_dir.clone(),
        connect: connect.clone(),
        mntr_addr,
        curator_cp: format!("{}:{jars}", classes.display()),
        python,
        jvm_opts,
    };
    let java_version = first_line(Command::new("java").arg("-version"));
    let py_version = first_line(Command::new(&setup.python).arg("--version"));

    let load_before = loadavg();
    eprintln!("bench: warming the server up");
    warm_server(&connect, &sizes)?;

    // Rounds, each running every implementation once, in a rotated order so
    // that no implementation always goes first; the table shows medians.
    let mut all: BTreeMap<Impl, Vec<Results>> = BTreeMap::new();
    for round in 0..sizes.rounds {
        for i in 0..Impl::ALL.len() {
            let imp = Impl::ALL[(i + round) % Impl::ALL.len()];
            eprintln!(
                "bench: round {}/{}: {} worker (warm-up pass, then measured pass)",
                round + 1,
                sizes.rounds,
                imp.name()
            );
            let mut r = run_worker(&setup, imp, &sizes)?;
            eprintln!(
                "bench: round {}/{}: {} handoff (2 processes)",
                round + 1,
                sizes.rounds,
                imp.name()
            );
            run_handoff(&setup, imp, &sizes, round, &mut r)?;
            if let Some(kb) = r.get("rss_end_kb").copied() {
                r.insert("rss_end_mib".into(), kb / 1024.0);
            }
            all.entry(imp).or_default().push(r);
        }
    }
    let load_after = loadavg();
    let medians: BTreeMap<Impl, Results> = all
        .iter()
        .map(|(imp, rounds)| (*imp, median_results(rounds)))
        .collect();

    let context = Context {
        sizes: &sizes,
        server: if server.is_some() {
            format!("standalone ZooKeeper {server_version} on 127.0.0.1 started by the bench (test-support config: forceSync=no, C1-only JVM)")
        } else {
            format!("ZKLOCK_CONNECT={connect} (ZooKeeper {server_version})")
        },
        java: java_version,
        jvm_opts: if setup.jvm_opts.is_empty() {
            "JVM defaults".into()
        } else {
            setup.jvm_opts.join(" ")
        },
        kazoo: format!("kazoo {kazoo_version} on {py_version}"),
        load: format!("{load_before} before, {load_after} after"),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        total_s: total.elapsed().as_secs_f64(),
    };
    let report = render(&medians, &all, &context);
    println!("{report}");
    let path = setup.out_dir.join("results.md");
    std::fs::write(&path, &report)?;
    eprintln!("bench: written to {}", path.display());
    drop(server);
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_results(rounds: &[Results]) -> Results {
    let mut keys: Vec<&String> = rounds.iter().flat_map(|r| r.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let vals = rounds.iter().filter_map(|r| r.get(k).copied()).collect();
            (k.clone(), median(vals))
        })
        .collect()
}

struct Context<'a> {
    sizes: &'a Sizes,
    server: String,
    java: String,
    jvm_opts: String,
    kazoo: String,
    load: String,
    cpus: usize,
    total_s: f64,
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn fmt_ratio(other: f64, base: f64) -> String {
    if other.is_nan() || base.is_nan() || base == 0.0 {
        "–".into()
    } else {
        format!("{:.2}×", other / base)
    }
}

/// One line of the main table: the key for Curator and kazoo, the key for
/// zklock (they differ for the watch_node(false) rows), and a scale.
struct Row {
    label: String,
    key: String,
    zkey: String,
    scale: f64,
}

fn rows(s: &Sizes) -> Vec<Row> {
    let mut v = Vec::new();
    let mut add = |label: String, key: &str, zkey: &str, scale: f64| {
        v.push(Row {
            label,
            key: key.into(),
            zkey: zkey.into(),
            scale,
        })
    };
    let rt = format!("1. create+delete, {} sequential pairs", s.n);
    add(
        format!("{rt}: mean µs/pair"),
        "rt.mean_us",
        "rt.mean_us",
        1.0,
    );
    add(format!("{rt}: p50 µs"), "rt.p50_us", "rt.p50_us", 1.0);
    add(format!("{rt}: p99 µs"), "rt.p99_us", "rt.p99_us", 1.0);
    add(
        format!("{rt}: server packets/pair"),
        "rt.packets_per_op",
        "rt.packets_per_op",
        1.0,
    );
    let pipe = format!("2. pipelined getData ×{}", s.m);
    add(
        format!("{pipe}: ops/s ↑"),
        "pipe.ops_per_s",
        "pipe.ops_per_s",
        1.0,
    );
    add(
        format!("{pipe}: server packets/op"),
        "pipe.packets_per_op",
        "pipe.packets_per_op",
        1.0,
    );
    for (variant, z) in [
        ("zklock default", "lock"),
        ("zklock watch_node(false)", "lock_nw"),
    ] {
        let l = format!("3. lock+unlock ×{} uncontended [{variant}]", s.k);
        add(
            format!("{l}: mean µs"),
            "lock.mean_us",
            &format!("{z}.mean_us"),
            1.0,
        );
        add(
            format!("{l}: p50 µs"),
            "lock.p50_us",
            &format!("{z}.p50_us"),
            1.0,
        );
        add(
            format!("{l}: p99 µs"),
            "lock.p99_us",
            &format!("{z}.p99_us"),
            1.0,
        );
        add(
            format!("{l}: server packets (requests) per cycle"),
            "lock.packets_per_op",
            &format!("{z}.packets_per_op"),
            1.0,
        );
        add(
            format!("{l}: server watches left behind per cycle"),
            "lock.watches_left",
            &format!("{z}.watches_left"),
            1.0 / s.k as f64,
        );
    }
    let h = format!("4. handoff, 2 processes, hold {} ms", s.hold_ms);
    add(
        format!("{h}: release→acquire mean µs"),
        "handoff.mean_us",
        "handoff.mean_us",
        1.0,
    );
    add(
        format!("{h}: p50 µs"),
        "handoff.p50_us",
        "handoff.p50_us",
        1.0,
    );
    add(
        format!("{h}: p99 µs"),
        "handoff.p99_us",
        "handoff.p99_us",
        1.0,
    );
    add(
        "5. client CPU µs per create+delete pair".into(),
        "rt.cpu_us_per_op",
        "rt.cpu_us_per_op",
        1.0,
    );
    add(
        "5. client CPU µs per pipelined getData".into(),
        "pipe.cpu_us_per_op",
        "pipe.cpu_us_per_op",
        1.0,
    );
    add(
        "5. client CPU µs per lock+unlock [zklock default]".into(),
        "lock.cpu_us_per_op",
        "lock.cpu_us_per_op",
        1.0,
    );
    add(
        "5. client CPU µs per lock+unlock [zklock watch_node(false)]".into(),
        "lock.cpu_us_per_op",
        "lock_nw.cpu_us_per_op",
        1.0,
    );
    add(
        "6. peak RSS of the worker process, MiB (VmHWM)".into(),
        "rss_hwm_kb",
        "rss_hwm_kb",
        1.0 / 1024.0,
    );
    v
}

fn render(
    med: &BTreeMap<Impl, Results>,
    all: &BTreeMap<Impl, Vec<Results>>,
    c: &Context,
) -> String {
    let get = |imp: Impl, key: &str| {
        med.get(&imp)
            .and_then(|m| m.get(key))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let s = c.sizes;
    let mut out = String::new();
    out.push_str("# zklock vs Curator vs kazoo\n\n");
    out.push_str(&format!(
        "Server: {}. Clients: zklock (release build), Apache Curator 5.4 with ZooKeeper 3.8 client on {} ({}), {}. \
         {} CPUs, load average {}. Whole run {:.0} s.\n\n",
        c.server, c.java, c.jvm_opts, c.kazoo, c.cpus, c.load, c.total_s
    ));
    out.push_str(&format!(
        "Medians of {} rounds; each round runs every client in a fresh process (order rotated per round). \
         Every worker first runs an unmeasured warm-up pass (half of each loop) for the JVM's JIT and for fairness \
         the same for zklock and kazoo; handoff processes warm up with {} uncontended lock cycles. \
         Ratios are other / zklock: above 1× means zklock is faster or cheaper, except rows marked ↑ \
         (higher is better), where above 1× means the other client is ahead.\n\n",
        s.rounds, s.handoff_warm
    ));
    out.push_str("| measurement | zklock | Curator | kazoo | Curator/zklock | kazoo/zklock |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|\n");
    let rows = rows(s);
    for row in &rows {
        let z = get(Impl::Zklock, &row.zkey) * row.scale;
        let cu = get(Impl::Curator, &row.key) * row.scale;
        let ka = get(Impl::Kazoo, &row.key) * row.scale;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.label,
            fmt_num(z),
            fmt_num(cu),
            fmt_num(ka),
            fmt_ratio(cu, z),
            fmt_ratio(ka, z)
        ));
    }

    out.push_str(&format!(
        "\n## Spread: min – max over the {} rounds\n\n",
        s.rounds
    ));
    out.push_str("| measurement | zklock | Curator | kazoo |\n|---|---:|---:|---:|\n");
    let range = |imp: Impl, key: &str, scale: f64| {
        let vals: Vec<f64> = all
            .get(&imp)
            .map(|rs| {
                rs.iter()
                    .filter_map(|r| r.get(key))
                    .map(|v| v * scale)
                    .collect()
            })
            .unwrap_or_default();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if vals.is_empty() {
            "–".to_owned()
        } else {
            format!("{} – {}", fmt_num(lo), fmt_num(hi))
        }
    };
    for row in &rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.label,
            range(Impl::Zklock, &row.zkey, row.scale),
            range(Impl::Curator, &row.key, row.scale),
            range(Impl::Kazoo, &row.key, row.scale)
        ));
    }

    out.push_str("\n## Details (medians)\n\n");
    out.push_str("| detail | zklock | Curator | kazoo |\n|---|---:|---:|---:|\n");
    let detail = |out: &mut String, label: &str, key: &str| {
        out.push_str(&format!(
            "| {label} | {} | {} | {} |\n",
            fmt_num(get(Impl::Zklock, key)),
            fmt_num(get(Impl::Curator, key)),
            fmt_num(get(Impl::Kazoo, key))
        ));
    };
    detail(&mut out, "create+delete pairs/s ↑", "rt.ops_per_s");
    detail(
        &mut out,
        "lock+unlock cycles/s ↑ (zklock default)",
        "lock.ops_per_s",
    );
    detail(
        &mut out,
        "lock+unlock cycles/s ↑ (zklock watch_node(false))",
        "lock_nw.ops_per_s",
    );
    detail(
        &mut out,
        "CPU µs/pair, create+delete, from /proc/self/stat ticks (10 ms resolution)",
        "rt.cpu_ticks_us_per_op",
    );
    detail(
        &mut out,
        "CPU µs/op, pipelined getData, from ticks",
        "pipe.cpu_ticks_us_per_op",
    );
    detail(
        &mut out,
        "CPU µs/cycle, lock+unlock, from ticks",
        "lock.cpu_ticks_us_per_op",
    );
    detail(
        &mut out,
        "CPU µs/cycle, lock+unlock watch_node(false), from ticks",
        "lock_nw.cpu_ticks_us_per_op",
    );
    detail(
        &mut out,
        "server watches left after the lock loop (zklock default)",
        "lock.watches_left",
    );
    detail(
        &mut out,
        "server watches left after the lock loop (zklock watch_node(false))",
        "lock_nw.watches_left",
    );
    detail(
        &mut out,
        "RSS growth during the lock loop, KiB (zklock default)",
        "lock.rss_growth_kb",
    );
    detail(
        &mut out,
        "RSS growth during the lock loop, KiB (zklock watch_node(false))",
        "lock_nw.rss_growth_kb",
    );
    detail(&mut out, "RSS at the end, MiB", "rss_end_mib");
    detail(&mut out, "handoffs measured per round", "handoff.count");
    detail(
        &mut out,
        "same process re-acquired (no handoff) per round",
        "handoff.same_process_again",
    );
    detail(
        &mut out,
        "overlapping holds seen (must be 0)",
        "handoff.overlaps",
    );
    detail(
        &mut out,
        "worker wall time incl. start-up and warm-up, s",
        "process_wall_s",
    );
    detail(
        &mut out,
        "probe: std::thread spawn+join, wall µs",
        "spawn.wall_us_per_op",
    );
    detail(
        &mut out,
        "probe: std::thread spawn+join, CPU µs",
        "spawn.cpu_us_per_op",
    );
    detail(
        &mut out,
        "watch events received by the client (whole worker)",
        "watch_events_received",
    );
    out
}
