#![no_main]
//! The session core driven by a byte script: no panic, every request and
//! watch answered exactly once.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zklock_proto::session::fuzz::run(data));
