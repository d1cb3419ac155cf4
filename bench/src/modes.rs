//! The modes: what each worker is asked to do, and what the orchestrator
//! reads around it (its /proc, the server's four-letter words).

use std::time::{Duration, Instant};

use zklock::{Client, CreateMode, Op};

use crate::json::Json;
use crate::orch::{Impl, Results, Setup, Sizes};
use crate::run::{cons_received, stats_us, Mntr, Proc, Server, Worker};
use crate::BoxResult;

/// Pause between polls of the server while waiters queue up.
const POLL: Duration = Duration::from_millis(20);

/// The lock paths' parents are made persistent up front, for every
/// implementation alike, so that no container reaper removes one mid-run.
pub fn ensure(client: &Client, path: &str) -> BoxResult<()> {
    match client.create(path, b"", CreateMode::Persistent) {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Everything one server configuration needs.
pub struct Bench<'a> {
    pub setup: &'a Setup,
    pub sizes: &'a Sizes,
    pub server: Server,
    pub connect: String,
    pub client: Client,
    /// "on" or "off" (fsync), the first part of every row key.
    pub fs: &'static str,
    pub results: &'a mut Results,
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
    pub fn attempt(&mut self, imp: Impl, prefix: &str, f: impl FnOnce(&mut Self) -> BoxResult<()>) {
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
                self.results
                    .note(&key, imp, &format!("failed: {first:.120}"));
            }
        }
    }

    pub fn uncontended(&mut self, imp: Impl, round: usize) -> BoxResult<()> {
        let p50 = self.uncontended_run(imp, round, "unc", &[])?;
        if imp == Impl::Zklock {
            self.floor(round, p50)?;
        }
        Ok(())
    }

    /// zklock's uncontended loop again with `leader_check=off` (row keys
    /// `unc.lc_off.*`), right after its floor.
    pub fn uncontended_lc_off(&mut self, round: usize) -> BoxResult<()> {
        let off = ["leader_check=off".to_owned()];
        self.uncontended_run(Impl::Zklock, round, "unc.lc_off", &off)?;
        Ok(())
    }

    /// One uncontended worker; its rows under `tag`; its p50.
    fn uncontended_run(
        &mut self,
        imp: Impl,
        round: usize,
        tag: &str,
        extra: &[String],
    ) -> BoxResult<f64> {
        let k = self.sizes.cycles;
        let name = format!("{}-{}-{round}", tag.replace('.', "-"), imp.key());
        let path = self.fresh_path(&name)?;
        let mut params = vec![format!("cycles={k}")];
        params.extend(extra.iter().cloned());
        let w = self.start(imp, "uncontended", &path, &params)?;
        let pid = w.pid();
        let mut rest = Proc::default();
        let mut span = Span::default();
        let server = &self.server;
        let j = w.drive(|stage, _| {
            if stage == "rest" {
                rest = Proc::of(pid);
            }
            span.read(stage, server, pid);
            Ok(())
        })?;
        let lat: Vec<f64> = j.arr("latencies_ns").iter().map(Json::as_f64).collect();
        let ops = lat.len().max(1) as f64;
        let (mean, p50, p99) = stats_us(lat);
        for (k, v) in [
            ("mean_us", mean),
            ("p50_us", p50),
            ("p99_us", p99),
            ("cpu_us", span.p0.cpu_s_until(&span.p1) * 1e6 / ops),
            ("requests", span.m0.requests_until(&span.m1) / ops),
            ("commits", span.commits() / ops),
            ("suspended_lost", j.num("suspended_lost")),
            ("hwm_mib", span.p1.hwm_kb as f64 / 1024.0),
        ] {
            let key = self.key(&format!("{tag}.{k}"));
            self.results.put(&key, imp, v);
        }
        if extra.is_empty() {
            for (k, v) in [
                ("rest.threads", rest.threads as f64),
                ("rest.rss_mib", rest.rss_kb as f64 / 1024.0),
            ] {
                let key = self.key(k);
                self.results.put(&key, imp, v);
            }
        }
        Ok(p50)
    }

    /// The raw pipelined floor (src/floor.rs) on the same server, right
    /// after zklock's own loop, and zklock's p50 over it.
    fn floor(&mut self, round: usize, zklock_p50: f64) -> BoxResult<()> {
        let path = self.fresh_path(&format!("floor-{round}"))?;
        let cycles = format!("cycles={}", self.sizes.cycles);
        let w = self.start(Impl::Zklock, "floor", &path, &[cycles])?;
        let pid = w.pid();
        let mut span = Span::default();
        let server = &self.server;
        let j = w.drive(|stage, _| {
            span.read(stage, server, pid);
            Ok(())
        })?;
        let lat: Vec<f64> = j.arr("latencies_ns").iter().map(Json::as_f64).collect();
        let ops = lat.len().max(1) as f64;
        let (_, p50, _) = stats_us(lat);
        for (k, v) in [
            ("unc.floor_p50_us", p50),
            ("unc.over_floor", zklock_p50 / p50),
            ("unc.floor_commits", span.commits() / ops),
        ] {
            let key = self.key(k);
            self.results.put(&key, Impl::Zklock, v);
        }
        Ok(())
    }

    pub fn contended(&mut self, imp: Impl, round: usize) -> BoxResult<()> {
        let c = self.contended_run(imp, round, "cont", &[])?;
        if imp == Impl::Zklock {
            self.floor_contended(round, &c)?;
        }
        Ok(())
    }

    /// zklock's contended run again with `leader_check=off` (row keys
    /// `cont.lc_off.*`), right after its floor.
    pub fn contended_lc_off(&mut self, round: usize) -> BoxResult<()> {
        let off = ["leader_check=off".to_owned()];
        self.contended_run(Impl::Zklock, round, "cont.lc_off", &off)?;
        Ok(())
    }

    /// One contended worker; its rows under `tag`.
    fn contended_run(
        &mut self,
        imp: Impl,
        round: usize,
        tag: &str,
        extra: &[String],
    ) -> BoxResult<Contention> {
        let name = format!("{}-{}-{round}", tag.replace('.', "-"), imp.key());
        let path = self.fresh_path(&name)?;
        let mut params = self.contended_params().to_vec();
        params.extend(extra.iter().cloned());
        let w = self.start(imp, "contended", &path, &params)?;
        let pid = w.pid();
        let mut span = Span::default();
        let server = &self.server;
        let j = w.drive(|stage, _| {
            span.read(stage, server, pid);
            Ok(())
        })?;
        let c = Contention::of(&j);
        for (k, v) in [
            ("ops_per_s", c.ops_per_s),
            ("handoff_p50_us", c.handoff_p50),
            ("handoff_p99_us", c.handoff_p99),
            ("overlaps", c.overlaps),
            ("cpu_us", span.p0.cpu_s_until(&span.p1) * 1e6 / c.ops),
            ("requests", span.m0.requests_until(&span.m1) / c.ops),
            ("commits", span.commits() / c.ops),
            ("suspended_lost", j.num("suspended_lost")),
        ] {
            let key = self.key(&format!("{tag}.{k}"));
            self.results.put(&key, imp, v);
        }
        Ok(c)
    }

    /// The raw contended floor (src/floor/contended.rs) on the same server
    /// with the same sizes, right after zklock's own run, and zklock over it.
    fn floor_contended(&mut self, round: usize, zklock: &Contention) -> BoxResult<()> {
        let path = self.fresh_path(&format!("cont-floor-{round}"))?;
        let w = self.start(
            Impl::Zklock,
            "floor-contended",
            &path,
            &self.contended_params(),
        )?;
        let pid = w.pid();
        let mut span = Span::default();
        let server = &self.server;
        let floor = Contention::of(&w.drive(|stage, _| {
            span.read(stage, server, pid);
            Ok(())
        })?);
        for (k, v) in [
            ("cont.floor_ops_per_s", floor.ops_per_s),
            (
                "cont.floor_cpu_us",
                span.p0.cpu_s_until(&span.p1) * 1e6 / floor.ops,
            ),
            ("cont.floor_commits", span.commits() / floor.ops),
            ("cont.floor_handoff_p50_us", floor.handoff_p50),
            ("cont.floor_overlaps", floor.overlaps),
            ("cont.ops_over_floor", zklock.ops_per_s / floor.ops_per_s),
            (
                "cont.handoff_over_floor",
                zklock.handoff_p50 / floor.handoff_p50,
            ),
        ] {
            let key = self.key(k);
            self.results.put(&key, Impl::Zklock, v);
        }
        Ok(())
    }

    fn contended_params(&self) -> [String; 3] {
        [
            format!("sessions={}", self.sizes.sessions),
            format!("cycles={}", self.sizes.contended_cycles),
            format!("hold_us={}", self.sizes.hold_us),
        ]
    }

    /// `n` waiters over `sessions` sessions queued behind one holder, then
    /// passed through. `tag` names the size in row keys ("w1", "w2").
    pub fn waiters(
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
                    // Then until every waiter's watch is set too (each
                    // implementation watches one node per waiter): the
                    // server's count has reached n and stopped moving.
                    // Bounded: 5 minutes, and the worker's deadline.
                    let settle_by = Instant::now() + Duration::from_secs(300);
                    let mut last = f64::NAN;
                    loop {
                        let now = server.mntr().watches;
                        if now >= n as f64 && now == last {
                            break;
                        }
                        if worker.time_left().is_zero() || Instant::now() > settle_by {
                            return Err(format!("only {now} of {n} watches set").into());
                        }
                        last = now;
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    queue_s = ready_at.elapsed().as_secs_f64();
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
            ("suspended_lost", j.num("suspended_lost")),
        ] {
            self.results.put(&format!("{prefix}.{k}"), imp, v);
        }
        Ok(())
    }

    /// The raw pass-through floor (src/floor/waiters.rs), same sizes, right
    /// after zklock's runs of `tag`, and each zklock variant over it.
    pub fn waiters_floor(&mut self, tag: &str, n: usize, sessions: usize) -> BoxResult<()> {
        let path = self.fresh_path(&format!("{tag}-floor"))?;
        let params = [format!("waiters={n}"), format!("sessions={sessions}")];
        let w = self.start(Impl::Zklock, "floor-waiters", &path, &params)?;
        let j = w.drive(|_, _| Ok(()))?;
        if j.num("errors") > 0.0 {
            let first = j.str("first_error").unwrap_or("");
            return Err(format!("{} waiters failed, first: {first}", j.num("errors")).into());
        }
        let pass_s = j.num("pass_ns") / 1e9;
        let prefix = self.key(tag);
        self.results
            .put(&format!("{prefix}.floor_pass_s"), Impl::Zklock, pass_s);
        for v in &self.sizes.zklock_variants {
            let zklock = self
                .results
                .get(&format!("{prefix}.{v}.pass_s"), Impl::Zklock);
            self.results.put(
                &format!("{prefix}.{v}.over_floor"),
                Impl::Zklock,
                zklock / pass_s,
            );
        }
        Ok(())
    }

    /// Each floor as a ratio to the best peer: how near the best any client
    /// can come to the best peer on this server. After every run of this
    /// server configuration, from the medians.
    pub fn floors_over_best_peer(&mut self) {
        for (floor, peers, higher) in [
            ("cont.floor_ops_per_s", "cont.ops_per_s", true),
            ("cont.floor_handoff_p50_us", "cont.handoff_p50_us", false),
            ("cont.floor_cpu_us", "cont.cpu_us", false),
            ("w1.floor_pass_s", "w1.blocking.pass_s", false),
        ] {
            let (floor, peers) = (self.key(floor), self.key(peers));
            let v = self.results.get(&floor, Impl::Zklock) / self.results.best_peer(&peers, higher);
            if v.is_finite() {
                let key = format!("{floor}_over_best");
                self.results.put(&key, Impl::Zklock, v);
            }
        }
    }

    /// One session takes `locks` locks, holds them, releases them.
    pub fn held(&mut self, imp: Impl) -> BoxResult<()> {
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
    /// zklock's idle mode: `idle_clients` clients (session timeout
    /// `idle_timeout_ms`), each holding one lock, idle for `idle_ms` with the
    /// leader check on or off. What the server received from those
    /// sessions is read from `cons` (per connection, by the session ids the
    /// worker names), and from `mntr` for comparison (which also counts
    /// the orchestrator's own idle session). Row keys `idle.{on,off}.*`.
    pub fn idle(&mut self, check: bool) -> BoxResult<()> {
        let n = self.sizes.idle_clients;
        let tag = if check { "on" } else { "off" };
        let path = self.fresh_path(&format!("idle-{tag}"))?;
        let names: Vec<String> = (0..n).map(|i| format!("{path}/l{i}")).collect();
        for chunk in names.chunks(500) {
            let ops: Vec<Op> = chunk
                .iter()
                .map(|p| Op::create(p, b"", CreateMode::Persistent))
                .collect();
            self.client.multi(&ops)?;
        }
        let params = [
            format!("clients={n}"),
            format!("idle_ms={}", self.sizes.idle_ms),
            format!("timeout_ms={}", self.sizes.idle_timeout_ms),
            format!("leader_check={tag}"),
        ];
        let w = self.start(Impl::Zklock, "idle", &path, &params)?;
        let (mut c0, mut c1) = (String::new(), String::new());
        let (mut t0, mut t1) = (Instant::now(), Instant::now());
        let (mut m0, mut m1) = (Mntr::default(), Mntr::default());
        let server = &self.server;
        let j = w.drive(|stage, _| {
            match stage {
                "ready" => {
                    m0 = server.mntr();
                    t0 = Instant::now();
                    c0 = server.cons();
                }
                "done" => {
                    c1 = server.cons();
                    t1 = Instant::now();
                    m1 = server.mntr();
                }
                _ => {}
            }
            Ok(())
        })?;
        let ids: Vec<String> = j
            .str("session_ids")
            .unwrap_or("")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_start_matches("0x").to_ascii_lowercase())
            .collect();
        let (r0, r1) = (cons_received(&c0), cons_received(&c1));
        let mut received = 0.0;
        for id in &ids {
            match (r0.get(id), r1.get(id)) {
                (Some(a), Some(b)) => received += b - a,
                _ => return Err(format!("session 0x{id} is not in cons").into()),
            }
        }
        if ids.len() != n {
            return Err(format!("{} session ids for {n} clients", ids.len()).into());
        }
        let per = |total: f64| total / n as f64 / (t1 - t0).as_secs_f64();
        let prefix = self.key(&format!("idle.{tag}"));
        for (k, v) in [
            ("per_client_s", per(received)),
            ("mntr_per_client_s", per(m0.requests_until(&m1))),
            ("window_s", (t1 - t0).as_secs_f64()),
            ("timeout_s", j.num("negotiated_ms") / 1e3),
            ("held_at_end", j.num("held_at_end")),
            ("suspended_lost", j.num("suspended_lost")),
        ] {
            self.results.put(&format!("{prefix}.{k}"), Impl::Zklock, v);
        }
        Ok(())
    }
}

/// What a contended run's timeline says: `[session, acquired, released]`
/// rows, sorted here by acquisition.
struct Contention {
    ops: f64,
    ops_per_s: f64,
    /// Release → next acquisition by another session, µs.
    handoff_p50: f64,
    handoff_p99: f64,
    /// Acquisitions before the previous release, plus what the worker saw.
    overlaps: f64,
}

impl Contention {
    fn of(j: &Json) -> Contention {
        let mut t: Vec<[f64; 3]> = j
            .arr("timeline")
            .iter()
            .filter_map(|r| match r {
                Json::Arr(a) if a.len() == 3 => Some([a[0].as_f64(), a[1].as_f64(), a[2].as_f64()]),
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
        let (_, handoff_p50, handoff_p99) = stats_us(handoffs);
        Contention {
            ops,
            ops_per_s: ops / span_s,
            handoff_p50,
            handoff_p99,
            overlaps: overlaps as f64 + j.num("overlaps_seen").max(0.0),
        }
    }
}

/// Warms the server's JIT with the kinds of request every lock sends, so
/// that the first implementation measured does not pay for a cold server.
pub fn warm_server(b: &Bench) -> BoxResult<()> {
    let path = format!("/bench/{}-server-warm", b.fs);
    ensure(&b.client, &path)?;
    let mutex = zklock::recipes::Mutex::new(&b.client, &path)?;
    for _ in 0..b.sizes.cycles.min(500) {
        mutex.lock()?.unlock()?;
    }
    Ok(())
}

/// The worker's `/proc` and the server's `mntr` read at the `ready` and
/// `done` stages: what a timed loop cost between them.
/// And the server's last zxid at both: the transactions committed between.
struct Span {
    p0: Proc,
    p1: Proc,
    m0: Mntr,
    m1: Mntr,
    z0: f64,
    z1: f64,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            p0: Proc::default(),
            p1: Proc::default(),
            m0: Mntr::default(),
            m1: Mntr::default(),
            z0: f64::NAN,
            z1: f64::NAN,
        }
    }
}

impl Span {
    fn read(&mut self, stage: &str, server: &Server, pid: u32) {
        match stage {
            "ready" => {
                self.z0 = server.zxid();
                self.m0 = server.mntr();
                self.p0 = Proc::of(pid);
            }
            "done" => {
                self.p1 = Proc::of(pid);
                self.m1 = server.mntr();
                self.z1 = server.zxid();
            }
            _ => {}
        }
    }

    /// Transactions the server committed from `ready` to `done` (the
    /// change of its last zxid; the bench's four-letter words commit none).
    fn commits(&self) -> f64 {
        self.z1 - self.z0
    }
}
