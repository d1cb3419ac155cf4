//! The timed loops: the uncontended and contended modes of every
//! implementation, zklock's raw floors beside them, and zklock's runs with
//! the leader check off.

use zklock_bench::json::Json;
use zklock_bench::BoxResult;

use crate::model::Impl;
use crate::modes::{Bench, Span};
use crate::run::{stats_us, Proc};

impl Bench<'_> {
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
        self.floor_run(round, "unc", zklock_p50, &[])
    }

    /// A raw floor run with `extra` parameters; its rows under
    /// `<tag>.floor_*`, and `<tag>.over_floor`, zklock's p50 over its own.
    fn floor_run(
        &mut self,
        round: usize,
        tag: &str,
        zklock_p50: f64,
        extra: &[String],
    ) -> BoxResult<()> {
        let path = self.fresh_path(&format!("floor-{}-{round}", tag.replace('.', "-")))?;
        let mut params = vec![format!("cycles={}", self.sizes.cycles)];
        params.extend(extra.iter().cloned());
        let w = self.start(Impl::Zklock, "floor", &path, &params)?;
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
            ("floor_p50_us", p50),
            ("over_floor", zklock_p50 / p50),
            ("floor_commits", span.commits() / ops),
            ("floor_cpu_us", span.p0.cpu_s_until(&span.p1) * 1e6 / ops),
        ] {
            let key = self.key(&format!("{tag}.{k}"));
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

    /// zklock's uncontended loop with `release=unlock` (row keys
    /// `unc.unlock.*`): each guard released by `unlock()`, which waits for
    /// the delete's reply, where the default drops it and goes on.
    pub fn uncontended_unlock(&mut self, round: usize) -> BoxResult<()> {
        let unlock = ["release=unlock".to_owned()];
        let p50 = self.uncontended_run(Impl::Zklock, round, "unc.unlock", &unlock)?;
        self.floor_run(round, "unc.unlock", p50, &unlock)
    }

    /// zklock's uncontended loop with `release=requeue` (row keys
    /// `unc.requeue.*`): the lock stays held between cycles, and each cycle
    /// is one `Mutex::requeue` (delete and create in one multi; its reply
    /// confirms the delete) and the wait for the grant.
    pub fn uncontended_requeue(&mut self, round: usize) -> BoxResult<()> {
        let requeue = ["release=requeue".to_owned()];
        self.uncontended_run(Impl::Zklock, round, "unc.requeue", &requeue)?;
        Ok(())
    }

    /// zklock's contended run with `release=unlock` (row keys
    /// `cont.unlock.*`), as [`Bench::uncontended_unlock`].
    pub fn contended_unlock(&mut self, round: usize) -> BoxResult<()> {
        let unlock = ["release=unlock".to_owned()];
        self.contended_run(Impl::Zklock, round, "cont.unlock", &unlock)?;
        Ok(())
    }

    /// zklock's contended run with `release=requeue` (row keys
    /// `cont.requeue.*`): every turn but each phase's last ends in
    /// `Mutex::requeue`, one multi (delete + create) where a release and a
    /// new acquisition send two commits; the next turn waits on the
    /// `PendingLock` it returned.
    pub fn contended_requeue(&mut self, round: usize) -> BoxResult<()> {
        let requeue = ["release=requeue".to_owned()];
        self.contended_run(Impl::Zklock, round, "cont.requeue", &requeue)?;
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
