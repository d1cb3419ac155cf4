//! The deterministic simulator's parts, for the project's own tests and
//! fuzz targets only (never published): the one model ZooKeeper
//! (`zookeeper`), the world that runs the shipped client core against it on
//! virtual time (`world`), with the one checker of its invariants
//! (`world/checker.rs` and the checks beside it), and the seeded random
//! numbers every choice is drawn from (`rng`).
#![allow(dead_code)]

pub mod rng;
pub mod world;
pub mod zookeeper;
