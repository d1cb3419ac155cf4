//! The orchestrator: servers, the workers of every implementation, the
//! modes, and what is read around each of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use zklock::{Client, CreateMode, Op};

use crate::json::Json;
use crate::run::{stats_us, Mntr, Proc, Server, Worker};
use crate::{footprint, peers, report, zk, BoxResult};

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between polls of the server while waiters queue up.
const POLL: Duration = Duration::from_millis(20);

/// The implementations, in table order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Impl {
    Zklock,
    Zkrs,
    Curator,
    Kazoo,
}

impl Impl {
    pub const ALL: [Impl; 4] = [Impl::Zklock, Impl::Zkrs, Impl::Curator, Impl::Kazoo];

    pub fn key(self) -> &'static str {
        match self {
            Impl::Zklock => "zklock",
            Impl::Zkrs => "zkrs",
            Impl::Curator => "curator",
            Impl::Kazoo => "kazoo",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Impl::Zklock => "zklock",
            Impl::Zkrs => "zookeeper-client-rs",
            Impl::Curator => "Curator",
            Impl::Kazoo => "kazoo",
        }
    }
}

/// Sizes and switches, from the environment (see bench/README.md).
pub struct Sizes {
    pub quick: bool,
    pub cycles: usize,
    pub sessions: usize,
    pub contended_cycles: usize,
    pub hold_us: usize,
    pub waiters: Vec<(usize, usize)>,
    pub locks: usize,
    pub rounds: usize,
    pub fsync: Vec<bool>,
    pub impls: Vec<Impl>,
    pub worker_timeout: Duration,
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl Sizes {
    pub fn from_env() -> Sizes {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let q = |full: usize, small: usize| if quick { small } else { full };
        let impls = match std::env::var("BENCH_IMPLS") {
            Ok(v) if !v.trim().is_empty() => Impl::ALL
                .into_iter()
                .filter(|i| v.split(',').any(|w| w.trim() == i.key()))
                .collect(),
            _ => Impl::ALL.to_vec(),
        };
        let fsync = std::env::var("BENCH_FSYNC").unwrap_or_else(|_| "on,off".into());
        Sizes {
            quick,
            cycles: env_usize("BENCH_CYCLES", q(1000, 200)).max(1),
            sessions: env_usize("BENCH_SESSIONS", 8).max(1),
            contended_cycles: env_usize("BENCH_CONTENDED_CYCLES", q(100, 25)).max(1),
            hold_us: env_usize("BENCH_HOLD_US", 0),
            waiters: vec![
                (
                    env_usize("BENCH_WAITERS_1", q(1000, 200)),
                    env_usize("BENCH_WAITER_SESSIONS_1", 10).max(1),
                ),
                (
                    env_usize("BENCH_WAITERS_2", q(10_000, 1000)),
                    env_usize("BENCH_WAITER_SESSIONS_2", q(100, 20)).max(1),
                ),
            ],
            locks: env_usize("BENCH_LOCKS", q(10_000, 500)),
            rounds: env_usize("BENCH_ROUNDS", 1).max(1),
            fsync: fsync
                .split(',')
                .filter_map(|w| match w.trim() {
                    "on" => Some(true),
                    "off" => Some(false),
                    _ => None,
                })
                .collect(),
            impls,
            worker_timeout: Duration::from_secs(env_usize("BENCH_WORKER_TIMEOUT_S", 600) as u64),
        }
    }
}

/// Every value measured, by row key and implementation (one per round), and
/// why a cell is empty where it is.
#[derive(Default)]
pub struct Results {
    pub values: BTreeMap<String, BTreeMap<Impl, Vec<f64>>>,
    pub notes: BTreeMap<(String, Impl), String>,
}

impl Results {
    fn put(&mut self, key: &str, imp: Impl, v: f64) {
        self.values
            .entry(key.to_owned())
            .or_default()
            .entry(imp)
            .or_default()
            .push(v);
    }

    fn note(&mut self, prefix: &str, imp: Impl, why: &str) {
        self.notes.insert((prefix.to_owned(), imp), why.to_owned());
    }

    /// The median over rounds, NaN when there is none.
    pub fn get(&self, key: &str, imp: Impl) -> f64 {
        let mut v: Vec<f64> = self
            .values
            .get(key)
            .and_then(|m| m.get(&imp))
            .map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
            .unwrap_or_default();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// The note of the first prefix of `key` that has one.
    pub fn note_for(&self, key: &str, imp: Impl) -> Option<&str> {
        self.notes
            .iter()
            .find(|((p, i), _)| *i == imp && key.starts_with(p.as_str()))
            .map(|(_, n)| n.as_str())
    }
}

/// Where things are and how to start each worker.
pub struct Setup {
    pub root: PathBuf,
    pub target: PathBuf,
    pub out_dir: PathBuf,
    pub curator_cp: String,
    pub python: String,
    pub jvm_opts: Vec<String>,
    pub zkrs_bin: PathBuf,
}

impl Setup {
    fn command(&self, imp: Impl, args: &[String]) -> Command {
        let mut c = match imp {
            Impl::Zklock => {
                let mut c = Command::new(std::env::current_exe().expect("current_exe"));
                c.arg("worker");
                c
            }
            Impl::Zkrs => Command::new(&self.zkrs_bin),
            Impl::Curator => {
                let mut c = Command::new("java");
                c.args(&self.jvm_opts)
                    .arg("-cp")
                    .arg(&self.curator_cp)
                    .arg("CuratorBench");
                c
            }
            Impl::Kazoo => {
                let mut c = Command::new(&self.python);
                c.arg("-u").arg(self.root.join("bench/kazoo_bench.py"));
                c
            }
        };
        c.args(args);
        c
    }
}

/// The lock paths' parents are made persistent up front, for every
/// implementation alike, so that no container reaper removes one mid-run.
fn ensure(client: &Client, path: &str) -> BoxResult<()> {
    match client.create(path, b"", CreateMode::Persistent) {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Everything one server configuration needs.
struct Bench<'a> {
    setup: &'a Setup,
    sizes: &'a Sizes,
    server: Server,
    connect: String,
    client: Client,
    /// "on" or "off" (fsync), the first part of every row key.
    fs: &'static str,
    results: &'a mut Results,
}

impl Bench<'_> {
    fn start(&self, imp: Impl, mode: &str, path: &str, params: &[String]) -> BoxResult<Worker> {
        let mut args = vec![mode.to_owned(), self.connect.clone(), path.to_owned()];
        args.extend(params.iter().cloned());
        Worker::start(
            format!("{} {mode}", imp.label()),
            self.setup.command(imp, &args),
            self.sizes.worker_timeout,
        )
    }

    fn fresh_path(&self, name: &str) -> BoxResult<String> {
        let path = format!("/bench/{}-{name}", self.fs);
        ensure(&self.client, &path)?;
        Ok(path)
    }

    fn key(&self, k: &str) -> String {
        format!("{}/{k}", self.fs)
    }

    /// Runs one mode of one implementation; a failure becomes a note in the
    /// table instead of ending the whole run.
    fn attempt(&mut self, imp: Impl, prefix: &str, f: impl FnOnce(&mut Self) -> BoxResult<()>) {
        let t = Instant::now();
        match f(self) {
            Ok(()) => eprintln!(
                "bench: {} {} {prefix} done in {:.1} s",
                self.fs,
                imp.label(),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("bench: {} {} {prefix} FAILED: {e}", self.fs, imp.label());
                let first = e.to_string().lines().next().unwrap_or("").to_owned();
                let key = self.key(prefix);
                self.results.note(&key, imp, &format!("failed: {first:.120}"));
            }
        }
    }

    fn uncontended(&mut self, imp: Impl, round: usize) -> BoxResult<()> {
        let k = self.sizes.cycles;
        let path = self.fresh_path(&format!("unc-{}-{round}", imp.key()))?;
        let w = self.start(imp, "uncontended", &path, &[format!("cycles={k}")])?;
        let pid = w.pid();
        let (mut rest, mut p0, mut p1) = (Proc::default(), Proc::default(), Proc::default());
        let (mut m0, mut m1) = (Mntr::default(), Mntr::default());
        let server = &self.server;
        let j = w.drive(|stage, _| {
            match stage {
                "rest" => rest = Proc::of(pid),
                "ready" => {
                    m0 = server.mntr();
                    p0 = Proc::of(pid);
                }
                "done" => {
                    p1 = Proc::of(pid);
                    m1 = server.mntr();
                }
                _ => {}
            }
            Ok(())
        })?;
        let lat: Vec<f64> = j.arr("latencies_ns").iter().map(Json::as_f64).collect();
        let ops = lat.len().max(1) as f64;
        let (mean, p50, p99) = stats_us(lat);
        for (k, v) in [
            ("unc.mean_us", mean),
            ("unc.p50_us", p50),
            ("unc.p99_us", p99),
            ("unc.cpu_us", p0.cpu_s_until(&p1) * 1e6 / ops),
            ("unc.requests", m0.requests_until(&m1) / ops),
            ("rest.threads", rest.threads as f64),
            ("rest.rss_mib", rest.rss_kb as f64 / 1024.0),
            ("unc.hwm_mib", p1.hwm_kb as f64 / 1024.0),
        ] {
            let key = self.key(k);
            self.results.put(&key, imp, v);
        }
        Ok(())
    }

    fn contended(&mut self, imp: Impl, round: usize) -> BoxResult<()> {
        let path = self.fresh_path(&format!("cont-{}-{round}", imp.key()))?;
        let params = [
            format!("sessions={}", self.sizes.sessions),
            format!("cycles={}", self.sizes.contended_cycles),
            format!("hold_us={}", self.sizes.hold_us),
        ];
        let w = self.start(imp, "contended", &path, &params)?;
        let pid = w.pid();
        let (mut p0, mut p1) = (Proc::default(), Proc::default());
        let (mut m0, mut m1) = (Mntr::default(), Mntr::default());
        let server = &self.server;
        let j = w.drive(|stage, _| {
            match stage {
                "ready" => {
                    m0 = server.mntr();
                    p0 = Proc::of(pid);
                }
                "done" => {
                    p1 = Proc::of(pid);
                    m1 = server.mntr();
                }
                _ => {}
            }
            Ok(())
        })?;
        // [session, acquired, released] in acquisition order.
        let mut t: Vec<[f64; 3]> = j
            .arr("timeline")
            .iter()
            .filter_map(|r| match r {
                Json::Arr(a) if a.len() == 3 => {
                    Some([a[0].as_f64(), a[1].as_f64(), a[2].as_f64()])
                }
                _ => None,
            })
            .collect();
        t.sort_by(|a, b| a[1].total_cmp(&b[1]));
        let mut handoffs = Vec::new();
        let mut overlaps = 0usize;
        for w in t.windows(2) {
            if w[1][1] < w[0][2] {
                overlaps += 1;
            } else if w[1][0] != w[0][0] {
                handoffs.push(w[1][1] - w[0][2]);
            }
        }
        let ops = t.len().max(1) as f64;
        let span_s = match (t.first(), t.iter().map(|r| r[2]).reduce(f64::max)) {
            (Some(first), Some(last)) => (last - first[1]) / 1e9,
            _ => f64::NAN,
        };
        let (_, h50, h99) = stats_us(handoffs);
        for (k, v) in [
            ("cont.ops_per_s", ops / span_s),
            ("cont.handoff_p50_us", h50),
            ("cont.handoff_p99_us", h99),
            (
                "cont.overlaps",
                overlaps as f64 + j.num("overlaps_seen").max(0.0),
            ),
            ("cont.cpu_us", p0.cpu_s_until(&p1) * 1e6 / ops),
            ("cont.requests", m0.requests_until(&m1) / ops),
        ] {
            let key = self.key(k);
            self.results.put(&key, imp, v);
        }
        Ok(())
    }

    /// `n` waiters over `sessions` sessions queued behind one holder, then
    /// passed through. `tag` names the size in row keys ("w1", "w2").
    fn waiters(
        &mut self,
        imp: Impl,
        tag: &str,
        n: usize,
        sessions: usize,
        variant: &str,
    ) -> BoxResult<()> {
        let path = self.fresh_path(&format!("{tag}-{}-{variant}", imp.key()))?;
        let params = [
            format!("waiters={n}"),
            format!("sessions={sessions}"),
            format!("variant={variant}"),
        ];
        let w = self.start(imp, "waiters", &path, &params)?;
        let pid = w.pid();
        let mut ready_at = Instant::now();
        let mut queue_s = f64::NAN;
        let mut at_queue = Proc::default();
        let mut end = Proc::default();
        let mut watches = f64::NAN;
        let (mut m0, mut m1) = (Mntr::default(), Mntr::default());
        let (server, client) = (&self.server, &self.client);
        let want = n as i32 + 1;
        let j = w.drive(|stage, worker| {
            match stage {
                "ready" => ready_at = Instant::now(),
                "queued" => {
                    // Every waiter's node exists: holder + n children.
                    loop {
                        let have = client.exists(&path)?.map_or(0, |s| s.num_children);
                        if have >= want {
                            break;
                        }
                        if worker.time_left().is_zero() {
                            return Err(format!("only {have} of {want} nodes queued").into());
                        }
                        std::thread::sleep(POLL);
                    }
                    queue_s = ready_at.elapsed().as_secs_f64();
                    // Then until every waiter's watch is set: the count stops
                    // moving (bounded: 10 s).
                    let settle = Instant::now() + Duration::from_secs(10);
                    let mut last = server.mntr().watches;
                    while Instant::now() < settle {
                        std::thread::sleep(Duration::from_millis(150));
                        let now = server.mntr().watches;
                        if now == last && now >= n as f64 {
                            break;
                        }
                        last = now;
                    }
                    at_queue = Proc::of(pid);
                    watches = server.total_watches();
                    m0 = server.mntr();
                }
                "done" => {
                    end = Proc::of(pid);
                    m1 = server.mntr();
                }
                _ => {}
            }
            Ok(())
        })?;
        let prefix = self.key(&format!("{tag}.{variant}"));
        if let Some(why) = j.str("unsupported") {
            self.results.note(&prefix, imp, &format!("n/a: {why}"));
            return Ok(());
        }
        if j.num("errors") > 0.0 {
            let first = j.str("first_error").unwrap_or("");
            return Err(format!("{} waiters failed, first: {first}", j.num("errors")).into());
        }
        let handoffs = n.max(1) as f64;
        for (k, v) in [
            ("queue_s", queue_s),
            ("pass_s", j.num("pass_ns") / 1e9),
            ("hwm_mib", end.hwm_kb as f64 / 1024.0),
            ("threads", at_queue.threads as f64),
            ("requests", m0.requests_until(&m1) / handoffs),
            ("notifications", m0.notifications_until(&m1) / handoffs),
            ("server_watches", watches),
        ] {
            self.results.put(&format!("{prefix}.{k}"), imp, v);
        }
        Ok(())
    }

    /// One session takes `locks` locks, holds them, releases them.
    fn held(&mut self, imp: Impl) -> BoxResult<()> {
        let locks = self.sizes.locks;
        let path = self.fresh_path(&format!("held-{}", imp.key()))?;
        // The parents, in batches of one multi each.
        let names: Vec<String> = (0..locks).map(|i| format!("{path}/l{i}")).collect();
        for chunk in names.chunks(500) {
            let ops: Vec<Op> = chunk
                .iter()
                .map(|p| Op::create(p, b"", CreateMode::Persistent))
                .collect();
            self.client.multi(&ops)?;
        }
        let w = self.start(imp, "held", &path, &[format!("locks={locks}")])?;
        let pid = w.pid();
        let (mut p0, mut ph) = (Proc::default(), Proc::default());
        let (mut m0, mut mh) = (Mntr::default(), Mntr::default());
        let mut watches = f64::NAN;
        let server = &self.server;
        let j = w.drive(|stage, _| {
            match stage {
                "ready" => {
                    m0 = server.mntr();
                    p0 = Proc::of(pid);
                }
                "held" => {
                    ph = Proc::of(pid);
                    mh = server.mntr();
                    watches = server.total_watches();
                }
                _ => {}
            }
            Ok(())
        })?;
        let n = locks.max(1) as f64;
        for (k, v) in [
            ("held.take_s", j.num("take_ns") / 1e9),
            ("held.release_s", j.num("release_ns") / 1e9),
            ("held.rss_mib", ph.rss_kb as f64 / 1024.0),
            ("held.threads", ph.threads as f64),
            ("held.requests", m0.requests_until(&mh) / n),
            ("held.server_watches", watches),
            ("held.cpu_us", p0.cpu_s_until(&ph) * 1e6 / n),
        ] {
            let key = self.key(k);
            self.results.put(&key, imp, v);
        }
        Ok(())
    }
}

/// What the report says about the run besides the numbers.
pub struct RunInfo {
    pub versions: Vec<(String, String)>,
    pub started: String,
    pub load_before: String,
    pub load_after: String,
    pub total_s: f64,
    pub fsync: Vec<bool>,
    /// Footprint notes: what was built from where, what could not be measured.
    pub notes: Vec<(String, String)>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn first_line(cmd: &mut Command) -> String {
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

/// Compiles `bench/CuratorBench.java` into `<out>/classes` unless the class
/// file is newer than the source.
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

/// The version of `name` in a Cargo.lock.
fn locked_version(lock: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            if let Some(v) = lines.next().and_then(|v| v.trim().strip_prefix("version = ")) {
                return v.trim_matches('"').to_owned();
            }
        }
    }
    "?".into()
}

/// The Curator version, from the jar's file name next to the symlink.
fn curator_version(cp: &str) -> String {
    for entry in cp.split(':') {
        let p = Path::new(entry);
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("curator-recipes")) {
            if let Some(dir) = p.parent() {
                if let Ok(rd) = std::fs::read_dir(dir) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if let Some(v) = n
                            .strip_prefix("curator-recipes-")
                            .and_then(|v| v.strip_suffix(".jar"))
                        {
                            return v.to_owned();
                        }
                    }
                }
            }
        }
    }
    "?".into()
}

pub fn run() -> BoxResult<()> {
    let total = Instant::now();
    let started = first_line(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no parent of bench/")?
        .to_path_buf();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_relative() { root.join(p) } else { p })
        .unwrap_or_else(|| root.join("target"));
    let out_dir = target.join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let sizes = Sizes::from_env();

    let jars = peers::curator_classpath().to_string_lossy().into_owned();
    let classes = compile_curator(&root, &out_dir, &jars)?;
    let kazoo_version = peers::ensure_kazoo().to_owned();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let setup = Setup {
        root: root.clone(),
        target: target.clone(),
        out_dir: out_dir.clone(),
        curator_cp: format!("{}:{jars}", classes.display()),
        python: python.clone(),
        jvm_opts: std::env::var("BENCH_JVM_OPTS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        zkrs_bin: target.join("release/zkrs-bench"),
    };
    if !setup.zkrs_bin.exists() {
        return Err(format!(
            "{} is missing: build it with scripts/bench.sh (cargo build --release --manifest-path bench/zkrs/Cargo.toml)",
            setup.zkrs_bin.display()
        )
        .into());
    }

    let mut versions = vec![
        ("rustc".into(), first_line(Command::new("rustc").arg("-V"))),
        ("Java".into(), first_line(Command::new("java").arg("-version"))),
        ("Curator".into(), curator_version(&jars)),
        ("kazoo".into(), format!("{kazoo_version} on {}", first_line(Command::new(&python).arg("--version")))),
        (
            "zookeeper-client".into(),
            format!("{} (tokio {})", locked_version(&root.join("bench/zkrs/Cargo.lock"), "zookeeper-client"), locked_version(&root.join("bench/zkrs/Cargo.lock"), "tokio")),
        ),
    ];
    let load_before = loadavg();
    let mut notes = Vec::new();
    let mut results = Results::default();
    let mut zk_version = String::new();
    let external = std::env::var("ZKLOCK_CONNECT").ok().filter(|c| !c.is_empty());
    let fsync_modes = if external.is_some() {
        vec![true]
    } else {
        sizes.fsync.clone()
    };
    for (i, &fsync) in fsync_modes.iter().enumerate() {
        let fs = if fsync { "on" } else { "off" };
        let (server, connect) = match &external {
            Some(c) => (None, c.clone()),
            None => {
                eprintln!("bench: starting a standalone ZooKeeper on 127.0.0.1, fsync {fs}");
                let options = zk::ZkOptions::new()
                    .config("forceSync", if fsync { "yes" } else { "no" })
                    .config("4lw.commands.whitelist", "*");
                let s = zk::ZkServer::start_with_options(&options);
                let c = s.connect_string();
                (Some(s), c)
            }
        };
        let addr = match &server {
            Some(s) => s.addr(),
            None => {
                let first = connect.split(['/', ',']).next().unwrap_or("").trim();
                std::net::ToSocketAddrs::to_socket_addrs(first)?
                    .next()
                    .ok_or("cannot resolve the first server")?
            }
        };
        let client = Client::connect(&connect, SESSION_TIMEOUT)?;
        ensure(&client, "/bench")?;
        let mut b = Bench {
            setup: &setup,
            sizes: &sizes,
            server: Server::new(addr),
            connect,
            client,
            fs,
            results: &mut results,
        };
        zk_version = b.server.version();
        warm_server(&b)?;
        let impls = sizes.impls.clone();
        for round in 0..sizes.rounds {
            for j in 0..impls.len() {
                let imp = impls[(j + round) % impls.len()];
                b.attempt(imp, "unc", |b| b.uncontended(imp, round));
                b.attempt(imp, "cont", |b| b.contended(imp, round));
            }
        }
        // The scale modes once, with fsync on (the first configuration).
        if i == 0 {
            for (tag, &(n, s)) in ["w1", "w2"].iter().zip(&sizes.waiters) {
                if n == 0 {
                    continue;
                }
                for &imp in &impls {
                    let variants: &[&str] = if imp == Impl::Zklock {
                        &["blocking", "nonblocking"]
                    } else {
                        &["blocking"]
                    };
                    for v in variants {
                        let prefix = format!("{tag}.{v}");
                        b.attempt(imp, &prefix, |b| b.waiters(imp, tag, n, s, v));
                    }
                }
            }
            if sizes.locks > 0 {
                for &imp in &impls {
                    b.attempt(imp, "held", |b| b.held(imp));
                }
            }
            if !sizes.impls.is_empty() {
                let fp = footprint::measure(&setup, &b.connect);
                for (k, v) in fp.values {
                    results_put_footprint(b.results, &k, v);
                }
                notes.extend(fp.notes);
            }
        }
        let _ = b.client.close();
        drop(b);
        drop(server);
    }
    versions.insert(0, ("ZooKeeper".into(), zk_version));
    let info = RunInfo {
        versions,
        started,
        load_before,
        load_after: loadavg(),
        total_s: total.elapsed().as_secs_f64(),
        fsync: fsync_modes,
        notes,
    };
    let (md, svg) = report::render(&results, &sizes, &info);
    let (md_path, svg_path) = if sizes.quick || std::env::var_os("BENCH_NO_RESULTS").is_some() {
        (out_dir.join("RESULTS.md"), out_dir.join("results.svg"))
    } else {
        (root.join("bench/RESULTS.md"), root.join("bench/results.svg"))
    };
    std::fs::write(&md_path, &md)?;
    std::fs::write(&svg_path, &svg)?;
    println!("{md}");
    eprintln!(
        "bench: written to {} and {} in {:.0} s",
        md_path.display(),
        svg_path.display(),
        info.total_s
    );
    Ok(())
}

fn results_put_footprint(r: &mut Results, key: &str, v: f64) {
    r.put(&format!("fp/{key}"), Impl::Zklock, v);
}

/// Warms the server's JIT with the kinds of request every lock sends, so
/// that the first implementation measured does not pay for a cold server.
fn warm_server(b: &Bench) -> BoxResult<()> {
    let path = format!("/bench/{}-server-warm", b.fs);
    ensure(&b.client, &path)?;
    let mutex = zklock::recipes::Mutex::new(&b.client, &path)?;
    for _ in 0..b.sizes.cycles.min(500) {
        mutex.lock()?.unlock()?;
    }
    Ok(())
}
