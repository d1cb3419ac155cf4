//! Tests that measure the whole process: its threads, its I/O threads, its
//! memory. A client of any other test would start threads and allocate
//! meanwhile, so these have a binary of their own and take turns
//! ([`one_at_a_time`]): each test's count is its own.
//!
//! `shutdown` and `flood` need nothing (a port nobody listens on, a fake
//! server in this process); `latch` and `io_thread` need a real ZooKeeper.

mod flood;
mod io_thread;
mod latch;
mod shutdown;

use std::sync::{Mutex, MutexGuard};

/// One test at a time: hold the guard for the whole test.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}
