//! The orchestrator: servers, the workers of every implementation, the
//! modes, and what is read around each of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::{peers, zk};
use zklock::Client;

use crate::modes::{ensure, warm_server, Bench};
use crate::run::Server;
use crate::{footprint, report, BoxResult};

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// zklock's waiters variants: `blocking` (a thread per waiter) and
    /// `nonblocking` (the non-blocking acquire handles: one thread for all).
    pub zklock_variants: Vec<String>,
    /// Implementations run in the second (largest) waiters mode.
    pub w2_impls: Vec<Impl>,
    /// zklock's idle mode: clients, each holding one lock; the idle window;
    /// the session timeout they ask for.
    pub idle_clients: usize,
    pub idle_ms: usize,
    pub idle_timeout_ms: usize,
    /// Modes to run: unc, cont, w1, w2, held, fp (footprint), idle, lc
    /// (zklock's uncontended and contended runs again with the leader
    /// check off).
    pub modes: Vec<String>,
    pub worker_timeout: Duration,
}

/// A comma list of implementation keys from the environment, or `all`.
fn impl_list(key: &str, default: &str) -> Vec<Impl> {
    let v = std::env::var(key)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned());
    Impl::ALL
        .into_iter()
        .filter(|i| {
            v.split(',')
                .any(|w| w.trim() == "all" || w.trim() == i.key())
        })
        .collect()
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl Sizes {
    pub fn runs(&self, mode: &str) -> bool {
        self.modes.iter().any(|m| m == mode)
    }

    pub fn from_env() -> Sizes {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let q = |full: usize, small: usize| if quick { small } else { full };
        let impls = impl_list("BENCH_IMPLS", "all");
        // Curator and kazoo list every child on every attempt: at 10 000
        // waiters that took Curator over 6 minutes and 5 GB here.
        let w2_impls = impl_list("BENCH_W2_IMPLS", "zklock,zkrs")
            .into_iter()
            .filter(|i| impls.contains(i))
            .collect();
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
                // Issue 10's size: 10 000 over 100 sessions.
                (
                    env_usize("BENCH_WAITERS_2", q(10_000, 1000)),
                    env_usize("BENCH_WAITER_SESSIONS_2", q(100, 20)).max(1),
                ),
            ],
            locks: env_usize("BENCH_LOCKS", q(10_000, 500)),
            idle_clients: env_usize("BENCH_IDLE_CLIENTS", 10).max(1),
            idle_ms: env_usize("BENCH_IDLE_S", q(10, 5)).max(1) * 1000,
            idle_timeout_ms: env_usize("BENCH_IDLE_TIMEOUT_MS", 10_000).max(1),
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
            w2_impls,
            zklock_variants: std::env::var("BENCH_ZKLOCK_VARIANTS")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "blocking,nonblocking".into())
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect(),
            modes: std::env::var("BENCH_MODES")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "unc,cont,w1,w2,held,fp,idle,lc".into())
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect(),
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
    pub fn put(&mut self, key: &str, imp: Impl, v: f64) {
        self.values
            .entry(key.to_owned())
            .or_default()
            .entry(imp)
            .or_default()
            .push(v);
    }

    pub fn note(&mut self, prefix: &str, imp: Impl, why: &str) {
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

    /// The sum over rounds (for counts that must be 0), NaN when there is none.
    pub fn sum(&self, key: &str, imp: Impl) -> f64 {
        let v: Vec<f64> = self
            .values
            .get(key)
            .and_then(|m| m.get(&imp))
            .map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
            .unwrap_or_default();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum()
        }
    }

    /// The best of the peers' values on `key` (the highest when `higher`),
    /// NaN when no peer has one.
    pub fn best_peer(&self, key: &str, higher: bool) -> f64 {
        let peers = Impl::ALL[1..]
            .iter()
            .map(|&i| self.get(key, i))
            .filter(|v| v.is_finite());
        if higher {
            peers.fold(f64::NAN, f64::max)
        } else {
            peers.fold(f64::NAN, f64::min)
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
    /// zklock's worker: the package's other binary, next to this one.
    pub zklock_worker: PathBuf,
}

impl Setup {
    pub fn command(&self, imp: Impl, args: &[String]) -> Command {
        let mut c = match imp {
            Impl::Zklock => Command::new(&self.zklock_worker),
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
    /// The command as run: the `BENCH_*` settings and `ZKLOCK_CONNECT`
    /// given, then `./scripts/bench.sh`.
    pub command: String,
    /// The code measured: the commit, and what was uncommitted.
    pub code: String,
    /// `ZKLOCK_CONNECT`'s server, when the bench did not start its own.
    pub external: Option<String>,
}

/// The environment settings of this run, as a command line.
fn command_line() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| (k.starts_with("BENCH_") && k != "BENCH_NOTE") || k == "ZKLOCK_CONNECT")
        .collect();
    vars.sort();
    let mut cmd: Vec<String> = vars
        .into_iter()
        .map(|(k, v)| {
            if v.chars()
                .all(|c| c.is_ascii_alphanumeric() || ",.:/_-=".contains(c))
            {
                format!("{k}={v}")
            } else {
                format!("{k}='{v}'")
            }
        })
        .collect();
    cmd.push("./scripts/bench.sh".into());
    cmd.join(" ")
}

/// The commit checked out in `root` and what was uncommitted, from git.
fn code_revision(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "not a git checkout".into();
    };
    let changed: Vec<String> = git(&["status", "--porcelain", "--untracked-files=no"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.get(3..))
        .map(str::to_owned)
        .collect();
    let head = head.trim();
    match changed.len() {
        0 => format!("commit {head}, nothing uncommitted"),
        n if n <= 12 => format!(
            "commit {head} with uncommitted changes to {}",
            changed
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        n => format!("commit {head} with uncommitted changes to {n} files"),
    }
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
            if let Some(v) = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
            {
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
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("curator-recipes"))
        {
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
    // The code measured, as it was when the run started.
    let code = code_revision(&root);

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
        zklock_worker: std::env::current_exe()?.with_file_name("zklock-worker"),
    };
    if !setup.zklock_worker.exists() {
        return Err(format!(
            "{} is missing: build it with scripts/bench.sh (cargo build --release --manifest-path bench/Cargo.toml --bins)",
            setup.zklock_worker.display()
        )
        .into());
    }
    if !setup.zkrs_bin.exists() {
        return Err(format!(
            "{} is missing: build it with scripts/bench.sh (cargo build --release --manifest-path bench/zkrs/Cargo.toml)",
            setup.zkrs_bin.display()
        )
        .into());
    }

    let mut versions = vec![
        ("rustc".into(), first_line(Command::new("rustc").arg("-V"))),
        (
            "Java".into(),
            first_line(Command::new("java").arg("-version")),
        ),
        ("Curator".into(), curator_version(&jars)),
        (
            "kazoo".into(),
            format!(
                "{kazoo_version} on {}",
                first_line(Command::new(&python).arg("--version"))
            ),
        ),
        (
            "zookeeper-client".into(),
            format!(
                "{} (tokio {})",
                locked_version(&root.join("bench/zkrs/Cargo.lock"), "zookeeper-client"),
                locked_version(&root.join("bench/zkrs/Cargo.lock"), "tokio")
            ),
        ),
    ];
    let load_before = loadavg();
    let mut notes = Vec::new();
    let mut results = Results::default();
    let mut zk_version = String::new();
    let external = std::env::var("ZKLOCK_CONNECT")
        .ok()
        .filter(|c| !c.is_empty());
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
        // The orchestrator's own session (parents, polls while waiters
        // queue) holds no lock, and must not drop its connection while the
        // server is slow: with the leader check on, a `sync` queued behind
        // the 10 000-waiter backlog (fsync on, busy machine) went unanswered
        // long enough to make it Suspended, and the poll in flight failed.
        // Off, it only pings, as before the check existed.
        let client = Client::builder(&connect)
            .session_timeout(SESSION_TIMEOUT)
            .leader_check(false)
            .connect()?;
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
                // zklock with the leader check off next to its own run and
                // floor, so that both see the same machine: after them in
                // even rounds, before them in odd ones, so that neither is
                // always the second of the two.
                let lc_off = imp == Impl::Zklock && sizes.runs("lc");
                let off_first = round % 2 == 1;
                if sizes.runs("unc") {
                    if lc_off && off_first {
                        b.attempt(imp, "unc.lc_off", |b| b.uncontended_lc_off(round));
                    }
                    b.attempt(imp, "unc", |b| b.uncontended(imp, round));
                    if lc_off && !off_first {
                        b.attempt(imp, "unc.lc_off", |b| b.uncontended_lc_off(round));
                    }
                }
                if sizes.runs("cont") {
                    if lc_off && off_first {
                        b.attempt(imp, "cont.lc_off", |b| b.contended_lc_off(round));
                    }
                    b.attempt(imp, "cont", |b| b.contended(imp, round));
                    if lc_off && !off_first {
                        b.attempt(imp, "cont.lc_off", |b| b.contended_lc_off(round));
                    }
                }
            }
        }
        // The scale modes once, with fsync on (the first configuration).
        if i == 0 {
            // Idle sessions send no writes: the fsync setting does not matter.
            if sizes.runs("idle") && impls.contains(&Impl::Zklock) {
                for check in [true, false] {
                    let prefix = format!("idle.{}", if check { "on" } else { "off" });
                    b.attempt(Impl::Zklock, &prefix, |b| b.idle(check));
                }
            }
            for (tag, &(n, s)) in ["w1", "w2"].iter().zip(&sizes.waiters) {
                if n == 0 || !sizes.runs(tag) {
                    continue;
                }
                for &imp in &impls {
                    if *tag == "w2" && !sizes.w2_impls.contains(&imp) {
                        let key = format!("{}/w2.blocking", b.fs);
                        b.results
                            .note(&key, imp, "not run: set BENCH_W2_IMPLS to include it");
                        continue;
                    }
                    let variants = if imp == Impl::Zklock {
                        sizes.zklock_variants.clone()
                    } else {
                        vec!["blocking".to_owned()]
                    };
                    for v in &variants {
                        let prefix = format!("{tag}.{v}");
                        b.attempt(imp, &prefix, |b| b.waiters(imp, tag, n, s, v));
                    }
                    // The raw floor right after zklock's runs, same sizes.
                    if imp == Impl::Zklock && *tag == "w1" {
                        let prefix = format!("{tag}.floor");
                        b.attempt(imp, &prefix, |b| b.waiters_floor(tag, n, s));
                    }
                }
            }
            if sizes.locks > 0 && sizes.runs("held") {
                for &imp in &impls {
                    b.attempt(imp, "held", |b| b.held(imp));
                }
            }
            if sizes.runs("fp") {
                let fp = footprint::measure(&setup, &b.connect);
                for (k, v) in fp.values {
                    results_put_footprint(b.results, &k, v);
                }
                notes.extend(fp.notes);
            }
        }
        b.floors_over_best_peer();
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
        command: command_line(),
        code,
        external: external.clone(),
    };
    let (md, svg) = report::render(&results, &sizes, &info);
    let (md_path, svg_path) = if sizes.quick || std::env::var_os("BENCH_NO_RESULTS").is_some() {
        (out_dir.join("RESULTS.md"), out_dir.join("results.svg"))
    } else {
        (
            root.join("bench/RESULTS.md"),
            root.join("bench/results.svg"),
        )
    };
    std::fs::write(&md_path, &md)?;
    std::fs::write(&svg_path, &svg)?;
    // Every value of every round, for a look behind the medians.
    let mut tsv = String::from("key\timpl\tvalues by round\n");
    for (key, by_impl) in &results.values {
        for (imp, v) in by_impl {
            let v: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
            tsv.push_str(&format!("{key}\t{}\t{}\n", imp.key(), v.join("\t")));
        }
    }
    std::fs::write(out_dir.join("values.tsv"), tsv)?;
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
