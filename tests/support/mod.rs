//! Shared by every integration test binary: real servers, the fault proxy, peers.
#![allow(dead_code)]

pub mod peers;
pub mod proxy;
pub mod zk;
