//! bench/RESULTS.md and its chart (src/chart.rs): the header (how the run
//! was made, on what), the tables of each server setting (src/rows.rs),
//! zklock's release modes (src/releases.rs), its leader check
//! (src/leader.rs) and its footprint.

use std::fmt::Write as _;

use crate::cells::{cell, fmt_num, ratio_to_best_peer};
use crate::chart::{chart_rows, svg};
use crate::leader::leader_check_section;
use crate::model::{Impl, Results};
use crate::releases::release_section;
use crate::rows::{rows, Better};
use crate::runinfo::RunInfo;
use crate::sizes::Sizes;

/// `nproc`, the CPU model and the memory of this machine.
fn machine() -> (String, String, String) {
    let cpus = std::process::Command::new("nproc")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<usize>()
                .ok()
        })
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get()));
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
         Run started {}; {:.0} s in all.\n",
        info.started, info.total_s
    );
    let _ = writeln!(
        md,
        "Machine: `nproc` {cpus}, CPU {model}, {mem} of memory. Load average (1, 5, 15 min) \
         at the start {}, at the end {}.\n",
        info.load_before, info.load_after
    );
    let busy = [&info.load_before, &info.load_after]
        .iter()
        .filter_map(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .fold(0.0f64, f64::max);
    if busy > 1.0 {
        let _ = writeln!(
            md,
            "**The machine was not quiet:** a load average above 1 ({busy:.2} at its highest \
             reading) means other processes shared its {cpus} CPUs with the server and the \
             workers: absolute figures are slower and noisier than on a quiet machine; ratios \
             between runs of the same round are less affected.\n"
        );
    }
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
        }
        let _ = writeln!(md);
    }
    md.push_str(&release_section(r, s, info));
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
        ("runtime crates without the build-time proc-macros: distinct names in `cargo tree -e normal,no-proc-macro -p zklock` (zklock and jute included)", "tree_runtime_crates"),
        ("threads per client (minimal program, connected, less the main thread)", "threads_per_client"),
        ("threads while holding one lock (less the main thread)", "threads_holding"),
        ("RSS at rest, connected, KiB", "rss_rest_kib"),
        ("RSS holding one lock, KiB", "rss_holding_kib"),
        ("RSS of the runtime skeleton (no ZooKeeper code) with its I/O thread running and its connection open, KiB", "skeleton_rss_rest_kib"),
        ("minimal lock program linked statically (`-C target-feature=+crt-static`, default release profile), stripped, KiB", "minimal_static_kib"),
        ("the same, RSS at rest, connected, KiB", "rss_static_rest_kib"),
    ] {
        let _ = writeln!(md, "| {label} | {} |", fmt_num(r.get(&format!("fp/{key}"), Impl::Zklock)));
    }
    for (k, v) in &info.notes {
        let _ = writeln!(md, "\n- {k}: {v}");
    }
    match &info.bloat {
        Some(Ok(b)) => {
            let _ = writeln!(md, "\n{}", b.markdown());
        }
        Some(Err(why)) => {
            let _ = writeln!(md, "\n- cargo-bloat: not measured: {why}");
        }
        None => {}
    }
    let notes: Vec<_> = r.notes.iter().collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "\n## Empty cells\n");
        for ((key, imp), n) in notes {
            let _ = writeln!(md, "- {} `{key}`: {n}", imp.label());
        }
    }
    (md, svg(r, &chart_rows(r, s, &info.fsync)))
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
                 data on the machine's disk; its JVM with a `-Xmx{}` heap, C1 only, serial GC), \
                 on 127.0.0.1",
                settings.join(", then "),
                s.zk_heap
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
