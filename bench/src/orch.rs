//! The orchestrator: servers, the workers of every implementation, the
//! modes, and what is read around each of them.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::zk;
use zklock::Client;
use zklock_bench::BoxResult;

use crate::chart;
use crate::footprint;
use crate::model::{Impl, Results};
use crate::modes::{ensure, warm_server, Bench};
use crate::report;
use crate::run::Server;
use crate::runinfo::{code_revision, command_line, git_rev, loadavg, RunInfo};
use crate::setup::{first_line, Setup};
use crate::sizes::Sizes;

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// `zklock-bench chart <values.tsv> <out.svg>`: the chart again from a
/// run's values (with this build's layout and this environment's sizes,
/// which must be the run's for the labels to match).
pub fn chart(args: &[String]) -> BoxResult<()> {
    let [values, out] = args else {
        return Err("usage: zklock-bench chart <values.tsv> <out.svg>".into());
    };
    let r = Results::from_tsv(&std::fs::read_to_string(values)?);
    let fsync: Vec<bool> = [true, false]
        .into_iter()
        .filter(|&f| {
            let prefix = if f { "on/" } else { "off/" };
            r.values.keys().any(|k| k.starts_with(prefix))
        })
        .collect();
    let sizes = Sizes::from_env();
    std::fs::write(out, chart::svg(&r, &chart::chart_rows(&r, &sizes, &fsync)))?;
    Ok(())
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
    let rev = git_rev(&root);

    let zkrs = sizes.impls.contains(&Impl::Zkrs);
    let setup = Setup::discover(root.clone(), target, out_dir.clone(), zkrs)?;
    let mut versions = setup.versions();
    let load_before = loadavg();
    let mut notes = Vec::new();
    let mut bloat = None;
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
                    .config("4lw.commands.whitelist", "*")
                    .jvm_flag(&format!("-Xmx{}", sizes.zk_heap));
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
                // zklock's release by unlock() (waiting for the delete's
                // reply) beside its release by drop in the same way.
                let unlock = imp == Impl::Zklock && sizes.runs("unlock");
                if sizes.runs("unc") {
                    if lc_off && off_first {
                        b.attempt(imp, "unc.lc_off", |b| b.uncontended_lc_off(round));
                    }
                    if unlock && off_first {
                        b.attempt(imp, "unc.unlock", |b| b.uncontended_unlock(round));
                    }
                    b.attempt(imp, "unc", |b| b.uncontended(imp, round));
                    if unlock && !off_first {
                        b.attempt(imp, "unc.unlock", |b| b.uncontended_unlock(round));
                    }
                    if imp == Impl::Zklock && sizes.runs("requeue") {
                        b.attempt(imp, "unc.requeue", |b| b.uncontended_requeue(round));
                    }
                    if lc_off && !off_first {
                        b.attempt(imp, "unc.lc_off", |b| b.uncontended_lc_off(round));
                    }
                }
                if sizes.runs("cont") {
                    if lc_off && off_first {
                        b.attempt(imp, "cont.lc_off", |b| b.contended_lc_off(round));
                    }
                    if unlock && off_first {
                        b.attempt(imp, "cont.unlock", |b| b.contended_unlock(round));
                    }
                    b.attempt(imp, "cont", |b| b.contended(imp, round));
                    if unlock && !off_first {
                        b.attempt(imp, "cont.unlock", |b| b.contended_unlock(round));
                    }
                    // zklock's requeue loop right after its own run and floor.
                    if imp == Impl::Zklock && sizes.runs("requeue") {
                        b.attempt(imp, "cont.requeue", |b| b.contended_requeue(round));
                    }
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
            if sizes.runs("refused") && impls.contains(&Impl::Zklock) {
                b.attempt(Impl::Zklock, "refused", |b| b.refused());
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
                bloat = Some(fp.bloat);
            }
        }
        b.floors_over_best_peer();
        let _ = b.client.close();
        drop(b);
        drop(server);
    }
    versions.insert(0, ("ZooKeeper".into(), zk_version));
    versions.insert(0, ("zklock".into(), format!("git {rev}")));
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
        bloat,
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
