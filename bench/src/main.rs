//! The zklock benchmark's orchestrator: `scripts/bench.sh` builds the peers
//! and runs this.
//!
//! Without arguments it orchestrates a whole run (servers, every
//! implementation's worker, the footprint, bench/RESULTS.md and
//! bench/results.svg). zklock's worker is the other binary of this package,
//! `zklock-worker` (src/bin/zklock-worker.rs), found next to this one.
//! See bench/README.md. A measurement, not a test: nothing asserts on timings.
//!
//! Module dependencies (each file's `use crate::`) form a DAG, leaves
//! first: `model` (the implementations, the values measured), `bloat`
//! (cargo-bloat's listings of the minimal program), `runinfo`,
//! `run` (worker processes, readings of /proc and of the server); `sizes`,
//! `setup`; `modes` (the bench of one server configuration), with its modes
//! in `timed` and `scale`; `footprint`; `rows`, `cells`, `leader`,
//! `releases`, `chart`, `report` (RESULTS.md and the chart); `orch` (the
//! run), called from here.

mod bloat;
mod cells;
mod chart;
mod footprint;
mod leader;
mod model;
mod modes;
mod orch;
mod releases;
mod report;
mod rows;
mod run;
mod runinfo;
mod scale;
mod setup;
mod sizes;
mod timed;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => orch::run(),
        Some("chart") => orch::chart(&args[1..]),
        Some(other) => Err(format!(
            "unknown command {other:?}: run without arguments, or `chart <values.tsv> <out.svg>` (zklock's worker is the `zklock-worker` binary)"
        )
        .into()),
    };
    if let Err(e) = result {
        eprintln!("zklock-bench: {e}");
        std::process::exit(1);
    }
}
