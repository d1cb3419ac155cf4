//! Real Apache ZooKeeper servers for integration tests: `zklock-test`'s
//! (see [`zklock_test::zk`]), and [`ZkHarness`], an embedded server whose
//! in-memory tree a test can edit.

mod harness;

pub use harness::{StoredStat, ZkHarness};
pub use zklock_test::zk::*;
