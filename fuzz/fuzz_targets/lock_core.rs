#![no_main]
//! The client core (session, lock machine, mutexes) against a model
//! server the bytes steer: no panic, no second holder, no node left.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zklock::fuzz::run(data));
