//! The model ZooKeeper lives in the `zklock-sim` crate (`sim/src/zookeeper/`).
//! This file stays only because `tests/lock_machine/main.rs` includes it by
//! path; it goes when that binary moves into the protocol crate.

pub use zklock_sim::zookeeper::*;
