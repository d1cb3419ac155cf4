//! RESULTS.md's section on zklock's leader check: its runs with the check
//! on (the default) and off side by side, and what that costs, in words.

use std::fmt::Write as _;

use crate::cells::fmt_num;
use crate::model::{Impl, Results};
use crate::runinfo::RunInfo;
use crate::sizes::Sizes;

/// zklock's leader check on (the default) and off, side by side: the
/// uncontended and contended runs of each server setting, and the idle mode.
pub fn leader_check_section(r: &Results, s: &Sizes, info: &RunInfo) -> String {
    let z = Impl::Zklock;
    let mut md = String::new();
    let Some(&first) = info.fsync.first() else {
        return md;
    };
    let fs_of = |f: bool| if f { "on" } else { "off" };
    let first = fs_of(first);
    let cell = |key: &str, sum: bool| -> String {
        let v = if sum { r.sum(key, z) } else { r.get(key, z) };
        if v.is_finite() {
            fmt_num(v)
        } else if r.note_for(key, z).is_some() {
            "failed".into()
        } else {
            "–".into()
        }
    };
    let ratio = |on: &str, off: &str| -> String {
        let v = r.get(on, z) / r.get(off, z);
        if v.is_finite() {
            format!("{v:.2}×")
        } else {
            "–".into()
        }
    };
    let (on_idle, off_idle) = (
        r.get(&format!("{first}/idle.on.per_client_s"), z),
        r.get(&format!("{first}/idle.off.per_client_s"), z),
    );
    let t_s = {
        let t = r.get(&format!("{first}/idle.on.timeout_s"), z);
        if t.is_finite() {
            t
        } else {
            s.idle_timeout_ms as f64 / 1e3
        }
    };
    let _ = writeln!(md, "## zklock's leader check: what it costs\n");
    let _ = writeln!(
        md,
        "{}\n",
        leader_check_paragraph(r, s, info, on_idle, off_idle, t_s)
    );
    let _ = writeln!(
        md,
        "| measurement | zklock, leader check on (default) | zklock, `leader_check(false)` | on ÷ off |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for &fsync in &info.fsync {
        let fs = fs_of(fsync);
        for (label, field, sum) in [
            (
                format!("uncontended lock+unlock ×{}: p50 µs", s.cycles),
                "unc.p50_us",
                false,
            ),
            ("uncontended: p99 µs".into(), "unc.p99_us", false),
            (
                "uncontended: client CPU µs per lock+unlock".into(),
                "unc.cpu_us",
                false,
            ),
            (
                "uncontended: server requests per lock+unlock".into(),
                "unc.requests",
                false,
            ),
            (
                "uncontended: server commits per lock+unlock".into(),
                "unc.commits",
                false,
            ),
            (
                "uncontended: times the session or a held guard went Suspended or Lost (must be 0)"
                    .into(),
                "unc.suspended_lost",
                true,
            ),
            (
                format!(
                    "{} sessions contended ×{} each: ops/s",
                    s.sessions, s.contended_cycles
                ),
                "cont.ops_per_s",
                false,
            ),
            (
                "contended: handoff p50 µs".into(),
                "cont.handoff_p50_us",
                false,
            ),
            (
                "contended: handoff p99 µs".into(),
                "cont.handoff_p99_us",
                false,
            ),
            (
                "contended: client CPU µs per op".into(),
                "cont.cpu_us",
                false,
            ),
            (
                "contended: server requests per op".into(),
                "cont.requests",
                false,
            ),
            (
                "contended: server commits per acquisition".into(),
                "cont.commits",
                false,
            ),
            (
                "contended: overlapping holders seen (must be 0)".into(),
                "cont.overlaps",
                true,
            ),
            (
                "contended: times a session or a held guard went Suspended or Lost (must be 0)"
                    .into(),
                "cont.suspended_lost",
                true,
            ),
        ] {
            let (dot, rest) = field.split_once('.').unwrap_or((field, ""));
            let on = format!("{fs}/{field}");
            let off = format!("{fs}/{dot}.lc_off.{rest}");
            let _ = writeln!(
                md,
                "| [fsync {fs}] {label} | {} | {} | {} |",
                cell(&on, sum),
                cell(&off, sum),
                if sum { "–".into() } else { ratio(&on, &off) }
            );
        }
    }
    let n = s.idle_clients;
    let w = s.idle_ms as f64 / 1e3;
    let idle = |k: &str| {
        (
            format!("{first}/idle.on.{k}"),
            format!("{first}/idle.off.{k}"),
        )
    };
    for (label, field, sum) in [
        (
            format!(
                "{n} idle clients, each holding one lock, T = {} s, for {} s: requests received per client per second \
                 (server's `cons`, `recved` of these sessions' connections)",
                fmt_num(t_s),
                fmt_num(w)
            ),
            "per_client_s",
            false,
        ),
        (
            "the same from `mntr`'s `zk_packets_received` (less the bench's four-letter words; \
             counts the orchestrator's own idle session too)"
                .into(),
            "mntr_per_client_s",
            false,
        ),
        (
            format!("locks still held at the end (of {n})"),
            "held_at_end",
            false,
        ),
        (
            "times a session or a held guard went Suspended or Lost (must be 0)".into(),
            "suspended_lost",
            true,
        ),
    ] {
        let (on, off) = idle(field);
        let _ = writeln!(
            md,
            "| [idle] {label} | {} | {} | {} |",
            cell(&on, sum),
            cell(&off, sum),
            if sum || field == "held_at_end" {
                "–".into()
            } else {
                ratio(&on, &off)
            }
        );
    }
    // The refused mode runs with the check on only (the default).
    let rn = s.refused_clients;
    let rt = {
        let t = r.get(&format!("{first}/refused.timeout_s"), z);
        if t.is_finite() {
            t
        } else {
            s.refused_timeout_ms as f64 / 1e3
        }
    };
    for (label, field, sum) in [
        (
            format!(
                "{rn} clients, each holding one lock, T = {} s, for {} s, each writing every 200 ms, \
                 half of the writes refused (5 s turns of refusals, then of successes; each client's \
                 refusals of one kind: a create of an existing path, a setData at a stale version, \
                 a delete of a missing node, a failing multi): writes answered",
                fmt_num(rt),
                fmt_num(s.refused_ms as f64 / 1e3)
            ),
            "writes_ok",
            true,
        ),
        ("writes refused as intended".into(), "writes_refused", true),
        (
            "writes failed otherwise (a connection lost, ...)".into(),
            "writes_failed",
            true,
        ),
        (format!("locks still held at the end (of {rn})"), "held_at_end", true),
        (
            "times a session or a held guard went Suspended (must be 0)".into(),
            "suspended",
            true,
        ),
        (
            "times a session or a held guard went Lost or Expired (must be 0)".into(),
            "lost",
            true,
        ),
    ] {
        let key = format!("{first}/refused.{field}");
        if !r.values.contains_key(&key) && r.note_for(&key, z).is_none() {
            continue;
        }
        let _ = writeln!(
            md,
            "| [refused] {label} | {} | not run | – |",
            cell(&key, sum)
        );
    }
    // The waiters modes run with the check on only (the default).
    for (tag, (wn, ws)) in ["w1", "w2"].iter().zip(&s.waiters) {
        for (variant, vlabel) in [
            ("blocking", "thread per waiter"),
            ("nonblocking", "non-blocking handles"),
        ] {
            let key = format!("{first}/{tag}.{variant}.suspended_lost");
            if *wn == 0 || !r.values.contains_key(&key) && r.note_for(&key, z).is_none() {
                continue;
            }
            let _ = writeln!(
                md,
                "| [fsync {first}] {wn} waiters / {ws} sessions [{vlabel}]: times a session or the holder's guard went Suspended or Lost (must be 0) | {} | not run | – |",
                cell(&key, true)
            );
        }
    }
    let _ = writeln!(
        md,
        "| [idle] expected requests per client per second: a `sync` per T/12 with the check (no ping is due: the syncs keep the connection busy), a ping per T/3 without | {} | {} | {} |",
        fmt_num(12.0 / t_s),
        fmt_num(3.0 / t_s),
        format_args!("{:.2}×", 12.0 / 3.0)
    );
    let _ = writeln!(md);
    md
}

/// What the leader check costs, in words, from this run's numbers.
fn leader_check_paragraph(
    r: &Results,
    s: &Sizes,
    info: &RunInfo,
    on_idle: f64,
    off_idle: f64,
    t_s: f64,
) -> String {
    let z = Impl::Zklock;
    let mut p = format!(
        "`ClientBuilder::leader_check` (on by default, docs/PARTITION.md \"The fix\") makes a session send a \
         `sync` every T/12, T the negotiated session timeout, whatever else it sends, and count only \
         the leader's answers (a refusal the leader ordered included) as proof that the session lives. \
         An idle session therefore sends about 12/T requests per second with the check and 3/T without \
         (its pings, one after T/3 of silence; with the check the syncs keep the connection busy, so no \
         ping is due). Measured here with {} idle clients each holding a lock, T = {} s: ",
        s.idle_clients,
        fmt_num(t_s)
    );
    if on_idle.is_finite() && off_idle.is_finite() {
        let _ = write!(
            p,
            "{} requests per client per second with the check and {} without (expected {} and {}), \
             {} more per idle session, or about {} more requests per second at the server for every \
             1000 idle sessions (each a `sync`: a round trip to the leader from a follower, no \
             transaction, no disk write). ",
            fmt_num(on_idle),
            fmt_num(off_idle),
            fmt_num(12.0 / t_s),
            fmt_num(3.0 / t_s),
            fmt_num(on_idle - off_idle),
            fmt_num(((on_idle - off_idle) * 1000.0).round()),
        );
    } else {
        p.push_str("not measured in this run. ");
    }
    // Under load: the requests per op with the check on and off.
    let mut load = Vec::new();
    let mut lat = Vec::new();
    for &fsync in &info.fsync {
        let fs = if fsync { "on" } else { "off" };
        let g = |k: &str| r.get(&format!("{fs}/{k}"), z);
        let (ru, ruo) = (g("unc.requests"), g("unc.lc_off.requests"));
        let (rc, rco) = (g("cont.requests"), g("cont.lc_off.requests"));
        if [ru, ruo, rc, rco].iter().all(|v| v.is_finite()) {
            load.push(format!(
                "fsync {fs}: {} and {} per uncontended lock+unlock, {} and {} per contended op",
                fmt_num(ru),
                fmt_num(ruo),
                fmt_num(rc),
                fmt_num(rco)
            ));
        }
        let (p50, p50o) = (g("unc.p50_us"), g("unc.lc_off.p50_us"));
        let (ops, opso) = (g("cont.ops_per_s"), g("cont.lc_off.ops_per_s"));
        if [p50, p50o, ops, opso].iter().all(|v| v.is_finite()) {
            lat.push((fs, p50 / p50o, ops / opso));
        }
    }
    if !load.is_empty() {
        let _ = write!(
            p,
            "Under load the check adds its syncs, 12/T per session per second, to the requests of \
             the load (no ping is due either way); server requests with the check on and off ({}). ",
            load.join("; ")
        );
    }
    if !lat.is_empty() {
        let spread = lat
            .iter()
            .flat_map(|&(_, a, b)| [a, b])
            .fold(0.0f64, |m, x| m.max((x - 1.0).abs()));
        let each: Vec<String> = lat
            .iter()
            .map(|(fs, a, b)| {
                format!("fsync {fs}: uncontended p50 {a:.2}×, contended ops/s {b:.2}×")
            })
            .collect();
        let _ = write!(p, "On ÷ off: {}. ", each.join("; "));
        if spread <= 0.10 {
            let _ = write!(
                p,
                "Every one of these is within 10 % of 1×, inside the spread between two worker \
                 processes on this machine (see Caveats in README.md): no cost in latency or \
                 throughput shows under load. "
            );
        } else {
            let _ = write!(
                p,
                "The largest departure from 1× is {:.0} %, {}; single worker processes here move by \
                 tens of per cent between runs (Caveats in README.md), and the check adds no request \
                 under load, only the bookkeeping of send times on the client: read a latency or \
                 throughput cost into it only if it holds over `BENCH_ROUNDS=3` or more. ",
                spread * 100.0,
                if s.rounds == 1 {
                    "each cell one worker process".to_owned()
                } else {
                    format!("each cell the median of {} worker processes", s.rounds)
                },
            );
        }
    }
    let alarms: f64 = info
        .fsync
        .iter()
        .flat_map(|&f| {
            let fs = if f { "on" } else { "off" };
            [
                format!("{fs}/unc.suspended_lost"),
                format!("{fs}/unc.lc_off.suspended_lost"),
                format!("{fs}/cont.suspended_lost"),
                format!("{fs}/cont.lc_off.suspended_lost"),
                format!("{fs}/cont.requeue.suspended_lost"),
                format!("{fs}/unc.requeue.suspended_lost"),
                format!("{fs}/unc.unlock.suspended_lost"),
                format!("{fs}/cont.unlock.suspended_lost"),
            ]
        })
        .chain(info.fsync.first().map_or(vec![], |&f| {
            let fs = if f { "on" } else { "off" };
            let mut v = vec![
                format!("{fs}/idle.on.suspended_lost"),
                format!("{fs}/idle.off.suspended_lost"),
            ];
            for tag in ["w1", "w2"] {
                for variant in ["blocking", "nonblocking"] {
                    v.push(format!("{fs}/{tag}.{variant}.suspended_lost"));
                }
            }
            v
        }))
        .map(|k| r.sum(&k, z))
        .filter(|v| v.is_finite())
        .sum();
    if alarms == 0.0 {
        p.push_str(
            "No session and no held guard went Suspended or Lost in any of zklock's runs \
             (counted from `Client::subscribe` and each guard's `state_changes`).",
        );
    } else {
        let _ = write!(
            p,
            "**{alarms} times a session or a held guard went Suspended or Lost** in zklock's runs \
             (counted from `Client::subscribe` and each guard's `state_changes`): see the rows below \
             and, for the 10 000-waiter mode, Caveats in README.md."
        );
    }
    p
}
