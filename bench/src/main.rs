//! The zklock benchmark: `scripts/bench.sh` builds the peers and runs this.
//!
//! Without arguments it orchestrates a whole run (servers, every
//! implementation's worker, the footprint, bench/RESULTS.md and
//! bench/results.svg). `zklock-bench worker <mode> ...` is zklock's worker.
//! See bench/README.md. A measurement, not a test: nothing asserts on timings.

mod floor;
mod footprint;
mod json;
mod modes;
mod orch;
mod report;
mod run;
mod worker;

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("worker") => worker::main(&args[1..]),
        None => orch::run(),
        Some(other) => Err(format!(
            "unknown command {other:?}: run without arguments, or `worker <mode> ...`"
        )
        .into()),
    };
    if let Err(e) = result {
        eprintln!("zklock-bench: {e}");
        std::process::exit(1);
    }
}
