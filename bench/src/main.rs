//! The zklock benchmark's orchestrator: `scripts/bench.sh` builds the peers
//! and runs this.
//!
//! Without arguments it orchestrates a whole run (servers, every
//! implementation's worker, the footprint, bench/RESULTS.md and
//! bench/results.svg). zklock's worker is the other binary of this package,
//! `zklock-worker` (src/bin/zklock-worker.rs), found next to this one.
//! See bench/README.md. A measurement, not a test: nothing asserts on timings.

mod footprint;
mod modes;
mod orch;
mod report;
mod run;

use zklock_bench::{json, BoxResult};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => orch::run(),
        Some(other) => Err(format!(
            "unknown command {other:?}: run without arguments (zklock's worker is the `zklock-worker` binary)"
        )
        .into()),
    };
    if let Err(e) = result {
        eprintln!("zklock-bench: {e}");
        std::process::exit(1);
    }
}
