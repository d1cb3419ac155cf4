//! The deterministic simulator's parts, for the project's own tests and
//! fuzz targets only (never published): the one model ZooKeeper
//! (`zookeeper`), the world that runs the shipped client core against it on
//! virtual time (`world`), with the one checker of its invariants
//! (`world/checker.rs` and the checks beside it), the driver that takes
//! one client's core through a script of raw bytes against the same model
//! and checker (`script`: the `lock_core` fuzz target), and the seeded
//! random numbers every choice is drawn from (`rng`).
#![allow(dead_code)]

pub mod rng;
pub mod script;
pub mod world;
pub mod zookeeper;
