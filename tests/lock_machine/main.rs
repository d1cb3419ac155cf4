//! The lock machine inside the real core (session, SetWatches), against
//! the simulator's ZooKeeper: the order in which SetWatches fires is the
//! server's, not the test's. The machine on its own, with the server
//! played by hand, is tested in the protocol crate (`proto/tests/lock_machine/`).

mod end_to_end;

/// The simulator's ZooKeeper, for the tests in [`end_to_end`] that run the
/// machine inside the real core (session and SetWatches included) against
/// it.
#[path = "../sim/zookeeper/mod.rs"]
mod sim_zookeeper;
