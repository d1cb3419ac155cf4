//! zklock's benchmark worker, alone in its binary: the orchestrator
//! (`zklock-bench`) starts it as `zklock-worker <mode> <connect> <lock path>
//! [name=value ...]`, so that none of the orchestrator's code (servers,
//! report, chart) is mapped into the process whose RSS is measured. The
//! modes are in src/worker.rs (the entry point) and the modules it uses
//! (src/lib.rs lists them); the protocol is in bench/README.md.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = zklock_bench::worker::main(&args) {
        eprintln!("zklock-worker: {e}");
        std::process::exit(1);
    }
}
