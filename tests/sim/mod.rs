//! The deterministic simulator's parts.
#![allow(dead_code)]

pub mod rng;
pub mod world;
pub mod zookeeper;
