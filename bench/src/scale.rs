//! The modes at scale, run once with the first server setting: waiters
//! queued behind one holder (and zklock's raw floor of them), many locks
//! held by one session, and zklock's idle clients.

use std::time::{Duration, Instant};

use zklock_bench::BoxResult;

use crate::model::Impl;
use crate::modes::{ensure_all, Bench};
use crate::run::{cons_received, Mntr, Proc};

/// Pause between polls of the server while waiters queue up.
const POLL: Duration = Duration::from_millis(20);

impl Bench<'_> {
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
                        // A stalled server may drop the orchestrator's
                        // connection for a while: that is no answer yet.
                        let have = match client.exists(&path) {
                            Ok(stat) => stat.map_or(0, |s| s.num_children),
                            Err(e) if e.is_outcome_unknown() => {
                                eprintln!("bench: polling {path}: {e}; polling on");
                                -1
                            }
                            Err(e) => return Err(e.into()),
                        };
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
            ("queued_hwm_mib", at_queue.hwm_kb as f64 / 1024.0),
            ("queued_rss_mib", at_queue.rss_kb as f64 / 1024.0),
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
            ("unc.floor_cpu_us", "unc.cpu_us", false),
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
        ensure_all(&self.client, &names)?;
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
    /// zklock's refused mode: `refused_clients` clients (session timeout
    /// `refused_timeout_ms`), each holding one lock while it writes every
    /// 200 ms, every other write refused by the server, for `refused_ms`.
    /// Row keys `refused.*`: the times a session or a held guard said
    /// Suspended, and Lost (both must be 0), the writes answered, refused
    /// and failed, the locks still held at the end.
    pub fn refused(&mut self) -> BoxResult<()> {
        let n = self.sizes.refused_clients;
        let path = self.fresh_path("refused")?;
        let names: Vec<String> = (0..n).map(|i| format!("{path}/l{i}")).collect();
        ensure_all(&self.client, &names)?;
        let params = [
            format!("clients={n}"),
            format!("run_ms={}", self.sizes.refused_ms),
            format!("timeout_ms={}", self.sizes.refused_timeout_ms),
        ];
        let w = self.start(Impl::Zklock, "refused", &path, &params)?;
        let j = w.drive(|_, _| Ok(()))?;
        let prefix = self.key("refused");
        for k in [
            "suspended",
            "lost",
            "writes_ok",
            "writes_refused",
            "writes_failed",
            "held_at_end",
        ] {
            self.results
                .put(&format!("{prefix}.{k}"), Impl::Zklock, j.num(k));
        }
        self.results.put(
            &format!("{prefix}.timeout_s"),
            Impl::Zklock,
            j.num("negotiated_ms") / 1e3,
        );
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
        ensure_all(&self.client, &names)?;
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
