//! bench/RESULTS.md and its chart, bench/results.svg, drawn by hand.

use std::fmt::Write as _;

use crate::orch::{Impl, Results, RunInfo, Sizes};

/// Which way is better for a row.
#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
    /// Shown, not ranked (e.g. counts that must be 0).
    Neither,
}

struct Row {
    label: String,
    /// Key of zklock's value and of the peers' values (they differ where
    /// zklock has two variants).
    zkey: String,
    pkey: String,
    better: Better,
}

fn row(label: String, key: &str, better: Better) -> Row {
    Row {
        label,
        zkey: key.to_owned(),
        pkey: key.to_owned(),
        better,
    }
}

fn rows(s: &Sizes, r: &Results, fs: &str, full: bool) -> Vec<Row> {
    use Better::*;
    let k = |x: &str| format!("{fs}/{x}");
    let mut v = vec![
        row(
            format!("uncontended lock+unlock ×{}: p50 µs", s.cycles),
            &k("unc.p50_us"),
            Lower,
        ),
        row(
            "uncontended: p50 µs of a raw client (codec only; create2+getChildren in one write, delete overlapped)".into(),
            &k("unc.floor_p50_us"),
            Lower,
        ),
        row(
            "uncontended: zklock's p50 ÷ that raw floor".into(),
            &k("unc.over_floor"),
            Neither,
        ),
        row("uncontended: p99 µs".into(), &k("unc.p99_us"), Lower),
        row(
            "uncontended: client CPU µs per lock+unlock".into(),
            &k("unc.cpu_us"),
            Lower,
        ),
        row(
            "uncontended: server requests per lock+unlock".into(),
            &k("unc.requests"),
            Lower,
        ),
        row(
            "uncontended: server commits per lock+unlock (change of `srvr`'s Zxid ÷ cycles)".into(),
            &k("unc.commits"),
            Lower,
        ),
        row(
            "uncontended: server commits per lock+unlock of the raw floor".into(),
            &k("unc.floor_commits"),
            Neither,
        ),
        row(
            format!(
                "{} sessions contended ×{} each: ops/s",
                s.sessions, s.contended_cycles
            ),
            &k("cont.ops_per_s"),
            Higher,
        ),
        row(
            "contended: handoff p50 µs (release → next holder)".into(),
            &k("cont.handoff_p50_us"),
            Lower,
        ),
        row(
            "contended: handoff p99 µs".into(),
            &k("cont.handoff_p99_us"),
            Lower,
        ),
        row(
            "contended: ops/s of a raw client (codec only; Curator's protocol, a blocking socket per session)".into(),
            &k("cont.floor_ops_per_s"),
            Neither,
        ),
        row(
            "contended: zklock's ops/s ÷ that raw floor".into(),
            &k("cont.ops_over_floor"),
            Neither,
        ),
        row(
            "contended: raw floor's ops/s ÷ best peer's (the most any client reaches here)".into(),
            &k("cont.floor_ops_per_s_over_best"),
            Neither,
        ),
        row(
            "contended: handoff p50 µs of the raw floor".into(),
            &k("cont.floor_handoff_p50_us"),
            Neither,
        ),
        row(
            "contended: zklock's handoff p50 ÷ the raw floor's".into(),
            &k("cont.handoff_over_floor"),
            Neither,
        ),
        row(
            "contended: raw floor's handoff p50 ÷ best peer's (the least any client reaches here)".into(),
            &k("cont.floor_handoff_p50_us_over_best"),
            Neither,
        ),
        row(
            "contended: client CPU µs per op".into(),
            &k("cont.cpu_us"),
            Lower,
        ),
        row(
            "contended: client CPU µs per op of the raw floor (no I/O thread: each session's own thread reads its socket)".into(),
            &k("cont.floor_cpu_us"),
            Neither,
        ),
        row(
            "contended: raw floor's client CPU per op ÷ best peer's".into(),
            &k("cont.floor_cpu_us_over_best"),
            Neither,
        ),
        row(
            "contended: server requests per op".into(),
            &k("cont.requests"),
            Lower,
        ),
        row(
            "contended: server commits per acquisition (change of `srvr`'s Zxid ÷ acquisitions)".into(),
            &k("cont.commits"),
            Lower,
        ),
        row(
            "contended: server commits per acquisition of the raw floor".into(),
            &k("cont.floor_commits"),
            Neither,
        ),
        row(
            "contended: overlapping holders seen (must be 0)".into(),
            &k("cont.overlaps"),
            Neither,
        ),
        row(
            "contended: overlapping holders seen in the raw floor (must be 0)".into(),
            &k("cont.floor_overlaps"),
            Neither,
        ),
    ];
    if !full {
        return v;
    }
    for (tag, (n, sessions)) in ["w1", "w2"].iter().zip(&s.waiters) {
        if *n == 0 {
            continue;
        }
        let nonblocking = r
            .values
            .keys()
            .any(|key| key.starts_with(&k(&format!("{tag}.nonblocking."))));
        let variants: &[(&str, &str)] = if nonblocking {
            &[
                ("blocking", "thread per waiter"),
                ("nonblocking", "non-blocking handles"),
            ]
        } else {
            &[("blocking", "thread per waiter")]
        };
        for (what, field, better) in [
            (
                "time to queue (every node and watch in place), s",
                "queue_s",
                Lower,
            ),
            ("passed through, s", "pass_s", Lower),
            ("peak RSS, MiB", "hwm_mib", Lower),
            ("threads while queued", "threads", Lower),
            ("server requests per hand-off", "requests", Lower),
            ("notifications per hand-off", "notifications", Lower),
            ("server watches while queued", "server_watches", Lower),
        ] {
            for &(variant, vlabel) in variants {
                v.push(Row {
                    label: format!("{n} waiters / {sessions} sessions: {what} [zklock: {vlabel}]"),
                    zkey: k(&format!("{tag}.{variant}.{field}")),
                    pkey: k(&format!("{tag}.blocking.{field}")),
                    better,
                });
            }
        }
        // The raw floor runs after zklock's first waiters mode only.
        if *tag != "w1" {
            continue;
        }
        let w = format!("{n} waiters / {sessions} sessions");
        v.push(row(
            format!("{w}: passed through by a raw client (codec only; a blocking socket per session), s"),
            &k(&format!("{tag}.floor_pass_s")),
            Neither,
        ));
        for &(variant, vlabel) in variants {
            v.push(row(
                format!("{w}: zklock's pass-through [{vlabel}] ÷ that raw floor"),
                &k(&format!("{tag}.{variant}.over_floor")),
                Neither,
            ));
        }
        v.push(row(
            format!(
                "{w}: raw floor's pass-through ÷ best peer's (the least any client reaches here)"
            ),
            &k(&format!("{tag}.floor_pass_s_over_best")),
            Neither,
        ));
    }
    for (tag, (n, sessions)) in ["w1", "w2"].iter().zip(&s.waiters) {
        let nonblocking = r
            .values
            .keys()
            .any(|key| key.starts_with(&k(&format!("{tag}.nonblocking."))));
        if *n > 0 && !nonblocking {
            v.push(Row {
                label: format!("{n} waiters / {sessions} sessions [zklock: non-blocking handles]: not run, see the note below"),
                zkey: k(&format!("{tag}.nonblocking.pass_s")),
                pkey: String::new(),
                better: Neither,
            });
        }
    }
    if s.locks > 0 {
        let l = s.locks;
        v.extend([
            row(
                format!("{l} locks held by one session: time to take all, s"),
                &k("held.take_s"),
                Lower,
            ),
            row(
                format!("{l} locks: time to release all, s"),
                &k("held.release_s"),
                Lower,
            ),
            row(
                format!("{l} locks: RSS while held, MiB"),
                &k("held.rss_mib"),
                Lower,
            ),
            row(
                format!("{l} locks: threads while held"),
                &k("held.threads"),
                Lower,
            ),
            row(
                format!("{l} locks: server requests per lock taken"),
                &k("held.requests"),
                Lower,
            ),
            row(
                format!("{l} locks: client CPU µs per lock taken"),
                &k("held.cpu_us"),
                Lower,
            ),
        ]);
    }
    v.extend([
        row(
            "one client at rest: threads (whole process)".into(),
            &k("rest.threads"),
            Lower,
        ),
        row(
            "one client at rest: RSS, MiB".into(),
            &k("rest.rss_mib"),
            Lower,
        ),
    ]);
    v
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() >= 1000.0 || (v.fract() == 0.0 && v.abs() < 1e9) {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The value of `imp` on a row, for the zklock key or the peers' key.
fn value(r: &Results, row: &Row, imp: Impl) -> f64 {
    r.get(
        if imp == Impl::Zklock {
            &row.zkey
        } else {
            &row.pkey
        },
        imp,
    )
}

/// zklock ÷ the best peer (lowest, or highest for ↑ rows).
fn ratio_to_best_peer(r: &Results, row: &Row) -> Option<f64> {
    let z = value(r, row, Impl::Zklock);
    let best = match row.better {
        Better::Lower => r.best_peer(&row.pkey, false),
        Better::Higher => r.best_peer(&row.pkey, true),
        Better::Neither => return None,
    };
    (z.is_finite() && best.is_finite() && best != 0.0).then(|| z / best)
}

fn cell(r: &Results, row: &Row, imp: Impl) -> String {
    let v = value(r, row, imp);
    if v.is_finite() {
        return fmt_num(v);
    }
    let key = if imp == Impl::Zklock {
        &row.zkey
    } else {
        &row.pkey
    };
    match r.note_for(key, imp) {
        Some(n) if n.starts_with("n/a") => "n/a".into(),
        Some(n) if n.starts_with("not run") => "not run".into(),
        Some(_) => "failed".into(),
        None => "–".into(),
    }
}

fn machine() -> (String, String, String) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_default();
    (cpus.to_string(), model, mem)
}

pub fn render(r: &Results, s: &Sizes, info: &RunInfo) -> (String, String) {
    let mut md = String::new();
    let (cpus, model, mem) = machine();
    let _ = writeln!(md, "# Benchmark results\n");
    let _ = writeln!(
        md,
        "Made by `scripts/bench.sh` (see [README.md](README.md) for what each figure means). \
         Run started {}; {:.0} s in all; load average {} before, {} after.\n",
        info.started, info.total_s, info.load_before, info.load_after
    );
    let _ = writeln!(md, "Machine: {cpus} CPUs ({model}), {mem} of memory.\n");
    let _ = writeln!(md, "{}\n", how_it_was_run(s, info));
    if let Ok(note) = std::env::var("BENCH_NOTE") {
        if !note.trim().is_empty() {
            let _ = writeln!(md, "**Note on this run:** {}\n", note.trim());
        }
    }
    if s.quick {
        let _ = writeln!(
            md,
            "**Quick mode (`BENCH_QUICK=1`): small sizes, a smoke run, not a measurement.**\n"
        );
    }
    let _ = writeln!(md, "Versions:\n");
    for (k, v) in &info.versions {
        let _ = writeln!(md, "- {k}: {v}");
    }
    let _ = writeln!(
        md,
        "\nOne standalone ZooKeeper per fsync setting on 127.0.0.1, clients on the same machine. \
         Each cell is one worker process (the median when `BENCH_ROUNDS` > 1). \
         The last column is zklock's value divided by the best peer's: below 1× zklock is ahead on \
         rows marked ↓, above 1× on rows marked ↑.\n"
    );
    let _ = writeln!(
        md,
        "![ratios to the best implementation per row](results.svg)\n"
    );
    let mut chart_rows = Vec::new();
    for (i, &fsync) in info.fsync.iter().enumerate() {
        let fs = if fsync { "on" } else { "off" };
        let _ = writeln!(
            md,
            "## fsync {fs} (`forceSync={}`)\n",
            if fsync { "yes" } else { "no" }
        );
        let _ = writeln!(
            md,
            "| measurement | zklock | zookeeper-client-rs | Curator | kazoo | zklock ÷ best peer |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for row in rows(s, r, fs, i == 0) {
            let arrow = match row.better {
                Better::Lower => " ↓",
                Better::Higher => " ↑",
                Better::Neither => "",
            };
            let ratio = ratio_to_best_peer(r, &row).map_or("–".into(), |x| format!("{x:.2}×"));
            let _ = writeln!(
                md,
                "| {}{arrow} | {} | {} | {} | {} | {ratio} |",
                row.label,
                cell(r, &row, Impl::Zklock),
                cell(r, &row, Impl::Zkrs),
                cell(r, &row, Impl::Curator),
                cell(r, &row, Impl::Kazoo),
            );
            if row.better != Better::Neither {
                chart_rows.push((format!("[fsync {fs}] {}", row.label), row));
            }
        }
        let _ = writeln!(md);
    }
    md.push_str(&leader_check_section(r, s, info));
    let _ = writeln!(md, "## zklock's footprint\n");
    let _ = writeln!(md, "| measurement | value |\n|---|---:|");
    for (label, key) in [
        ("minimal lock program, stripped, default release profile, KiB", "minimal_kib"),
        ("minimal lock program, stripped, size profile (opt-level s, LTO, 1 CGU, panic abort), KiB", "minimal_size_kib"),
        ("runtime skeleton without ZooKeeper (bench/skeleton: mio I/O thread, crossbeam channels, one TCP connection), stripped, default release profile, KiB", "skeleton_kib"),
        ("the same skeleton, stripped, size profile, KiB", "skeleton_size_kib"),
        ("CLI `zklock`, stripped, release, KiB", "cli_kib"),
        ("runtime crates: `cargo tree -e normal -p zklock --prefix none \\| sort -u \\| wc -l`", "tree_lines"),
        ("runtime crates: distinct names in that tree (zklock and jute included)", "tree_crates"),
        ("threads per client (minimal program, connected, less the main thread)", "threads_per_client"),
        ("threads while holding one lock (less the main thread)", "threads_holding"),
        ("RSS at rest, connected, KiB", "rss_rest_kib"),
        ("RSS holding one lock, KiB", "rss_holding_kib"),
    ] {
        let _ = writeln!(md, "| {label} | {} |", fmt_num(r.get(&format!("fp/{key}"), Impl::Zklock)));
    }
    for (k, v) in &info.notes {
        let _ = writeln!(md, "\n- {k}: {v}");
    }
    let notes: Vec<_> = r.notes.iter().collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "\n## Empty cells\n");
        for ((key, imp), n) in notes {
            let _ = writeln!(md, "- {} `{key}`: {n}", imp.label());
        }
    }
    (md, svg(r, &chart_rows))
}

/// The command, the code, the servers and the sizes of this run.
fn how_it_was_run(s: &Sizes, info: &RunInfo) -> String {
    let servers = match &info.external {
        Some(c) => format!("the server at `{c}` (`ZKLOCK_CONNECT`), as configured there"),
        None => {
            let settings: Vec<&str> = info
                .fsync
                .iter()
                .map(|&f| {
                    if f {
                        "`forceSync=yes`"
                    } else {
                        "`forceSync=no`"
                    }
                })
                .collect();
            format!(
                "one standalone ZooKeeper per fsync setting, in this order: {} \
                 (the test kit's server: `tickTime=2000`, `4lw.commands.whitelist=*`, \
                 data on the machine's disk), on 127.0.0.1",
                settings.join(", then ")
            )
        }
    };
    format!(
        "**How it was run:** `{}` on the code of {}. Servers: {servers}. \
         Every worker asks for a 30 s session timeout (zklock's idle mode: {} ms). \
         Rounds of the uncontended and contended modes: {} (cells are medians over rounds; \
         the counts that must be 0 are sums); the waiters, held, idle and footprint cells are \
         one run each, with the first server setting.",
        info.command, info.code, s.idle_timeout_ms, s.rounds
    )
}

/// zklock's leader check on (the default) and off, side by side: the
/// uncontended and contended runs of each server setting, and the idle mode.
fn leader_check_section(r: &Results, s: &Sizes, info: &RunInfo) -> String {
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
        "| [idle] expected requests per client per second: a `sync` per T/8 with the check (no ping is due: the syncs keep the connection busy), a ping per T/3 without | {} | {} | {} |",
        fmt_num(8.0 / t_s),
        fmt_num(3.0 / t_s),
        format_args!("{:.2}×", 8.0 / 3.0)
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
         `sync` whenever no leader-ordered request (a write or a sync) went out for T/8, T the negotiated \
         session timeout, and count only the leader's answers as proof that the session lives. \
         An idle session therefore sends about 8/T requests per second with the check and 3/T without \
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
            fmt_num(8.0 / t_s),
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
            "Under load the check sends nothing of its own: every lock's create and delete is a \
             leader-ordered write, so no T/8 gap opens and no ping is due either; server requests \
             with the check on and off ({}). ",
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

const COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A horizontal bar per implementation and row: how many times worse than
/// the best of the four on that row (1× = best), on a log scale to 100×.
fn svg(r: &Results, rows: &[(String, Row)]) -> String {
    let label_w = 560.0;
    let plot_w = 420.0;
    let bar_h = 7.0;
    let gap = 12.0;
    let top = 60.0;
    let group_h = 4.0 * bar_h + gap;
    let drawn: Vec<(&String, [f64; 4])> = rows
        .iter()
        .filter_map(|(label, row)| {
            let vals = Impl::ALL.map(|i| value(r, row, i));
            let finite: Vec<f64> = vals
                .iter()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
                .collect();
            if finite.len() < 2 {
                return None;
            }
            let best = match row.better {
                Better::Higher => finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                _ => finite.iter().copied().fold(f64::INFINITY, f64::min),
            };
            let ratios = vals.map(|v| {
                if !(v.is_finite() && v > 0.0) {
                    f64::NAN
                } else if row.better == Better::Higher {
                    best / v
                } else {
                    v / best
                }
            });
            Some((label, ratios))
        })
        .collect();
    let height = top + drawn.len() as f64 * group_h + 40.0;
    let width = label_w + plot_w + 80.0;
    let x_of = |ratio: f64| label_w + plot_w * (ratio.clamp(1.0, 100.0).log10() / 2.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Times the best implementation on each row (1× = best; shorter is better; log scale, cut at 100×)</text>"#
    );
    for (i, imp) in Impl::ALL.iter().enumerate() {
        let x = 10.0 + i as f64 * 170.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="32" width="12" height="10" fill="{}"/><text x="{}" y="41">{}</text>"#,
            COLORS[i],
            x + 16.0,
            imp.label()
        );
    }
    for tick in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0] {
        let x = x_of(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{:.1}" stroke="#ccc"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#555">{tick}×</text>"##,
            top - 6.0,
            height - 30.0,
            height - 16.0
        );
    }
    for (gi, (label, ratios)) in drawn.iter().enumerate() {
        let y0 = top + gi as f64 * group_h;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y0 + 2.0 * bar_h + 3.0,
            esc(label)
        );
        for (i, ratio) in ratios.iter().enumerate() {
            let y = y0 + i as f64 * bar_h;
            if !ratio.is_finite() {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" font-size="7" fill="#999">n/a</text>"##,
                    label_w + 2.0,
                    y + bar_h - 1.0
                );
                continue;
            }
            let w = (x_of(*ratio) - label_w).max(1.5);
            let _ = writeln!(
                s,
                r#"<rect x="{label_w}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="7">{}×</text>"#,
                bar_h - 1.0,
                COLORS[i],
                label_w + w + 3.0,
                y + bar_h - 1.0,
                if *ratio >= 10.0 {
                    format!("{ratio:.0}")
                } else {
                    format!("{ratio:.2}")
                }
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
