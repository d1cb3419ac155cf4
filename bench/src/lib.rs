//! What zklock's benchmark worker is made of, shared by the lean worker
//! binary (`zklock-worker`, src/bin/zklock-worker.rs) and the orchestrator
//! (`zklock-bench`, src/main.rs), which reads the workers' JSON with
//! [`json`]. See bench/README.md.

mod floor;
pub mod json;
pub mod worker;

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
