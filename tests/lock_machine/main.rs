//! The lock machine on its own: handed replies, watch events, session
//! changes and the time, no server and no clock. Each test plays the server
//! by answering the requests the machine asks to send.
//!
//! One test binary (`cargo test --test lock_machine`), one module a topic;
//! what they share is in [`support`]. The tests in [`end_to_end`] run the
//! machine inside the real core instead (session, SetWatches), against the
//! simulator's ZooKeeper: the order in which SetWatches fires is the
//! server's, not the test's.
//!
//! Tests written to kill a mutant that the suites missed say so in their
//! doc comment ("Kills: ..."); docs/MUTANTS.md lists them.

mod support;

mod end_to_end;
mod give_up;
mod grant;
mod lock_delay;
mod no_contact;
mod reconnect;
mod recovery;
mod requeue;
mod revocation;
mod rules;
mod sequence_end;

/// The simulator's ZooKeeper, for the tests in [`end_to_end`] that run the
/// machine inside the real core (session and SetWatches included) against
/// it.
#[path = "../sim/zookeeper/mod.rs"]
mod sim_zookeeper;
