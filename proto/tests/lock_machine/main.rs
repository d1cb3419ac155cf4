//! The lock machine on its own: handed replies, watch events, session
//! changes and the time, no server and no clock. Each test plays the server
//! by answering the requests the machine asks to send.
//!
//! One test binary (`cargo test -p zklock-proto --test lock_machine`), one
//! module a topic; what they share is in [`support`]. zklock's
//! `tests/lock_machine/` runs the machine inside the real core instead
//! (session, SetWatches), against the simulator's ZooKeeper.
//!
//! Tests written to kill a mutant that the suites missed say so in their
//! doc comment ("Kills: ..."); docs/MUTANTS.md lists them.

mod support;

mod give_up;
mod grant;
mod lock_delay;
mod max_hold;
mod no_contact;
mod reconnect;
mod recovery;
mod requeue;
mod revocation;
mod rules;
mod sequence_end;
