#![no_main]
//! The client core (session, lock machine, mutexes) driven by a script of
//! bytes against the simulator's model ZooKeeper, held to the simulator's
//! checker after every step (zklock_sim::script): no panic, no holder with
//! a contender ahead of it, no node left.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zklock_sim::script::run(data));
