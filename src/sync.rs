//! The synchronisation primitives of the parts that threads share with each
//! other or with the I/O thread and that are model-checked (the oneshot, a
//! holder's state, the registry of holdings, a cancel token):
//! std's, or loom's when built with `--cfg zklock_loom` (scripts/loom.sh), which
//! then runs their tests under every interleaving it can find.

#[cfg(zklock_loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8},
    Arc, Condvar, Mutex, MutexGuard,
};
#[cfg(not(zklock_loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8},
    Arc, Condvar, Mutex, MutexGuard,
};
