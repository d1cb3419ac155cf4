//! What zklock's benchmark worker is made of, shared by the lean worker
//! binary (`zklock-worker`, src/bin/zklock-worker.rs) and the orchestrator
//! (`zklock-bench`, src/main.rs), which reads the workers' JSON with
//! [`json`]. See bench/README.md.
//!
//! Module dependencies (each file's `use crate::`) form a DAG:
//! `stage` (the protocol's primitives) and `json` are leaves; `contend`
//! (the contended harness) and `session` (zklock's sessions) build on them;
//! `floor` (the raw floors), `worker_scale` (zklock's waiters, held and
//! idle modes) and `worker_refused` (zklock's holders whose other writes
//! are refused) on those; `worker` (the entry point and zklock's timed
//! modes) on all of them.

mod contend;
mod floor;
pub mod json;
mod session;
mod stage;
pub mod worker;
mod worker_refused;
mod worker_scale;

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
