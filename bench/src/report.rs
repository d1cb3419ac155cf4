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
