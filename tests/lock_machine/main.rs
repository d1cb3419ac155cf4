//! The lock machine inside the real core (session, SetWatches), against
//! the simulator's ZooKeeper (`zklock-sim`): the order in which SetWatches
//! fires is the server's, not the test's. The machine on its own, with the
//! server played by hand, is tested in the protocol crate
//! (`proto/tests/lock_machine/`).

mod end_to_end;
mod max_hold;
mod renewal;
mod support;
